"""The pair view: the kept document and a member, side by side (stacked when narrow), diffed.

A place to decide: the main screen's decision keys act on the right-hand document (through the
same review model and plans), the view moves on after each one as the main screen does, and
> < } { go to the next or previous member and cluster. A key that decides for a whole cluster
(a, N) asks first, with their count, when some members it would decide for were not shown here
(session.shown: the rule of every screen).
"""

from __future__ import annotations

import numpy as np
from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Static

from ...review.shown import ShownMembers
from ..actions import PAIR_ACTIONS
from ..diff import lines_of
from ..state import ReviewChanged
from ..text import first_fitting, literal_line, shorten_apart
from ..widgets.aligned import AlignedDiffView
from ..widgets.docview import DocView, compose_side_by_side
from ..widgets.footer import AppFooter
from ..widgets.pair_diff import PairDiff
from ..widgets.tables import STATUS, why
from ..window import PAIR_LINES, PAIR_WINDOW, Shown, pair_notice, windows
from .dialogs import AskScreen


class PairScreen(Screen):
    BINDINGS = [a.binding() for a in PAIR_ACTIONS]
    ACTIONS = PAIR_ACTIONS
    NARROW = 100

    def __init__(self, session, cluster_id: int, right: int) -> None:
        super().__init__()
        self.session = session
        self._start_visit(cluster_id, right)

    def reopen(self, cluster_id: int, right: int) -> None:
        """Show another pair in this screen, as a new one would (the main screen keeps one pair
        view installed: composing a new screen and its footer on each opening cost ~100 ms)."""
        self._start_visit(cluster_id, right)
        if self.is_mounted:
            self.query_one("#aligned-doc", AlignedDiffView).folded = True
            self._apply_layout()
            self.load_pair()

    def _start_visit(self, cluster_id: int, right: int) -> None:
        """What one opening of the pair view starts from (nothing of an earlier opening: what
        the reviewer saw then does not count as seen now)."""
        session = self.session
        session.intake.forget("pair")  # what an earlier opening drew is not on screen now
        self.cluster_id = cluster_id
        self.right = right
        self.left = session.kept_of(right)
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
        self._moved = False  # > < } { moved the cursor since the main screen's lists last followed it
        # the texts shown on the right in this opening (what an earlier one showed is not counted here)
        self.seen = ShownMembers(session.model, also=session.shown)
        # what is shown of each document: a window of a huge one (its first PAIR_WINDOW characters)
        self.shown: tuple[Shown, Shown] = (Shown("", 0), Shown("", 0))

    def compose(self) -> ComposeResult:
        yield Static("", id="pair-header")
        with PairDiff():
            yield from compose_side_by_side()
            yield AlignedDiffView(id="aligned-doc")
        yield AppFooter()

    def on_mount(self) -> None:
        left, right = self.query_one("#left-doc", DocView), self.query_one("#right-doc", DocView)
        self.watch(left, "scroll_y", lambda _: self._sync(left, right), init=False)
        self.watch(right, "scroll_y", lambda _: self._sync(right, left), init=False)
        self.load_pair()  # focuses the view the documents are shown in

    def on_resize(self) -> None:
        self._apply_layout()
        self.refresh_view()

    def _apply_layout(self) -> None:
        stacked = self.app.size.width < self.NARROW if self.layout_choice is None else self.layout_choice == "stacked"
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
        members = self.session.index.members(self.cluster_id)
        return members[members != self.left]

    ALIGN_MIN_LINES = 4  # documents with at least this many lines open line-aligned
    SYNC_CHARS = 4000  # both documents shorter than this together: diffed at once, not in a worker

    def load_pair(self) -> None:
        """Both documents (a window of a huge one: reading, wrapping and the diff are bounded by
        PAIR_WINDOW characters and PAIR_LINES lines, never by the document), the diff computed in
        a worker."""
        project = self.session.project
        self.shown = left, right = tuple(windows(project, [self.left, self.right], PAIR_WINDOW, PAIR_LINES))
        self.session.intake.showing("pair", self.right)
        self.seen.add(self.right)
        self.session.shown.add(self.left)  # (on screen too: the session's record, not this view's rule)
        left_text, right_text = left.text, right.text
        self.query_one("#pair-header", Static).set_class(left.cut or right.cut, "-cut")  # a line says so
        if self.aligned_choice is None:
            self.aligned = min(len(lines_of(left_text)), len(lines_of(right_text))) >= self.ALIGN_MIN_LINES
        else:
            self.aligned = self.aligned_choice
        self.set_class(self.aligned, "-aligned")
        (self.query_one("#aligned-doc") if self.aligned else self.query_one("#right-doc")).focus()
        self._key = (self.left, self.right, self.aligned, self.normalized)
        self.jaccard = self._stored_jaccard()
        self.jaccard_computed = False
        # Below the floor the Jaccard is computed here, of the whole texts: never of a window
        self.jaccard_unknown = self.jaccard is None and (left.cut or right.cut)
        k = int((project.scan_params() or {}).get("k", 5))
        k = k if self.jaccard is None and not self.jaccard_unknown else 0
        # short texts: the diff now (a few ms), shown with the documents in one repaint
        if not self.query_one(PairDiff).show(
            self._key,
            left,
            right,
            aligned=self.aligned,
            normalized=self.normalized,
            jaccard_k=k,
            sync_chars=self.SYNC_CHARS,
            then=self._diffed,
        ):
            self.refresh_view()

    def _stored_jaccard(self) -> float | None:
        a, b = (self.session.exact_root(o) for o in (self.left, self.right))
        if a == b:
            return 1.0
        return self.session.project.stored_jaccard(a, b)

    def _diffed(self, result) -> None:
        """The pair's differences are in its views (the Jaccard too, for a pair below the floor)."""
        if self.jaccard is None and result.jaccard is not None:
            self.jaccard = result.jaccard
            self.jaccard_computed = True
        self.refresh_view()

    def on_pair_diff_shown(self, message: PairDiff.Shown) -> None:
        """The right-hand document is on screen (the widget says so after the repaint that drew it)."""
        if message.key == self._key:
            self.session.intake.drawn("pair", self.right)

    def refresh_view(self) -> None:
        """Header and titles from the review's current clustering (after decisions too), each
        fitted to the width: shorter words before anything is cut, ids shortened in the middle."""
        index = self.session.index
        if index is None:
            return
        width = max(20, self.size.width - 2)  # the header's padding
        header = first_fitting([self._header_line(index, level) for level in (0, 1, 2)], width)
        header.append("\n")
        header.append("deleted ", style=self._style("delete"))
        header.append(" ")
        header.append("inserted", style=self._style("insert"))
        header.append(" ")
        header.append("changed", style=self._style("change"))
        header.append(" ")
        header.append("chars", style=self._style("char"))
        pos = index.position(self.cluster_id)
        if pos is not None:
            header.append(f"  · cluster {pos + 1:,}/{len(index.labels):,} ({{ }})", style="dim")
        notice = pair_notice(
            *self.shown,
            names=("top", "bottom") if self.has_class("-stacked") and not self.aligned else ("left", "right"),
        )
        if notice:
            header.append("\n")
            header.append(" LONG ", style="reverse bold")
            header.append(" " + notice, style="italic")
        self.query_one("#pair-header", Static).update(header)
        stacked = self.has_class("-stacked") and not self.aligned
        room = max(20, (self.size.width if stacked else self.size.width // 2) - 2)  # a title's padding
        ids = [literal_line(i) for i in self.session.project.ids_for([self.left, self.right])]
        for side, o, doc_id, other in (("left", self.left, ids[0], ids[1]), ("right", self.right, ids[1], ids[0])):
            name = {"left": "top", "right": "bottom"}[side] if stacked else side
            self.query_one(f"#{side}-title", Static).update(self._title(index, o, name, doc_id, other, room))

    def _header_line(self, index, level: int) -> Text:
        """The header's first line: the similarity, the view, the change and the member shown;
        level 1 and 2 in fewer words (for narrower screens)."""
        short = level >= 2
        header = Text()
        header.append(" JACCARD ", style="reverse bold")
        if self.jaccard is None and self.jaccard_unknown:
            header.append(
                " — (not computed: too long) "
                if short
                else " — (no stored pair; not computed for documents this long) ",
                style="dim",
            )
        else:
            header.append(f" {self.jaccard:.3f} " if self.jaccard is not None else " …  ", style="bold")
        if self.jaccard_computed:
            header.append("(computed) " if short else "(below the scan's floor, computed now) ", style="dim")
        header.append(
            f" ≥{index.threshold:.2f} {index.policy}"
            if level
            else f" threshold {index.threshold:.2f} · {index.policy}",
            style="dim",
        )
        if self.normalized:
            header.append(" · case ignored (c)" if short else " · case and spacing ignored (c)", style="dim")
        if self.aligned:
            view = self.query_one("#aligned-doc", AlignedDiffView)
            if view.result is not None:
                changes, at = view.change_count, view.current_change()
                if not changes:
                    header.append(" · no changed lines", style="dim")
                elif at:
                    header.append(f" · change {at}/{changes}" + ("" if short else " ([ ])"), style="dim")
                else:
                    header.append(
                        f" · {changes} change{'s' if changes != 1 else ''}"
                        + (" ([ ])" if level else " ([ ] go through them)"),
                        style="dim",
                    )
        members = self.members()
        pos = np.flatnonzero(members == self.right)
        if len(pos):
            header.append(f" · member {int(pos[0]) + 1}/{len(members)} (< >)", style="dim")
        return header

    @staticmethod
    def _title(index, o: int, name: str, doc_id: str, other: str, width: int) -> Text:
        """ "left: ID  STATUS · why" in `width` cells: the id whole when it fits, the reason
        dropped first (at 120x40 "right: man1…_alpha_…ncel.1  near · near duplicate (≥ 0.80)" cut
        the one thing that tells the pages apart to repeat the header), shortened where it differs
        from `other` when even that is too long."""
        status, style = STATUS[int(index.clustering.reason[o])]
        reason = f" · {why(index, o, int(index.clustering.cluster[o]))}"
        fixed = len(name) + 2 + 2 + len(status)
        if fixed + cell_len(doc_id) + len(reason) > width:
            reason = ""
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(f"{name}: ", style="dim")
        t.append(shorten_apart(doc_id, other, max(8, width - fixed - len(reason))), style="bold")
        t.append(f"  {status}", style=style)
        if reason:
            t.append(reason, style="italic dim")
        return t

    def _style(self, kind: str):
        return self.query_one("#left-doc", DocView).get_component_rich_style(f"docview--{kind}", partial=True)

    # -- actions -------------------------------------------------------------------------
    def action_close(self) -> None:
        doc = self.session.model.cursor.doc
        if self._moved and doc is not None and self.session.index is not None:
            self.session.show_document(doc)  # the main screen's lists on the document shown last
        self.dismiss()

    def action_toggle_layout(self) -> None:
        if self.aligned:
            self.notify("Aligned lines are always side by side: l shows the text flowing, then w stacks it", timeout=4)
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
            return
        self.refresh_view()

    def action_toggle_fold(self) -> None:
        if self.aligned:
            self.query_one("#aligned-doc", AlignedDiffView).toggle_fold()

    def action_toggle_normalized(self) -> None:
        self.normalized = not self.normalized
        self.load_pair()

    def action_step(self, delta: int) -> None:
        """The next or previous member of this cluster (wrapping round)."""
        members = self.members()
        if not len(members):
            return
        pos = np.flatnonzero(members == self.right)
        i = (int(pos[0]) + delta) % len(members) if len(pos) else 0
        self.session.model.select(int(members[i]))  # the keys act on the member shown on the right
        self._moved = True
        self.follow_cursor()

    def action_cluster(self, delta: int) -> None:
        """The next or previous cluster of the main screen's list: its first member to review."""
        index = self.session.index
        pos = index.position(self.cluster_id) if index is not None else None
        if pos is None:
            self.notify("This cluster is not in the list any more: esc goes back to it", timeout=3)
            return
        if not 0 <= pos + delta < len(index.labels):
            self.notify("This is the " + ("last" if delta > 0 else "first") + " cluster of the list", timeout=2)
            return
        self.session.model.select_cluster(int(index.labels[pos + delta]))
        self._moved = True
        self.follow_cursor()

    def _decide(self, act) -> bool:
        """A decision on the right-hand document (the one shown, whatever the cursor did in the
        meantime); the model moves its cursor on (to the next member to review) and this view
        follows it. A key typed before that document was drawn decides nothing."""
        if not self.session.intake.admit("pair", self.right):
            return False
        self.session.model.select(self.right)
        self._moved = False  # a decision puts the main screen's lists on the cursor
        act(self.right)
        self.follow_cursor()
        return True

    def action_keep(self) -> None:
        self._decide(self.session.keep)

    def action_remove(self) -> None:
        self._decide(self.session.remove)

    def action_not_duplicate(self) -> None:
        """Split the right-hand document off, then on to the next member of this cluster. Its exact
        copies leave the cluster with it: the model may put the cursor on one of them (to review
        in their new cluster), which would take the reviewer out of the cluster being reviewed."""
        model, root = self.session.model, self.session.exact_root
        split, cluster = self.right, model.members(self.cluster_id)
        if not self._decide(self.session.separate):
            return
        doc = model.cursor.doc
        if doc is None or doc == split or root(doc) != root(split):
            return
        copies = frozenset(m for m in cluster if root(m) == root(split))
        following = model.next_to_review(split, cluster, model.position, leaving=copies)
        if following is not None:
            # through the main screen's lists too: their cursor, put on the copy by the decision,
            # would otherwise select it again
            self.session.show_document(following)
            self.follow_cursor()

    def unseen(self) -> list[int]:
        """The cluster's members to review whose text was not shown here (an exact copy of the
        kept document, or of a document shown, counts as shown)."""
        return self.seen.unseen(self.cluster_id)

    def _decide_cluster(self, what: str, plan) -> None:
        """A decision for every member of the cluster: asked first when some were not shown here
        (the rule of every screen, session.shown)."""
        if not self.session.intake.admit("pair", self.right):
            return
        self.session.model.select(self.right)
        self._moved = False  # a decision puts the main screen's lists on the cursor
        self.session.decide_cluster(what, self.unseen(), plan, then=self.follow_cursor)

    def action_accept(self) -> None:
        cluster_id = self.cluster_id
        self._decide_cluster("Accept the cluster", lambda: self.session.model.plan_accept(cluster_id))

    def action_none_duplicates(self) -> None:
        cluster_id = self.cluster_id
        self._decide_cluster("Say none are duplicates", lambda: self.session.model.plan_none_duplicates(cluster_id))

    def action_note(self) -> None:
        o = self.right

        def done(value: str | None) -> None:
            if value:
                self.session.act(lambda: self.session.model.plan_note(value, o))

        doc_id = self.session.project.ids_for([o])[0]
        self.app.push_screen(AskScreen(f"Note on {literal_line(doc_id, 80)}", placeholder="why this decision?"), done)

    def on_review_changed(self, _message: ReviewChanged) -> None:
        self.follow_cursor()

    def index_changed(self) -> None:
        self.follow_cursor()

    def follow_cursor(self) -> None:
        """Show the document the review's cursor is on (against its kept document; the kept
        document itself against its closest member)."""
        model = self.session.model
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
        self.session.undo()

    def action_redo(self) -> None:
        self.session.act(self.session.model.plan_redo)
