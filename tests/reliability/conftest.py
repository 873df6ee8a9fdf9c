"""Helpers for the reliability suite: projects, and the CLI in a real subprocess (`cli`) or in this
process (`run`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from dedup_tui.cli import main

from ..conftest import NEAR_CORPUS, write_jsonl

HERE = Path(__file__).parent
CLI = [sys.executable, "-m", "dedup_tui"]


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


def run(*args):
    """The CLI in this process: a deliberate exit is acceptable, never an escaped exception or a
    traceback in the output."""
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result


@pytest.fixture
def project_files(tmp_path):
    """(folder, corpus, project): NEAR_CORPUS and a near copy of its first document, loaded and
    scanned by the CLI (default settings) into P.db."""
    corpus = write_jsonl(tmp_path / "c.jsonl", NEAR_CORPUS + [("dup", NEAR_CORPUS[0][1] + "!")])
    db = tmp_path / "P.db"
    assert run("load", corpus, "--db", db).exit_code == 0
    assert run("scan", "--db", db).exit_code == 0
    return tmp_path, corpus, db
