"""Fixtures for driving the real app: a small corpus with planted duplicates, built in tmp."""

from __future__ import annotations

import contextlib
import html
import json
import random
import re
import shutil
import threading
from importlib.resources import files
from pathlib import Path

import pytest
from textual.worker import WorkerCancelled


@pytest.fixture(autouse=True)
def no_kernel_warmup_from_the_app(monkeypatch):
    """The app starts a kernel warm-up process on mount (first run after an install); tests of
    the screens do not (tests/ui/test_app.py checks that it does)."""
    monkeypatch.setenv("DEDUP_TUI_APP_WARMUP", "0")


WORDS = (
    "river library council garden report schedule volunteer students meeting import path "
    "release quiet survey winter opening hours notes front desk bread recipe choir water"
).split()


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
    add(
        "Markup must stay literal: [bold]not bold[/bold] [link=https://example.com]x[/link] "
        "\x1b[31mred\x1b[0m end of note."
    )
    add(
        "Markup must stay literal: [bold]not bold[/bold] [link=https://example.com]y[/link] "
        "\x1b[31mred\x1b[0m end of note!"
    )
    return docs


def write_corpus(path: Path, docs: list[dict]) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for d in docs:
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
    return path


@pytest.fixture
def corpus(tmp_path) -> Path:
    return write_corpus(tmp_path / "corpus.jsonl", corpus_docs())


@pytest.fixture
def sample(tmp_path) -> Path:
    """The bundled sample (notes.jsonl), copied into tmp_path."""
    path = tmp_path / "notes.jsonl"
    shutil.copy(files("dedup_tui") / "samples" / "notes.jsonl", path)
    return path


def plain_screen(app) -> str:
    """The screen's lines as plain text (from the SVG screenshot: its text runs, line by line;
    runs of blanks between styled parts may be left out)."""
    svg = app.export_screenshot()
    lines: dict[int, list[tuple[float, str]]] = {}
    for x, line, text in re.findall(
        r'<text [^>]*?x="([\d.]+)"[^>]*?clip-path="url\(#terminal-\d+-line-(\d+)\)">'
        r"(.*?)</text>",
        svg,
    ):
        lines.setdefault(int(line), []).append((float(x), html.unescape(text).replace("\xa0", " ")))
    return "\n".join("".join(t for _x, t in sorted(lines[n])) for n in sorted(lines))


async def settle(pilot, rounds: int = 60) -> None:
    """Wait until no worker runs and no re-clustering is pending (no sleeping)."""
    app = pilot.app
    for _ in range(rounds):
        try:
            await app.workers.wait_for_complete()
        except WorkerCancelled:
            pass  # (one replaced by a newer one: not running)
        await pilot.pause()
        main = app.main
        busy = main.scanning or main.busy or any(w.is_running for w in app.workers)
        if not busy:
            return
    raise AssertionError("the app did not settle")


HUGE = 20_000_000  # characters in each of the huge pair's documents


async def until_drawn(pilot, place: str, doc, rounds: int = 200) -> None:
    """Wait until `doc` is drawn at `place` (the key intake's record): a decision key pressed
    earlier is dropped on purpose, as one typed ahead of the screen."""
    intake = pilot.app.session.intake
    for _ in range(rounds):
        if intake.on_screen(place) == doc:
            return
        await pilot.pause()
    raise AssertionError(f"{doc!r} was never drawn at {place}")


def decision_target(app) -> tuple[str, object]:
    """Where a decision key pressed now acts and what it would decide: the pair view's right-hand
    document, the labelling or audit queue's pair, else the main screen's cursor document."""
    from dedup_tui.ui.screens.audit import AuditScreen
    from dedup_tui.ui.screens.pair import PairScreen
    from dedup_tui.ui.screens.tune import LabelScreen

    screen = app.screen
    if isinstance(screen, PairScreen):
        return "pair", screen.right
    if isinstance(screen, LabelScreen):
        return "label", None if screen.current is None else (screen.current.a, screen.current.b)
    if isinstance(screen, AuditScreen):
        return "audit", None if screen.current is None else screen.current.key
    return "main", app.main.selected_doc()


async def press_decision(pilot, *keys: str, rounds: int = 200) -> None:
    """Press each decision key once what it would decide is drawn (until_drawn on the screen's own
    target): the key intake drops a key typed ahead of the screen on purpose, and a test that
    means its key to decide must not race the redraw."""
    for key in keys:
        for _ in range(rounds):
            place, doc = decision_target(pilot.app)
            if doc is None or pilot.app.session.intake.on_screen(place) == doc:  # (nothing to decide: no wait)
                break
            await pilot.pause()
        else:
            raise AssertionError(f"what {key!r} would decide ({place}: {doc!r}) was never drawn")
        await pilot.press(key)


def huge_text(size: int, changed_every: int = 0) -> str:
    """`size` characters of numbered lines (every `changed_every`-th line reworded), the first
    line carrying markup and an escape sequence that must stay literal."""
    head = "[bold]not bold[/bold] \x1b]2;HUGE\x07 the report begins\n"
    line = "line {:07d} of a very long report: river library council garden notes and survey{}\n"
    n = size // len(line.format(0, "")) + 1
    body = "".join(line.format(i, " CHANGED" if changed_every and i % changed_every == 0 else "") for i in range(n))
    return (head + body)[:size]


@pytest.fixture
def huge_pair_project(tmp_path) -> Path:
    """A scanned project whose cluster list is a cluster of three short notes, then big-a and
    big-b: two near-duplicate documents of HUGE characters each.

    The scan runs on short stand-ins and the two texts are put in place after it: scanning 40 MB
    takes ~8 s, and what is tested is how the app shows what a project holds, not the scan."""
    from dedup_tui.engine.ingest import load_corpus
    from dedup_tui.engine.scanning.local import scan
    from dedup_tui.engine.store import Project

    rng = random.Random(3)
    base = " ".join(rng.choice(WORDS) for _ in range(60))
    stand_in = " ".join(rng.choice(WORDS) for _ in range(60))
    docs = [{"id": f"note-{i}", "text": base + " note" * i} for i in range(3)]
    docs += [{"id": "big-a", "text": stand_in}, {"id": "big-b", "text": stand_in + " changed"}]
    docs += [{"id": f"single-{i}", "text": f"a single note number {i} about " + rng.choice(WORDS)} for i in range(3)]
    corpus = write_corpus(tmp_path / "huge.jsonl", docs)
    db = tmp_path / "huge.db"
    project = Project(db, create=True)
    try:
        load_corpus(project, [corpus])
        scan(project)
        for doc_id, text in (("big-a", huge_text(HUGE)), ("big-b", huge_text(HUGE + 7, changed_every=997))):
            project.conn.execute(
                "UPDATE documents SET text = ?, length = ? WHERE doc_id = ?", (text, len(text), doc_id)
            )
    finally:
        project.close()
    return db


@contextlib.contextmanager
def writer_held(app):
    """The app's project writer busy (a slow disk, a big write) until the block ends or the
    yielded event is set: what a key shows before its write is saved, or a queue that waits."""
    gate = threading.Event()
    app.writer.submit(lambda project: gate.wait(10), what="a slow write")
    try:
        yield gate
    finally:
        gate.set()
