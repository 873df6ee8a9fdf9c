"""Fixtures for driving the real app: a small corpus with planted duplicates, built in tmp."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

WORDS = ("river library council garden report schedule volunteer students meeting import path "
         "release quiet survey winter opening hours notes front desk bread recipe choir water").split()


def corpus_docs(seed: int = 7) -> list[dict]:
    """40 base notes; some get exact copies, some near copies with a few words changed."""
    rng = random.Random(seed)
    docs: list[dict] = []
    bases = [" ".join(rng.choice(WORDS) for _ in range(40)) + f" (note {i})." for i in range(40)]
    n = 0

    def add(text: str) -> None:
        nonlocal n
        docs.append({"id": f"d{n:03d}", "text": text})
        n += 1

    for i, base in enumerate(bases):
        add(base)
        if i % 4 == 0:
            add(base)  # exact copy
        if i % 3 == 0:
            words = base.split()
            for j in rng.sample(range(len(words) - 2), 2 + i % 5):
                words[j] = rng.choice(WORDS)
            add(" ".join(words))
    add("Markup must stay literal: [bold]not bold[/bold] [link=https://example.com]x[/link] \x1b[31mred\x1b[0m end of note.")
    add("Markup must stay literal: [bold]not bold[/bold] [link=https://example.com]y[/link] \x1b[31mred\x1b[0m end of note!")
    return docs


def write_corpus(path: Path, docs: list[dict]) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for d in docs:
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
    return path


@pytest.fixture
def corpus(tmp_path) -> Path:
    return write_corpus(tmp_path / "corpus.jsonl", corpus_docs())


async def settle(pilot, rounds: int = 60) -> None:
    """Wait until no worker runs and no re-clustering is pending (no sleeping)."""
    app = pilot.app
    for _ in range(rounds):
        await app.workers.wait_for_complete()
        await pilot.pause()
        main = app.main
        busy = main.scanning or main.busy or any(w.is_running for w in app.workers)
        if not busy:
            return
    raise AssertionError("the app did not settle")
