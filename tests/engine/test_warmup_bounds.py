"""The warm-up's bounds (issue 40): it ends when its install changes or vanishes under it and at
a deadline, its bookkeeping stays small, its lock is per sources key, a scan never waits on it
forever (a fake clock for the long waits), a full disk under the cache is a slower scan, not an
error, and a cache folder another user could write into is never used."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dedup_tui.engine.compile import kernel_cache, warmup, warmup_job
from dedup_tui.engine.progress import Control

from ..conftest import write_jsonl
from .test_scan import planted_corpus

ROOT = Path(__file__).resolve().parents[2]


def _wait_for(condition, seconds: float, what: str):
    """Poll a real process's state until `condition()` is true (its value), at most `seconds`."""
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {seconds} s: {what}")


# --- the warm-up process ends itself ------------------------------------------------------------


def _installed_copy(tmp_path: Path) -> Path:
    """A copy of dedup_tui (an install of its own: its own engine folder, its own sources key)."""
    copy = tmp_path / "install"
    shutil.copytree(ROOT / "dedup_tui", copy / "dedup_tui", ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _start_warmup(install: Path, cache: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != warmup_job.KEY_VARIABLE}
    env.update(NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(install))
    return subprocess.Popen(
        [sys.executable, "-m", "dedup_tui.engine.compile.warmup_job"],
        env=env,
        cwd=install,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _ready_lines(cache: Path) -> int:
    return sum(len(p.read_text().split()) for p in cache.glob("dedup-tui-warm-*.ready"))


@pytest.mark.parametrize("change", ["upgraded", "removed"])
def test_a_warmup_ends_when_its_install_changes_or_vanishes_under_it(tmp_path, change):
    install, cache = _installed_copy(tmp_path), tmp_path / "cache"
    cache.mkdir(mode=0o700)
    process = _start_warmup(install, cache)
    try:
        _wait_for(lambda: _ready_lines(cache) >= 2 or process.poll() is not None, 120, "two kernels compiled")
        assert process.poll() is None, process.communicate()
        engine = install / "dedup_tui" / "engine"
        if change == "upgraded":  # as pip install over it, or git pull, does
            os.utime(engine / "scanning" / "kernels" / "text.py", ns=(time.time_ns(), time.time_ns() + 10**9))
        else:  # the venv deleted
            shutil.rmtree(install)
        changed = time.monotonic()
        code = process.wait(timeout=warmup_job.WATCH_EVERY + warmup_job.GRACE + 10)
        ended_after = time.monotonic() - changed
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
    assert code == warmup_job.EXIT_STALE
    assert ended_after < warmup_job.WATCH_EVERY + warmup_job.GRACE + 5
    stamps = [p.name for p in cache.glob("dedup-tui-warm-*") if "." not in p.name]
    assert stamps == []  # not warm (and not marked failed: the next install's warm-up is welcome)
    assert not list(cache.glob("dedup-tui-warm-*.failed"))
    assert _ready_lines(cache) <= len(warmup_job.waited_for()) + 1  # (its bookkeeping removed, or small)


def _lock_free(lock: Path) -> bool:
    import fcntl

    with open(lock, "a+b") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        return True


def test_a_scan_killed_and_its_install_removed_holds_up_no_other_install(tmp_path):
    """The issue's reproduction: a scan of install A is killed (-9) while its warm-up compiles,
    A is deleted, and install B scans with the same cache folder: B's scan ends (it hung), and
    A's orphaned warm-up ends by itself (it appended to its ready file forever)."""
    install, cache = _installed_copy(tmp_path), tmp_path / "cache"
    cache.mkdir(mode=0o700)
    corpus = write_jsonl(tmp_path / "c.jsonl", planted_corpus(n_bases=60))
    env = {k: v for k, v in os.environ.items() if k != warmup_job.KEY_VARIABLE}
    env.update(NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(install))
    scan = subprocess.Popen(
        [sys.executable, "-m", "dedup_tui", "scan", "--method", "lsh", "--db", str(tmp_path / "a.db"), str(corpus)],
        env=env,
        cwd=install,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        ready = _wait_for(
            lambda: [p for p in cache.glob("dedup-tui-warm-*.ready") if len(p.read_text().split()) >= 2],
            120,
            "the warm-up's ready file has two lines",
        )[0]
    finally:
        scan.send_signal(signal.SIGKILL)
        scan.wait()
    shutil.rmtree(install)
    removed = time.monotonic()
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "dedup_tui", "scan", "--method", "lsh", "--db", str(tmp_path / "b.db"), str(corpus)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "near pairs" in done.stdout, done.stderr[-2000:]
    _wait_for(
        lambda: not ready.exists() and _lock_free(ready.with_suffix(".lock")),
        warmup_job.WATCH_EVERY + warmup_job.GRACE + 10,
        "A's warm-up ended",
    )
    assert time.monotonic() - removed < 120


def test_a_warmup_started_for_other_sources_ends_at_once(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env[warmup_job.KEY_VARIABLE] = "0123456789abcdef"  # what the command that started it read
    done = subprocess.run(
        [sys.executable, "-m", "dedup_tui.engine.compile.warmup_job"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == warmup_job.EXIT_STALE and done.stderr == b""
    assert not list(cache.glob("dedup-tui-warm-*"))


def test_a_warmup_stuck_past_its_deadline_is_ended(tmp_path):
    """A warm-up that never returns from its work (a compile that hangs) ends at its deadline
    plus the grace: a real process, with a short deadline."""
    failed = tmp_path / "stamp.failed"
    code = f"""
        import threading
        from pathlib import Path
        from dedup_tui.engine.compile import kernel_cache, warmup_job
        warmup_job.Watchdog(kernel_cache.sources_key(), deadline=0.5, every=0.1, grace=0.5,
                            failed=Path({str(failed)!r}))
        threading.Event().wait()  # stuck
    """
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == warmup_job.EXIT_STALE, done.stderr
    assert time.monotonic() - started < 20
    assert failed.exists()  # marked failed: no warm-up of this code is started again


def test_a_warmup_at_its_deadline_ends_and_is_marked_failed(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(warmup_job, "DEADLINE", 0.2)
    monkeypatch.setattr(warmup_job, "WATCH_EVERY", 0.05)
    reached = []

    def endless(cache, key, watchdog):  # a warm-up that would never finish
        reached.append(watchdog.cancel.wait(30))
        watchdog.check()

    monkeypatch.setattr(warmup_job, "_warm", endless)
    assert warmup_job.main([]) == warmup_job.EXIT_STALE
    assert reached == [True]
    assert kernel_cache.has_failed(str(tmp_path)) and not kernel_cache.is_warm(str(tmp_path))
    assert warmup.start() is None  # (the scans compile what they need themselves)


def test_the_claims_compile_each_kernel_once_and_the_ready_file_stays_small(tmp_path, monkeypatch):
    compiled = []
    monkeypatch.setattr(warmup_job, "compile_listed", compiled.append)
    mine = warmup_job.Claims(str(tmp_path), "k1")
    mine.reset()
    # The bug: the ready file read was not the one written (the sources key had changed), and
    # after the patience every missing kernel was compiled and appended again every 20 ms, forever.
    monkeypatch.setattr(warmup_job, "mark_ready", lambda *args: None)
    started = time.monotonic()
    mine.finish([0, 1, 2], patience=0)
    assert compiled == [0, 1, 2] and time.monotonic() - started < 5
    monkeypatch.undo()
    monkeypatch.setattr(warmup_job, "compile_listed", compiled.append)
    theirs = warmup_job.Claims(str(tmp_path), "k1")
    mine.compile(3)
    theirs.compile(3)  # (two processes finishing one kernel: listed once)
    assert mine.ready.read_text() == "3\n"
    mine.ready.write_text("9\n" * (kernel_cache.READY_MAX_BYTES // 2))
    size = mine.ready.stat().st_size
    mine.compile(4)
    assert mine.ready.stat().st_size == size  # capped
    assert warmup_job.Claims(str(tmp_path), "k2").ready_kernels() == set()  # another key's file


# --- the lock is per sources key -----------------------------------------------------------------


def test_another_installs_warmup_never_blocks_this_one(tmp_path, monkeypatch):
    import fcntl

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    spawned = []
    monkeypatch.setattr(warmup, "_started", None)
    monkeypatch.setattr(warmup, "_spawn", lambda cache, key: spawned.append(key) or None)
    with kernel_cache.lock_file(str(tmp_path), "feedfacefeedface") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another install's warm-up runs
        assert not kernel_cache.warmup_running(str(tmp_path))
        assert warmup.start() is None and spawned == [kernel_cache.sources_key()]  # ours is started
        with kernel_cache.lock_file(str(tmp_path)) as ours:
            fcntl.flock(ours, fcntl.LOCK_EX | fcntl.LOCK_NB)
            assert kernel_cache.warmup_running(str(tmp_path))
            assert warmup.start() is not None and len(spawned) == 1  # (ours runs: followed, not started)


# --- a scan never waits forever (a fake clock) --------------------------------------------------


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class StalledWarmup(warmup.Warmup):
    """A warm-up that runs and adds `later` to its ready file, one per `every` seconds of the
    fake clock (never, once `later` is spent)."""

    def __init__(self, cache: str, clock: FakeClock, later=(), every: float = 1.0):
        super().__init__(cache, None)
        self.clock, self.later, self.every, self.waited = clock, list(later), every, 0.0
        self.next_at = clock.now + every
        kernel_cache.ready_path(cache, self.key).touch()  # (as the warm-up makes it)

    def running(self):
        return True

    def wait(self, seconds):
        self.clock.now += seconds
        self.waited += seconds
        if self.later and self.clock.now >= self.next_at:
            kernel_cache.mark_ready(self.cache, self.key, self.later.pop(0))
            self.next_at = self.clock.now + self.every


def test_a_scan_leaves_a_stalled_warmup_and_says_so_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(kernel_cache, "_said", [])
    clock = FakeClock()
    handle = StalledWarmup(str(tmp_path), clock)  # (no claims folder: the scan compiles nothing while it waits)
    seen = []
    gated = warmup._Gated(Control(lambda s, d, t: seen.append(s)), handle, tick=1.0, clock=clock)
    gated.report("signatures", 0, 8)
    assert gated.gave_up
    assert warmup.STALL_SECONDS <= handle.waited <= warmup.STALL_SECONDS + 0.1
    assert seen[0] == "signatures" and warmup.STAGE in seen and seen[-1] == "signatures"
    waited = handle.waited
    gated.report("signatures", 8, 8)
    gated.report("candidates", 3, 3)
    assert handle.waited == waited  # never again
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"warning: the compile warm-up made no progress for {warmup.STALL_SECONDS:.0f} s: "
        "compiling the kernels in this process instead"
    ]


def test_a_scan_waits_for_a_slow_warmup_that_progresses(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    clock = FakeClock()
    needed = sorted(warmup.kernels_needed_at("signatures:start"))
    slow = warmup.STALL_SECONDS * 0.8  # each kernel just within the stall limit
    handle = StalledWarmup(str(tmp_path), clock, needed, every=slow)
    gated = warmup._Gated(Control(), handle, tick=1.0, clock=clock)
    gated.report("signatures", 0, 8)
    assert len(needed) >= 2 and not gated.gave_up and set(needed) <= handle.ready()
    assert handle.waited >= slow * len(needed) > warmup.STALL_SECONDS  # longer than the stall limit, in all


# --- a full disk under the cache -----------------------------------------------------------------

# Every write of a compiled kernel to numba's cache fails as on a full disk (numba writes each
# index and data file through _open_for_write): in this process and in the warm-up it starts.
_FULL_DISK = """
import contextlib, errno
from numba.core import caching

@contextlib.contextmanager
def _full(self, filepath):
    raise OSError(errno.ENOSPC, "No space left on device", filepath)
    yield

caching.IndexDataCacheFile._open_for_write = _full
"""


def test_a_full_disk_under_the_cache_means_compiling_in_the_scan(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(_FULL_DISK)
    cache = tmp_path / "cache"
    corpus = write_jsonl(tmp_path / "c.jsonl", planted_corpus(n_bases=40))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), str(ROOT)]))
    env.pop(warmup_job.KEY_VARIABLE, None)
    done = subprocess.run(
        [sys.executable, "-m", "dedup_tui", "scan", "--method", "lsh", "--db", str(tmp_path / "p.db"), str(corpus)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: cannot write compiled kernels to the cache {cache}: No space left on device; "
        "compiling them in this process without caching them"
    ], done.stderr
    assert "near pairs" in done.stdout
    truth = subprocess.run(
        [
            sys.executable,
            "-m",
            "dedup_tui",
            "scan",
            "--method",
            "exhaustive",
            "--db",
            str(tmp_path / "q.db"),
            str(corpus),
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=200,
    )
    count = done.stdout.split(" near pairs")[0].rsplit(" ", 1)[-1]
    assert count == truth.stdout.split(" near pairs")[0].rsplit(" ", 1)[-1] and int(count.replace(",", "")) > 0
    # The warm-up it started ended at its first kernel, its bookkeeping removed, not marked
    # failed (the next command tries again: a full disk empties again).
    _wait_for(
        lambda: not kernel_cache.warmup_running(str(cache)) and not list(cache.glob("dedup-tui-warm-*.ready")),
        60,
        "the warm-up ended",
    )
    assert not list(cache.glob("dedup-tui-warm-*.failed")) and not kernel_cache.is_warm(str(cache))


# --- a cache folder another user could write into -----------------------------------------------


def _index_files(cache: Path) -> list[str]:
    """Where numba looks for the kernels' cache indexes (.nbi, pickles) under `cache`."""
    code = """
        import json
        from dedup_tui.engine.scanning.kernels import bands, components, intersections, shingles, signatures, text
        modules = (bands, components, intersections, shingles, signatures, text)
        paths = sorted({d._cache._cache_file._index_path for m in modules for d in vars(m).values()
                        if getattr(d, "_cache", None) is not None and hasattr(d._cache, "_cache_file")})
        print(json.dumps(paths))
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [str(Path(p).relative_to(cache)) for p in json.loads(done.stdout)]


class _WritesAFile:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("attack", ["world-writable", "another user's"])
def test_a_planted_fallback_cache_folder_is_never_loaded(tmp_path, attack):
    import pickle

    if attack == "another user's" and os.getuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    legit = tmp_path / "legit"
    legit.mkdir(mode=0o700)
    planted_paths = _index_files(legit)
    assert planted_paths
    tmp = tmp_path / "tmp"
    tmp.mkdir(mode=0o1777)
    planted = tmp / f"dedup-tui-numba-{os.getuid()}"
    marker = tmp_path / "marker"
    for relative in planted_paths:
        (planted / relative).parent.mkdir(parents=True, exist_ok=True)
        (planted / relative).write_bytes(pickle.dumps(_WritesAFile(str(marker))))
    for folder in [planted, *planted.rglob("*")]:
        if attack == "world-writable":
            os.chmod(folder, 0o777 if folder.is_dir() else 0o666)
        else:
            os.chown(folder, 65534, 65534)
    before = sorted(str(p) for p in planted.rglob("*"))
    (tmp_path / "home").write_text("")  # ~/.cache cannot be made: the temporary folder is the fallback
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", warmup_job.KEY_VARIABLE)}
    env.update(XDG_CACHE_HOME=str(tmp_path / "home" / "cache"), TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    code = """
        import json
        from dedup_tui.engine.compile import jit
        from dedup_tui.engine.scanning.kernels import text
        text.normalized_buffer(["Some TEXT to normalise", "and more"])  # a compiled kernel, called
        print(json.dumps({"cache": jit.CACHE_DIR}))
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert not marker.exists(), "a planted pickle was loaded"
    assert json.loads(done.stdout.splitlines()[-1]) == {"cache": None}
    assert sorted(str(p) for p in planted.rglob("*")) == before  # nothing written there either
    reason = (
        "other users can write into it (mode 777)"
        if attack == "world-writable"
        else "it belongs to another user (uid 65534)"
    )
    assert done.stderr.splitlines() == [
        f"warning: not caching compiled kernels in {planted}: {reason}; compiling them "
        "without that folder (a folder must belong to this user and be writable by "
        "nobody else)"
    ]


def test_cache_folders_are_made_private_and_checked(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(kernel_cache, "_said", [])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(kernel_cache.tempfile, "tempdir", None)
    (tmp_path / "tmp").mkdir()
    old = os.umask(0)  # (a permissive umask: the folders are private all the same)
    try:
        made = Path(kernel_cache.cache_dir())
    finally:
        os.umask(old)
    assert made == tmp_path / "xdg" / "dedup-tui" / "numba"
    assert (made.stat().st_mode & 0o777, made.parent.stat().st_mode & 0o777) == (0o700, 0o700)
    assert capsys.readouterr().err == ""
    os.chmod(made.parent, 0o775)  # a folder the tool makes under XDG_CACHE_HOME: the same rule
    fallback = Path(kernel_cache.cache_dir())
    assert fallback == tmp_path / "tmp" / f"dedup-tui-numba-{os.getuid()}" and fallback.stat().st_mode & 0o777 == 0o700
    assert "dedup-tui: other users can write into it (mode 775)" in capsys.readouterr().err
    fallback.rmdir()
    fallback.symlink_to(made)  # a link planted where the fallback goes
    assert kernel_cache.cache_dir() is None
    assert "it is a symbolic link" in capsys.readouterr().err
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(made.parent))  # the user's own choice: the same rule
    assert kernel_cache.cache_dir() is None
    os.chmod(made.parent, 0o755)
    assert kernel_cache.cache_dir() == str(made.parent)


def test_the_samples_fallback_folder_follows_the_same_rule(tmp_path, monkeypatch):
    from dedup_tui.engine import opening

    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "file" / "data"))  # cannot be made
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(opening.tempfile, "tempdir", None)
    monkeypatch.setattr(kernel_cache, "_said", [])
    (tmp_path / "tmp").mkdir()
    victim = tmp_path / "victims-folder"
    victim.mkdir()
    planted = tmp_path / "tmp" / f"dedup-tui-sample-{os.getuid()}"
    planted.symlink_to(victim)  # another user's link: the sample would be copied into the victim's folder
    monkeypatch.setattr(opening, "_fresh_sample_dir", None, raising=False)
    chosen = opening.sample_dir()
    assert chosen != planted and chosen.parent == tmp_path / "tmp" and chosen.stat().st_mode & 0o777 == 0o700
    spec = opening.prepare()  # the sample copied and its project made there
    assert spec.db.parent == chosen and (chosen / "notes.jsonl").exists()
    assert list(victim.iterdir()) == []
    planted.unlink()
    monkeypatch.setattr(opening.tempfile, "tempdir", None)
    assert opening.sample_dir() == planted and planted.stat().st_mode & 0o777 == 0o700  # made private: used
