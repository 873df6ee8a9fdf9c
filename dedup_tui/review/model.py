"""The review: what the reviewer sees and decides, with no user interface in it.

`Review` owns the view (threshold, policy, sort, filter; the keep rule is the project's), the
cluster list on screen (a ClusterIndex), the cursor (the cluster and the document the keys act
on), the queue (where the cursor goes after a decision) and the decisions with undo and redo.
Screens render it and send it intents; a script can drive it the same way (see the README's
"Use from Python").

Every intent is split so that a front end never waits on SQLite or on a re-clustering:
`plan_*` runs on the owner's thread at once (it checks the intent, moves the cursor on and
returns a Plan); `Plan.write(project)` runs wherever the front end writes (the app: its writer
thread); `finish(plan, result)` back on the owner's thread; then `request()` / `compute()` /
`show()` build the next cluster list (the app: in a worker) and put the cursor back. The
synchronous methods (`keep`, `remove`, ...) do all of that in turn.

The queue's rules, held after every step (tests/review/test_review_model.py checks them):
- a cluster is decided when each member the clustering does not keep is decided (keep,
  remove, split off) or when it was accepted as a whole;
- auto-advance goes to the next undecided member, in member order, then to the next cluster in
  list order with one, wrapping around; it never skips one and never lands on a kept document;
- a decision never re-orders the list: a cluster stays where it was listed (also when the
  filter would now drop it) until the reviewer re-sorts, re-filters or moves the threshold;
- undo puts the cursor back where the undone decision was made; redo on the document it names;
- the view and the cursor are stored in the project and restored when it is opened again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from ..engine.curate import decisions, keep_rules
from ..engine.curate.decisions import Decision, Overrides, default_author
from ..engine.curate.keep_rules import cluster_with_decisions
from ..engine.display import literal_line
from ..engine.errors import DedupError
from ..engine.graph import clustering as graph_clustering
from ..engine.graph.clustering import EXACT, KEPT
from ..engine.graph.pairs import POLICIES, PairGraph, Policy
from ..engine.progress import Control
from ..engine.store import Project
from ..engine.store import reviewer as reviewer_tables
from .index import FILTERS, SORTS, ClusterIndex, Listing, Sort, build_index, parse_filter

DEFAULT_THRESHOLD = 0.8
MAX_ID_WIDENING = 400  # cells: any pane is narrower

# What a Plan does: a decision (keep, remove, not a duplicate, accept) or one of the others
PlanKind = Literal["decision", "split", "note", "undo", "redo", "keep_rule"]
# The kinds of decisions.KINDS (the decisions table's kind column) the review records
DecisionKind = Literal["keep", "remove", "not_duplicate", "accept", "note", "keep_rule"]
# A decision to record: (kind, doc id, other doc id, value), as decisions.record_many takes them
DecisionRow = tuple[str, str, str | None, str | None]  # (kind, doc_id, other_id, value)


class ReviewError(DedupError):
    """An intent that cannot be carried out as asked (the message says why, for the reviewer)."""


class NeedsConfirmation(ReviewError):
    """An intent that must be confirmed first (e.g. removing a kept document): repeat it with
    confirmed=True."""


@dataclass(frozen=True)
class View:
    threshold: float = DEFAULT_THRESHOLD
    policy: Policy = "components"
    sort: Sort = "size"
    filter: str = "all"  # see Listing.filter
    id_widening: int = 0  # cells the reviewer added to the id columns (negative: took from them)

    @property
    def listing(self) -> Listing:
        """How the ClusterIndex lists the clusters (its sort and filter)."""
        return Listing(self.sort, self.filter)


@dataclass(frozen=True)
class Cursor:
    doc: int | None = None  # the document the keys act on
    cluster_id: int | None = None  # its cluster (the kept document's ord) when it was placed
    auto: bool = False  # placed by auto-advance (not by the reviewer)
    # auto-advance: the members of the cluster the decision was made in, as they were listed
    # (after the list is rebuilt, those still to review come first)
    origin: tuple = ()


@dataclass
class Plan:
    """An intent checked and ready to write. `write` may run on another thread (with its own
    connection); `finish` on the owner's thread returns what to tell the reviewer."""

    what: str
    write: Callable[[Project], Any]
    kind: PlanKind = "decision"
    cursor_before: Cursor | None = None
    seq: int = 0
    message: str = ""  # set by finish
    shown_in_row: bool = False  # one document's keep or removal: its row in the list shows it at once
    list_shown: Any = None  # an undo shown at once: the list it replaced (back on screen if not saved)
    placed: bool = False  # a redo that put the cursor where its decision did (finish leaves it there)
    # the decisions as the project will read them back once this plan is saved, when that is
    # known exactly: the list it leads to can then be worked out before the write is done
    overrides_after: Overrides | None = None


@dataclass(frozen=True)
class Request:
    """What the next cluster list is built from (captured on the owner's thread)."""

    view: View
    previous: ClusterIndex | None  # keep this list's order (None: the view's own order)
    written: int  # plans written before it


@dataclass
class Match:
    """A search hit: where the document is at the current view."""

    doc: int
    doc_id: str
    cluster_id: int | None  # its cluster when listed (None otherwise)
    status: str  # for people: "cluster of X, 3 members", "hidden by the current filter", ...


class Review:
    def __init__(
        self, project: Project, graph: PairGraph | None = None, *, author: str | None = None, floor: float | None = None
    ) -> None:
        self.project = project  # the owner thread's connection: reads only
        self.graph = graph
        self.author = author or default_author()
        self.floor = float((project.scan_params() or {}).get("floor", 0.0)) if floor is None else floor
        self.view = View()
        self.index: ClusterIndex | None = None
        self.cursor = Cursor()
        self._saved_doc: int | None = None  # the cursor stored in the project, until the list is shown
        self._seq = 0  # plans made
        self._written = 0  # plans whose write finished (in order)
        self._shown_written = 0  # plans the list on screen holds (it was built after their write)
        self._pending: dict[int, int] = {}  # doc -> seq of the plan deciding it (not in the list yet)
        # keep decisions not in the list yet: the document kept, and the kept one it demotes to a
        # member (doc -> (seq, the document kept instead)), so that fast keys see them as they will be
        self._pending_keep: dict[int, int] = {}
        self._pending_remove: dict[int, int] = {}  # removals not in the list yet (doc -> seq)
        self._demoted: dict[int, tuple[int, int]] = {}
        self._cursor_of: dict[int, Cursor | None] = {}  # decision id -> the cursor when it was made
        # The list as it was before each of the last few decisions (by the newest decision id of
        # the step), when that list held every earlier decision: undoing that step re-clusters to
        # exactly that list, so an undo shows it at once. (plan seq -> list, until it is saved)
        self._list_before_plan: dict[int, tuple[ClusterIndex, Any]] = {}
        self._list_before: dict[int, tuple[ClusterIndex, Any]] = {}
        self._list_after: dict[int, tuple[ClusterIndex, Any]] = {}  # decision id -> the list undone from (for redo)
        self.restore_view()

    # -- opening and the stored view --------------------------------------------------------------
    @classmethod
    def open(cls, path, author: str | None = None) -> Review:
        """A review of a scanned project, its list built (synchronously)."""
        from ..engine.store.scans import load_graph

        project = Project(path)
        review = cls(project, load_graph(project), author=author)
        review.refresh(keep_order=False)
        return review

    def close(self) -> None:
        self.project.close()

    def restore_view(self) -> None:
        """The view and the cursor stored in the project (by the last review)."""
        try:
            state = json.loads(self.project.get_meta("ui_state") or "{}")
        except ValueError:
            state = {}
        view = View()
        try:
            threshold = min(max(float(state.get("threshold", view.threshold)), self.floor), 1.0)
        except (TypeError, ValueError):
            threshold = view.threshold
        policy = state.get("policy") if state.get("policy") in POLICIES else view.policy
        sort = state.get("sort") if state.get("sort") in SORTS else view.sort
        try:
            flt = parse_filter(str(state.get("filter", "all")))
        except ValueError:
            flt = "all"
        widening = state.get("id_widening", 0)
        widening = min(max(widening, -MAX_ID_WIDENING), MAX_ID_WIDENING) if type(widening) is int else 0
        self.view = View(round(threshold, 4), policy, sort, flt, widening)
        doc = state.get("doc")
        self._saved_doc = doc if isinstance(doc, int) and 0 <= doc < self.project.next_ord() else None

    def view_state(self) -> str:
        """The view and the cursor, as stored in the project's meta (ui_state)."""
        v = self.view
        state = {"threshold": v.threshold, "policy": v.policy, "sort": v.sort, "filter": v.filter}
        if v.id_widening:
            state["id_widening"] = v.id_widening
        if self.cursor.doc is not None:
            state["doc"] = int(self.cursor.doc)
        return json.dumps(state)

    def save_view(self, project: Project | None = None) -> None:
        (project or self.project).set_meta(ui_state=self.view_state())

    # -- building the list ------------------------------------------------------------------------
    def request(self, keep_order: bool = True) -> Request:
        previous = self.index if keep_order and self.index is not None and self.shows_view(self.index) else None
        return Request(self.view, previous, self._written)

    @property
    def built(self) -> ClusterIndex:
        """The cluster list, for what runs once refresh() has built one."""
        assert self.index is not None, "no cluster list yet: refresh() builds it"
        return self.index

    def shows_view(self, index: ClusterIndex) -> bool:
        """Whether `index` is a list of the current view (threshold, policy, sort and filter)."""
        v = self.view
        return (index.threshold, index.policy, index.listing) == (v.threshold, v.policy, v.listing)

    def compute(
        self,
        project: Project,
        request: Request,
        graph: PairGraph | None = None,
        overrides: Overrides | None = None,
        control: Control | None = None,
    ) -> ClusterIndex:
        """The cluster list for `request` (any thread, with that thread's connection). control:
        checked between the steps (Cancelled: work ahead of the reviewer gives way)."""
        graph = graph if graph is not None else self.graph
        assert graph is not None  # (a scanned project's review has its pair graph)
        overrides = overrides if overrides is not None else Overrides.load(project)
        index = self.after_decisions(project, request, graph, overrides)
        if index is not None:
            return index
        v = request.view
        clustering = cluster_with_decisions(project, graph, v.threshold, v.policy, overrides=overrides, control=control)
        index = build_index(graph, clustering, overrides, v.listing, control)
        return index.keeping_order_of(request.previous)

    @staticmethod
    def after_decisions(
        project: Project, request: Request, graph: PairGraph, overrides: Overrides
    ) -> ClusterIndex | None:
        """The list `request` keeps the order of, with only the clusters that decisions made
        since it was built changed (keep and remove decisions move no document to another
        cluster: at a million documents this is a few ms instead of a re-clustering of ~60).
        None when only a re-clustering gives it: another view, scan, keep rule or split."""
        previous, v = request.previous, request.view
        if (
            previous is None
            or previous.graph is not graph
            or (previous.threshold, previous.policy, previous.listing) != (v.threshold, v.policy, v.listing)
            or previous.clustering.kept_by != keep_rules.keep_rule(project)
        ):
            return None
        clustering = decisions.reapply_overrides(graph, previous.clustering, previous.overrides, overrides)
        if clustering is None:
            return None
        return previous.with_decisions(
            clustering, overrides, decisions.changed_documents(previous.overrides, overrides)
        )

    def show(self, index: ClusterIndex, request: Request | None = None) -> None:
        """Put a newly built list on screen and the cursor where it belongs in it."""
        old, self.index = self.index, index
        self._shown_written = request.written if request is not None else self._seq
        if request is not None:  # the decisions written before it are in the list now
            self._forget_pending(lambda seq: seq <= request.written)
        if self._saved_doc is not None:
            doc, self._saved_doc = self._saved_doc, None
            if self._listed_cluster(doc) is not None:
                self.cursor = Cursor(doc, self._listed_cluster(doc))
                return
        self._settle_cursor(old)

    def refresh(self, keep_order: bool = True) -> None:
        """Build the list now, on this thread (scripts, tests)."""
        request = self.request(keep_order)
        self.show(self.compute(self.project, request), request)

    # -- reading ------------------------------------------------------------------------------------
    def kept_of(self, o: int) -> int:
        """The document o's cluster keeps (o itself when it is kept): its keeper, the one the
        removed log names, also for an exact copy of another member (linked via its first copy);
        decisions being saved included."""
        if o in self._demoted:
            return self._demoted[o][1]
        if o in self._pending_keep:
            return o
        c = self.built.clustering
        if int(c.reason[o]) == KEPT:
            return int(o)
        return int(c.cluster[o])

    def root(self, o: int) -> int:
        """The first copy of this document's text (itself if it is the first)."""
        first = int(self.graph.exact_of[o]) if self.graph is not None else self.project.exact_of(o)
        return first if first >= 0 else int(o)

    def is_kept(self, o: int) -> bool:
        """Kept in its cluster (keep decisions being saved included)."""
        if o in self._pending_keep:
            return True
        return int(self.built.clustering.reason[o]) == KEPT and o not in self._demoted

    def is_reference(self, o: int) -> bool:
        """From a reference source: matched, never removed, never exported."""
        return self.index is not None and self.index.clustering.is_reference(o)

    def is_decided(self, o: int) -> bool:
        """A decision settles this document (or one is being saved)."""
        return o in self._pending or (self.index is not None and o in self.index.overrides.decided)

    @property
    def has_pending(self) -> bool:
        """Decisions made that the shown list does not hold yet (being saved, or re-clustered)."""
        return bool(self._pending)

    def is_being_removed(self, o: int) -> bool:
        """A removal of `o` is being saved: the list shows it removed (as it will be) at once."""
        return o in self._pending_remove

    def to_review(self, o: int) -> bool:
        """A member the reviewer still has to judge: not kept, no decision yet."""
        return not self.is_kept(o) and not self.is_decided(o)

    def members(self, cluster_id: int | None = None) -> list[int]:
        cluster_id = self.cursor.cluster_id if cluster_id is None else cluster_id
        return [] if cluster_id is None or self.index is None else [int(m) for m in self.index.members(cluster_id)]

    def progress(self, cluster_id: int) -> tuple[int, int]:
        """(members decided, members to review) of a listed cluster, decisions being saved included."""
        pos = self.built.position(cluster_id)
        if pos is None:
            return 0, 0
        reviewed, to_review = self.built.reviewed, self.built.to_review
        assert reviewed is not None and to_review is not None  # (a built list's)
        done, total = int(reviewed[pos]), int(to_review[pos])
        if self._pending:  # (the few decisions being saved, not the cluster's members: a page asks for 100 clusters)
            cluster = self.built.clustering.cluster
            done += sum(
                1
                for m in self._pending
                if int(cluster[m]) == cluster_id and not self.is_kept(m) and m not in self.built.overrides.decided
            )
        return min(done, total), total

    def newly_decided_clusters(self) -> int:
        """Listed clusters that the decisions being saved complete (the list counts them once
        it is rebuilt)."""
        if not self._pending or self.index is None:
            return 0
        cluster = self.index.clustering.cluster
        count = 0
        for cluster_id in {int(cluster[m]) for m in self._pending}:
            pos = self.index.position(cluster_id)
            if pos is not None and not self.index.decided[pos] and self.cluster_decided(cluster_id):
                count += 1
        return count

    def cluster_decided(self, cluster_id: int) -> bool:
        done, total = self.progress(cluster_id)
        return done >= total

    def closest_member(self, kept: int) -> int:
        """The member of `kept`'s cluster most similar to it (`kept` itself when it is alone):
        what the kept document is shown beside."""
        c = self.built.clustering
        others = [m for m in self.members(int(c.cluster[kept])) if m != kept]
        return max(others, key=lambda m: np.nan_to_num(c.similarity[m], nan=-1.0)) if others else int(kept)

    def _listed_cluster(self, o: int) -> int | None:
        cluster_id = int(self.built.clustering.cluster[o])
        return cluster_id if self.built.position(cluster_id) is not None else None

    @property
    def position(self) -> int | None:
        """The cursor's cluster's place in the list."""
        if self.index is None or self.cursor.doc is None:
            return None
        return self.index.position(int(self.index.clustering.cluster[self.cursor.doc]))

    # -- the cursor and the queue ------------------------------------------------------------------
    def select(self, doc: int) -> None:
        """The reviewer put the cursor on `doc` (a member of a listed cluster)."""
        self.cursor = Cursor(int(doc), self._listed_cluster(int(doc)))

    def select_cluster(self, cluster_id: int) -> None:
        """The reviewer chose a cluster: the cursor goes to its first member to review (else its
        first member the clustering does not keep, else its kept document)."""
        members = self.members(cluster_id)
        if not members:
            return
        doc = next((m for m in members if self.to_review(m)), None)
        if doc is None:
            doc = next((m for m in members if not self.is_kept(m)), members[0])
        self.cursor = Cursor(doc, int(cluster_id))

    def select_position(self, pos: int) -> None:
        if self.index is not None and len(self.index.labels):
            self.select_cluster(int(self.index.labels[min(max(pos, 0), len(self.index.labels) - 1)]))

    def next_to_review(
        self,
        after: int | None = None,
        members: list[int] | None = None,
        pos: int | None = None,
        also: frozenset = frozenset(),
        leaving: frozenset = frozenset(),
    ) -> int | None:
        """The next member to review: after `after` in `members` (the cluster as it was listed;
        wrapping round to its first), else the first of the next cluster with one, in list order
        from `pos`, wrapping round. None when every listed member is decided."""
        if self.index is None:
            return None
        if members:
            start = members.index(after) + 1 if after in members else 0
            for m in members[start:] + members[:start]:
                if m not in leaving and self._listed_cluster(m) is not None and (self.to_review(m) or m in also):
                    return m
        index = self.index
        count = len(index.labels)
        if not count:
            return None
        pos = 0 if pos is None else pos
        assert index.reviewed is not None and index.to_review is not None  # (a built list's)
        open_ = np.flatnonzero(index.reviewed < index.to_review)
        order = np.concatenate([open_[open_ > pos], open_[open_ <= pos]])
        for p in order.tolist():
            hit = next((m for m in index.members(int(index.labels[p])).tolist() if self.to_review(m)), None)
            if hit is not None:
                return int(hit)
        return None

    def advance(self, also: frozenset = frozenset(), leaving: frozenset = frozenset()) -> bool:
        """Move the cursor to the next member to review (or of `also`: documents a decision being
        saved makes members to review); False (the cursor stays) when none is left."""
        members = self.members(self.cursor.cluster_id)
        nxt = self.next_to_review(self.cursor.doc, members, self.position, also, leaving)
        if nxt is None:
            return False
        self.cursor = Cursor(nxt, self._listed_cluster(nxt), auto=True, origin=tuple(members))
        return True

    def _settle_cursor(self, old: ClusterIndex | None = None) -> None:
        """After a new list: the cursor stays on its document if it is still listed (an
        auto-placed cursor that ended on a kept or decided document moves on); otherwise it goes
        on from where its cluster was in the list before (`old`): the members of that cluster
        still listed first, then the clusters that followed it."""
        index, cur = self.built, self.cursor
        if not len(index.labels):
            self.cursor = Cursor()
            return
        if cur.doc is not None and cur.doc < len(index.clustering.cluster):
            cluster_id = self._listed_cluster(cur.doc)
            if cluster_id is not None:
                self.cursor = replace(cur, cluster_id=cluster_id)
                if cur.auto and not self.to_review(cur.doc):
                    # on among the members of the cluster the decision was made in, then from its place
                    origin = list(cur.origin) or self.members(cluster_id)
                    start = (
                        self._where_it_was(old, int(old.clustering.cluster[origin[0]]))
                        if old is not None and cur.origin
                        else None
                    )
                    nxt = self.next_to_review(
                        cur.doc, origin, index.position(cluster_id) if start is None else start - 1
                    )
                    if nxt is not None:
                        self.cursor = Cursor(nxt, self._listed_cluster(nxt), auto=True, origin=cur.origin)
                return
            start = self._where_it_was(old, cur.cluster_id)
            if start is not None:
                members = list(cur.origin) or (
                    [int(m) for m in old.members(cur.cluster_id)]
                    if old is not None and cur.cluster_id is not None
                    else None
                )
                nxt = self.next_to_review(None, members, start - 1)
                if nxt is not None:
                    self.cursor = Cursor(nxt, self._listed_cluster(nxt), auto=True)
                    return
        self.select_position(0)

    def _where_it_was(self, old: ClusterIndex | None, cluster_id: int | None) -> int | None:
        """The place in this list of the first cluster, from `cluster_id`'s place in the `old` list
        on, that is still listed (its documents may be listed under another cluster id now)."""
        if cluster_id is None:
            return None
        if old is None or len(old.clustering.cluster) != len(self.built.clustering.cluster):
            return self.built.position(cluster_id)
        at = old.position(cluster_id)
        if at is None:
            return self.built.position(cluster_id)
        following = np.concatenate([old.members(cluster_id), old.labels[at + 1 :], old.labels[:at]])
        places = self.built.places()[self.built.clustering.cluster[following]]
        places = places[places >= 0]
        return int(places[0]) if len(places) else None

    # -- view changes (the list is rebuilt: `request(keep_order=False)`) -----------------------------
    def set_threshold(self, value: float) -> bool:
        """False when the value is the current one (or the floor stops it)."""
        value = round(min(max(float(value), self.floor), 1.0), 4)
        if value == self.view.threshold:
            return False
        self.view = replace(self.view, threshold=value)
        return True

    def set_policy(self, policy: Policy) -> bool:
        if policy not in POLICIES:
            raise ReviewError(f"unknown policy {policy!r} (choose from {', '.join(POLICIES)})")
        if policy == self.view.policy:
            return False
        self.view = replace(self.view, policy=policy)
        return True

    def toggle_policy(self) -> None:
        self.set_policy(POLICIES[(POLICIES.index(self.view.policy) + 1) % len(POLICIES)])

    def set_sort(self, sort: Sort) -> None:
        """Re-sort the list now (no re-clustering); the cursor goes to its top."""
        if sort not in SORTS:
            raise ReviewError(f"unknown sort {sort!r} (choose from {', '.join(SORTS)})")
        self.view = replace(self.view, sort=sort)
        self._relist()

    def cycle_sort(self) -> str:
        keys = list(SORTS)
        self.set_sort(keys[(keys.index(self.view.sort) + 1) % len(keys)])
        return self.view.sort

    def set_id_widening(self, cells: int) -> None:
        """Widen (or narrow) the id columns by this many cells: a view setting, stored with it."""
        self.view = replace(self.view, id_widening=min(max(int(cells), -MAX_ID_WIDENING), MAX_ID_WIDENING))

    def set_filter(self, flt: str) -> None:
        """Filter the list now (a typed filter is parsed: ValueError says what is wrong)."""
        self.view = replace(self.view, filter=parse_filter(flt))
        self._relist()

    def cycle_filter(self) -> str:
        has_references = (
            self.index is not None
            and self.index.clustering.reference is not None
            and bool(self.index.clustering.reference.any())
        )
        has_new = self.index is not None and self.index.clustering.new_from is not None
        keys = [k for k in FILTERS if (k != "reference" or has_references) and (k != "new" or has_new)]
        flt = self.view.filter
        self.set_filter(keys[(keys.index(flt) + 1) % len(keys)] if flt in keys else "all")
        return self.view.filter

    def _relist(self) -> None:
        if (
            self.index is not None
            and self.index.can_show(self.view.listing)
            and (self.index.threshold, self.index.policy) == (self.view.threshold, self.view.policy)
        ):
            self.index = self.index.with_listing(self.view.listing)
            if len(self.index.labels):
                self.select_position(0)
            else:
                self.cursor = Cursor()

    def needs_rebuild(self) -> bool:
        """The list on screen is not of the current view (another threshold, policy or filter)."""
        return self.index is None or not self.shows_view(self.index)

    # -- decisions --------------------------------------------------------------------------------
    def _plan(
        self, what: str, write: Callable[[Project], Any], kind: PlanKind = "decision", decided: Sequence[int] = ()
    ) -> Plan:
        self._seq += 1
        plan = Plan(what, write, kind, self.cursor, self._seq)
        for d in decided:
            self._pending[int(d)] = self._seq
        return plan

    def _target(self, o: int | None) -> int:
        o = self.cursor.doc if o is None else int(o)
        if o is None or self.index is None:
            raise ReviewError("Select a document first")
        return o

    def _ids(self, ords) -> list[str]:
        return self.project.ids_for([int(o) for o in ords])

    def _decision(
        self,
        what: str,
        rows: Sequence[DecisionRow],
        decided: Sequence[int],
        advance: bool = True,
        also: frozenset = frozenset(),
        leaving: frozenset = frozenset(),
    ) -> Plan:
        v, author = self.view, self.author
        state = self.view_state()

        def write(project: Project) -> list[Decision]:
            made = decisions.record_many(project, rows, v.threshold, v.policy, author=author)
            project.set_meta(ui_state=state)  # `export` defaults to the view the decisions were made in
            return made

        whole = self._list_holds_every_plan
        plan = self._plan(what, write, decided=decided)
        if whole:
            self._list_before_plan[plan.seq] = (self.built, self.graph)
        if advance:
            self.advance(also, leaving)
        return plan

    def plan_keep(self, o: int | None = None) -> Plan:
        o = self._target(o)
        doc_id = self._ids([o])[0]
        # keeping a member makes the cluster's kept document one of its members to review
        # (unless a reviewer chose to keep it, or decided it)
        kept = self.kept_of(o)
        also = (
            frozenset({kept})
            if kept != o
            and kept not in self.built.overrides.keep
            and kept not in self._pending_keep
            and not self.is_decided(kept)
            else frozenset()
        )
        after = self._overrides_after_keep(o)
        plan = self._decision(f"keep {literal_line(doc_id, 60)}", [("keep", doc_id, None, None)], [o], also=also)
        plan.overrides_after = after
        self._pending_keep[o] = plan.seq
        self._pending_remove.pop(o, None)  # the later decision is the one the list will show
        plan.shown_in_row = True
        if also:
            self._demoted[kept] = (plan.seq, o)
        return plan

    def _overrides_after_keep(self, o: int) -> Overrides | None:
        """The decisions as the project will read them back once a keep of `o` is saved, when
        that is known exactly: the list on screen holds every decision made (none is being
        saved). A keep changes its cluster's kept document and every member's similarity to
        it: with these, the list it leads to is worked out while it is written
        (Review.after_decisions)."""
        if not self._list_holds_every_plan or self._pending:
            return None
        return self.built.overrides.after_keep(o)

    def is_saved(self, plan: Plan) -> bool:
        """The plan's write is over (saved, or failed and abandoned)."""
        return self._written >= plan.seq

    def plan_remove(self, o: int | None = None, confirmed: bool = False) -> Plan:
        o = self._target(o)
        doc_id = self._ids([o])[0]
        if self.is_reference(o):
            raise ReviewError(
                f"{literal_line(doc_id, 60)} is a reference document: reference documents are matched but never removed"
            )
        if self.is_kept(o):
            if not confirmed:
                raise NeedsConfirmation(
                    f"{literal_line(doc_id, 60)} is the document its cluster keeps: remove it "
                    f"anyway (its duplicates then keep another)?"
                )
            return self._decision(
                f"remove {literal_line(doc_id, 60)} (a kept document)", [("remove", doc_id, None, None)], [o]
            )
        judged_against = self._ids([self.kept_of(o)])[0]  # pins the kept one: no keep rule moves it
        plan = self._decision(f"remove {literal_line(doc_id, 60)}", [("remove", doc_id, judged_against, None)], [o])
        self._pending_remove[o] = plan.seq  # (a member: removing it changes no other row)
        plan.shown_in_row = True
        return plan

    def links_to_cut(self, o: int) -> list[tuple[int, int, float]]:
        """The stored pairs at or above the threshold that hold `o` (its text's first copy) in
        its cluster: (its first copy, the other member's first copy, similarity)."""
        cluster_id = int(self.built.clustering.cluster[o])
        mine = self.root(o)
        others = sorted({self.root(m) for m in self.members(cluster_id)} - {mine})
        if not others or self.graph is None:
            return []
        other_roots = np.array(others, dtype=np.int64)
        x, y = np.minimum(other_roots, mine), np.maximum(other_roots, mine)
        at, found = self.graph.pair_index(x, y)
        sims = np.where(found, self.graph.jaccard[np.where(found, at, 0)], np.nan)
        split = self.built.overrides.split_pairs
        return [
            (mine, int(b), float(s))
            for b, s, xx, yy in zip(other_roots.tolist(), sims.tolist(), x.tolist(), y.tolist())
            if s >= self.view.threshold and (xx, yy) not in split
        ]

    def plan_separate(self, o: int | None = None) -> Plan:
        """Not a duplicate: split `o` (with its exact copies) off its cluster at this threshold,
        cutting every link that holds it there."""
        o = self._target(o)
        if self.is_kept(o):
            raise ReviewError(
                "This is the kept document: select a member to split it off "
                "(N says none of the cluster's documents are duplicates)"
            )
        if self.root(o) == self.root(self.kept_of(o)):
            raise ReviewError("These have the same text: exact copies cannot be split (use k or x)")
        links = self.links_to_cut(o)
        if not links:
            raise ReviewError("No link at this threshold holds this document in its cluster")
        doc_id = self._ids([o])[0]
        other_ids = self._ids([b for _a, b, _s in links])
        rows = [("not_duplicate", doc_id, other, None) for other in other_ids]
        named = ", ".join(f"{literal_line(i, 30)} {s:.2f}" for i, (_a, _b, s) in list(zip(other_ids, links))[:3])
        more = f" and {len(links) - 3} more" if len(links) > 3 else ""
        # its exact copies leave the cluster with it, their first copy kept there: not one to go to
        leaving = frozenset({self.root(o)})
        return self._decision(
            f"split off {literal_line(doc_id, 40)}: cut {len(links)} link"
            f"{'s' if len(links) != 1 else ''} ({named}{more})",
            rows,
            [o],
            leaving=leaving,
        )

    def plan_none_duplicates(self, cluster_id: int | None = None) -> Plan:
        """None of the cluster's documents are duplicates of each other: every link between
        different texts in it is cut (exact copies stay together)."""
        cluster_id = self.cursor.cluster_id if cluster_id is None else int(cluster_id)
        if cluster_id is None or self.index is None:
            raise ReviewError("Select a cluster first")
        members = self.members(cluster_id)
        roots = sorted({self.root(m) for m in members})
        if len(roots) < 2:
            raise ReviewError("Every document of this cluster has the same text: exact copies cannot be split")
        r = np.array(roots, dtype=np.int64)
        x, y = np.meshgrid(r, r, indexing="ij")
        upper = x < y
        x, y = x[upper], y[upper]
        graph = self.graph
        assert graph is not None  # (a scanned project's review has its pair graph)
        at, found = graph.pair_index(x, y)
        sims = np.where(found, graph.jaccard[np.where(found, at, 0)], np.nan)
        keep = sims >= self.view.threshold
        pairs = list(zip(x[keep].tolist(), y[keep].tolist()))
        if not pairs:
            raise ReviewError("No link at this threshold joins this cluster")
        # each text's first copy is named first in one row: every one of them counts as decided
        rows_by_doc: list[tuple[int, int]] = []
        unused = list(range(len(pairs)))
        for root in roots:
            i = next((i for i in unused if root in pairs[i]), None)
            a, b = pairs[i] if i is not None else next(p for p in pairs if root in p)
            rows_by_doc.append((root, b if a == root else a))
            if i is not None:
                unused.remove(i)
        rows_by_doc += [pairs[i] for i in unused]
        ids = dict(zip(roots, self._ids(roots)))
        rows = [("not_duplicate", ids[a], ids[b], None) for a, b in rows_by_doc]
        decided = [m for m in members if self.root(m) == m]
        return self._decision(
            f"none of these are duplicates: cut {len(pairs)} links in the cluster of "
            f"{literal_line(ids[cluster_id] if cluster_id in ids else self._ids([cluster_id])[0], 40)}",
            rows,
            decided,
        )

    def plan_accept(self, cluster_id: int | None = None) -> Plan:
        cluster_id = self.cursor.cluster_id if cluster_id is None else int(cluster_id)
        if cluster_id is None or self.index is None:
            raise ReviewError("Select a cluster first")
        members = self.members(cluster_id)
        ids = self._ids(members)
        kept = self._ids([cluster_id])[0]
        return self._decision(
            f"accept the cluster of {literal_line(kept, 40)}",
            [("accept", kept, None, json.dumps(ids, ensure_ascii=False))],
            members,
        )

    def bulk_candidates(self, at_least: float) -> tuple[list[int], int]:
        """Listed clusters with a member to review whose lowest similarity is at least `at_least`:
        their cluster ids and how many documents accepting them removes."""
        index = self.built
        assert index.reviewed is not None and index.to_review is not None  # (a built list's)
        picked = np.flatnonzero((index.reviewed < index.to_review) & (index.min_sim >= at_least - 1e-9))
        return [int(index.labels[p]) for p in picked], int(index.sizes[picked].sum()) - len(picked)

    def plan_bulk_accept(self, cluster_ids: list[int]) -> Plan:
        members = [self.members(cluster_id) for cluster_id in cluster_ids]
        ids = dict(zip(cluster_ids, self._ids(cluster_ids)))
        rows = [
            ("accept", ids[cluster_id], None, json.dumps(self._ids(ms), ensure_ascii=False))
            for cluster_id, ms in zip(cluster_ids, members)
        ]
        return self._decision(
            f"accept {len(cluster_ids):,} clusters",
            rows,
            [m for ms in members for m in ms],
            advance=self.cursor.cluster_id in set(cluster_ids),
        )

    def plan_split_chain(self, chain) -> Plan:
        """The tuning screen's split of a chained cluster (engine.curate.tune.Chain): its weakest links
        marked not a duplicate, in one undo step."""
        from ..engine.curate import tune

        v, author = self.view, self.author
        return self._plan(
            f"split the chained cluster of {literal_line(chain.label_id, 40)}",
            lambda project: tune.split_chain(project, chain, v.threshold, v.policy, author=author),
            kind="split",
        )

    def plan_note(self, value: str, o: int | None = None) -> Plan:
        o = self._target(o)
        v, author, doc_id = self.view, self.author, self._ids([o])[0]
        return self._plan(
            f"note on {literal_line(doc_id, 40)}",
            lambda project: [
                decisions.record(project, "note", doc_id, None, value, v.threshold, v.policy, author=author)
            ],
            kind="note",
        )

    LISTS_BEFORE_KEPT = 3  # lists kept for undo (each holds the clustering: ~30 MB at 1M documents)

    def plan_undo(self) -> Plan:
        return self._plan_switch("undo")

    def plan_redo(self) -> Plan:
        return self._plan_switch("redo")

    @property
    def _list_holds_every_plan(self) -> bool:
        """The list on screen was built after every plan made had been written."""
        return self.index is not None and self._shown_written == self._seq

    def _plan_switch(self, kind: Literal["undo", "redo"]) -> Plan:
        """An undo or a redo; shown at once when the list it leads to is kept (_show_at_once)."""
        undo = kind == "undo"
        whole = self._list_holds_every_plan  # (before this plan)
        plan = self._plan(f"the {kind}", decisions.undo if undo else decisions.redo, kind=kind)
        d = (decisions.next_undo if undo else decisions.next_redo)(self.project) if whole else None
        if d is None:
            return plan
        if undo:
            self._keep_list(self._list_after, d.id, (self.index, self.graph))  # what a redo gives back
        elif d.kind != "keep_rule":
            self._redo_as_decided(plan, d)
        self._show_at_once(plan, (self._list_before if undo else self._list_after).get(d.id), d)
        return plan

    def _redo_as_decided(self, plan: Plan, d: Decision) -> None:
        """A redo moves the cursor as its decision did: the documents it decides count as
        decided at once, and the cursor goes on from the one it names to the next member to
        review (never stays on the kept document of an accepted cluster)."""
        rows = (
            [d]
            if d.batch is None
            else [
                decisions.Decision(**r)
                for r in reviewer_tables.decision_rows(
                    self.project, "batch = ? AND undone = ?", [d.batch, reviewer_tables.UNDONE]
                )
            ]
        )
        ids = [x.doc_id for x in rows if decisions.decides_its_document(x)]
        if not ids:  # (a tuning label's split: it decides nothing, the cursor stays on it)
            return
        ids += [m for x in rows if x.kind == "accept" for m in json.loads(x.value or "[]")]
        ords = decisions.ords_for_ids(self.project, ids)
        for o in ords.values():
            self._pending[int(o)] = plan.seq
        named = ords.get(d.doc_id) if d.doc_id is not None else None
        if named is None or self._listed_cluster(int(named)) is None:
            return
        self.cursor = Cursor(int(named), self._listed_cluster(int(named)))
        self.advance()
        plan.placed = True

    def _show_at_once(self, plan: Plan, entry: tuple | None, d: Decision) -> None:
        """An undo or redo whose list is known (kept when the step was last on screen, for the same
        view, keep rule and scan): shown now, the re-clustering after the write gives it again."""
        if entry is None:
            return
        shown, graph = entry
        if (
            graph is not self.graph
            or not self.shows_view(shown)
            or shown.clustering.kept_by != self.built.clustering.kept_by
        ):
            return
        cursor = self._cursor_after(d, plan.kind) if not plan.placed else None  # (where finish() puts it)
        plan.list_shown = (self.index, plan.cursor_before if plan.placed else self.cursor, self._shown_written)
        self.index, self._shown_written = shown, plan.seq
        if plan.placed:
            self._settle_cursor(plan.list_shown[0])
        elif cursor is not None:
            self.cursor = cursor
            if cursor.cluster_id is None:
                self._settle_cursor(plan.list_shown[0])

    def _keep_list(self, lists: dict, decision_id: int, entry: tuple) -> None:
        lists[decision_id] = entry
        while len(lists) > self.LISTS_BEFORE_KEPT:
            del lists[next(iter(lists))]

    def plan_keep_rule(self, rule: str) -> Plan:
        """Which document a cluster keeps when no reviewer chose (never one a reviewer judged):
        one step of the undo history (u puts the previous rule back). A field rule on records
        without that field is refused when it is written."""
        rule = keep_rules.parse_keep_rule(rule)
        v, author = self.view, self.author

        def write(project: Project) -> tuple[str, Decision | None]:
            return rule, keep_rules.record_keep_rule(project, rule, v.threshold, v.policy, author=author)

        return self._plan("the keep rule", write, kind="keep_rule")

    def finish(self, plan: Plan, result: Any) -> str:
        """A plan's write is done (on the owner's thread): what to tell the reviewer. The list is
        then rebuilt in the same order (`request()`)."""
        self._written = max(self._written, plan.seq)
        before = self._list_before_plan.pop(plan.seq, None)
        if plan.kind == "decision":
            made = result or []
            for decision in made:
                self._cursor_of[decision.id] = plan.cursor_before
            if before is not None and made:  # (undo undoes the step of its newest decision)
                self._keep_list(self._list_before, made[-1].id, before)
            plan.message = f"Saved: {plan.what}"
        elif plan.kind == "split":
            plan.message = f"Saved: {plan.what}: {result} links marked not a duplicate (u undoes them in one step)"
        elif plan.kind == "note":
            plan.message = f"Saved: {result[0].describe()}"
            if self._shown_written == plan.seq - 1:  # a note changes no list: the one shown holds it
                self._shown_written = plan.seq
        elif plan.kind in ("undo", "redo"):
            d: Decision | None = result
            done = "Undone" if plan.kind == "undo" else "Redone"
            if d is None:
                plan.message = "Nothing to undo" if plan.kind == "undo" else "Nothing to redo"
            else:
                plan.message = f"{done}: {d.describe()}"
                if not plan.placed:
                    self._return_to(d, plan.kind)
        elif plan.kind == "keep_rule":
            rule, _made = result
            plan.message = f"Each cluster keeps {keep_rules.describe_keep_rule(rule)}; clusters you decided keep theirs"
        return plan.message

    def abandon(self, plan: Plan) -> None:
        """A plan's write failed (the project was busy): nothing it decided counts, and the
        cursor goes back where the plan was made."""
        self._forget_pending(lambda seq: seq == plan.seq)
        self._list_before_plan.pop(plan.seq, None)
        self._written = max(self._written, plan.seq)
        if plan.cursor_before is not None and (plan.kind == "decision" or plan.placed):
            self.cursor = plan.cursor_before
        if plan.list_shown is not None:  # an undo shown at once, not saved: the list it replaced
            self.index, self.cursor, self._shown_written = plan.list_shown

    def _forget_pending(self, gone: Callable[[int], bool]) -> None:
        """Drop what the plans whose seq is `gone` decided (in the list now, or never saved)."""
        self._pending = {d: s for d, s in self._pending.items() if not gone(s)}
        self._pending_keep = {d: s for d, s in self._pending_keep.items() if not gone(s)}
        self._pending_remove = {d: s for d, s in self._pending_remove.items() if not gone(s)}
        self._demoted = {d: v for d, v in self._demoted.items() if not gone(v[0])}

    def _return_to(self, d: Decision, kind: Literal["undo", "redo"]) -> None:
        cursor = self._cursor_after(d, kind)
        if cursor is not None:
            self.cursor = cursor

    def _cursor_after(self, d: Decision, kind: PlanKind) -> Cursor | None:
        """Undo: back where the decision was made. Redo (or an undo of a decision of an earlier
        session): from the document it names, on as after a decision (a redo: the next member
        to review, never the kept document); None: it is not in the project."""
        if d.kind == "keep_rule":  # about no document: the cursor stays where it is
            return None
        before = self._cursor_of.get(d.id) if kind == "undo" else None
        if before is not None and before.doc is not None:
            return Cursor(before.doc, before.cluster_id)
        about = decisions.ords_for_ids(self.project, [d.doc_id]).get(d.doc_id) if d.doc_id is not None else None
        if about is None:
            return None
        if kind == "redo" and self.index is not None and self._listed_cluster(int(about)) is not None:
            # (auto: once the list holds the redone decision, _settle_cursor moves on from it)
            cluster_id = self._listed_cluster(int(about))
            return Cursor(int(about), cluster_id, auto=True, origin=tuple(self.members(cluster_id)))
        return Cursor(int(about), None)

    def run(self, plan: Plan) -> str:
        """Write a plan here and now, rebuild the list (scripts, tests)."""
        result = plan.write(self.project)
        message = self.finish(plan, result)
        self.refresh(keep_order=True)
        return message

    # -- the same, synchronously ------------------------------------------------------------------
    def keep(self, o: int | None = None) -> str:
        return self.run(self.plan_keep(o))

    def remove(self, o: int | None = None, confirmed: bool = False) -> str:
        return self.run(self.plan_remove(o, confirmed))

    def separate(self, o: int | None = None) -> str:
        return self.run(self.plan_separate(o))

    def none_duplicates(self, cluster_id: int | None = None) -> str:
        return self.run(self.plan_none_duplicates(cluster_id))

    def accept(self, cluster_id: int | None = None) -> str:
        return self.run(self.plan_accept(cluster_id))

    def bulk_accept(self, at_least: float) -> str:
        cluster_ids, _removed = self.bulk_candidates(at_least)
        return self.run(self.plan_bulk_accept(cluster_ids)) if cluster_ids else "No cluster to accept"

    def note(self, value: str, o: int | None = None) -> str:
        return self.run(self.plan_note(value, o))

    def undo(self) -> str:
        return self.run(self.plan_undo())

    def redo(self) -> str:
        return self.run(self.plan_redo())

    def set_keep_rule(self, rule: str) -> str:
        return self.run(self.plan_keep_rule(rule))

    def change_view(self, threshold: float | None = None, policy: Policy | None = None) -> None:
        """Another threshold or policy, the list rebuilt here (scripts, tests)."""
        changed = (threshold is not None and self.set_threshold(threshold)) | (
            policy is not None and self.set_policy(policy)
        )
        if changed:
            self.refresh(keep_order=False)

    # -- search -----------------------------------------------------------------------------------
    def search(self, project: Project, query: str, limit: int = 1000) -> list[Match]:
        """Every document whose id is `query`, else starts with it, else whose text holds it (up
        to `limit`), each with where it is at the current view."""
        found = project.find_documents(query, limit=limit)
        ids = project.ids_for(found)
        return [Match(o, doc_id, *self.whereabouts(o)) for o, doc_id in zip(found, ids)]

    def whereabouts(self, o: int) -> tuple[int | None, str]:
        index = self.built
        c = index.clustering
        cluster_id = int(c.cluster[o])
        size = len(index.members(cluster_id))
        t = f"{index.threshold:.2f}"
        if index.position(cluster_id) is not None:
            state = "kept" if self.is_kept(o) else ("decided" if self.is_decided(o) else "to review")
            return cluster_id, f"in a cluster of {size} at {t} ({state})"
        if size >= 2:
            return None, f"in a cluster of {size} at {t}, hidden by the current filter (f shows every cluster)"
        if int(c.reason[o]) == graph_clustering.REVIEWER:
            return None, f"removed by the reviewer, in no cluster at {t}"
        if o in index.overrides.decided and int(c.reason[o]) == KEPT:
            return None, f"split off by the reviewer, in no cluster at {t}"
        if int(c.reason[o]) == EXACT:
            return None, f"an exact copy, in no listed cluster at {t}"
        return None, f"has no duplicate at {t}"
