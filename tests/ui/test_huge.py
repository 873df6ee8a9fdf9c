"""Huge documents: the app shows a window of them, says so on screen, and no view, table or diff
ever works on a whole huge text."""

from __future__ import annotations

import pytest

from dedup_tui.engine.store import Project
from dedup_tui.ui.app import create_app
from dedup_tui.ui.screens.pair import PairScreen
from dedup_tui.ui.screens.tune import LabelScreen
from dedup_tui.ui.widgets.aligned import AlignedDiffView
from dedup_tui.ui.widgets.docview import DocView
from dedup_tui.ui.window import PAIR_LINES, PAIR_WINDOW, PREVIEW_WINDOW, Shown, cut_notice, pair_notice, windows

from .conftest import HUGE, huge_text, press_decision, settle
from .conftest import plain_screen as screen_text


def read_texts(monkeypatch) -> list:
    """Every whole text the app reads from here on (none may be read: they are 20 MB each)."""
    read: list = []
    original = Project.texts_for

    def spy(self, ords):
        read.extend(ords)
        return original(self, ords)

    monkeypatch.setattr(Project, "texts_for", spy)
    return read


async def test_a_huge_pair_is_shown_through_a_window(huge_pair_project, monkeypatch):
    whole_reads = read_texts(monkeypatch)
    with Project(huge_pair_project) as project:
        big_a, big_b = (project.text_windows([o], 0)[o] for o in (3, 4))
    assert (big_a[0], big_a[1], big_b[0], big_b[1]) == ("big-a", HUGE, "big-b", HUGE + 7)

    app = create_app(huge_pair_project, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        assert main.project.ids_for([main.model.cursor.doc]) == ["note-1"]  # the short notes' cluster first
        await pilot.press("down")  # onto the huge pair's cluster
        await settle(pilot)
        assert main.project.ids_for([main.model.cursor.doc]) == ["big-b"]

        # The triage preview: the first PREVIEW_WINDOW characters of each, and the title says so.
        kept_view, member_view = main.query_one("#preview-kept", DocView), main.query_one("#preview-member", DocView)
        expected = huge_text(HUGE + 7, changed_every=997)[:PREVIEW_WINDOW]
        assert member_view._raw == expected
        assert member_view.notice == f"showing the first {PREVIEW_WINDOW:,} of {HUGE + 7:,} characters"
        assert kept_view.line_count < PREVIEW_WINDOW // 10
        shown = screen_text(app)
        assert f"showing the first {PREVIEW_WINDOW:,} of {HUGE:,} / {HUGE + 7:,} chars" in shown
        # the window's text stays literal: the markup shown as typed, the escape sequence escaped
        assert "[bold]not bold[/bold]" in shown and "\\x1b]2;HUGE\\x07" in shown and "\x1b" not in shown

        # The pair view: windows of PAIR_WINDOW characters, diffed line by line in a worker.
        await pilot.press("d")
        await settle(pilot)
        pair = app.screen
        assert isinstance(pair, PairScreen) and pair.aligned
        aligned = pair.query_one("#aligned-doc", AlignedDiffView)
        assert aligned.result is not None and aligned.change_count > 0  # the diff came back
        left, right = aligned.result.left_lines, aligned.result.right_lines
        assert sum(len(x) + 1 for x in left) <= PAIR_WINDOW + 1 and sum(len(x) + 1 for x in right) <= PAIR_WINDOW + 1
        assert "\n".join(right) == huge_text(HUGE + 7, changed_every=997)[:PAIR_WINDOW]
        notice = f"showing the first {PAIR_WINDOW:,} characters of each ({HUGE:,} and {HUGE + 7:,} in all)"
        assert notice in screen_text(app)
        # the end of the view says it again, after the window's last line
        await pilot.press("end")
        await pilot.pause()
        assert aligned.scroll_y == aligned.max_scroll_y > 0
        assert "[… " + notice in screen_text(app)

        # The text flowing (l): each side's window, bounded, ending with the notice.
        await pilot.press("l")
        await settle(pilot)
        for view, length in (
            (pair.query_one("#left-doc", DocView), HUGE),
            (pair.query_one("#right-doc", DocView), HUGE + 7),
        ):
            assert len(view._raw) == PAIR_WINDOW and view.line_count < PAIR_WINDOW // 20
            assert view.notice == f"showing the first {PAIR_WINDOW:,} of {length:,} characters"
        assert notice in screen_text(app)
    assert whole_reads == []  # no whole text was read for the screens, the tables or the diffs


def test_text_windows_read_the_start_of_a_text_and_its_length(make_project):
    texts = ["é" * 50 + "€" * 50 + "😀" * 50, "short", "a" + "€" * 300, ""]
    project = make_project([(f"d{i}", t) for i, t in enumerate(texts)])
    try:
        for chars in (0, 1, 3, 60, 120, 151, 400):
            got = project.text_windows(range(len(texts)), chars)
            assert got == {i: (f"d{i}", len(t), t[:chars]) for i, t in enumerate(texts)}
        shown = windows(project, [2, 1], 10)
        assert shown == [Shown(texts[2][:10], 301), Shown("short", 5)]
        assert shown[0].cut and not shown[1].cut
    finally:
        project.close()


def test_a_window_of_short_lines_ends_after_its_last_whole_line(make_project):
    # 100,000 characters of one-character lines are 50,000 rows to lay out: the window stops at a line count too
    text = "".join(f"{i % 10}\n" for i in range(60_000))
    project = make_project([("lines", text), ("no-breaks", "word " * 30_000)])
    try:
        by_lines, no_breaks = windows(project, [0, 1], PAIR_WINDOW, PAIR_LINES)
        assert by_lines.text == text[: 2 * PAIR_LINES] and by_lines.text.count("\n") == PAIR_LINES
        assert cut_notice(by_lines) == f"showing the first {2 * PAIR_LINES:,} of 120,000 characters"
        assert no_breaks == Shown(("word " * 30_000)[:PAIR_WINDOW], 150_000)
    finally:
        project.close()


@pytest.mark.parametrize(
    "left, right, expected",
    [
        (Shown("ab", 2), Shown("cd", 2), ""),
        (
            Shown("ab", 9),
            Shown("cd", 2),
            "showing the first 2 of 9 characters of the left document: the differences are those of the parts shown",
        ),
        (
            Shown("ab", 9),
            Shown("cd", 1_000_000),
            "showing the first 2 characters of each (9 and 1,000,000 in all): the "
            "differences are those of the parts shown",
        ),
    ],
)
def test_pair_notice_names_what_is_cut(left, right, expected):
    assert pair_notice(left, right) == expected
    assert cut_notice(Shown("ab", 2)) == "" and cut_notice(Shown("ab", 3)) == "showing the first 2 of 3 characters"


async def test_the_labelling_queue_shows_a_huge_pair_through_a_window(huge_pair_project, monkeypatch):
    whole_reads = read_texts(monkeypatch)
    app = create_app(huge_pair_project, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("T")
        await settle(pilot)
        await pilot.press("L")  # label borderline pairs: the huge pair is one of the four stored
        await settle(pilot)
        queue = app.screen
        assert isinstance(queue, LabelScreen) and (3, 4) in [(q.a, q.b) for q in queue.queue]
        for _ in range(len(queue.queue)):  # skip to it
            if (queue.current.a, queue.current.b) == (3, 4):
                break
            await press_decision(pilot, "0")
            await settle(pilot)
        assert (queue.current.a, queue.current.b) == (3, 4)
        notice = f"showing the first {PAIR_WINDOW:,} characters of each ({HUGE:,} and {HUGE + 7:,} in all)"
        assert notice in screen_text(app)
        for side, length in (("#left-doc", HUGE), ("#right-doc", HUGE + 7)):
            view = queue.query_one(side, DocView)
            assert len(view._raw) == PAIR_WINDOW and view.notice.endswith(f"of {length:,} characters")
    assert whole_reads == []
