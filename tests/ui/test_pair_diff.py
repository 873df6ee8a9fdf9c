"""The pair-diff widget on its own (issue 39, part 4): the one worker behind the main screen's
preview, the pair view and the labelling queue. A result for a pair that was replaced is dropped,
a newer pair cancels the older one's diff, and PairDiff.Shown(key) comes only after a repaint
that drew that pair: the frames the app displays are recorded and searched."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from textual.app import App, ComposeResult
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import get_current_worker

from dedup_tui import ui
from dedup_tui.ui.widgets import pair_diff
from dedup_tui.ui.widgets.aligned import AlignedDiffView
from dedup_tui.ui.widgets.docview import DocView
from dedup_tui.ui.widgets.pair_diff import PairDiff
from dedup_tui.ui.window import Shown

SGR = re.compile(r"\x1b\[([0-9;]*)m")


class Harness(App):
    """A PairDiff around two documents and an aligned view; every frame displayed is kept, as
    the terminal would have received it, and every Shown with the number of frames before it."""

    CSS_PATH = Path(ui.__file__).parent / "app.tcss"  # the app's styles of differences

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[str] = []
        self.shown: list[tuple[object, bool, int]] = []  # (key, diffed, frames displayed before it)

    def compose(self) -> ComposeResult:
        with PairDiff(id="pair"):
            yield DocView(id="left")
            yield DocView(id="right")
            yield AlignedDiffView(id="aligned")

    def _display(self, screen, renderable) -> None:
        if renderable is not None and hasattr(renderable, "render_segments"):
            self.frames.append(renderable.render_segments(self.console))
        super()._display(screen, renderable)

    def on_pair_diff_shown(self, message: PairDiff.Shown) -> None:
        self.shown.append((message.key, message.diffed, len(self.frames)))


def style_before(frame: str, word: str, last: bool = False) -> str | None:
    """The terminal style in force where `word` is drawn in a frame (None: not drawn there); its
    `last` drawing: the right-hand view's, where both views show it on one row."""
    at = frame.rfind(word) if last else frame.find(word)
    if at < 0:
        return None
    last = ""
    for m in SGR.finditer(frame, 0, at):
        last = m.group(1)
    return last


def drawn(frames: list[str], *words: str) -> bool:
    """Whether one frame drew all the words (a word's characters may be styled apart)."""
    return any(all(w in SGR.sub("", f) for w in words) for f in frames)


def marked(frames: list[str], word: str, plain_word: str = "survey", within: str | None = None) -> bool:
    """Whether some frame (of those that drew `within`) drew `word` in another style than
    `plain_word` drawn in the same (right-hand) view: the two views' backgrounds differ (the focused
    one is lighter in true colour)."""
    if within is not None:
        frames = [f for f in frames if within in SGR.sub("", f)]
    return any(
        None not in (style_before(f, word), style_before(f, plain_word, last=True))
        and style_before(f, word) != style_before(f, plain_word, last=True)
        for f in frames
    )


async def until(pilot, condition, rounds: int = 400) -> None:
    for _ in range(rounds):
        if condition():
            return
        await pilot.pause()
    raise AssertionError("the state waited for never came")


class HeldDiffs:
    """diff_pair held in the worker until released, per pair (by the left text's first word):
    what each worker saw of its cancellation once released."""

    def __init__(self, monkeypatch) -> None:
        self.release: dict[str, threading.Event] = {}
        self.started: dict[str, threading.Event] = {}
        self.cancelled: dict[str, bool] = {}
        real = pair_diff.diff_pair

        def held(left, right, aligned, normalized, jaccard_k):
            name = left.split()[0]
            self.started.setdefault(name, threading.Event()).set()
            assert self.release.setdefault(name, threading.Event()).wait(10), "never released"
            self.cancelled[name] = get_current_worker().is_cancelled
            return real(left, right, aligned, normalized, jaccard_k)

        monkeypatch.setattr(pair_diff, "diff_pair", held)

    def let_go(self, name: str) -> None:
        self.release.setdefault(name, threading.Event()).set()


def pair(name: str) -> tuple[Shown, Shown]:
    left = f"{name} the river library opens at nine for the winter survey"
    return Shown(left, len(left)), Shown(left + " CHANGED", len(left) + 8)


async def test_shown_comes_after_the_frame_that_drew_the_pair_and_carries_its_key():
    app = Harness()
    async with app.run_test(size=(80, 24)) as pilot:
        widget = app.query_one(PairDiff)
        left, right = pair("ALPHA")
        assert widget.show(("a", 1), left, right, sync_chars=10_000)  # short: diffed at once
        assert widget.diffed and not widget.drawn
        await until(pilot, lambda: app.shown)
        key, diffed, before = app.shown[0]
        assert (key, diffed) == (("a", 1), True) and widget.drawn
        assert drawn(app.frames[:before], "ALPHA", "CHANGED")
        assert marked(app.frames[:before], "CHANGED")  # the difference too
        assert len(app.shown) == 1


async def test_a_pair_replaced_before_a_repaint_is_never_announced():
    app = Harness()
    async with app.run_test(size=(80, 24)) as pilot:
        widget = app.query_one(PairDiff)
        widget.show("first", *pair("FIRST"), sync_chars=10_000)
        widget.show("second", *pair("SECOND"), sync_chars=10_000)  # in the same turn: no repaint between
        await until(pilot, lambda: app.shown)
        await pilot.pause()
        assert [k for k, _d, _n in app.shown] == ["second"]
        assert not drawn(app.frames, "FIRST")


async def test_a_long_pair_is_announced_drawn_then_diffed(monkeypatch):
    held = HeldDiffs(monkeypatch)
    app = Harness()
    async with app.run_test(size=(80, 24)) as pilot:
        widget = app.query_one(PairDiff)
        assert not widget.show("long", *pair("LONG"), sync_chars=0)  # in the worker
        assert not widget.drawn
        await until(pilot, lambda: app.shown)
        assert widget.drawn  # (its documents)
        assert app.shown[0][:2] == ("long", False)
        assert drawn(app.frames[: app.shown[0][2]], "LONG", "CHANGED")
        assert not marked(app.frames, "CHANGED")  # its diff is not there yet
        held.let_go("LONG")
        await until(pilot, lambda: len(app.shown) == 2)
        key, diffed, before = app.shown[1]
        assert (key, diffed) == ("long", True) and widget.diffed
        assert marked(app.frames[:before], "CHANGED")


async def test_a_newer_pair_cancels_the_older_diff_and_its_late_result_is_dropped(monkeypatch):
    held = HeldDiffs(monkeypatch)
    app = Harness()
    results = []
    async with app.run_test(size=(80, 24)) as pilot:
        widget = app.query_one(PairDiff)
        widget.show("old", *pair("OLD"), sync_chars=0, then=lambda r: results.append(("old", r)))
        await until(pilot, lambda: "OLD" in held.started and held.started["OLD"].is_set())
        widget.show("new", *pair("NEW"), sync_chars=0, then=lambda r: results.append(("new", r)))
        held.let_go("NEW")
        await until(pilot, lambda: ("new", True) in [s[:2] for s in app.shown])
        right = app.query_one("#right", DocView)
        spans = list(right._spans)
        held.let_go("OLD")  # the old pair's diff ends after the new one was shown
        await app.workers.wait_for_complete()
        for _ in range(5):
            await pilot.pause()
        assert held.cancelled == {"OLD": True, "NEW": False}  # the older one was told to stop
        assert [name for name, _r in results] == ["new"]
        assert widget.key == "new" and right.text.startswith("NEW") and right._spans == spans
        assert "old" not in [s[0] for s in app.shown[1:]] and not marked(app.frames, "CHANGED", within="OLD")


async def test_a_stale_result_is_dropped_even_when_its_worker_was_not_cancelled():
    """The widget's own rule, not only the worker's cancellation: a result for another pair than
    the last one asked for never reaches the views."""
    app = Harness()
    async with app.run_test(size=(80, 24)) as pilot:
        widget = app.query_one(PairDiff)
        widget.show("old", *pair("OLD"), sync_chars=10_000)
        old_result = pair_diff.diff(pair("OLD")[0].text, pair("OLD")[1].text)
        widget.show("new", Shown("NEW text", 8), Shown("NEW text", 8), sync_chars=10_000)  # equal: nothing marked
        await until(pilot, lambda: any(s[0] == "new" for s in app.shown))
        shown_before = len(app.shown)
        widget.post_message(PairDiff._Diffed(widget._generation - 1, old_result))
        for _ in range(5):
            await pilot.pause()
        assert app.query_one("#right", DocView)._spans == [] and len(app.shown) == shown_before


async def test_aligned_pairs_go_to_the_aligned_view_and_then_sees_the_same_result():
    app = Harness()
    seen = []
    async with app.run_test(size=(80, 24)) as pilot:
        widget = app.query_one(PairDiff)
        lines = [f"line {i} of the package description" for i in range(6)]
        changed = list(lines)
        changed[2] = "line 2 of the plugin description"
        left, right = "\n".join(lines), "\n".join(changed)
        widget.show(
            "aligned",
            Shown(left, len(left)),
            Shown(right, len(right)),
            aligned=True,
            sync_chars=10_000,
            then=seen.append,
        )
        view = app.query_one(AlignedDiffView)
        assert seen == [view.result] and view.change_count == 1  # counted before any layout
        await until(pilot, lambda: app.shown)
        assert app.shown[0][:2] == ("aligned", True)


class Above(Screen):
    def compose(self) -> ComposeResult:
        yield Static("a screen on top")


async def test_a_pair_shown_under_another_screen_is_announced_when_that_screen_closes():
    app = Harness()
    async with app.run_test(size=(80, 24)) as pilot:
        widget = app.query_one(PairDiff)
        await pilot.pause()
        await app.push_screen(Above())
        await pilot.pause()
        widget.show("under", *pair("UNDER"), sync_chars=10_000)
        for _ in range(10):
            await pilot.pause()
        assert app.shown == [] and not drawn(app.frames, "UNDER")
        app.pop_screen()
        await until(pilot, lambda: app.shown)
        key, diffed, before = app.shown[0]
        assert (key, diffed) == ("under", True) and drawn(app.frames[:before], "UNDER", "CHANGED")


async def test_a_pair_shown_while_the_widget_is_hidden_is_announced_once_it_is_displayed():
    app = Harness()
    async with app.run_test(size=(80, 24)) as pilot:
        widget = app.query_one(PairDiff)
        widget.display = False
        await pilot.pause()
        widget.show("hidden", *pair("HIDDEN"), sync_chars=10_000)
        for _ in range(10):
            await pilot.pause()
        assert app.shown == [] and not drawn(app.frames, "HIDDEN")
        widget.display = True
        await until(pilot, lambda: app.shown)
        key, diffed, before = app.shown[0]
        assert (key, diffed) == ("hidden", True) and drawn(app.frames[:before], "HIDDEN", "CHANGED")


async def test_the_screens_announce_the_pair_they_show_once_it_is_drawn(tmp_path, monkeypatch):
    """In the app: the pair view announces its pair; the main screen's preview, hidden on a short
    terminal, announces (kept, member under the cursor) only once a taller one shows it, after a
    frame that drew the member's last word (the members list shows only the start of the text)."""
    from dedup_tui.ui.app import create_app
    from dedup_tui.ui.screens.pair import PairScreen

    from .conftest import settle, write_corpus

    base = "the river library opens at nine for the winter survey and the choir meets on friday " * 2
    docs = [{"id": "note-a", "text": base + "KEPTWORD"}, {"id": "note-b", "text": base + "MEMBERWORD"}]
    app = create_app(write_corpus(tmp_path / "notes.jsonl", docs), author="tester")
    frames: list[str] = []
    shown: list[tuple[str, object, bool, int]] = []  # (screen, key, diffed, frames before it)
    display, post = type(app)._display, PairDiff.post_message

    def record_frame(self, screen, renderable):
        if renderable is not None and hasattr(renderable, "render_segments"):
            frames.append(renderable.render_segments(self.console))
        return display(self, screen, renderable)

    def record_shown(self, message):
        if isinstance(message, PairDiff.Shown):
            shown.append((type(self.screen).__name__, message.key, message.diffed, len(frames)))
        return post(self, message)

    def frames_before(screen: str, key) -> list[str]:
        return frames[: next(n for name, k, diffed, n in shown if (name, k, diffed) == (screen, key, True))]

    monkeypatch.setattr(type(app), "_display", record_frame)
    monkeypatch.setattr(PairDiff, "post_message", record_shown)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("tab")
        await settle(pilot)
        main = app.main
        member = main.model.cursor.doc
        kept = main.model.kept_of(member)
        assert member != kept and main.has_class("-short")
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PairScreen) and screen._key[:2] == (kept, member)
        await until(pilot, lambda: ("PairScreen", screen._key, True) in [s[:3] for s in shown])
        assert drawn(frames_before("PairScreen", screen._key), "MEMBERWORD", "KEPTWORD")
        assert "MainScreen" not in [s[0] for s in shown]  # its preview is hidden at 80x24
        closed = len(frames)
        await pilot.press("escape")
        await settle(pilot)
        assert "MainScreen" not in [s[0] for s in shown] and not drawn(frames[closed:], "MEMBERWORD", "KEPTWORD")
        await pilot.resize_terminal(120, 40)
        await until(pilot, lambda: ("MainScreen", (kept, member), True) in [s[:3] for s in shown])
        assert drawn(frames_before("MainScreen", (kept, member)), "MEMBERWORD", "KEPTWORD")
