"""`dedup-tui serve` and `open --read-only` on the command line: what they refuse (one line, no
traceback), the address they listen on, and the command each browser runs. The page itself is
tested in a real browser: tests/ui/test_browser.py."""

from __future__ import annotations

import shlex
import socket
import sys

from dedup_tui.engine.store import Project
from dedup_tui.ui.serve import app_command, listen, page_url

from .conftest import NEAR_CORPUS, write_jsonl
from .test_cli import cli


def test_serve_refuses_what_is_not_a_project(tmp_path):
    corpus = write_jsonl(tmp_path / "c.jsonl", NEAR_CORPUS)
    result = cli("serve", corpus)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: {corpus}: serve opens a project file (.db); make one with dedup-tui scan PROJECT CORPUS"]
    result = cli("serve", tmp_path / "missing.db")
    assert result.exit_code == 1 and "no such project file" in result.output
    assert len(result.output.strip().splitlines()) == 1
    result = cli("serve")
    assert result.exit_code == 2 and "give the project: dedup-tui serve PROJECT" in result.output


def test_serve_says_when_the_port_is_taken(tmp_path):
    db = tmp_path / "p.db"
    Project(db, create=True).close()
    taken = listen("127.0.0.1", 0)
    try:
        port = taken.getsockname()[1]
        result = cli("serve", db, "--port", port)
    finally:
        taken.close()
    assert result.exit_code == 1
    assert result.output.startswith(f"error: cannot listen on 127.0.0.1:{port}: ")
    assert len(result.output.strip().splitlines()) == 1


def test_open_read_only_opens_projects_only(tmp_path):
    corpus = write_jsonl(tmp_path / "c.jsonl", NEAR_CORPUS)
    result = cli("open", corpus, "--read-only")
    assert result.exit_code == 1
    assert "a read-only view opens a project file (.db)" in result.output
    assert not (tmp_path / "c.db").exists()  # nothing made for it


def test_listening_address_and_each_browsers_command(tmp_path):
    sock = listen("127.0.0.1", 0)
    try:
        host, port = sock.getsockname()[:2]
        assert host == "127.0.0.1" and port > 0
    finally:
        sock.close()
    assert page_url("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert page_url("::1", 8000) == "http://[::1]:8000"
    assert page_url("0.0.0.0", 8000) == f"http://{socket.getfqdn()}:8000"  # a name other machines can use
    db = tmp_path / "a project with spaces.db"
    assert shlex.split(app_command(db, read_only=False)) == [
        sys.executable, "-P", "-m", "dedup_tui", "open", str(db.resolve()), "--read-only-if-open"]
    assert shlex.split(app_command(db, read_only=True))[-1] == "--read-only"


def test_the_readmes_browser_commands_parse_as_written():
    from pathlib import Path

    from dedup_tui.cli import main

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("## Review in a browser"):].split("```")[1]
    lines = [shlex.split(line.split("  #")[0]) for line in block.splitlines() if line.startswith("dedup-tui ")]
    assert [words[1] for words in lines] == ["serve", "serve", "serve", "open"]
    for words in lines:
        command = main.commands[words[1]]
        with command.make_context(words[1], words[2:]) as ctx:
            assert (ctx.params.get("project_path") or ctx.params.get("path")) == "project.db"


def test_the_browser_test_says_why_it_is_skipped(tmp_path, monkeypatch):
    from . import browser_session

    monkeypatch.setattr(browser_session, "CHROMIUM", tmp_path / "no-chromium")
    reason = browser_session.missing()
    assert reason.startswith(f"no {tmp_path / 'no-chromium'}") and "apt-get install chromium chromium-driver" in reason
