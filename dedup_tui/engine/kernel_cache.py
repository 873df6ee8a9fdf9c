"""Where numba caches the compiled kernels, and whether the warm-up (warmup.py) has filled that
cache for this very code: a stamp file named after the engine's sources and numba's version
marks a finished warm-up, a lock file one under way (shared by every process of this user), a
ready file which kernels it has compiled so far, and the points of a scan's progress its
kernels are listed under (ReportEvents). Imports nothing of the engine and no numba: _jit.py, the
warm-up's parent process and the normalisation all ask it."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

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
    for path in sorted(ENGINE.rglob("*.py")):
        st = path.stat()
        h.update(f"{path.relative_to(ENGINE)}:{st.st_mtime_ns}:{st.st_size};".encode())
    return h.hexdigest()[:16]


def stamp_path(cache: str | None = None) -> Path | None:
    cache = cache or cache_dir()
    return Path(cache) / f"dedup-tui-warm-{_sources_key()}" if cache else None


def is_warm(cache: str | None = None) -> bool:
    """The cache holds the kernels of this code (a warm-up finished since it last changed)."""
    stamp = stamp_path(cache)
    return stamp is not None and stamp.exists()


def has_failed(cache: str) -> bool:
    """A warm-up of this code failed already (then scans compile what they need themselves,
    and show why if it fails there too, instead of every command starting a doomed warm-up)."""
    stamp = stamp_path(cache)
    return stamp is not None and stamp.with_suffix(".failed").exists()


def lock_file(cache: str):
    return open(Path(cache) / _LOCK_NAME, "a+b")


def warmup_running(cache: str) -> bool:
    """A warm-up process holds the lock (any process of this user, not only ours)."""
    try:
        import fcntl
    except ImportError:  # (Windows) only our own child is known
        return False
    try:
        with lock_file(cache) as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return True
            return False
    except OSError:
        return False


def ready_path(cache: str) -> Path | None:
    """The running warm-up's list of the kernels it has compiled into the cache (indices into
    kernel_list.KERNELS, one a line)."""
    stamp = stamp_path(cache)
    return stamp.with_suffix(".ready") if stamp else None


def claims_dir(cache: str) -> Path | None:
    """Where the warm-up's processes claim kernels to compile (one empty file each, named by
    its index), so that no kernel is compiled twice."""
    stamp = stamp_path(cache)
    return stamp.with_suffix(".claims") if stamp else None


def ready_kernels(cache: str) -> set[int]:
    """The kernels (indices into kernel_list.KERNELS) the running warm-up has compiled so far."""
    try:
        return {int(line) for line in ready_path(cache).read_text(encoding="utf-8").split()}
    except (OSError, AttributeError, ValueError):
        return set()


class ReportEvents:
    """The points of a scan's progress at which it may wait for kernels: the first report of
    a stage starting ("signatures:start", done 0 of a known total) and of a stage ending
    ("candidates:end", done == total). The same for the warm-up's recording of which kernels
    follow which point (warmup_job.record) and for the scan waiting there (warmup._Gated)."""

    def __init__(self):
        self._seen: set[str] = set()

    def see(self, stage: str, done: int, total: int) -> str | None:
        if total <= 0:
            return None
        event = f"{stage}:start" if done == 0 else f"{stage}:end" if done >= total else None
        if event is None or event in self._seen:
            return None
        self._seen.add(event)
        return event
