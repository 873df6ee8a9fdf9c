"""Helpers for the reliability suite: corpora, projects and the CLI in a real subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
CLI = [sys.executable, "-m", "dedup_tui"]


def write_jsonl(path: Path, docs) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for d in docs:
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
    return path


def cli(*args, check: bool = True, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, DEDUP_TUI_AUTHOR="tester")
    r = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, env=env, timeout=300, **kw)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def one_line_error(r: subprocess.CompletedProcess) -> str:
    """The stderr of a failed command: exactly one line starting with `error:`, no traceback."""
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


class Child:
    """A subprocess that the test kills with a real SIGKILL."""

    def __init__(self, args, **kw):
        env = dict(os.environ, DEDUP_TUI_AUTHOR="tester", PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kw)

    def wait_for_line(self, prefix: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"child ended before {prefix!r}: {self.proc.stderr.read()}")
            if line.startswith(prefix):
                return line.rstrip("\n")
        raise AssertionError(f"no {prefix!r} line within {timeout}s")

    def kill9(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        assert self.proc.returncode == -signal.SIGKILL

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()


@pytest.fixture
def child():
    made: list[Child] = []

    def start(args, **kw) -> Child:
        c = Child(args, **kw)
        made.append(c)
        return c

    yield start
    for c in made:
        c.close()


def review_child(start, db: Path, n: int = 3) -> Child:
    return start([sys.executable, str(HERE / "_review_child.py"), str(db), str(n)])
