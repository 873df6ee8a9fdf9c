"""`dedup-tui serve` in a real browser (Debian's headless Chromium, driven by Selenium): the URL
printed (with its token) gets in and the token leaves the address bar, the address without it is
refused, the page shows the app, a decision typed in the browser is in the project, a second
browser gets a read-only view, and nothing is left running afterwards.

Skipped when /usr/bin/chromium or /usr/bin/chromedriver is missing (.ci/run installs them)."""

from __future__ import annotations

import re

import pytest

from dedup_tui.engine.curate import decisions
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.scanning.local import scan
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
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]{40,}", served.url)  # this machine only
        first = Browser(tmp_path / "chrome-1")
        browsers.append(first)
        first.open(served.url)
        shown = first.wait_for(lambda s: "clusters:" in s and "Keep" in s)
        assert "READ-ONLY" not in shown
        # the token left the address bar; the cookie that replaces it is out of the page's reach
        assert first.driver.current_url == served.url.split("?")[0]
        (cookie,) = first.driver.get_cookies()
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["value"] in served.url
        first.keys("\t")  # the members: the cursor on the first member to review
        shown = first.wait_for(lambda s: re.search(r"keys act on ▸\s+(d\d{3})", s) is not None)
        target = re.search(r"keys act on ▸\s+(d\d{3})", shown).group(1)
        first.keys("k")
        # in the project, read by the engine (the list shows the keep in its row: no toast)
        first.wait_for(lambda _screen: active(project) == [("keep", target)])
        first.wait_for("your choice")

        second = Browser(tmp_path / "chrome-2")
        browsers.append(second)
        second.open(served.url.split("?")[0])  # without the token: refused, no app
        assert "The address needs its token" in second.driver.page_source
        assert second.screen() == ""
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
