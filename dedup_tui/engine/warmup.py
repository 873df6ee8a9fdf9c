"""Compiling the scan's kernels ahead of time, in a separate process, so that a fresh install's
first large scan does not wait for numba.

The kernels (kernels.py) are compiled by numba on first use and cached on disk (see _jit.py).
A first scan used to compile them in the scanning process, several seconds on which nothing
moved. Now a command that will need them starts `python -m dedup_tui.engine.warmup` as early as
it can (before loading a large corpus, which takes seconds of its own): on another core and
without sharing a GIL, it runs the real LSH scan on a small made-up corpus in a temporary
folder, so exactly the kernels and argument types a scan uses are compiled into the cache.
The scan then waits for what is left of it (the stage "kernels", shown with its timer ticking)
and loads the kernels from the cache.

Nothing here imports numba: a small corpus (the bundled sample, compared exhaustively with
numpy) neither compiles nor starts anything. When no cache folder is writable nothing can be
kept for the next process, so no warm-up is started (the scan compiles in its own process, as
before).

A stamp file in the cache folder, named after the engine's sources and numba's version, marks
a finished warm-up; a lock file marks one under way (shared by every process of this user:
the app and a CLI command in another terminal wait for the same one).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

STAGE = "kernels"
# A corpus at least this large (bytes of its files) is likely to need the kernels (the
# compiled normalisation of a load starts at 256 KiB of text; LSH a little above that).
CORPUS_BYTES = 1 << 18
ENGINE = Path(__file__).resolve().parent
_LOCK_NAME = "dedup-tui-warmup.lock"


def _writable_dir(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def cache_dir() -> str | None:
    """The folder compiled kernels are cached in (None: no cache)."""
    chosen = os.environ.get("NUMBA_CACHE_DIR")
    if chosen:
        return chosen if _writable_dir(Path(chosen)) else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    uid = os.getuid() if hasattr(os, "getuid") else os.getpid()
    for candidate in (Path(base) / "dedup-tui" / "numba", Path(tempfile.gettempdir()) / f"dedup-tui-numba-{uid}"):
        if _writable_dir(candidate):
            return str(candidate)
    return None


def _sources_key() -> str:
    """Changes whenever the engine's code, numba or Python does (then the cache needs filling again)."""
    h = hashlib.sha256()
    from importlib.util import find_spec

    try:  # numba's own files (found, not imported: importlib.metadata costs ~0.1 s)
        for name in ("numba", "llvmlite"):
            origin = Path(find_spec(name).origin)
            for f in (origin, origin.with_name("_version.py")):
                st = f.stat()
                h.update(f"{f}:{st.st_mtime_ns}:{st.st_size};".encode())
    except (AttributeError, TypeError, ImportError, ValueError, OSError):
        h.update(b"numba?")
    h.update(sys.version.encode())
    h.update(str(ENGINE).encode())
    for path in sorted(ENGINE.glob("*.py")):
        st = path.stat()
        h.update(f"{path.name}:{st.st_mtime_ns}:{st.st_size};".encode())
    return h.hexdigest()[:16]


def stamp_path(cache: str | None = None) -> Path | None:
    cache = cache or cache_dir()
    return Path(cache) / f"dedup-tui-warm-{_sources_key()}" if cache else None


def is_warm(cache: str | None = None) -> bool:
    """The cache holds the kernels of this code (a warm-up finished since it last changed)."""
    stamp = stamp_path(cache)
    return stamp is not None and stamp.exists()


def _failed(cache: str) -> bool:
    """A warm-up of this code failed already (then scans compile what they need themselves,
    and show why if it fails there too, instead of every command starting a doomed warm-up)."""
    stamp = stamp_path(cache)
    return stamp is not None and stamp.with_suffix(".failed").exists()


def _lock_file(cache: str):
    return open(Path(cache) / _LOCK_NAME, "a+b")


def _running(cache: str) -> bool:
    """A warm-up process holds the lock (any process of this user, not only ours)."""
    try:
        import fcntl
    except ImportError:  # (Windows) only our own child is known
        return False
    try:
        with _lock_file(cache) as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return True
            return False
    except OSError:
        return False


class Warmup:
    """A warm-up under way: `process` when this process started it (None: another one did)."""

    def __init__(self, cache: str, process: subprocess.Popen | None):
        self.cache = cache
        self.process = process

    def wait(self, seconds: float) -> None:
        """Until the process ends or `seconds` pass."""
        if self.process is not None and self.process.poll() is None:
            try:
                self.process.wait(seconds)
            except subprocess.TimeoutExpired:
                pass
        else:
            time.sleep(seconds)  # (another process's warm-up: its lock is polled)

    def running(self) -> bool:
        if is_warm(self.cache):
            return False
        if self.process is not None and self.process.poll() is None:
            return True
        return _running(self.cache)


# The child imports this very dedup_tui (wherever this process found it: an install, a checkout
# on PYTHONPATH or the current folder), without putting its folder on sys.path.
_CHILD = """\
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location(
    "dedup_tui", os.path.join({package!r}, "__init__.py"), submodule_search_locations=[{package!r}])
package = importlib.util.module_from_spec(spec)
sys.modules["dedup_tui"] = package
spec.loader.exec_module(package)
from dedup_tui.engine.warmup import main
sys.exit(main())
"""

_started: Warmup | None = None
_started_lock = threading.Lock()


def start() -> Warmup | None:
    """Start a warm-up process unless the cache is warm, one is already running, or there is no
    cache to fill (then None). Returns at once; the process ends by itself, silently."""
    global _started
    cache = cache_dir()
    if cache is None or is_warm(cache) or _failed(cache):
        return None
    with _started_lock:
        if _started is not None and _started.running():
            return _started
        if _running(cache):
            _started = Warmup(cache, None)
            return _started
        env = dict(os.environ)
        env["NUMBA_CACHE_DIR"] = cache
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", _CHILD.format(package=str(ENGINE.parent))], env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C of the command leaves it to finish quietly
                close_fds=True,
            )
        except OSError:
            return None
        # Reaped as soon as it ends (a long-lived app keeps no zombie).
        threading.Thread(target=process.wait, name="dedup-tui-warmup-reaper", daemon=True).start()
        _started = Warmup(cache, process)
        return _started


def corpus_bytes(paths) -> int:
    total = 0
    for p in paths:
        p = Path(p)
        try:
            if p.is_dir():
                total += sum(f.stat().st_size for f in p.iterdir() if f.is_file())
            else:
                total += p.stat().st_size
        except OSError:
            pass
        if total >= CORPUS_BYTES:
            break
    return total


def start_for_corpus(paths, method: str = "auto") -> Warmup | None:
    """Before loading `paths`: start the warm-up when what follows will likely compile."""
    if method == "exhaustive":
        return None
    if method == "lsh" or corpus_bytes(paths) >= CORPUS_BYTES:
        return start()
    return None


_VALUE_OPTIONS = ("--db", "--id-field", "--text-field", "--k", "--floor", "--method", "--num-perm", "--seed",
                  "--workers", "--max-bucket")


def start_early(argv: list[str]) -> Warmup | None:
    """From the dedup-tui command line itself, before the CLI's imports (a third of a second):
    `scan` or `load` of a large corpus starts the warm-up (the command's own start_for_corpus
    then finds it running). Anything else, or a guess gone wrong, only leaves that to the
    command."""
    if len(argv) < 3 or argv[1] not in ("scan", "load"):
        return None
    prog = Path(argv[0])
    if prog.name != "dedup-tui" and not (prog.name == "__main__.py" and prog.parent.name == "dedup_tui"):
        return None
    method, corpus, args = "auto", [], argv[2:]
    for i, arg in enumerate(args):
        if arg.startswith("--method="):
            method = arg.split("=", 1)[1]
        elif arg.startswith("-") or (i and args[i - 1] in _VALUE_OPTIONS):
            if i and args[i - 1] == "--method":
                method = arg
        else:
            corpus.append(arg)
    return start_for_corpus(corpus, method) if corpus else None


def scan_needs_kernels(project, settings) -> bool:
    """Whether the scan of `project` with `settings` will run the compiled LSH path (as
    pipeline.find_pairs decides, estimated from the stored documents)."""
    from . import pipeline

    if settings.method == "lsh":
        return True
    if settings.method == "exhaustive":
        return False
    n, avg = project.distinct_texts_and_average_length()
    n = n or 0
    return n >= 2 and n * (n - 1) / 2 * max(float(avg or 0), 1) > pipeline.EXHAUSTIVE_WORK_LIMIT


def _stages_path(cache: str) -> Path | None:
    stamp = stamp_path(cache)
    return stamp.with_suffix(".stages") if stamp else None


def warmup_stages(cache: str) -> list[str]:
    """The stages the running warm-up's scan has reached so far, in order."""
    try:
        return _stages_path(cache).read_text(encoding="utf-8").split()
    except (OSError, AttributeError):
        return []


def _wait(handle: Warmup, control, ready, tick: float) -> None:
    """Wait, reporting STAGE (its timer ticking) and honouring cancel, until the warm-up ended
    or ready(its stages) holds."""
    shown = 0.0
    while handle.running() and not ready(warmup_stages(handle.cache)):
        now = time.monotonic()
        if now - shown >= tick:
            control.report(STAGE, 0, 0)
            shown = now
        control.check()
        handle.wait(0.05)
    control.check()


# The scan's last stage (whose end is reported inside its final transaction: no kernel follows,
# and waiting there would only hold the project's write lock).
_UNGATED = (STAGE, "write")


class _Gated:
    """The scan's Control while the warm-up still compiles: the scan runs alongside it, one
    stage behind. When the scan finishes a stage (done == total), it waits until the warm-up
    has finished the next one (reported the stage after it), whose kernels are then in the
    cache (or until the warm-up ended). The scan so loads every kernel from the
    cache instead of compiling it a second time, and shows STAGE whenever it does wait."""

    def __init__(self, control, handle: Warmup, tick: float):
        self._control, self._handle, self._tick = control, handle, tick
        self.cancel = control.cancel
        self.progress = control.progress

    def report(self, stage: str, done: int, total: int) -> None:
        self._control.report(stage, done, total)
        if total and done >= total and stage not in _UNGATED and self._handle.running():
            def ready(stages, stage=stage):
                return stage in stages and len(stages) > stages.index(stage) + 2

            self._wait_for(ready)

    def _wait_for(self, ready) -> None:
        if not ready(warmup_stages(self._handle.cache)):
            _wait(self._handle, self._control, ready, self._tick)

    def check(self) -> None:
        self._control.check()


def prepare(project, settings, control, tick: float = 0.25):
    """Before pipeline.scan: when the scan will use kernels that are not cached yet, have them
    compiled by a warm-up process (started now unless one runs) and return the Control to scan
    with. The scan starts once the warm-up has finished its first two stages (its first
    kernels are cached) and then follows it a stage behind (see _Gated), so most of the
    compiling overlaps the scan's own work. Returns `control` itself when the cache is warm,
    there is no cache, or the scan needs no kernels; a failed warm-up only means the scan
    compiles what it needs itself."""
    cache = cache_dir()
    if cache is None or is_warm(cache) or not scan_needs_kernels(project, settings):
        return control
    handle = start()
    if handle is None:
        return control
    # The scan's first stage (exact copies) needs no kernels; its second needs the warm-up's second.
    _wait(handle, control, lambda stages: len(stages) >= 3, tick)
    if not handle.running():
        return control
    return _Gated(control, handle, tick)


# -- the warm-up process -------------------------------------------------------------------
def _corpus() -> list[dict]:
    """Small, made-up, but enough to take every path of a scan that a corpus of a few thousand
    documents takes: exact copies, non-ASCII text, many small components, and one template
    family with more than 50,000 pairs (verified as bitsets, and enough pairs for the compiled
    spanning forest)."""
    import random

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


def run() -> None:
    """Run the real load and LSH scan on _corpus() in a temporary folder (compiling into the
    cache whatever they use)."""
    import json

    from . import pipeline
    from .ingest import load_corpus
    from .progress import Control
    from .store import Project

    with tempfile.TemporaryDirectory(prefix="dedup-tui-warmup-") as tmp:
        corpus = Path(tmp) / "warmup.jsonl"
        with open(corpus, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in _corpus())
        project = Project(Path(tmp) / "warmup.db", create=True)
        stages_file = _stages_path(cache_dir())
        reached: list[str] = []

        def progress(stage: str, done: int, total: int) -> None:
            if not reached or reached[-1] != stage:  # the previous stage's kernels are cached
                reached.append(stage)
                with open(stages_file, "a", encoding="utf-8") as fh:
                    fh.write(stage + "\n")

        try:
            stages_file.unlink(missing_ok=True)
            load_corpus(project, [corpus])  # (the scan normalises with the load's compiled kernel)
            pipeline.scan(project, pipeline.ScanSettings(method="lsh", workers=2), Control(progress))
        finally:
            project.close()


def main() -> int:
    cache = cache_dir()
    if cache is None:
        return 0
    os.environ["NUMBA_CACHE_DIR"] = cache
    try:
        import fcntl
    except ImportError:
        fcntl = None
    with _lock_file(cache) as lock:
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
        _stages_path(cache).unlink(missing_ok=True)
        for old in Path(cache).glob("dedup-tui-warm-*"):  # stamps of earlier code
            if old != stamp:
                old.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
