"""The pair view: the kept document and a member, side by side (stacked when narrow), diffed."""

from __future__ import annotations

import numpy as np
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import get_current_worker

from ...engine.normalize import normalize
from ...engine.shingle import shingle_sets
from ...engine.similarity import verify_pairs
from ..actions import PAIR_ACTIONS
from ..diff import AlignedDiff, aligned_in_worker, diff_in_worker, lines_of
from ..messages import DiffReady
from ..state import ReviewChanged
from ..text import literal_line
from ..widgets.aligned import AlignedDiffView
from ..widgets.docview import DocView, compose_side_by_side
from ..widgets.footer import AppFooter
from ..widgets.tables import STATUS, why
from ..window import PAIR_LINES, PAIR_WINDOW, Shown, pair_notice, windows


class PairScreen(Screen):
    BINDINGS = [a.binding() for a in PAIR_ACTIONS]
    ACTIONS = PAIR_ACTIONS
    NARROW = 100

    def __init__(self, review, cluster_id: int, right: int) -> None:
        super().__init__()
        self.review = review
        self.cluster_id = cluster_id
        self.right = right
        self.left = review.kept_of(right)
        self.layout_choice: str | None = None  # None: automatic by width
        self.jaccard: float | None = None
        self.jaccard_computed = False  # below the scan's floor: computed by the pair view
        self.jaccard_unknown = False  # below the floor and too long to compute here
        self._key: tuple = ()
        self._syncing = False
        self._advance = False  # after a decision here: show the next undecided member when it is saved
        self.normalized = False  # c: ignore differences of case and spacing, as the similarity does
        self.aligned_choice: bool | None = None  # l: lines aligned / text flowing; None: by the documents
        self.aligned = False
        self._shown_change: int | None = None  # the "change k/n" the header last showed
        # what is shown of each document: a window of a huge one (its first PAIR_WINDOW characters)
        self.shown: tuple[Shown, Shown] = (Shown("", 0), Shown("", 0))

    def compose(self) -> ComposeResult:
        yield Static("", id="pair-header")
        yield from compose_side_by_side()
        yield AlignedDiffView(id="aligned-doc")
        yield AppFooter()

    def on_mount(self) -> None:
        left, right = self.query_one("#left-doc", DocView), self.query_one("#right-doc", DocView)
        self.watch(left, "scroll_y", lambda _: self._sync(left, right), init=False)
        self.watch(right, "scroll_y", lambda _: self._sync(right, left), init=False)
        aligned = self.query_one("#aligned-doc", AlignedDiffView)
        self.watch(aligned, "scroll_y", lambda _: self._follow_changes(aligned), init=False)
        self.load_pair()  # focuses the view the documents are shown in

    def _follow_changes(self, view: AlignedDiffView) -> None:
        """The header's "change 3/17", redrawn only when scrolling reaches another change (not
        on every line: the header reads ids and reasons)."""
        at = view.current_change()
        if at != self._shown_change:
            self._shown_change = at
            self.refresh_view()

    def on_resize(self) -> None:
        self._apply_layout()
        self.refresh_view()

    def _apply_layout(self) -> None:
        stacked = self.size.width < self.NARROW if self.layout_choice is None else self.layout_choice == "stacked"
        self.set_class(stacked, "-stacked")

    def _sync(self, source: DocView, target: DocView) -> None:
        """Scroll together: the same fraction of each document."""
        if self._syncing:
            return
        self._syncing = True
        try:
            frac = source.scroll_y / source.max_scroll_y if source.max_scroll_y else 0.0
            target.scroll_to(y=round(frac * target.max_scroll_y), animate=False, immediate=True)
        finally:
            self._syncing = False

    # -- content -------------------------------------------------------------------------
    def members(self) -> np.ndarray:
        members = self.review.index.members(self.cluster_id)
        return members[members != self.left]

    ALIGN_MIN_LINES = 4  # documents with at least this many lines open line-aligned

    def load_pair(self) -> None:
        """Both documents (a window of a huge one: reading, wrapping and the diff are bounded by
        PAIR_WINDOW characters and PAIR_LINES lines, never by the document), the diff computed in
        a worker."""
        project = self.review.project
        self.shown = left, right = tuple(windows(project, [self.left, self.right], PAIR_WINDOW, PAIR_LINES))
        left_text, right_text = left.text, right.text
        self.query_one("#pair-header", Static).set_class(left.cut or right.cut, "-cut")  # a line says so
        if self.aligned_choice is None:
            self.aligned = min(len(lines_of(left_text)), len(lines_of(right_text))) >= self.ALIGN_MIN_LINES
        else:
            self.aligned = self.aligned_choice
        self.set_class(self.aligned, "-aligned")
        self.query_one("#left-doc", DocView).set_document(left_text, length=left.length)
        self.query_one("#right-doc", DocView).set_document(right_text, length=right.length)
        self.query_one("#aligned-doc", AlignedDiffView).set_diff(None)
        (self.query_one("#aligned-doc") if self.aligned else self.query_one("#right-doc")).focus()
        self._key = (self.left, self.right, self.aligned, self.normalized)
        self.jaccard = self._stored_jaccard()
        self.jaccard_computed = False
        # Below the floor the Jaccard is computed here, of the whole texts: never of a window
        self.jaccard_unknown = self.jaccard is None and (left.cut or right.cut)
        self.refresh_view()
        k = int((project.scan_params() or {}).get("k", 5))
        self.compute_diff(self._key, left_text, right_text, k if self.jaccard is None and not self.jaccard_unknown
                          else 0, self.aligned)

    def _stored_jaccard(self) -> float | None:
        a, b = (self.review.exact_root(o) for o in (self.left, self.right))
        if a == b:
            return 1.0
        return self.review.project.stored_jaccard(a, b)

    @work(thread=True, exclusive=True, group="diff", exit_on_error=False)
    def compute_diff(self, key: tuple, left: str, right: str, k: int, aligned: bool) -> None:
        """Diff (and, for a pair below the floor, the exact Jaccard with shingle size k)."""
        if aligned:
            result = aligned_in_worker(left, right, self.normalized)
        else:
            result = diff_in_worker(left, right, self.normalized)
        if result is None:
            return
        if k:
            values, offsets = shingle_sets([normalize(left), normalize(right)], k)
            result.jaccard = float(verify_pairs(values, offsets, np.array([0]), np.array([1]))[0])
        if not get_current_worker().is_cancelled:
            self.post_message(DiffReady(key, result))

    def on_diff_ready(self, message: DiffReady) -> None:
        if message.key != self._key:
            return
        if isinstance(message.result, AlignedDiff):
            self.query_one("#aligned-doc", AlignedDiffView).set_diff(message.result, pair_notice(*self.shown))
        else:
            self.query_one("#left-doc", DocView).set_spans(message.result.left)
            self.query_one("#right-doc", DocView).set_spans(message.result.right)
        if self.jaccard is None and message.result.jaccard is not None:
            self.jaccard = message.result.jaccard
            self.jaccard_computed = True
        self.refresh_view()

    def refresh_view(self) -> None:
        """Header and titles from the review's current clustering (after decisions too)."""
        index = self.review.index
        if index is None:
            return
        ids = self.review.project.ids_for([self.left, self.right])
        header = Text()
        header.append(" JACCARD ", style="reverse bold")
        if self.jaccard is None and self.jaccard_unknown:
            header.append(" — (no stored pair; not computed for documents this long) ", style="dim")
        else:
            header.append(f" {self.jaccard:.3f} " if self.jaccard is not None else " …  ", style="bold")
        if self.jaccard_computed:
            header.append("(below the scan's floor, computed now) ", style="dim")
        header.append(f" threshold {index.threshold:.2f} · {index.policy}", style="dim")
        if self.normalized:
            header.append(" · case and spacing ignored (c)", style="dim")
        if self.aligned:
            view = self.query_one("#aligned-doc", AlignedDiffView)
            if view.result is not None:
                changes = view.change_count
                at = view.current_change()
                header.append((f" · change {at}/{changes} ([ ])" if at else
                               f" · {changes} change{'s' if changes != 1 else ''} ([ ] go through them)")
                              if changes else " · no changed lines", style="dim")
        members = self.members()
        pos = np.flatnonzero(members == self.right)
        if len(pos):
            header.append(f" · member {int(pos[0]) + 1}/{len(members)} (< >)", style="dim")
        header.append("\n")
        header.append("deleted ", style=self._style("delete"))
        header.append(" ")
        header.append("inserted", style=self._style("insert"))
        header.append(" ")
        header.append("changed", style=self._style("change"))
        header.append(" ")
        header.append("chars", style=self._style("char"))
        notice = pair_notice(*self.shown, names=("top", "bottom") if self.has_class("-stacked") and not self.aligned
                             else ("left", "right"))
        if notice:
            header.append("\n")
            header.append(" LONG ", style="reverse bold")
            header.append(" " + notice, style="italic")
        self.query_one("#pair-header", Static).update(header)
        for side, o, doc_id in (("left", self.left, ids[0]), ("right", self.right, ids[1])):
            status, style = STATUS[int(index.clustering.reason[o])]
            t = Text()
            stacked = self.has_class("-stacked") and not self.aligned
            t.append(f"{({'left': 'top', 'right': 'bottom'}[side] if stacked else side)}: ",
                     style="dim")
            t.append(literal_line(doc_id, 80), style="bold")
            t.append(f"  {status}", style=style)
            t.append(f" · {why(index, o, int(index.clustering.cluster[o]))}", style="italic dim")
            self.query_one(f"#{side}-title", Static).update(t)

    def _style(self, kind: str):
        return self.query_one("#left-doc", DocView).get_component_rich_style(f"docview--{kind}", partial=True)

    # -- actions -------------------------------------------------------------------------
    def action_close(self) -> None:
        self.dismiss()

    def action_toggle_layout(self) -> None:
        if self.aligned:
            self.notify("Aligned lines are always side by side: l shows the text flowing, then w stacks it",
                        timeout=4)
            return
        stacked = self.has_class("-stacked")
        self.layout_choice = "side" if stacked else "stacked"
        self._apply_layout()
        self.refresh_view()

    def action_toggle_aligned(self) -> None:
        self.aligned_choice = not self.aligned
        self.load_pair()

    def action_change(self, delta: int) -> None:
        view = self.query_one("#aligned-doc", AlignedDiffView)
        if not self.aligned or view.result is None:
            self.notify("Next/previous change needs the line-aligned view (l)", timeout=3)
            return
        if not view.next_change(delta):
            self.notify("No more changes " + ("below" if delta > 0 else "above"), timeout=2)
        self.call_after_refresh(self.refresh_view)

    def action_toggle_fold(self) -> None:
        if self.aligned:
            self.query_one("#aligned-doc", AlignedDiffView).toggle_fold()

    def action_toggle_normalized(self) -> None:
        self.normalized = not self.normalized
        self.load_pair()

    def action_step(self, delta: int) -> None:
        members = self.members()
        if not len(members):
            return
        pos = np.flatnonzero(members == self.right)
        i = (int(pos[0]) + delta) % len(members) if len(pos) else 0
        self.review.model.select(int(members[i]))  # the keys act on the member shown on the right
        self.follow_cursor()

    def _decide(self, act) -> None:
        """A decision on the right-hand document; the model moves its cursor on (to the next
        member to review) and this view follows it."""
        self.review.model.select(self.right)
        act(self.right)
        self.follow_cursor()

    def action_keep(self) -> None:
        self._decide(self.review.keep)

    def action_remove(self) -> None:
        self._decide(self.review.remove)

    def action_not_duplicate(self) -> None:
        self._decide(self.review.separate)

    def on_review_changed(self, _message: ReviewChanged) -> None:
        self.follow_cursor()

    def index_changed(self) -> None:
        self.follow_cursor()

    def follow_cursor(self) -> None:
        """Show the document the review's cursor is on (against its kept document; the kept
        document itself against its closest member)."""
        model = self.review.model
        index = model.index
        if index is None or model.cursor.doc is None:
            return
        c = index.clustering
        right = int(model.cursor.doc)
        self.cluster_id = int(c.cluster[right])
        kept = model.kept_of(right)
        if kept == right:  # the kept one: shown on the left, against its closest member
            right = model.closest_member(kept)
        self.left, self.right = kept, right
        if (self.left, self.right) != self._key[:2]:
            self.load_pair()
        else:
            self.refresh_view()

    def action_undo(self) -> None:
        self.review.undo()
