"""`dedup-tui serve` in a real browser (Debian's headless Chromium, driven by Selenium): the page
shows the app, a decision typed in the browser is in the project, a second browser gets a
read-only view, and nothing is left running afterwards.

Skipped when /usr/bin/chromium or /usr/bin/chromedriver is missing (.ci/run installs them)."""

from __future__ import annotations

import re

import pytest

from dedup_tui.engine import decisions
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.pipeline import scan
from dedup_tui.engine.store import Project

from ..browser_session import Browser, Served, missing

pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")


@pytest.fixture
def project(tmp_path, corpus):
    db = tmp_path / "served.db"
    p = Project(db, create=True)
    try:
        load_corpus(p, [corpus])
        scan(p)
    finally:
        p.close()
    return db


def active(db) -> list[tuple[str, str]]:
    with Project(db) as p:
        return [(d.kind, d.doc_id) for d in decisions.active(p)]


def test_review_in_the_browser_and_a_second_browser_is_read_only(project, tmp_path):
    served = Served(project)
    browsers: list[Browser] = []
    try:
        assert served.url.startswith("http://127.0.0.1:")  # this machine only, unless --host
        first = Browser(tmp_path / "chrome-1")
        browsers.append(first)
        first.open(served.url)
        shown = first.wait_for(lambda s: "clusters:" in s and "Keep" in s)
        assert "READ-ONLY" not in shown
        first.keys("\t")  # the members: the cursor on the first member to review
        shown = first.wait_for(lambda s: re.search(r"keys act on ▸\s+(d\d{3})", s) is not None)
        target = re.search(r"keys act on ▸\s+(d\d{3})", shown).group(1)
        first.keys("k")
        # in the project, read by the engine (the list shows the keep in its row: no toast)
        first.wait_for(lambda _screen: active(project) == [("keep", target)])
        first.wait_for("your choice")

        second = Browser(tmp_path / "chrome-2")
        browsers.append(second)
        second.open(served.url)
        shown = second.wait_for(lambda s: "READ-ONLY" in s and "clusters:" in s)
        assert "served.db is open in another dedup-tui window" in re.sub(r"\s+", " ", shown)
        second.keys("x")
        second.wait_for("decisions cannot be made here")
        first.keys("u")  # the first browser still reviews
        first.wait_for(f"Undone: keep {target}")
        assert active(project) == []
        # Ctrl+C to the server with both pages open: their sessions end, their apps quit
        left = served.stop()
        assert left == [], f"processes of the server left running: {left}"
        for browser in browsers:
            assert browser.session_ended()
    finally:
        left = served.stop() + [p for b in browsers for p in b.quit()]
    assert left == [], f"processes left running: {left}"
    said = "".join(served.output)
    assert "Traceback" not in said and "WARNING" not in said and "ERROR" not in said, said
