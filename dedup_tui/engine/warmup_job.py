"""The warm-up process (started by warmup.start): runs the real load and LSH scan on a small
made-up corpus in a temporary folder, so that exactly the kernels and argument types a scan
uses are compiled into numba's cache, in the order the scan needs them, then an incremental
scan after more documents (its own kernel), then stamps the cache (kernel_cache)."""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from pathlib import Path

from . import pipeline
from .ingest import load_corpus
from .kernel_cache import cache_dir, is_warm, lock_file, stages_path, stamp_path
from .progress import Control
from .store import Project


def _corpus() -> list[dict]:
    """Small, made-up, but enough to take every path of a scan that a corpus of a few thousand
    documents takes: exact copies, non-ASCII text, many small components, and one template
    family with more than 50,000 pairs (verified as bitsets, and enough pairs for the compiled
    spanning forest)."""
    rng = random.Random(21)
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "zé", "ßa", "qu", "ex", "on", "ar", "el"]
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(400)]

    def text(n):
        return " ".join(rng.choice(words) for _ in range(n))

    def edit(t, n):
        w = t.split(" ")
        for _ in range(n):
            w[rng.randrange(len(w))] = rng.choice(words)
        return " ".join(w)

    docs = []
    family = text(70)
    for _ in range(340):  # one component of ~57,000 pairs
        docs.append(edit(family, 2))
    for _ in range(150):  # small components: pairs and triples
        base = text(rng.randint(30, 90))
        docs += [base] + [edit(base, 3) for _ in range(rng.randint(1, 2))]
    docs += [text(rng.randint(10, 120)) for _ in range(300)]
    docs += docs[:5]  # exact copies
    docs.append("  Ünïcödé  TEXT\twith\u00a0spaces  ")
    docs.append("ΟΔΥΣΣΕΥΣ, a capital sigma: normalised by Python (the compiled splice of the rest)")
    rng.shuffle(docs)
    return [{"id": f"w{i}", "text": t} for i, t in enumerate(docs)]


def run(on_stage=None) -> None:
    """Run the real load and LSH scan on _corpus() in a temporary folder (compiling into the
    cache whatever they use); on_stage(name) as each stage of the scan begins."""
    with tempfile.TemporaryDirectory(prefix="dedup-tui-warmup-") as tmp:
        corpus = Path(tmp) / "warmup.jsonl"
        with open(corpus, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in _corpus())
        project = Project(Path(tmp) / "warmup.db", create=True)
        stages_file = stages_path(cache_dir())
        reached: list[str] = []

        def progress(stage: str, done: int, total: int) -> None:
            if not reached or reached[-1] != stage:  # the previous stage's kernels are cached
                reached.append(stage)
                if on_stage is not None:
                    on_stage(stage)
                with open(stages_file, "a", encoding="utf-8") as fh:
                    fh.write(stage + "\n")

        try:
            stages_file.unlink(missing_ok=True)
            load_corpus(project, [corpus])  # (the scan normalises with the load's compiled kernel)
            settings = pipeline.ScanSettings(method="lsh", workers=2)
            pipeline.scan(project, settings, Control(progress))
            progress("scanned", 0, 0)  # (a scan waiting on the last stage's kernels need not wait for what follows)
            _lowest_priority()  # what follows only serves later scans: cores to the scan under way
            _count_rare_fingerprints()
            # More documents, scanned again: the incremental scan's own kernel (its stages after
            # the full scan's: a scan waiting for the warm-up has passed them by then).
            more = Path(tmp) / "more.jsonl"
            with open(more, "w", encoding="utf-8") as fh:
                fh.writelines(json.dumps({"id": f"more-{record['id']}", "text": record["text"] + " more"},
                                         ensure_ascii=False) + "\n" for record in _corpus()[:200])
            load_corpus(project, [more])
            pipeline.scan(project, settings, Control(None))
        finally:
            project.close()


def _count_rare_fingerprints() -> None:
    """A big template family's rare fingerprints are counted pair by pair (kernels.Family):
    the made-up corpus's family is too small to take that path, so it is taken here, on a few
    texts, through the same code (the same argument types) as a scan's."""
    import numpy as np

    from . import kernels

    texts = [" ".join(f"w{(i * 7 + j) % 40}" for j in range(30)) + f" text {i}" for i in range(12)]
    family = kernels.Family(kernels.normalized_buffer(texts), np.arange(len(texts)), pipeline.DEFAULT_K)
    pairs = np.array([(a, b) for a in range(len(texts)) for b in range(a + 1, len(texts))], np.int64)
    family.intersections(np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1]), below=4)


def _lowest_priority() -> None:
    if hasattr(os, "nice"):
        try:
            os.nice(19 - os.nice(0))
        except OSError:
            pass


def main() -> int:
    cache = cache_dir()
    if cache is None:
        return 0
    os.environ["NUMBA_CACHE_DIR"] = cache
    try:
        import fcntl
    except ImportError:
        fcntl = None
    with lock_file(cache) as lock:
        if fcntl is not None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return 0  # another warm-up is filling the cache
        if is_warm(cache):
            return 0
        stamp = stamp_path(cache)
        try:
            run()
        except BaseException:
            stamp.with_suffix(".failed").touch()
            raise
        stamp.touch()
        stages_path(cache).unlink(missing_ok=True)
        for old in Path(cache).glob("dedup-tui-warm-*"):  # stamps of earlier code
            if old != stamp:
                old.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
