"""The warm-up process (started by warmup.start): compiles the kernels of kernel_list.py (what
a scan calls, with their argument types) into numba's cache in the order a scan needs them
(sharing the list with the scans that wait for it, which compile some while they wait); then
it runs the real load and LSH scan on a small made-up corpus in a temporary folder (with an
incremental scan after more documents), which compiles whatever the list lacks, and stamps
the cache (kernel_cache). `--record` writes kernel_list.py from that made-up scan."""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from ..errors import Cancelled
from ..ingest import load_corpus
from ..progress import Control
from ..scanning import local
from ..scanning.settings import DEFAULT_K, ScanSettings
from ..store import Project, pid_alive
from .kernel_cache import (
    KEY_VARIABLE,
    WARM_PREFIX,
    ReportEvents,
    cache_dir,
    claims_dir,
    is_warm,
    lock_file,
    mark_ready,
    ready_kernels,
    ready_path,
    sources_key,
    stamp_path,
)

# The package kernel_list's module names are relative to (scanning.kernels.text, ...).
ENGINE_PACKAGE = __package__.rsplit(".", 1)[0]


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


def run(on_report=None, cancel=None) -> None:
    """Run the real load and LSH scan on _corpus() in a temporary folder (compiling into the
    cache whatever they use and kernel_list did not give); on_report(stage, done, total) for
    each report of that scan, then ("scanned", 0, 0), before the rest of the warm-up: the
    counting of rare fingerprints and an incremental scan. `cancel` (an Event) stops it."""
    with tempfile.TemporaryDirectory(prefix="dedup-tui-warmup-") as tmp:
        corpus = Path(tmp) / "warmup.jsonl"
        with open(corpus, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in _corpus())
        project = Project(Path(tmp) / "warmup.db", create=True)
        try:
            load_corpus(project, [corpus])  # (the scan normalises with the load's compiled kernel)
            settings = ScanSettings(method="lsh", workers=2)
            local.scan(project, settings, Control(on_report, cancel))
            if on_report is not None:
                on_report(SCANNED, 0, 0)
            _count_rare_fingerprints()
            _split_a_bucket()
            # More documents, scanned again: the incremental scan's own kernel.
            more = Path(tmp) / "more.jsonl"
            with open(more, "w", encoding="utf-8") as fh:
                fh.writelines(
                    json.dumps({"id": f"more-{record['id']}", "text": record["text"] + " more"}, ensure_ascii=False)
                    + "\n"
                    for record in _corpus()[:200]
                )
            load_corpus(project, [more])
            local.scan(project, settings, Control(None, cancel))
        finally:
            project.close()


def _count_rare_fingerprints() -> None:
    """A big template family's rare fingerprints are counted pair by pair (kernels.Family):
    the made-up corpus's family is too small to take that path, so it is taken here, on a few
    texts, through the same code (the same argument types) as a scan's."""
    import numpy as np

    from ..scanning.kernels import intersections
    from ..scanning.kernels import text as kernels_text

    texts = [" ".join(f"w{(i * 7 + j) % 40}" for j in range(30)) + f" text {i}" for i in range(12)]
    family = intersections.Family(kernels_text.normalized_buffer(texts), np.arange(len(texts)), DEFAULT_K)
    pairs = np.array([(a, b) for a in range(len(texts)) for b in range(a + 1, len(texts))], np.int64)
    family.intersections(np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1]), below=4)


def _split_a_bucket() -> None:
    """A bucket over --max-bucket that is split by sub-bands (kernels.bands.split_bucket_survivors):
    the made-up corpus has none, so one is split here, on made-up signatures, with the argument
    types of a scan's call (candidates._BandCandidates.band)."""
    import numpy as np

    from ..scanning import lsh
    from ..scanning.kernels import bands as kernels_bands
    from ..scanning.memory_model import split_layout_of

    banding = lsh.choose_banding(ScanSettings().floor, ScanSettings().num_perm)
    n, perms = 64, ScanSettings().num_perm
    signatures = np.random.default_rng(5).integers(0, 4, (n, perms)).astype(np.uint32)
    tags = np.zeros((n, banding.bands), np.uint16)
    state = np.ones(banding.bands, np.int8)
    members = np.arange(n, dtype=np.int64)
    packed, sub_positions = lsh.pack_nibbles(signatures), lsh.sub_bands(perms, banding.rows, banding.bands)
    layout = split_layout_of(n // 2, packed, sub_positions, 1, 1 << 20)
    kernels_bands.split_bucket_survivors(
        members[: n // 2], packed, perms, perms // 2, signatures, tags, 1, banding.rows, state, n, sub_positions,
        layout, np.empty(n * n, np.int64), np.array([0, 0, 1], np.int64), np.zeros(2, np.int64),
    )  # fmt: skip


def _lowest_priority() -> None:
    """This process at the lowest priority, and its session too when it leads one (as warmup
    starts it): where Linux groups processes by session (autogroup), a nice value only weighs
    against the session's other processes."""
    if hasattr(os, "nice"):
        try:
            os.nice(19 - os.nice(0))
        except OSError:
            pass
    if not hasattr(os, "getsid") or os.getsid(0) != os.getpid():
        return  # (only a session of its own: never the session of whoever ran this)
    try:
        with open("/proc/self/autogroup", "w") as fh:
            fh.write("19")
    except OSError:
        pass


# What the recording lists after the first scan's reports: kernels no scan waits for.
SCANNED = "scanned"


def _numba_type(spec: str):
    """A kernel argument's numba type from kernel_list's spelling: "int64", "uint8:2d" (a
    C-contiguous array), "uint8:1d:ro" (a read-only one)."""
    import numpy as np
    from numba.core import types
    from numba.np.numpy_support import from_dtype

    name, *array = spec.split(":")
    dtype = from_dtype(np.dtype(name))
    if not array:
        return dtype
    return types.Array(dtype, int(array[0].rstrip("d")), "C", readonly=array[1:] == ["ro"])


def _spelling(numba_type) -> str:
    from numba.core import types

    if isinstance(numba_type, types.Array):
        if numba_type.layout != "C" or not numba_type.aligned:
            raise ValueError(f"kernel_list spells only aligned C-contiguous arrays, not {numba_type}")
        return f"{numba_type.dtype}:{numba_type.ndim}d" + ("" if numba_type.mutable else ":ro")
    if isinstance(numba_type, (types.Integer, types.Float, types.Boolean)):
        return str(numba_type)
    raise ValueError(f"kernel_list cannot spell the argument type {numba_type}")


def compile_listed(index: int) -> None:
    """Compile kernel_list.KERNELS[index] for its argument types (into the cache; loaded from
    it when another process put it there)."""
    import importlib

    from .kernel_list import KERNELS

    _event, module, name, spelled = KERNELS[index]
    dispatcher = getattr(importlib.import_module(f"{ENGINE_PACKAGE}.{module}"), name)
    dispatcher.compile(tuple(_numba_type(spec) for spec in spelled.split()))


# How long the warm-up leaves a kernel to the scan that claimed it (compiling one takes ~1 s).
CLAIM_PATIENCE = 20.0
# The warm-up's whole life at most (it takes ~10 s of CPU): past it, it ends and is marked failed
# (no warm-up of this code again: scans compile what they need themselves).
DEADLINE = 300.0
# How often it checks that its sources are the ones it started with (a few dozen stats).
WATCH_EVERY = 0.5
# How long it has to end by itself once it should, before it is ended at once.
GRACE = 10.0
# The exit code of a warm-up that ended because its sources changed or vanished, or at DEADLINE.
EXIT_STALE = 3


def waited_for() -> list[int]:
    """The kernels (indices into kernel_list.KERNELS) some point of a scan waits for."""
    from .kernel_list import KERNELS

    return [i for i, (event, *_) in enumerate(KERNELS) if event != SCANNED]


class Stale(Exception):
    """The warm-up must end: its sources changed or are gone, its deadline passed, or the cache
    cannot be written."""


class Watchdog:
    """Ends the warm-up when its install is upgraded or removed under it (its sources key is
    not the one it started with), and at its deadline: sets `cancel` (checked between kernels,
    and by the made-up scan's Control), and ends the process at once if it is still running
    GRACE seconds later (a compile that never returns)."""

    def __init__(
        self,
        key: str,
        deadline: float | None = None,
        every: float | None = None,
        grace: float | None = None,
        failed: Path | None = None,
    ):
        import threading

        self.key, self._failed = key, failed
        self.reason: str | None = None
        self.cancel, self._stopped = threading.Event(), threading.Event()
        self._ends_at = time.monotonic() + (DEADLINE if deadline is None else deadline)
        self._every = WATCH_EVERY if every is None else every
        self._grace = GRACE if grace is None else grace
        threading.Thread(target=self._watch, name="dedup-tui-warmup-watchdog", daemon=True).start()

    def _watch(self) -> None:
        while not self._stopped.wait(self._every):
            if sources_key() != self.key:
                self.reason = "sources changed"
            elif time.monotonic() > self._ends_at:
                self.reason = "deadline"
            else:
                continue
            self.cancel.set()
            if not self._stopped.wait(self._grace):
                if self.reason == "deadline" and self._failed is not None:
                    _touch(self._failed)
                os._exit(EXIT_STALE)
            return

    def stop(self) -> None:
        """The warm-up ended (its process may go on: a test's)."""
        self._stopped.set()

    def check(self) -> None:
        if self.cancel.is_set():
            raise Stale(self.reason)
        from .jit import cache_write_error

        if cache_write_error() is not None:
            self.reason = "cache not writable"
            raise Stale(self.reason)


class Claims:
    """The warm-up process and the scans waiting for it share kernel_list's work: each kernel
    is claimed by one process (a file created exclusively, holding its process id), compiled,
    then added to the ready file the scans read. All of it under one sources key: the one its
    warm-up started with."""

    def __init__(self, cache: str, key: str | None = None, check=None):
        self.cache, self.key = cache, key or sources_key()
        claims, ready = claims_dir(cache, self.key), ready_path(cache, self.key)
        assert claims is not None and ready is not None  # (a cache is given)
        self.dir, self.ready = claims, ready
        self.check = check or (lambda: None)
        self.compiled: set[int] = set()

    def ready_kernels(self) -> set[int]:
        return ready_kernels(self.cache, self.key)

    def reset(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        self.ready.write_bytes(b"")
        self.dir.mkdir()

    def claim(self, index: int) -> bool:
        try:
            fd = os.open(self.dir / str(index), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except OSError:  # (taken; or the folder went: the warm-up is over)
            return False
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(str(os.getpid()))
        except OSError:  # (a full disk: an empty claim, which others take as abandoned)
            pass
        return True

    def owner_alive(self, index: int) -> bool:
        """Whether the process that claimed kernel `index` still runs."""
        try:
            return pid_alive(int((self.dir / str(index)).read_text()))
        except (OSError, ValueError):
            return False

    def compile(self, index: int) -> None:
        """Compile it (once in this process) and mark it ready."""
        self.compiled.add(index)
        try:
            compile_listed(index)
        except Exception:  # noqa: BLE001 - a list older than the code: the made-up scan compiles what it needs
            pass
        finally:  # (even when interrupted: nobody waits for it then, whoever calls it compiles it)
            mark_ready(self.cache, self.key, index)

    def finish(self, kernels, patience: float) -> None:
        """Until every kernel of `kernels` is ready: those another process claimed are left
        to it while it runs, for `patience` seconds at most (a process stopped with Ctrl-Z
        keeps its claims), then compiled here; each at most once (a ready file that went, or
        cannot be written, ends the wait instead)."""
        missing, give_up = set(kernels) - self.ready_kernels(), time.monotonic() + patience
        while missing - self.compiled:
            self.check()
            for index in sorted(missing - self.compiled):
                if not self.owner_alive(index) or time.monotonic() > give_up:
                    self.compile(index)
            time.sleep(0.02)
            missing -= self.ready_kernels()

    def take_one(self, order) -> bool:
        """Claim and compile the first kernel of `order` nobody has claimed (False: none left)."""
        for index in order:
            self.check()
            if self.claim(index):
                self.compile(index)
                return True
        return False

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        self.ready.unlink(missing_ok=True)


def _warm(cache: str, key: str | None = None, watchdog: Watchdog | None = None) -> None:
    """The warm-up process's work: the list's kernels in order (a scan waiting for some of them
    compiles others meanwhile, warmup._Gated), then, once all of them are in the cache, the
    made-up scan (which compiles whatever the list lacks) at the lowest priority; ended by
    `watchdog` (Stale) when its sources change."""
    from .kernel_list import KERNELS

    claims = Claims(cache, key, watchdog.check if watchdog else None)
    claims.reset()
    try:
        for kernels in (waited_for(), range(len(KERNELS))):
            while claims.take_one(kernels):
                pass
            claims.finish(kernels, CLAIM_PATIENCE)
            _lowest_priority()  # what follows only serves later scans: cores to the scan under way
        claims.check()
        run(cancel=watchdog.cancel if watchdog else None)
        claims.check()
    finally:
        claims.remove()


def record() -> str:
    """kernel_list.py's text: the compiled kernels a scan calls from Python, each with its
    argument types, in the order a scan calls them, under the point of the scan's progress
    (kernel_cache.ReportEvents) it is first called after; recorded from the warm-up's own
    made-up scan on an empty cache, in a new process. The warm-up compiles them into the cache
    and a first scan waits at each point for those listed under it (warmup.py);
    tests/engine/test_warmup checks the list is current. An argument is "int64", "uint8:2d" (a
    C-contiguous array) or "uint8:1d:ro" (read-only)."""
    import subprocess

    with tempfile.TemporaryDirectory(prefix="dedup-tui-record-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        done = subprocess.run(
            [sys.executable, "-m", f"{__package__}.warmup_job", "--record-here"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    return done.stdout


def _record_here() -> str:
    from numba.core import event

    events, order, kernels = ReportEvents(), [], []
    state: dict = {"event": "load", "depth": 0, "scanned": False}

    def on_report(stage, done, total):
        if stage == SCANNED:
            state["event"], state["scanned"] = SCANNED, True
        elif not state["scanned"]:
            state["event"] = events.see(stage, done, total) or state["event"]

    class Listener(event.Listener):
        def on_start(self, ev):
            state["depth"] += 1
            if state["depth"] == 1:  # (a kernel the Python side calls, not one it calls)
                fn = ev.data["dispatcher"].py_func
                if state["event"] not in order:
                    order.append(state["event"])
                kernels.append(
                    (
                        state["event"],
                        fn.__module__.removeprefix(ENGINE_PACKAGE + "."),
                        fn.__qualname__,
                        " ".join(_spelling(t) for t in ev.data["args"]),
                    )
                )

        def on_end(self, ev):
            state["depth"] -= 1

    event.register("numba:compile", Listener())
    run(on_report)
    lines = [f'"""{_LIST_DOC}"""', "", "EVENTS = (", *(f"    {e!r}," for e in order), ")", "", "KERNELS = ("]
    lines += [f"    {k!r}," for k in kernels]
    lines += [")", ""]
    return "\n".join(lines)


_LIST_DOC = """Generated by `python -m dedup_tui.engine.compile.warmup_job --record` (do not edit; what it
holds: warmup_job.record)."""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--record"]:
        Path(__file__).with_name("kernel_list.py").write_text(record(), encoding="utf-8")
        return 0
    if argv == ["--record-here"]:
        sys.stdout.write(_record_here())
        return 0
    cache = cache_dir()
    if cache is None:
        return 0
    os.environ["NUMBA_CACHE_DIR"] = cache
    key = sources_key()
    if os.environ.get(KEY_VARIABLE, key) != key:
        return EXIT_STALE  # the sources changed since the command that started it read them
    try:
        import fcntl
    except ImportError:
        fcntl = None  # type: ignore[assignment]
    with lock_file(cache, key) as lock:
        if fcntl is not None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return 0  # another warm-up is filling the cache
        if is_warm(cache, key):
            return 0
        stamp = stamp_path(cache, key)
        assert stamp is not None
        watchdog = Watchdog(key, failed=stamp.with_suffix(".failed"))
        try:
            _warm(cache, key, watchdog)
        except (Stale, Cancelled):
            if watchdog.reason == "deadline":  # (not for a cache it cannot write: a full disk empties again)
                _touch(stamp.with_suffix(".failed"))
            return EXIT_STALE
        except BaseException:
            if sources_key() != key:  # its install changed or went under it (a module it imports is gone)
                return EXIT_STALE
            _touch(stamp.with_suffix(".failed"))
            raise
        finally:
            watchdog.stop()
        stamp.touch()
        _remove_other_keys(cache, key)
    return 0


def _touch(path: Path) -> None:
    try:
        path.touch()
    except OSError:
        pass


def _remove_other_keys(cache: str, key: str) -> None:
    """The stamps, claims, ready and lock files of earlier code, unless a warm-up of theirs
    still runs (it holds its lock: another install)."""
    try:
        import fcntl
    except ImportError:
        fcntl = None  # type: ignore[assignment]
    others: dict[str, list[Path]] = {}
    for path in Path(cache).glob(f"{WARM_PREFIX}*"):
        other = path.name[len(WARM_PREFIX) :].split(".")[0]
        if other != key:
            others.setdefault(other, []).append(path)
    for other, paths in others.items():
        stamp = stamp_path(cache, other)
        assert stamp is not None
        lock_path = stamp.with_suffix(".lock")
        try:
            with open(lock_path, "a+b") as lock:
                if fcntl is not None:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                for path in paths:
                    if path.is_dir():
                        shutil.rmtree(path, ignore_errors=True)
                    elif path != lock_path:
                        path.unlink(missing_ok=True)
                lock_path.unlink(missing_ok=True)
        except OSError:
            continue  # (its warm-up runs)


if __name__ == "__main__":
    sys.exit(main())
