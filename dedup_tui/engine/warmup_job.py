"""The warm-up processes (started by warmup.start).

The first (`main`) runs the real load and LSH scan on a small made-up corpus in a temporary
folder, so that exactly the kernels and argument types a scan uses are compiled into numba's
cache, in the order the scan needs them, then stamps the cache (kernel_cache).

The second (`main_from_the_end`), at the lowest CPU priority, compiles the same kernels from
the last stage's backwards, from the argument types recorded in kernel_signatures.py: it runs
only on a core nobody else wants (while the scanning process waits for the first, say), and
the first then loads from the cache what the second already compiled. Together they finish
sooner than the first alone, without slowing the load or the scan they overlap.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from pathlib import Path

from . import pipeline
from .ingest import load_corpus
from .kernel_cache import cache_dir, has_failed, is_warm, lock_file, stages_path, stamp_path
from .kernel_signatures import INCREMENTAL, SIGNATURES
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
    rng.shuffle(docs)
    return [{"id": f"w{i}", "text": t} for i, t in enumerate(docs)]


def run(after_the_scan=None) -> None:
    """Run the real load and LSH scan on _corpus() in a temporary folder (compiling into the
    cache whatever they use)."""
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
                with open(stages_file, "a", encoding="utf-8") as fh:
                    fh.write(stage + "\n")

        try:
            stages_file.unlink(missing_ok=True)
            load_corpus(project, [corpus])  # (the scan normalises with the load's compiled kernel)
            settings = pipeline.ScanSettings(method="lsh", workers=2)
            pipeline.scan(project, settings, Control(progress))
            progress("scanned", 0, 0)  # (a scan waiting on the last stage's kernels need not wait for what follows)
            if after_the_scan is not None:
                after_the_scan()
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


def numba_types(args: tuple) -> tuple:
    """A recorded argument list (kernel_signatures.py) as numba types: an array is
    (dtype, ndim, layout, readonly), a scalar its numba type's name."""
    import numba
    import numpy as np

    from . import kernels  # noqa: F401  (numba set up with its cache folder: _jit)

    out = []
    for arg in args:
        if isinstance(arg, str):
            out.append(getattr(numba.types, arg))
        else:
            dtype, ndim, layout, readonly = arg
            out.append(numba.types.Array(numba.from_dtype(np.dtype(dtype)), ndim, layout, readonly=readonly))
    return tuple(out)


def described(args: tuple) -> tuple:
    """numba argument types as kernel_signatures.py records them (numba_types' inverse)."""
    import numba
    import numpy as np

    out = []
    for t in args:
        if isinstance(t, numba.types.Array):
            out.append((str(np.dtype(numba.np.numpy_support.as_dtype(t.dtype))), t.ndim, t.layout, not t.mutable))
        elif isinstance(t, (numba.types.Integer, numba.types.Float, numba.types.Boolean)):
            out.append(str(t))
        else:
            raise TypeError(f"a kernel argument of type {t} cannot be recorded; extend kernel_signatures' format")
    return tuple(out)


def kernel(module: str, name: str):
    from importlib import import_module

    return getattr(import_module(f"{__package__}.{module}"), name)


def record() -> tuple[list[tuple[str, str, tuple]], list[tuple[str, str, tuple]]]:
    """Run the warm-up (on an empty cache) and return the kernels it compiled, in the order it
    first called them, as (module, name, described argument types): those of the full scan,
    and those the incremental scan after it added (kernel_signatures.py)."""
    from numba.core import event

    from . import kernels  # noqa: F401  (numba set up with its cache folder: _jit)

    scan: list[tuple[str, str, tuple]] = []
    compiled = scan
    package = __package__ + "."

    class Listener(event.Listener):
        depth = 0

        def on_start(self, ev):
            fn = ev.data["dispatcher"].py_func
            if self.depth == 0 and fn.__module__.startswith(package):
                entry = (fn.__module__[len(package):], fn.__name__, described(ev.data["args"]))
                if entry not in scan and entry not in compiled:
                    compiled.append(entry)
            self.depth += 1

        def on_end(self, ev):
            self.depth -= 1

    listener = Listener()
    event.register("numba:compile", listener)
    try:
        incremental: list[tuple[str, str, tuple]] = []

        def switch():
            nonlocal compiled
            compiled = incremental

        run(after_the_scan=switch)
    finally:
        event.unregister("numba:compile", listener)
    return scan, incremental


def compile_from_the_end(cache: str | None, signatures=SIGNATURES, afterwards=INCREMENTAL) -> int:
    """Compile (into the cache) the full scan's recorded kernels, the last-needed first, then
    the incremental scan's, until the cache is stamped warm; returns how many were compiled or
    loaded."""
    done = 0
    for module, name, args in [*reversed(signatures), *afterwards]:
        if is_warm(cache) or (cache and has_failed(cache)):
            break
        kernel(module, name).compile(numba_types(args))
        done += 1
    return done


def main_from_the_end() -> int:
    cache = cache_dir()
    if cache is None:
        return 0
    os.environ["NUMBA_CACHE_DIR"] = cache
    if hasattr(os, "nice"):
        try:
            os.nice(19)  # only a core that is otherwise idle
        except OSError:
            pass
    compile_from_the_end(cache)
    return 0


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
    sys.exit(main_from_the_end() if sys.argv[1:] == ["--from-the-end"] else main())
