"""Compiling the scan's kernels ahead of time, in a separate process, so that a fresh install's
first large scan does not wait for numba.

The kernels (scanning/kernels/) are compiled by numba on first use and cached on disk (see jit.py).
A first scan used to compile them in the scanning process, several seconds on which nothing
moved. Now a command that will need them starts a warm-up process (warmup_job.py) as early as
it can (before loading a large corpus, which takes seconds of its own): on another core and
without sharing a GIL, it compiles the kernels a scan calls (kernel_list.py: each with its
argument types, in the order a scan calls them) into the cache. The scan waits at each of its
reports for the kernels it calls after that report (the stage "kernels", shown with its timer
ticking), compiling kernels it needs later meanwhile (on the core it would leave idle), and
loads the rest from the cache.

Nothing here imports numba: a small corpus (the bundled sample, compared exhaustively with
numpy) neither compiles nor starts anything. When no cache folder is writable nothing can be
kept for the next process, so no warm-up is started (the scan compiles in its own process, as
before).

The cache's state (a stamp for a finished warm-up, a lock for one under way, shared by every
process of this user: the app and a CLI command in another terminal wait for the same one; both
named after the sources key, so another install's warm-up is never waited for) is kept by
kernel_cache.py; the warm-up process itself is warmup_job.py, which ends when its sources change
and at a deadline. A scan never waits longer than STALL_SECONDS without progress.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from .kernel_cache import (
    ENGINE,
    KEY_VARIABLE,
    ReportEvents,
    cache_dir,
    has_failed,
    is_warm,
    notice,
    ready_kernels,
    sources_key,
    warmup_running,
)

STAGE = "kernels"
# A corpus at least this large (bytes of its files) is likely to need the kernels (the
# compiled normalisation of a load starts at 256 KiB of text; LSH a little above that).
CORPUS_BYTES = 1 << 18
# How long a scan waits for a warm-up that makes no progress (no kernel added to its ready file,
# none compiled by the scan itself; compiling one takes ~1 s) before compiling in its own process.
STALL_SECONDS = 6.0


class Warmup:
    """A warm-up under way, of the sources `key` (this process's, when it was started):
    `process` when this process started it (None: another one did)."""

    def __init__(self, cache: str, process: subprocess.Popen | None, key: str | None = None):
        self.cache = cache
        self.process = process
        self.key = key or sources_key()

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
        if is_warm(self.cache, self.key):
            return False
        if self.process is not None and self.process.poll() is None:
            return True
        return warmup_running(self.cache, self.key)

    def ready(self) -> set[int]:
        return ready_kernels(self.cache, self.key)


# The child imports this very dedup_tui (wherever this process found it: an install, a checkout
# on PYTHONPATH or the current folder), without putting its folder on sys.path.
_CHILD = """\
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location(
    "dedup_tui", os.path.join({package!r}, "__init__.py"), submodule_search_locations=[{package!r}])
package = importlib.util.module_from_spec(spec)
sys.modules["dedup_tui"] = package
spec.loader.exec_module(package)
from dedup_tui.engine.compile.warmup_job import main
sys.exit(main([]))
"""

_started: Warmup | None = None
_started_lock = threading.Lock()


def start() -> Warmup | None:
    """Start a warm-up process unless the cache is warm, one is already running, or there is no
    cache to fill (then None). Returns at once; the process ends by itself, silently."""
    global _started
    cache = cache_dir()
    key = sources_key()
    if cache is None or is_warm(cache, key) or has_failed(cache, key):
        return None
    with _started_lock:
        if _started is not None and _started.key == key and _started.running():
            return _started
        if warmup_running(cache, key):
            _started = Warmup(cache, None, key)
            return _started
        process = _spawn(cache, key)
        if process is None:
            return None
        _started = Warmup(cache, process, key)
        return _started


def _spawn(cache: str, key: str) -> subprocess.Popen | None:
    """A warm-up process (warmup_job.main), of this very dedup_tui, filling `cache` for the
    sources `key` (it ends at once when its own sources are not those)."""
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = cache
    env[KEY_VARIABLE] = key
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", _CHILD.format(package=str(ENGINE.parent))],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C of the command leaves it to finish quietly
            close_fds=True,
        )
    except OSError:
        return None
    # Reaped as soon as it ends (a long-lived app keeps no zombie).
    threading.Thread(target=process.wait, name="dedup-tui-warmup-reaper", daemon=True).start()
    return process


def corpus_bytes(paths, enough: int = CORPUS_BYTES) -> int:
    """Bytes of the corpus files (and of the files in corpus folders, of the shards a glob
    pattern names; compressed ones counted as on disk), counted up to `enough`."""
    from ..errors import CorpusError
    from ..readers.shards import expand

    total = 0
    for p in paths:
        p = Path(p)
        try:
            shards = expand(p)
            if shards is not None:
                total += sum(f.stat().st_size for f in shards if f.is_file())
            elif p.is_dir():
                total += sum(f.stat().st_size for f in p.iterdir() if f.is_file())
            else:
                total += p.stat().st_size
        except (OSError, CorpusError):
            pass
        if total >= enough:
            break
    return total


def start_for_corpus(paths, method: str = "auto") -> Warmup | None:
    """Before loading `paths`: start the warm-up when what follows will likely compile."""
    if method == "exhaustive":
        return None
    if method == "lsh" or corpus_bytes(paths) >= CORPUS_BYTES:
        return start()
    return None


_VALUE_OPTIONS = (
    "--db",
    "--id-field",
    "--text-field",
    "--k",
    "--floor",
    "--method",
    "--num-perm",
    "--seed",
    "--workers",
    "--max-bucket",
)


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
    candidates.find_pairs decides, estimated from the stored documents)."""
    from ..scanning import candidates

    if settings.method == "lsh":
        return True
    if settings.method == "exhaustive":
        return False
    n, avg = project.distinct_texts_and_average_length()
    n = n or 0
    return n >= 2 and n * (n - 1) / 2 * max(float(avg or 0), 1) > candidates.EXHAUSTIVE_WORK_LIMIT


def kernels_needed_at(event: str) -> set[int]:
    """The kernels (indices into kernel_list.KERNELS) a scan calls before its first report
    after `event`: those listed under it and under every event before it."""
    from .kernel_list import EVENTS, KERNELS

    if event not in EVENTS:
        return set()
    upto = EVENTS.index(event)
    return {i for i, (listed, *_) in enumerate(KERNELS) if EVENTS.index(listed) <= upto}


def _wait(
    handle: Warmup, control, needed: set[int], tick: float, clock=time.monotonic, stall: float = STALL_SECONDS
) -> bool:
    """Wait, reporting STAGE (its timer ticking) and honouring cancel, until the warm-up ended
    or has compiled the kernels `needed`; meanwhile compile, here, those of them nobody has
    taken yet, then the kernels a scan needs last (the warm-up works from the first). False
    when it gave up: nothing progressed for `stall` seconds (a warm-up stopped, or of sources
    no longer there), the scan should compile in its own process."""
    from .warmup_job import Claims, waited_for

    claims = Claims(handle.cache, handle.key)
    order = [*sorted(needed), *reversed(waited_for())]
    shown, progressed = float("-inf"), clock()
    ready = handle.ready()
    while handle.running() and not needed <= ready:
        now = clock()
        if now - progressed > stall:
            return False
        if now - shown >= tick:
            control.report(STAGE, 0, 0)
            shown = now
        control.check()
        if claims.dir.is_dir() and claims.take_one(order):
            progressed = clock()
        else:
            handle.wait(0.02)
        latest = handle.ready()
        if latest - ready:
            progressed = clock()
        ready = latest
    control.check()
    return True


class _Gated:
    """The scan's Control while the warm-up still compiles: at each point of its progress
    after which it calls kernels (ReportEvents), the scan waits until those are compiled
    (kernel_list.py records which follow which point; _wait compiles some itself), so it never
    compiles a kernel the warm-up compiles too, and shows STAGE whenever it does wait. (The
    writing reports its start before its transaction, and its end inside it, where no kernel
    follows: no wait holds the project's write lock.) A warm-up that stalls is left, said
    once: the scan compiles what it needs itself."""

    def __init__(self, control, handle: Warmup, tick: float, clock=time.monotonic, stall: float = STALL_SECONDS):
        self._control, self._handle, self._tick = control, handle, tick
        self._clock, self._stall = clock, stall
        self.cancel = control.cancel
        self.progress = control.progress
        self._events = ReportEvents()
        self.gave_up = False

    def report(self, stage: str, done: int, total: int) -> None:
        self._control.report(stage, done, total)
        event = self._events.see(stage, done, total)
        if event is None or self.gave_up or not self._handle.running():
            return
        needed = kernels_needed_at(event)
        if needed and not needed <= self._handle.ready():
            if not _wait(self._handle, self._control, needed, self._tick, self._clock, self._stall):
                self.gave_up = True
                notice(
                    f"the compile warm-up made no progress for {self._stall:.0f} s: "
                    f"compiling the kernels in this process instead"
                )
            self._control.report(stage, done, total)  # (the stage shown again after STAGE)

    def check(self) -> None:
        self._control.check()


def prepare(project, settings, control, tick: float = 0.25):
    """Before scanning.local.scan: when the scan will use kernels that are not cached yet, have them
    compiled by a warm-up process (started now unless one runs) and return the Control to scan
    with. The scan finds the exact copies (no kernels) meanwhile, and waits at each point of
    its progress only for the kernels it calls next (see _Gated), so most of the compiling
    overlaps the scan's own work. Returns `control` itself when the cache is
    warm, there is no cache, or the scan needs no kernels; a failed warm-up only means the
    scan compiles what it needs itself."""
    cache = cache_dir()
    if cache is None or is_warm(cache) or settings.method == "exhaustive":
        return control
    handle = _started if _started is not None and _started.running() else None
    if handle is None:  # (started for this corpus's load: no need to ask the project, 0.2 s on 64k texts)
        if not scan_needs_kernels(project, settings):
            return control
        handle = start()
        if handle is None:
            return control
    return _Gated(control, handle, tick)
