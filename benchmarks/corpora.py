"""Deterministic benchmark corpora with planted near-duplicates and a ground-truth group.

Three kinds:

* ``long``  -- ~4 KB documents built from sentences (real package summaries when
  ../shared/corpora/package_summaries.jsonl.gz is present, else sentences of a generated
  vocabulary drawn with a Zipf distribution);
* ``short`` -- ~200-character documents from the same sentence source;
* ``real``  -- the real package summaries themselves (first N lines, no planting; the
  ``group`` field is null). Falls back to ``short`` when the file is absent.

In ``long`` and ``short`` about 45% of the documents belong to planted groups: an original
plus 1-5 variants made by one noise operation each (exact copy, case/whitespace change,
character edits, word edits, sentence replacement, truncation) at several strengths, so
pair similarities spread over the whole 0.3-1.0 range, including just above and below the
usual floors. Every document carries ``group`` (the same string for an original and its
variants; singletons get their own). Output is a pure function of (kind, n, seed).

Run ``python benchmarks/corpora.py --kind long --docs 1000 --out corpus.jsonl`` to write one.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SUMMARIES = REPO.parent / "shared" / "corpora" / "package_summaries.jsonl.gz"

LONG_TARGET = 4000
SHORT_RANGE = (120, 280)
PLANTED_FRACTION = 0.45

# (operation, strength) choices for variants; weights favour the interesting middle.
NOISE_OPS = [
    ("exact", 0.0, 1),
    ("case_space", 0.0, 1),
    ("char", 0.005, 2),
    ("char", 0.01, 2),
    ("char", 0.02, 2),
    ("char", 0.04, 2),
    ("char", 0.08, 1),
    ("word", 0.02, 2),
    ("word", 0.05, 2),
    ("word", 0.1, 2),
    ("word", 0.2, 1),
    ("sentence", 0.1, 1),
    ("sentence", 0.3, 1),
    ("truncate", 0.1, 1),
    ("truncate", 0.3, 1),
]

_WS = re.compile(r"\s+")


def summaries_path() -> Path | None:
    env = os.environ.get("DEDUP_BENCH_SUMMARIES")
    p = Path(env) if env else SUMMARIES
    return p if p.exists() else None


def read_summaries(limit: int | None = None) -> list[str]:
    """Texts of the real package summaries, in file order (first `limit` lines)."""
    path = summaries_path()
    if path is None:
        raise FileNotFoundError(SUMMARIES)
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            out.append(json.loads(line)["text"])
            if limit is not None and len(out) >= limit:
                break
    return out


class SentenceSource:
    """Sentences to build documents from: real summaries or a Zipf-distributed vocabulary."""

    def __init__(self, seed: int, use_real: bool = True):
        self.rng = random.Random(seed * 7919 + 17)
        self.real = None
        if use_real and summaries_path() is not None:
            texts = read_summaries(300_000)
            seen, pool = set(), []
            for t in texts:
                t = _WS.sub(" ", t).strip()
                if 25 <= len(t) <= 300 and t.lower() not in seen:
                    seen.add(t.lower())
                    pool.append(t)
            self.real = pool
        if self.real is None:
            syll = ["ka", "lo", "mi", "ne", "ru", "ta", "shi", "po", "den", "var", "qu", "zel",
                    "an", "or", "ix", "um", "bre", "sto", "fa", "gli", "tor", "win", "ep", "yo"]
            vocab = set()
            r = random.Random(seed)
            while len(vocab) < 20_000:
                vocab.add("".join(r.choice(syll) for _ in range(r.randint(1, 4))))
            self.vocab = sorted(vocab)
            r.shuffle(self.vocab)
            # Zipf(s=1.1) weights over ranks.
            self.weights = [1.0 / (i + 1) ** 1.1 for i in range(len(self.vocab))]
            self.cum = []
            acc = 0.0
            for w in self.weights:
                acc += w
                self.cum.append(acc)

    @property
    def kind(self) -> str:
        return "package-summary sentences" if self.real is not None else "Zipf vocabulary"

    def sentence(self) -> str:
        if self.real is not None:
            s = self.rng.choice(self.real)
            return s if s.endswith((".", "!", "?")) else s + "."
        n = self.rng.randint(5, 20)
        words = self.rng.choices(self.vocab, cum_weights=self.cum, k=n)
        s = " ".join(words)
        return s[0].upper() + s[1:] + "."

    def document(self, target: int) -> str:
        parts, size = [], 0
        while size < target:
            s = self.sentence()
            parts.append(s)
            size += len(s) + 1
        return " ".join(parts)

    def word(self) -> str:
        if self.real is not None:
            return self.rng.choice(self.rng.choice(self.real).split())
        return self.rng.choices(self.vocab, cum_weights=self.cum, k=1)[0]


_ALPHABET = "abcdefghijklmnopqrstuvwxyz etaoinshrdlu"


def _char_edits(rng: random.Random, text: str, rate: float) -> str:
    chars = list(text)
    n_edits = max(1, round(len(chars) * rate))
    for _ in range(n_edits):
        if not chars:
            break
        i = rng.randrange(len(chars))
        op = rng.random()
        if op < 0.4:
            chars[i] = rng.choice(_ALPHABET)
        elif op < 0.7:
            del chars[i]
        else:
            chars.insert(i, rng.choice(_ALPHABET))
    return "".join(chars)


def _word_edits(rng: random.Random, src: SentenceSource, text: str, rate: float) -> str:
    words = text.split(" ")
    n_edits = max(1, round(len(words) * rate))
    for _ in range(n_edits):
        if not words:
            break
        i = rng.randrange(len(words))
        op = rng.random()
        if op < 0.4:
            words[i] = src.word()
        elif op < 0.7 and len(words) > 1:
            del words[i]
        else:
            words.insert(i, src.word())
    return " ".join(words)


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?]) ", text) if s]


def make_variant(rng: random.Random, src: SentenceSource, text: str, op: str, strength: float) -> str:
    if op == "exact":
        return text
    if op == "case_space":  # identical after normalisation
        t = text.upper() if rng.random() < 0.5 else text
        return "  " + t.replace(" ", "  \n", 3) + "\t"
    if op == "char":
        return _char_edits(rng, text, strength)
    if op == "word":
        return _word_edits(rng, src, text, strength)
    if op == "sentence":
        sents = _sentences(text)
        if len(sents) < 3:
            return _word_edits(rng, src, text, strength)
        for _ in range(max(1, round(len(sents) * strength))):
            sents[rng.randrange(len(sents))] = src.sentence()
        return " ".join(sents)
    if op == "truncate":  # drop a tail, append fresh text of similar size
        cut = max(1, int(len(text) * (1 - strength)))
        extra = src.document(max(1, len(text) - cut)) if len(text) > 400 else src.word()
        return text[:cut] + " " + extra
    raise ValueError(op)


# Near-variant operations for short texts (sentence operations make no sense on one line).
SHORT_VARIANT_OPS = [
    ("exact", 0.0), ("case_space", 0.0),
    ("char", 0.02), ("char", 0.04), ("char", 0.08), ("char", 0.15),
    ("word", 0.1), ("word", 0.2), ("word", 0.3),
    ("truncate", 0.1), ("truncate", 0.3),
]


def real_plus_variants(n_docs: int, seed: int = 0) -> list[dict]:
    """Every real summary, then near-variants of random ones up to n_docs: a million short
    documents with real template families plus planted near-duplicates. A variant's group is
    its original's id (originals are their own group)."""
    texts = read_summaries()
    rng = random.Random(seed)
    src = SentenceSource(seed)
    pool = [i for i, t in enumerate(texts) if len(t) >= 30]
    out = [{"id": f"r{i:07d}", "text": t, "group": f"r{i:07d}"} for i, t in enumerate(texts[:n_docs])]
    for j in range(max(0, n_docs - len(texts))):
        op, strength = rng.choice(SHORT_VARIANT_OPS)
        base = rng.choice(pool)
        out.append({"id": f"v{j:07d}", "text": make_variant(rng, src, texts[base], op, strength),
                    "group": f"r{base:07d}"})
    return out


def generate(kind: str, n_docs: int, seed: int = 0) -> list[dict]:
    """n_docs records {"id", "text", "group"} (deterministic for (kind, n_docs, seed))."""
    if kind == "realplus" and summaries_path() is not None:
        return real_plus_variants(n_docs, seed)
    if kind == "realplus":
        kind = "short"
    if kind == "real":
        if summaries_path() is None:
            kind = "short"
        else:
            texts = read_summaries(n_docs)
            return [{"id": f"r{i:07d}", "text": t, "group": None} for i, t in enumerate(texts)]
    if kind not in ("long", "short"):
        raise ValueError(f"unknown corpus kind {kind!r}")
    rng = random.Random(seed)
    src = SentenceSource(seed)
    ops = [(o, s) for o, s, w in NOISE_OPS for _ in range(w)]

    def original() -> str:
        if kind == "long":
            return src.document(rng.randint(int(LONG_TARGET * 0.75), int(LONG_TARGET * 1.25)))
        return src.document(rng.randint(*SHORT_RANGE))

    docs: list[tuple[str, str]] = []  # (group, text)
    planted_target = int(n_docs * PLANTED_FRACTION)
    g = 0
    while len(docs) < planted_target:
        base = original()
        group = f"g{g}"
        g += 1
        docs.append((group, base))
        for _ in range(rng.randint(1, 5)):
            op, strength = rng.choice(ops)
            docs.append((group, make_variant(rng, src, base, op, strength)))
    docs = docs[:planted_target]
    while len(docs) < n_docs:
        docs.append((f"s{g}", original()))
        g += 1
    rng.shuffle(docs)
    return [{"id": f"d{i:07d}", "text": t, "group": grp} for i, (grp, t) in enumerate(docs)]


def write_jsonl(records: list[dict], path: str | Path) -> int:
    """Write records as JSONL; returns the number of bytes of text (UTF-8)."""
    total = 0
    with open(path, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
            total += len(r["text"].encode("utf-8"))
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", choices=["long", "short", "real", "realplus"], default="long")
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    recs = generate(a.kind, a.docs, a.seed)
    size = write_jsonl(recs, a.out)
    print(f"{len(recs):,} documents, {size / 1e6:.1f} MB of text -> {a.out}")


if __name__ == "__main__":
    main()
