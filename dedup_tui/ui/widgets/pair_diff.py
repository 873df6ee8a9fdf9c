"""Two documents with their differences marked: the one widget that diffs a pair, for the main
screen's preview, the pair view and the labelling queue.

A screen composes it around the views it lays out (two DocViews, left then right, and in the pair
view an AlignedDiffView) and gives it a pair with `show`. A short pair is diffed at once and drawn
with its differences in one repaint; a longer one is drawn at once and diffed in this widget's
worker: one diff at a time (a newer pair cancels the older one's), and a result for any pair but
the last one asked for is dropped. Once a pair is on screen (after the repaint that drew it; not
while the widget is hidden or its screen is under another) the widget posts PairDiff.Shown with
its key.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np
from textual import on, work
from textual.message import Message
from textual.widget import Widget
from textual.worker import get_current_worker

from ...engine.scanning.similarity import verify_pairs
from ...engine.text.normalize import normalize
from ...engine.text.shingle import shingle_sets
from .. import window
from ..diff import AlignedDiff, DiffResult, align_lines, aligned_in_worker, diff, diff_in_worker
from .aligned import AlignedDiffView
from .docview import DocView

Result = DiffResult | AlignedDiff


def shingle_jaccard(left: str, right: str, k: int) -> float:
    """The exact Jaccard similarity of the two texts' k-shingles, as the scan measures it."""
    values, offsets = shingle_sets([normalize(left), normalize(right)], k)
    return float(verify_pairs(values, offsets, np.array([0]), np.array([1]))[0])


def diff_pair(left: str, right: str, aligned: bool, normalized: bool, jaccard_k: int) -> Result | None:
    """In the worker: the diff (lines aligned or text flowing) and, with `jaccard_k`, the Jaccard
    similarity; None when the worker was cancelled."""
    result = aligned_in_worker(left, right, normalized) if aligned else diff_in_worker(left, right, normalized)
    if result is not None and jaccard_k:
        result.jaccard = shingle_jaccard(left, right, jaccard_k)
    return result


class PairDiff(Widget):
    DEFAULT_CSS = """
    PairDiff { width: 1fr; height: 1fr; overflow: hidden hidden; }
    """
    MAX_WAIT = 20  # repaints to wait for the views to lay a pair out (each does at its next Resize)

    class Shown(Message):
        """The pair `key` is on screen: drawn, not only asked for. `diffed`: with its differences
        marked (False: its documents are drawn, their diff is still being computed; a Shown with
        True follows when the differences are drawn)."""

        def __init__(self, pair_diff: PairDiff, key: Hashable, diffed: bool) -> None:
            super().__init__()
            self.pair_diff, self.key, self.diffed = pair_diff, key, diffed

        @property
        def control(self) -> PairDiff:
            return self.pair_diff

    class _Diffed(Message, bubble=False):
        def __init__(self, generation: int, result: Result) -> None:
            super().__init__()
            self.generation, self.result = generation, result

    def __init__(
        self, *children: Widget, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(*children, name=name, id=id, classes=classes)
        self.key: Hashable = None  # the pair asked for last
        self.diffed = False  # whether its differences are in the views
        self.drawn = False  # whether it was drawn (announced by Shown): a key may act on it
        self._generation = 0  # of the pair asked for last: a result of an earlier one is dropped
        self._pair: tuple[window.Shown, window.Shown] = (window.Shown("", 0), window.Shown("", 0))
        self._then: Callable[[Result], None] | None = None
        self._unannounced: tuple[int, bool] | None = None  # in the views while they were not on screen
        self._views: tuple[DocView, DocView, AlignedDiffView | None] | None = None

    def on_mount(self) -> None:
        self.watch(self.screen, "stack_updates", self._screen_stacked, init=False)

    def _found_views(self) -> tuple[DocView, DocView, AlignedDiffView | None]:
        if self._views is None:  # (the views are composed once: looked up once)
            left, right, *_ = self.query(DocView)
            self._views = left, right, next(iter(self.query(AlignedDiffView)), None)
        return self._views

    @property
    def documents(self) -> tuple[DocView, DocView]:
        """The two documents' views, left then right (the first two DocViews inside)."""
        return self._found_views()[:2]

    @property
    def aligned_view(self) -> AlignedDiffView | None:
        """The view of both documents' lines aligned, if the screen has one (the pair view)."""
        return self._found_views()[2]

    def show(
        self,
        key: Hashable,
        left: window.Shown,
        right: window.Shown | None,
        *,
        aligned: bool = False,
        normalized: bool = False,
        jaccard_k: int = 0,
        sync_chars: int = 0,
        then: Callable[[Result], None] | None = None,
    ) -> bool:
        """Show a pair: `left` and `right` (None: `left` alone, nothing to diff), what is shown of
        each document. With `aligned` the differences go to the aligned view (line by line), else
        to the two documents; `normalized` ignores differences of case and spacing; `jaccard_k`:
        the Jaccard similarity of that shingle size is computed too (always in the worker). Pairs
        of at most `sync_chars` characters are diffed now. `then(result)` runs once the
        differences are in the views (before the repaint that draws them). Returns whether they
        are already (False: the documents are, their diff is under way)."""
        self._generation += 1
        self.key, self.diffed, self.drawn, self._then, self._unannounced = key, False, False, then, None
        self._pair = (left, right if right is not None else window.Shown("", 0))
        self.workers.cancel_group(self, "pair-diff")
        left_view, right_view = self.documents
        aligned_view = self.aligned_view
        if aligned_view is not None:
            aligned_view.set_diff(None)
        if right is None:
            left_view.set_document(left.text, length=left.length)
            right_view.set_document("")
            self.diffed = True
            self._announce()
            return True
        if not jaccard_k and len(left.text) + len(right.text) <= sync_chars:
            if aligned:
                lines = align_lines(left.text, right.text, normalized)
                left_view.set_document(left.text, length=left.length)
                right_view.set_document(right.text, length=right.length)
                self._shown(lines)
            else:
                flowing = diff(left.text, right.text, normalized=normalized)
                left_view.set_document(left.text, flowing.left, length=left.length)
                right_view.set_document(right.text, flowing.right, length=right.length)
                self._shown(flowing, spans_set=True)
            return True
        left_view.set_document(left.text, length=left.length)
        right_view.set_document(right.text, length=right.length)
        self._diff(self._generation, left.text, right.text, aligned, normalized, jaccard_k)
        self._announce()
        return False

    @work(thread=True, exclusive=True, group="pair-diff", exit_on_error=False)
    def _diff(self, generation: int, left: str, right: str, aligned: bool, normalized: bool, jaccard_k: int) -> None:
        result = diff_pair(left, right, aligned, normalized, jaccard_k)
        if result is not None and not get_current_worker().is_cancelled:
            self.post_message(self._Diffed(generation, result))

    @on(_Diffed)
    def _result_ready(self, message: _Diffed) -> None:
        if message.generation == self._generation:  # else a newer pair was asked for since
            self._shown(message.result)

    def _shown(self, result: Result, spans_set: bool = False) -> None:
        if isinstance(result, AlignedDiff):
            left, right = self._pair
            aligned_view = self.aligned_view
            assert aligned_view is not None, "an aligned diff needs an AlignedDiffView in the PairDiff"
            aligned_view.set_diff(result, window.pair_notice(left, right))
        elif not spans_set:
            left_view, right_view = self.documents
            left_view.set_spans(result.left)
            right_view.set_spans(result.right)
        self.diffed = True
        if self._then is not None:
            self._then(result)
        self._announce()

    # -- saying what is on screen --------------------------------------------------------------
    def _announce(self) -> None:
        self.call_after_refresh(self._post_shown, self._generation, self.diffed, self._laid_out())

    def _laid_out(self) -> bool:
        """Whether the views hold the pair laid out at their width (a view given its width in the
        layout under way lays the pair out when it handles its Resize, for the repaint after)."""
        left, right, aligned = self._found_views()
        return all(view.laid_out for view in (left, right, aligned) if view is not None and view.display)

    def _post_shown(self, generation: int, diffed: bool, laid_out: bool, waited: int = 0) -> None:
        if generation != self._generation:
            return  # replaced before it was drawn
        if not self._on_screen():  # announced when it is
            self._unannounced = (generation, diffed)
            return
        if not laid_out and waited < self.MAX_WAIT:  # the repaint just made may have drawn empty views
            self.call_after_refresh(self._post_shown, generation, diffed, self._laid_out(), waited + 1)
            return
        self.drawn = True
        self.post_message(self.Shown(self, self.key, diffed))

    def _on_screen(self) -> bool:
        """Whether the repaint drew this widget: laid out with room (not hidden by a style, as the
        main screen's preview is on a short terminal), on the screen on top or under screens that
        let it show through (a dialog's). Screen.is_current counts the screen under any screen."""
        if not self.region.area:
            return False
        stack = self.app.screen_stack
        if self.screen not in stack:
            return False
        return all(above.styles.background.a < 1 for above in stack[stack.index(self.screen) + 1 :])

    def on_show(self) -> None:
        self._announce_unannounced()

    def _screen_stacked(self, _updates: int) -> None:
        self._announce_unannounced()

    def _announce_unannounced(self) -> None:
        if self._unannounced is not None and self._on_screen():
            generation, diffed = self._unannounced
            self._unannounced = None
            self.call_after_refresh(self._post_shown, generation, diffed, self._laid_out())
