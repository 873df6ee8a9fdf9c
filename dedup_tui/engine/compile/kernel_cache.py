"""Where numba caches the compiled kernels, and whether the warm-up (warmup.py) has filled that
cache for this very code: a stamp file named after the engine's sources and numba's version
marks a finished warm-up, a lock file one under way (one per sources key, shared by every
process of this user), a ready file which kernels it has compiled so far, and the points of a scan's progress its
kernels are listed under (ReportEvents). Imports nothing of the engine and no numba: jit.py, the
warm-up's parent process and the normalisation all ask it."""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ENGINE = Path(__file__).resolve().parent.parent  # (this module is in engine/compile/)
WARM_PREFIX = "dedup-tui-warm-"
# The sources key of the command that starts a warm-up, which the warm-up must have too
# (here, not in warmup_job: spawning the warm-up must not import the engine first).
KEY_VARIABLE = "DEDUP_TUI_WARMUP_KEY"
# The ready file lists each kernel once (a few dozen short lines): never more than this.
READY_MAX_BYTES = 4096

_said: list[str] = []
_listeners: list[Callable[[str], None]] = []


def notice(message: str) -> None:
    """One line on stderr, once per process (a fallback the user should know of, never an
    error; under the CLI's progress it is printed above the bars), and to every listener (the
    app, where stderr is not seen)."""
    if message in _said:
        return
    _said.append(message)
    try:
        print(f"warning: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
    for listener in list(_listeners):
        listener(message)


def listen(listener: Callable[[str], None]) -> list[str]:
    """Call `listener` with every later notice (from any thread); returns those said already."""
    _listeners.append(listener)
    return list(_said)


def stop_listening(listener: Callable[[str], None]) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def _refusal(path: Path) -> str | None:
    """Why `path` may not hold compiled kernels (None: it may): numba loads pickles from its
    cache, so a folder another user can write into is a way to run code as this user."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a folder"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"it belongs to another user (uid {st.st_uid})"
    if hasattr(os, "getuid") and st.st_mode & 0o022:
        return f"other users can write into it (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def private_dir(path: Path) -> tuple[bool, str | None]:
    """Make `path` (mode 0700) unless it exists, then check it: (usable, why it is refused;
    None when it is usable or merely cannot be made, as under a read-only or missing parent)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return False, None
    reason = _refusal(path)  # (checked after making it too: the umask, or another process first)
    if reason is not None:
        return False, reason
    return os.access(path, os.W_OK | os.X_OK), None


def _refused(path: Path, reason: str) -> None:
    notice(
        f"not caching compiled kernels in {path}: {reason}; compiling them without that folder "
        f"(a folder must belong to this user and be writable by nobody else)"
    )


def cache_dir() -> str | None:
    """The folder compiled kernels are cached in (None: no cache): NUMBA_CACHE_DIR when set,
    else dedup-tui/numba under the user's cache folder, else a per-user folder in the temporary
    folder; each only when it belongs to this user and nobody else can write it (what is
    refused is said once)."""
    chosen = os.environ.get("NUMBA_CACHE_DIR")
    if chosen:
        path = Path(chosen)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            return None
        usable, reason = private_dir(path)
        if reason is not None:
            _refused(path, reason)
        return chosen if usable else None
    base = Path(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"))
    uid = os.getuid() if hasattr(os, "getuid") else os.getpid()
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        chain = [base / "dedup-tui", base / "dedup-tui" / "numba"]
    except OSError:
        chain = []
    for candidates in (chain, [Path(tempfile.gettempdir()) / f"dedup-tui-numba-{uid}"]):
        for folder in candidates:
            usable, reason = private_dir(folder)
            if reason is not None:
                _refused(folder, reason)
            if not usable:
                break
        else:
            if candidates:
                return str(candidates[-1])
    return None


def _stat_line(path: Path, name: str) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{name}:gone;"
    return f"{name}:{st.st_mtime_ns}:{st.st_size};"


def sources_key() -> str:
    """Changes whenever the engine's code, numba or Python does (then the cache needs filling
    again), or any of their files is gone. A few dozen stats: the warm-up asks it twice a second
    to end itself when its install is upgraded or removed under it."""
    h = hashlib.sha256()
    from importlib.util import find_spec

    try:  # numba's own files (found, not imported: importlib.metadata costs ~0.1 s)
        for name in ("numba", "llvmlite"):
            spec = find_spec(name)
            if spec is None or spec.origin is None:
                raise ImportError(name)
            origin = Path(spec.origin)
            for f in (origin, origin.with_name("_version.py")):
                h.update(_stat_line(f, str(f)).encode())
    except (AttributeError, TypeError, ImportError, ValueError, OSError):
        h.update(b"numba?")
    h.update(sys.version.encode())
    h.update(str(ENGINE).encode())
    try:
        sources = sorted(ENGINE.rglob("*.py"))
    except OSError:
        sources = []
    if not sources:
        h.update(b"no sources")
    for path in sources:
        h.update(_stat_line(path, str(path.relative_to(ENGINE))).encode())
    return h.hexdigest()[:16]


def stamp_path(cache: str | None = None, key: str | None = None) -> Path | None:
    """The finished warm-up's stamp; its .failed, .ready, .claims and .lock beside it (all named
    after the sources `key`, this code's by default)."""
    cache = cache or cache_dir()
    return Path(cache) / f"{WARM_PREFIX}{key or sources_key()}" if cache else None


def is_warm(cache: str | None = None, key: str | None = None) -> bool:
    """The cache holds the kernels of this code (a warm-up finished since it last changed)."""
    stamp = stamp_path(cache, key)
    return stamp is not None and stamp.exists()


def has_failed(cache: str, key: str | None = None) -> bool:
    """A warm-up of this code failed already (then scans compile what they need themselves,
    and show why if it fails there too, instead of every command starting a doomed warm-up)."""
    stamp = stamp_path(cache, key)
    return stamp is not None and stamp.with_suffix(".failed").exists()


def lock_file(cache: str, key: str | None = None):
    """The lock of the warm-up of these sources: one install's warm-up never holds up another's."""
    stamp = stamp_path(cache, key)
    assert stamp is not None  # (a cache is given)
    return open(stamp.with_suffix(".lock"), "a+b")


def warmup_running(cache: str, key: str | None = None) -> bool:
    """A warm-up process of these sources holds the lock (any process of this user, not only ours)."""
    try:
        import fcntl
    except ImportError:  # (Windows) only our own child is known
        return False
    try:
        with lock_file(cache, key) as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return True
            return False
    except OSError:
        return False


def ready_path(cache: str, key: str | None = None) -> Path | None:
    """The running warm-up's list of the kernels it has compiled into the cache (indices into
    kernel_list.KERNELS, one a line)."""
    stamp = stamp_path(cache, key)
    return stamp.with_suffix(".ready") if stamp else None


def claims_dir(cache: str, key: str | None = None) -> Path | None:
    """Where the warm-up's processes claim kernels to compile (one empty file each, named by
    its index), so that no kernel is compiled twice."""
    stamp = stamp_path(cache, key)
    return stamp.with_suffix(".claims") if stamp else None


def ready_kernels(cache: str, key: str | None = None) -> set[int]:
    """The kernels (indices into kernel_list.KERNELS) the running warm-up has compiled so far."""
    try:
        path = ready_path(cache, key)
        if path is None:
            return set()
        with open(path, encoding="utf-8") as fh:
            return {int(line) for line in fh.read(READY_MAX_BYTES).split()}
    except (OSError, TypeError, ValueError):
        return set()


def mark_ready(cache: str, key: str, index: int) -> None:
    """Add kernel `index` to the ready file: once, never past READY_MAX_BYTES, and only while
    the file is there (the warm-up makes it, and removes it when it ends: no process makes it
    again). One that cannot be written, on a full disk, leaves the scans waiting to their
    deadline."""
    path = ready_path(cache, key)
    if path is None:
        return
    try:
        if index in ready_kernels(cache, key):
            return
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            if os.fstat(fd).st_size < READY_MAX_BYTES:
                fh.write(f"{index}\n")
    except OSError:
        pass


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
