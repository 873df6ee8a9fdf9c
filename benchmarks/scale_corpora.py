"""The scale corpora of issue 41, generated reproducibly (a pure function of kind and seed).

- ``summaries3`` (2.5M documents, ~225 MB): the 841,708 real package summaries from
  ``../shared/corpora`` plus two noisy copies of each (one word in ten replaced by a word of
  the summaries' vocabulary).
- ``summaries5`` (4.2M, ~378 MB): the same with four copies.
- ``mixed10m`` (10M documents of 100 B to 1 KB): distinct documents made of several real
  summaries joined with distinct generated words, about 10% of them near duplicates (one
  word in ten replaced) of an earlier document.

Written as JSONL ``{"id", "text"}`` with, beside it, ``<out>.planted.tsv``: each near
duplicate's id and the id of the document it was made from (the recall sample's ground
truth). Optionally zstandard-compressed (``--out x.jsonl.zst``) or as shards (``--shards N
--out folder``; ``--zst``: shard-0000.jsonl.zst ...). Shards take the documents in turn
(document i in shard i mod N).

    python benchmarks/scale_corpora.py --kind summaries3 --out /tmp/s3.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from corpora import read_summaries

KINDS = {"summaries3": 3, "summaries5": 5, "mixed10m": 0}


def noisy(rng: random.Random, vocab: list[str], text: str) -> str:
    words = text.split()
    if not words:
        return text
    for _ in range(max(1, len(words) // 10)):
        words[rng.randrange(len(words))] = rng.choice(vocab)
    return " ".join(words)


def summaries_times(copies: int, seed: int):
    texts = read_summaries()
    vocab = sorted({w for t in texts[:50_000] for w in t.split()})
    rng = random.Random(seed)
    for i, text in enumerate(texts):
        yield f"s{i}", text, None
    for c in range(1, copies):
        for i, text in enumerate(texts):
            yield f"s{i}-{c}", noisy(rng, vocab, text), f"s{i}"


def mixed(n_docs: int, seed: int, near_share: float = 0.1):
    texts = [t for t in read_summaries() if len(t) >= 20]
    vocab = sorted({w for t in texts[:50_000] for w in t.split()})
    rng = random.Random(seed)
    made: list[tuple[str, str]] = []  # a window of recent documents (id, text) that near duplicates copy
    window = 200_000
    for i in range(n_docs):
        source = None
        if made and rng.random() < near_share:
            source, original = made[rng.randrange(len(made))]
            text = noisy(rng, vocab, original)
        else:
            target = int(100 * 10 ** (rng.random()))  # 100 B to 1 KB, log-uniform
            parts: list[str] = []
            size = 0
            while size < target:
                if rng.random() < 0.5:
                    part = texts[rng.randrange(len(texts))]
                else:  # distinct text: invented words
                    part = " ".join(
                        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
                        for _ in range(rng.randint(3, 12))
                    )
                parts.append(part)
                size += len(part) + 1
            text = " ".join(parts)[:1000]
            if len(made) < window:
                made.append((f"m{i}", text))
            else:
                made[rng.randrange(window)] = (f"m{i}", text)
        yield f"m{i}", text, source


def records(kind: str, n_docs: int | None, seed: int):
    if kind == "mixed10m":
        return mixed(n_docs or 10_000_000, seed)
    return summaries_times(KINDS[kind], seed)


def write(kind: str, out: Path, n_docs: int | None, seed: int, shards: int, zst: bool = False) -> int:
    import contextlib

    def opener(path: Path):
        if path.suffix == ".zst":
            import zstandard

            return zstandard.open(path, "wt", encoding="utf-8")
        return path.open("w", encoding="utf-8")

    count = 0
    planted = Path(str(out).rstrip("/") + ".planted.tsv")
    with contextlib.ExitStack() as stack:
        sources = stack.enter_context(planted.open("w", encoding="utf-8"))
        if shards > 1:
            out.mkdir(parents=True, exist_ok=True)
            suffix = ".jsonl.zst" if zst else ".jsonl"
            files = [stack.enter_context(opener(out / f"shard-{s:04d}{suffix}")) for s in range(shards)]
        else:
            files = [stack.enter_context(opener(out))]
        for doc_id, text, source in records(kind, n_docs, seed):
            if source is not None:
                sources.write(f"{doc_id}\t{source}\n")
            files[count % len(files)].write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")
            count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", choices=sorted(KINDS), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=None, help="mixed10m only (default 10,000,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--zst", action="store_true", help="shards zstandard-compressed (.jsonl.zst)")
    args = parser.parse_args()
    n = write(args.kind, args.out, args.docs, args.seed, args.shards, args.zst)
    print(f"{n:,} documents -> {args.out}")


if __name__ == "__main__":
    main()
