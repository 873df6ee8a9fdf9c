"""The main screen: threshold, counts, the cluster list (paged), members, and decisions."""

from __future__ import annotations

import json
import shlex
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Container, Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Static
from textual.worker import WorkerState, get_current_worker

from ...engine import decisions
from ...engine.cluster import NEAR, POLICIES, strongest_links
from ...engine.decisions import Overrides, cluster_with_decisions
from ...engine.errors import Cancelled, DedupError
from ...engine.ingest import load_corpus
from ...engine.pipeline import ScanSettings, load_graph, scan
from ...engine.progress import Control
from ...engine.outputs import project_protected
from ...engine.store import Project
from ..actions import MAIN_ACTIONS
from ..messages import ExportFinished, GraphReady, PipelineStopped, Reclustered, StageProgress, ViewReady
from ..model import (FILTERS, SORTS, describe_view, join_view, parse_filter, split_view, ClusterIndex, PreparedViews, build_index, load_snapshot, save_snapshot, view_key,
                     view_keys)
from ..launch import default_export_path
from ..state import ReviewChanged, ReviewState
from ..text import literal_line
from ..diff import diff, diff_in_worker
from ..messages import DiffReady, SearchDone
from ..widgets.docview import DocView
from ..widgets.footer import AppFooter
from ..widgets.progress import ScanProgress
from ..widgets.tables import ClusterTable, MemberTable, why
from .dialogs import AskScreen, ExportRequest, ExportScreen, RescanScreen



class MainScreen(Screen):
    BINDINGS = [a.binding() for a in MAIN_ACTIONS]
    ACTIONS = MAIN_ACTIONS
    PAGE = 100
    NARROW = 110
    partial: dict | None = None  # an imported cluster scan: scandir.partial_view

    def __init__(self, spec, review: ReviewState) -> None:
        super().__init__()
        self.spec = spec
        self.review = review
        review.attach(self)
        self.page = 0
        self.scanning = False
        self.last_export = None
        self._cancel = threading.Event()
        self._generation = 0
        self._clustering_busy = False
        self._dirty = False
        self._focus_doc: int | None = None  # document to select after the next re-clustering
        self._snapshot_generation: int | None = None  # _generation when a stored view was shown
        self._snapshot_key: str | None = None  # key of the view snapshot the project holds
        self._opening = False  # reading a scanned project (not loading or scanning it)
        self._views = PreparedViews()  # cluster indexes computed (or prepared ahead) for this graph
        self._last_step = 0.0  # the last threshold move, for which way to prepare first
        self._label: int | None = None  # selected cluster

    # The review's state lives in the app's ReviewState; the main screen is its controller.
    project = property(lambda self: self.review.project, lambda self, v: setattr(self.review, "project", v))
    graph = property(lambda self: self.review.graph, lambda self, v: setattr(self.review, "graph", v))
    index = property(lambda self: self.review.index, lambda self, v: setattr(self.review, "index", v))
    threshold = property(lambda self: self.review.threshold, lambda self, v: setattr(self.review, "threshold", v))
    policy = property(lambda self: self.review.policy, lambda self, v: setattr(self.review, "policy", v))
    sort = property(lambda self: self.review.sort, lambda self, v: setattr(self.review, "sort", v))
    floor = property(lambda self: self.review.floor, lambda self, v: setattr(self.review, "floor", v))

    def kept_of(self, o: int) -> int:
        return self.review.kept_of(o)

    def exact_root(self, o: int) -> int:
        return self.review.exact_root(o)

    def remember_state(self) -> None:
        self._remember_state()

    def show_document(self, o: int, now: bool = True) -> None:
        self._focus_doc = o
        if now and self.index is not None:
            self.show_page(keep_selection=True)

    # -- layout -------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Vertical(id="top"):
            yield Static("", id="threshold")
            yield Static("", id="summary")
        yield ScanProgress(id="progress")
        with Container(id="body"):
            with Vertical(id="left"):
                yield Static("", id="clusters-title", classes="pane-title")
                yield ClusterTable(id="clusters")
            with Vertical(id="right"):
                yield Static("", id="members-title", classes="pane-title")
                yield MemberTable(id="members")
                yield Static("", id="member-info")
                yield Static("", id="preview-title", classes="pane-title")
                with Horizontal(id="preview"):
                    yield DocView(id="preview-kept", classes="side")
                    yield DocView(id="preview-member", classes="side")
        yield AppFooter()

    SHORT = 30  # rows: below this the triage preview gives its room to the lists

    def on_resize(self) -> None:
        self.set_class(self.size.width < self.NARROW, "-narrow")
        self.set_class(self.size.height < self.SHORT, "-short")
        if self.index is not None:
            self.call_after_refresh(self.show_page, True)

    def on_mount(self) -> None:
        self.project = Project(self.spec.db)
        self.partial = getattr(self.app, "partial", None)
        saved = self.project.get_meta("ui_state")
        if saved:
            state = json.loads(saved)
            self.threshold = float(state.get("threshold", self.threshold))
            self.policy = state.get("policy", self.policy) if state.get("policy") in POLICIES else self.policy
        self.query_one("#progress", ScanProgress).display = False
        self.update_top()
        has_documents = self.project.has_documents()
        needs_scan = bool(self.spec.corpus) or not has_documents or self.project.scan_state != "complete"
        self.start_pipeline(load=bool(self.spec.corpus), scan_it=needs_scan)
        self.query_one("#clusters", ClusterTable).focus()

    # -- background pipeline ------------------------------------------------------------
    def start_pipeline(self, load: bool, scan_it: bool) -> None:
        self._opening = not (load or scan_it)
        self._cancel = threading.Event()
        self.scanning = True
        self.update_top()
        if scan_it:
            what = "Loading and scanning" if load else "Scanning"
            self.query_one("#progress", ScanProgress).start(f"{what} {self.spec.db.name} — esc cancels")
        self.refresh_bindings()
        self.run_pipeline(load, scan_it)

    @work(thread=True, exclusive=True, group="pipeline", exit_on_error=False)
    def run_pipeline(self, load: bool, scan_it: bool) -> None:
        project = Project(self.spec.db, create=True)
        control = Control(progress=lambda s, d, t: self.post_message(StageProgress(s, d, t)), cancel=self._cancel)
        try:
            if load:
                if project.document_count() == 0:
                    load_corpus(project, self.spec.corpus, control=control, **self.spec.load_options)
            if scan_it or project.scan_state != "complete":
                scan(project, self.spec.scan_settings or ScanSettings(), control)
            control.report("graph", 0, 0)
            floor = float((project.scan_params() or {}).get("floor", 0.0))
            threshold, policy, sort = min(max(self.threshold, floor), 1.0), self.policy, self.sort
            overrides = Overrides.load(project)
            # Reopening: the view stored when the app last showed it comes up at once; the pairs
            # (hundreds of ms at a million documents) are read meanwhile, for the next change.
            stored, key = load_snapshot(project, overrides, threshold, policy, sort)
            if stored is not None:
                self._snapshot_key = key
                painted = threading.Event()
                self.post_message(ViewReady(stored, floor, painted))
                # Reading the pairs competes with the first paint of the list for the GIL: start
                # once the list is on screen (bounded, in case the view is not shown at all).
                painted.wait(timeout=1.0)
            graph = load_graph(project)
            graph.warm(policy, overrides.split_pairs)  # the first threshold change should not pay for these
            if stored is not None:
                self.post_message(GraphReady(graph, floor, scan_it))
                return
            clustering = cluster_with_decisions(project, graph, threshold, policy, overrides=overrides)
            index = build_index(graph, clustering, overrides, sort)
            self.post_message(GraphReady(graph, floor, scan_it, index))
            self._snapshot_key = save_snapshot(project, index)
        except Cancelled:
            loaded = project.has_documents()
            self.post_message(PipelineStopped(
                ("Cancelled: the documents are loaded, the scan did not finish. " if load and loaded else
                 "Cancelled: the project is unchanged. ") + "Press R to scan again.", True))
        except DedupError as exc:
            self.post_message(PipelineStopped(str(exc) + " (R scans again)", False))
        finally:
            project.close()

    def on_stage_progress(self, message: StageProgress) -> None:
        self.query_one("#progress", ScanProgress).report(message.stage, message.done, message.total)

    def on_view_ready(self, message: ViewReady) -> None:
        index = message.index
        self.floor = message.floor
        self.threshold = min(max(self.threshold, self.floor), 1.0)
        if self.index is None and (index.threshold, index.policy, index.sort) == (self.threshold, self.policy, self.sort):
            self._snapshot_generation = self._generation
            self.show_index(index)
            self.call_after_refresh(message.painted.set)
        else:
            message.painted.set()

    def on_graph_ready(self, message: GraphReady) -> None:
        self.scanning = False
        self.graph, self.floor = message.graph, message.floor
        self._views = PreparedViews()  # views of another graph are of no use
        self.threshold = min(max(self.threshold, self.floor), 1.0)
        self.query_one("#progress", ScanProgress).stop()
        self.refresh_bindings()
        index = message.index
        if index is None and self._snapshot_generation == self._generation:
            return  # the stored view on screen is still what the settings ask for
        if index is not None and not self._clustering_busy and \
                (index.threshold, index.policy, index.sort) == (self.threshold, self.policy, self.sort):
            self._generation += 1
            self.show_index(index)
        else:
            self.schedule_recluster()

    def on_unmount(self) -> None:
        self.save_view()

    def save_view(self) -> None:
        """Store the view on screen for the next opening, unless it is stored already or stale."""
        index = self.index
        if index is None or self.project is None or self._clustering_busy or self._dirty or \
                (index.threshold, index.policy, index.sort) != (self.threshold, self.policy, self.sort):
            return
        try:
            stale = view_key(self.project, index.overrides, index.threshold, index.policy, index.sort) != self._snapshot_key
        except sqlite3.Error:
            return
        if stale:  # only a shortcut for the next opening: a failure leaves the project unaffected
            self.app.writer.submit(lambda project: save_snapshot(project, index), what="the view for the next opening")

    def on_pipeline_stopped(self, message: PipelineStopped) -> None:
        self.scanning = False
        self.update_top()
        self.query_one("#progress", ScanProgress).stop(message.reason)
        self.notify(message.reason, severity="warning" if message.cancelled else "error", markup=False)
        self.refresh_bindings()

    def action_cancel_scan(self) -> None:
        self._cancel.set()
        self.notify("Cancelling…")

    def action_rescan(self) -> None:
        """Scan again (after a cancel or a failure, or with another floor or shingle size)."""
        if self.scanning:
            return
        if self.partial:
            self.notify("This project was imported from a cluster scan: scan again with dedup-tui cluster-scan "
                        "(--floor, --k) and import that.", title="Partial view", severity="warning", timeout=12,
                        markup=False)
            return
        load = bool(self.spec.corpus) and not self.project.has_documents()
        params = self.project.scan_params() or {}
        current = self.spec.scan_settings or ScanSettings()
        floor, k = float(params.get("floor", current.floor)), int(params.get("k", current.k))

        def done(choice: tuple[float, int] | None) -> None:
            if choice is None or self.scanning:
                return
            self.spec.scan_settings = replace(current, floor=choice[0], k=choice[1])
            self.start_pipeline(load=load, scan_it=True)

        self.app.push_screen(RescanScreen(floor, k), done)

    # -- search: a document by id or text, then its cluster ----------------------------------
    def action_search(self) -> None:
        def done(query: str | None) -> None:
            if query:
                self.run_search(query)

        self.app.push_screen(AskScreen("Find a document (id, or words from its text)", placeholder="id or text"), done)

    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def run_search(self, query: str) -> None:
        with Project(self.spec.db) as project:
            found = project.find_documents(query, limit=1)
        self.post_message(SearchDone(query, found[0] if found else None))

    def on_search_done(self, message: "SearchDone") -> None:
        shown = literal_line(message.query, 60)
        if message.ord is None:
            self.notify(f"No document has the id or text {shown!r}", severity="warning", markup=False)
            return
        o, index = message.ord, self.index
        if index is None:
            return
        label = int(index.clustering.cluster[o])
        if index.position(label) is None:
            why_alone = "it is removed by the reviewer" if index.clustering.reason[o] else "it has no duplicate"
            self.notify(f"{literal_line(self.project.ids_for([o])[0], 60)}: in no cluster at "
                        f"{index.threshold:.2f} ({why_alone})", markup=False)
            return
        self._focus_doc = o
        self.show_page(keep_selection=True)
        self.query_one("#members", MemberTable).focus()

    def on_worker_state_changed(self, event) -> None:
        if event.state == WorkerState.ERROR:
            if event.worker.group == "pipeline":
                self.scanning = False
                self.query_one("#progress", ScanProgress).stop(f"Failed: {event.worker.error}")
            self._clustering_busy = self._clustering_busy and event.worker.group != "cluster"
            self.notify(f"{type(event.worker.error).__name__}: {event.worker.error}", severity="error",
                        markup=False, timeout=10)

    # -- re-clustering ------------------------------------------------------------------
    def schedule_recluster(self) -> None:
        """Re-cluster now, or as soon as the running re-clustering ends (newest settings win)."""
        self._generation += 1
        self.update_top()
        if self.graph is None:
            return
        if self._clustering_busy:
            self._dirty = True
            return
        self._clustering_busy, self._dirty = True, False
        self.recluster(self._generation, self.threshold, self.policy, self.sort)

    @work(thread=True, exclusive=True, group="cluster", exit_on_error=False)
    def recluster(self, generation: int, threshold: float, policy: str, sort: str) -> None:
        graph, views = self.graph, self._views
        project = Project(self.spec.db, readonly=False)
        try:
            overrides = Overrides.load(project)
            key_of = view_keys(project, overrides)

            def view(t: float, pol: str = policy) -> tuple[str, Callable[[], ClusterIndex]]:
                def compute() -> ClusterIndex:
                    clustering = cluster_with_decisions(project, graph, t, pol, overrides=overrides)
                    return build_index(graph, clustering, overrides, sort)
                return key_of(t, pol, sort), compute

            index = views.get(*view(threshold))
            worker = get_current_worker()
            if worker.is_cancelled:
                return
            self.post_message(Reclustered(generation, index))
            # While the reviewer looks, prepare the next step each way (the direction of the last
            # move first), then the other policy, so holding ] or [ (or pressing p) shows the
            # result without waiting for a re-clustering.
            step = 0.01 if self._last_step >= 0 else -0.01
            other = POLICIES[(POLICIES.index(policy) + 1) % len(POLICIES)]
            for t, pol in ((round(threshold + step, 4), policy), (round(threshold - step, 4), policy), (threshold, other)):
                if worker.is_cancelled or generation != self._generation:
                    return
                if self.floor <= t <= 1.0:
                    key, compute = view(t, pol)
                    if not views.has(key):
                        views.get(key, compute)
        finally:
            project.close()

    def on_reclustered(self, message: Reclustered) -> None:
        self._clustering_busy = False
        if self._dirty or message.generation != self._generation:
            self._dirty = False
            self._clustering_busy = True
            self.recluster(self._generation, self.threshold, self.policy, self.sort)
            return
        self.show_index(message.index)

    def show_index(self, index) -> None:
        first = self.index is None
        self.index = index
        self.update_top()
        self.show_page(keep_selection=True)
        if first:  # check_action only depends on whether there is an index (and on scanning)
            self.refresh_bindings()
        if self.app.screen is not self:  # a screen on top (pair view, tuning) follows the new clustering
            self.app.screen.post_message(ReviewChanged())

    # -- showing --------------------------------------------------------------------------
    def update_top(self) -> None:
        t = Text()
        t.append(" THRESHOLD ", style="reverse bold")
        t.append(f" {self.threshold:.2f} ", style="bold")
        t.append(" [ ] ±.01  { } ±.05  t", style="dim")
        t.append("   policy ", style="dim")
        t.append(self.policy, style="bold")
        t.append(" (p)", style="dim")
        if self.floor:
            t.append(f"   floor {self.floor:.2f}", style="dim")
        self.query_one("#threshold", Static).update(t)
        s = Text()
        if self.index is None:
            s.append(("Opening…" if self._opening else "Scanning…") if self.scanning else "No clusters yet", style="dim")
        else:
            c = self.index.counts
            stale = self.index.threshold != self.threshold or self.index.policy != self.policy
            partial = self.partial
            corpus_docs = int(partial.get("corpus_documents", c.documents)) if partial else c.documents
            parts = [
                (f"{c.documents:,}", f" of {corpus_docs:,} documents (those with a duplicate)" if partial else " documents"),
                (f"{c.exact_groups:,}", f" exact groups ({c.exact_duplicates:,} copies)"),
                (f"{c.pairs_at_threshold:,}", f" near pairs ≥ {self.index.threshold:.2f}"),
                (f"{c.clusters:,}", f" clusters: {c.decided_clusters:,} decided, "
                                    f"{c.clusters - c.decided_clusters:,} to review"),
                (f"{corpus_docs - c.removed:,}" if partial else f"{c.kept:,}", " kept"),
                (f"{c.removed:,}", " removed"),
            ]
            for i, (num, label) in enumerate(parts):
                if i:
                    s.append(" · ", style="dim")
                s.append(num, style="bold")
                s.append(label)
            if stale:
                s.append("  (updating…)", style="dim italic")
        self.query_one("#summary", Static).update(s)

    def _previews(self, ords: list[int], chars: int = 200) -> dict[int, tuple[str, int, str]]:
        return self.project.previews(ords, chars)

    @property
    def pages(self) -> int:
        return max(1, -(-len(self.index.labels) // self.PAGE)) if self.index is not None else 1

    def show_page(self, keep_selection: bool = False) -> None:
        index = self.index
        table = self.query_one("#clusters", ClusterTable)
        target_row = table.cursor_row if keep_selection else 0
        if keep_selection:
            label = None
            if self._focus_doc is not None:
                label = int(index.clustering.cluster[self._focus_doc])
            elif self._label is not None:
                label = self._label
            pos = index.position(label) if label is not None else None
            if pos is not None:
                self.page, target_row = divmod(pos, self.PAGE)
        self.page = min(self.page, self.pages - 1)
        start = self.page * self.PAGE
        stop = min(start + self.PAGE, len(index.labels))
        labels = [int(x) for x in index.labels[start:stop]]
        previews = {o: (d, t) for o, (d, _n, t) in self._previews(labels).items()}
        table.fill(index, start, stop, previews)
        title = Text()
        title.append(f"Clusters {start + 1 if stop else 0:,}–{stop:,} of {len(index.labels):,}", style="bold")
        title.append(f"  page {self.page + 1}/{self.pages} (< >) · {describe_view(self.sort)} (s, f)", style="dim")
        self.query_one("#clusters-title", Static).update(title)
        if stop > start:
            table.move_cursor(row=min(target_row, stop - start - 1), animate=False)
            self.show_members(int(index.labels[start + table.cursor_row]))
        else:
            self._label = None
            self.query_one("#members", MemberTable).clear()
            self.query_one("#members-title", Static).update(Text("No clusters at this threshold", style="dim"))
            self.query_one("#member-info", Static).update("")

    def show_members(self, label: int) -> None:
        self._label = label
        index = self.index
        members = index.members(label)
        table = self.query_one("#members", MemberTable)
        focus_doc, self._focus_doc = self._focus_doc, None
        hit = np.flatnonzero(members == focus_doc) if focus_doc is not None else np.empty(0, np.int64)
        # enough chunks to show the document to focus
        count = (int(hit[0]) // table.CHUNK + 1) * table.CHUNK if len(hit) else table.CHUNK
        rows = self._previews(members[:count].tolist(), 240)
        table.fill(index, label, members, rows, count)
        self.update_members_title()
        table.move_cursor(row=int(hit[0]) if len(hit) else 0, animate=False)
        self.show_member_info()

    def update_members_title(self) -> None:
        table = self.query_one("#members", MemberTable)
        title = Text()
        title.append(f"{table.total:,} members", style="bold")
        if table.loaded < table.total:
            title.append(f" ({table.loaded:,} shown, more as you scroll)", style="dim")
        title.append("  enter/d: diff with kept · k keep · x remove · n not dup", style="dim")
        self.query_one("#members-title", Static).update(title)

    def show_member_info(self) -> None:
        o = self.selected_doc()
        info = self.query_one("#member-info", Static)
        if o is None or self.index is None:
            info.update("")
            return
        c = self.index.clustering
        doc_id, length, _ = self._previews([o], 1)[o]
        t = Text()
        t.append(literal_line(doc_id, 80), style="bold")
        t.append(f"  {length:,} chars · {why(self.index, o, self._label)}")
        if c.keeper[o] >= 0:
            keeper_id = self.project.ids_for([int(c.keeper[o])])[0]
            sim = c.similarity[o]
            t.append(" · duplicate of ")
            t.append(literal_line(keeper_id, 80), style="bold")
            if sim >= self.index.threshold or c.reason[o] != NEAR or self.graph is None:
                t.append(f" (Jaccard {sim:.2f})" if not np.isnan(sim) else " (joined through other members)")
            else:  # chained: say through whom (a pair the reviewer rejected is never cited)
                via, via_sim = strongest_links(self.graph, c, [o])
                if via[0] >= 0:
                    t.append(" · linked via ")
                    t.append(literal_line(self.project.ids_for([int(via[0])])[0], 60), style="bold")
                    t.append(f" ({via_sim[0]:.2f})")
                    if not np.isnan(sim):
                        t.append(f"; {sim:.2f} with the kept one", style="dim")
        for note in decisions.notes_for(self.project, doc_id):
            t.append("\nnote: ", style="italic")
            t.append(literal_line(note))
        info.update(t)
        self.show_preview(o)

    # -- triage preview: the selected member against its kept document, differences marked --
    PREVIEW_SYNC_CHARS = 4000  # below this the diff is computed at once (a few ms)

    def show_preview(self, o: int) -> None:
        c = self.index.clustering
        kept = int(c.keeper[o]) if c.keeper[o] >= 0 else None
        if kept is None:  # the kept document itself: show it beside its closest member
            members = self.index.members(self._label)
            others = [int(m) for m in members if int(m) != o]
            kept, o = o, (max(others, key=lambda m: np.nan_to_num(c.similarity[m], nan=-1.0)) if others else o)
        left, right = self.project.texts_for([kept, o])
        ids = self.project.ids_for([kept, o])
        title = Text()
        title.append("kept ", style="dim")
        title.append(literal_line(ids[0], 40), style="bold")
        if o != kept:
            title.append("  ·  this member ", style="dim")
            title.append(literal_line(ids[1], 40), style="bold")
            sim = c.similarity[o]
            if not np.isnan(sim):
                title.append(f"  Jaccard {sim:.2f}", style="dim")
        self.query_one("#preview-title", Static).update(title)
        kept_view, member_view = self.query_one("#preview-kept", DocView), self.query_one("#preview-member", DocView)
        self._preview_key = (kept, o)
        if o == kept:
            kept_view.set_document(left)
            member_view.set_document("")
            return
        if len(left) + len(right) <= self.PREVIEW_SYNC_CHARS:
            result = diff(left, right)
            kept_view.set_document(left, result.left)
            member_view.set_document(right, result.right)
            return
        kept_view.set_document(left)
        member_view.set_document(right)
        self.compute_preview((kept, o), left, right)

    @work(thread=True, exclusive=True, group="preview", exit_on_error=False)
    def compute_preview(self, key: tuple, left: str, right: str) -> None:
        result = diff_in_worker(left, right)
        if result is not None:
            self.post_message(DiffReady(key, result))

    def on_diff_ready(self, message: DiffReady) -> None:
        if message.key != getattr(self, "_preview_key", None):
            return
        self.query_one("#preview-kept", DocView).set_spans(message.result.left)
        self.query_one("#preview-member", DocView).set_spans(message.result.right)

    @on(DataTable.RowHighlighted, "#clusters")
    def _cluster_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row != event.data_table.cursor_row:
            return  # stale: posted while the page was refilled, before the cursor was put back
        if self.index is not None and event.row_key is not None and event.row_key.value is not None:
            label = int(event.row_key.value)
            if label != self._label:
                self.show_members(label)

    @on(DataTable.RowHighlighted, "#members")
    def _member_highlighted(self, event: DataTable.RowHighlighted) -> None:
        table = self.query_one("#members", MemberTable)
        if table.wants_more():
            table.extend(self._previews(table.pending(), 240))
            self.update_members_title()
        self.show_member_info()

    @on(MemberTable.WantsAll)
    def _all_members(self, _event: MemberTable.WantsAll) -> None:
        """End in a big cluster: every member shown, the cursor on the last (the least similar)."""
        table = self.query_one("#members", MemberTable)
        while table.loaded < table.total:
            table.extend(self._previews(table.pending(), 240))
        self.update_members_title()
        table.move_cursor(row=table.row_count - 1, animate=False)

    @on(DataTable.RowSelected, "#clusters")
    def _cluster_selected(self, event: DataTable.RowSelected) -> None:
        self.query_one("#members", MemberTable).focus()

    @on(DataTable.RowSelected, "#members")
    def _member_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open_pair()

    # -- selection ------------------------------------------------------------------------
    def selected_doc(self) -> int | None:
        table = self.query_one("#members", MemberTable)
        if self.index is None or table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key
        return int(key.value)

    # -- actions --------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_scan":
            return self.scanning
        if action == "rescan":
            return not self.scanning
        if action == "search":
            return None if self.index is None else True
        if action == "tune":  # works on the stored pairs themselves
            return None if self.graph is None else True
        if action in ("keep", "remove", "not_duplicate", "accept", "bulk_accept", "note", "open_pair", "export",
                      "page", "cycle_sort", "cycle_filter", "type_filter", "cycle_keep_rule", "keep_by_field", "undo", "redo"):
            return None if self.index is None else True
        return True

    def action_threshold(self, delta: float) -> None:
        self.set_threshold(round(self.threshold + delta, 2))

    def set_threshold(self, value: float) -> None:
        value = round(min(max(value, self.floor), 1.0), 4)
        if value == self.threshold:
            if self.floor and value == self.floor:
                self.notify(f"The scan's floor is {self.floor:.2f}: rescan with a lower floor to go below it")
            return
        self._last_step = value - self.threshold
        self.threshold = value
        self._remember_state()
        self.schedule_recluster()

    def action_type_threshold(self) -> None:
        def validate(text: str) -> str | None:
            try:
                v = float(text)
            except ValueError:
                return "Type a number such as 0.85"
            if not self.floor <= v <= 1.0:
                return f"Between the scan's floor {self.floor:.2f} and 1"
            return None

        def done(value: str | None) -> None:
            if value:
                self.set_threshold(float(value))

        self.app.push_screen(AskScreen("Threshold", f"{self.threshold:.2f}", validate=validate), done)

    def action_toggle_policy(self) -> None:
        self.policy = POLICIES[(POLICIES.index(self.policy) + 1) % len(POLICIES)]
        self._remember_state()
        self.schedule_recluster()

    def action_cycle_sort(self) -> None:
        keys = list(SORTS)
        sort, flt = split_view(self.sort)
        self.sort = join_view(keys[(keys.index(sort) + 1) % len(keys)], flt)
        if self.index is not None:
            self.index = self.index.with_sort(self.sort)
            self.page = 0
            self._focus_doc = None
            self.show_page(keep_selection=False)
        self.notify(f"Sorted: {SORTS[split_view(self.sort)[0]]}", timeout=2)

    def action_cycle_keep_rule(self) -> None:
        """Which document a cluster keeps when the reviewer did not choose, for the project (the
        app, the policies and every export follow it)."""
        rules = list(decisions.KEEP_RULES)
        current = decisions.keep_rule(self.project)
        self._set_keep_rule(rules[(rules.index(current) + 1) % len(rules)] if current in rules else "first")

    def _set_keep_rule(self, rule: str) -> None:
        def saved(_result) -> None:
            self._views = PreparedViews()  # every prepared view kept the other rule's documents
            self.notify(f"Each cluster keeps {decisions.describe_keep_rule(rule)} (unless you chose)", timeout=4)
            self.schedule_recluster()

        self.app.writer.submit(lambda project: decisions.set_keep_rule(project, rule), saved, what="the keep rule")

    def action_keep_by_field(self) -> None:
        """Keep the document with the highest / lowest value of a record field (newest date, best score)."""
        def done(rule: str | None) -> None:
            if rule:
                self._set_keep_rule(rule)

        current = decisions.keep_rule(self.project)
        self.app.push_screen(AskScreen("Keep rule: max:FIELD or min:FIELD (the highest / lowest value of a record "
                                       "field; documents without it come last), first or longest",
                                       current if ":" in current else "", placeholder="e.g. max:date, max:score",
                                       parse=decisions.parse_keep_rule), done)

    def action_cycle_filter(self) -> None:
        """Which clusters the list shows: all, undecided, with a near duplicate, exact copies only
        (from a typed filter: all)."""
        keys = list(FILTERS)
        sort, flt = split_view(self.sort)
        flt = keys[(keys.index(flt) + 1) % len(keys)] if flt in keys else "all"
        self._set_filter(flt)
        self.notify(f"Showing {FILTERS[flt]}", timeout=2)

    def _set_filter(self, flt: str) -> None:
        sort, _ = split_view(self.sort)
        self.sort = join_view(sort, flt)
        self.page = 0
        if self.index is not None and not self._clustering_busy and self.index.can_show(self.sort):
            self.index = self.index.with_sort(self.sort)  # the same clustering, other clusters listed
            self._focus_doc = None
            self.show_page(keep_selection=False)
        else:
            self.schedule_recluster()  # the list is rebuilt from the clustering (the filter dropped some)

    def action_type_filter(self) -> None:
        """Filter by size and lowest similarity, with or without the named filters."""
        def done(flt: str | None) -> None:
            if flt is not None:
                self._set_filter(flt)
                self.notify("Showing every cluster" if flt == "all" else f"Showing clusters: {flt.replace(',', ', ')}",
                            timeout=3)

        _, current = split_view(self.sort)
        self.app.push_screen(AskScreen("Filter clusters: size>=N, size<=N, sim>=X, sim<=X (the lowest similarity), "
                                       "undecided, near, exact; empty for all", "" if current == "all" else
                                       current.replace(",", " "), placeholder="e.g. size>=5 sim<=0.9 undecided",
                                       parse=parse_filter), done)

    def action_page(self, delta: int) -> None:
        new = min(max(self.page + delta, 0), self.pages - 1)
        if new != self.page:
            self.page = new
            self.show_page()

    def _remember_state(self) -> None:
        state = json.dumps({"threshold": self.threshold, "policy": self.policy})
        self.app.writer.submit(lambda project: project.set_meta(ui_state=state), what="the threshold and policy")

    # decisions: written by the app's writer thread; the view follows once they are saved
    def decide(self, kind: str, o: int, other: int | None = None, value: str | None = None,
               cursor: int | None = None) -> None:
        """Record a decision on document o (and other); then the cursor moves on from `cursor`
        (default o) to the next undecided member or cluster."""
        doc_id = self.project.ids_for([o])[0]
        other_id = self.project.ids_for([other])[0] if other is not None else None
        threshold, policy, author = self.threshold, self.policy, self.app.author

        after = (self._next_undecided(o if cursor is None else cursor, whole_cluster=kind == "accept")
                 if kind in ("keep", "remove", "not_duplicate", "accept") else None)  # a note stays put

        def saved(d: decisions.Decision) -> None:
            self.notify(f"Saved: {d.describe()}", markup=False, timeout=3)
            self._focus_doc = after if after is not None else o
            self.schedule_recluster()

        state = json.dumps({"threshold": threshold, "policy": policy})

        def write(project):
            decision = decisions.record(project, kind, doc_id, other_id, value, threshold, policy, author=author)
            # The view the decision was made in: `export` defaults to it (even when the
            # threshold and policy were never changed from the defaults)
            project.set_meta(ui_state=state)
            return decision

        self.app.writer.submit(write, saved, what=f"the {kind.replace('_', ' ')} decision")

    def _next_undecided(self, o: int, whole_cluster: bool = False) -> int | None:
        """Where the cursor goes after a decision on `o`: the next member of this cluster no
        decision names yet, else the next cluster (in list order) with no decision, else None."""
        index = self.index
        if index is None or self._label is None:
            return None
        decided = index.overrides.decided | {o}
        if not whole_cluster:
            members = [int(m) for m in index.members(self._label)]
            start = members.index(o) + 1 if o in members else 0
            for m in members[start:] + members[:start]:
                if m not in decided and index.clustering.keeper[m] >= 0:
                    return m
        pos = index.position(self._label)
        if pos is None:
            return None
        labels = index.labels
        for p in list(range(pos + 1, len(labels))) + list(range(0, pos)):
            if not index.decided[p]:
                members = index.members(int(labels[p]))
                removed = [int(m) for m in members if index.clustering.keeper[m] >= 0]
                return removed[0] if removed else int(labels[p])
        return None

    def _need_doc(self) -> int | None:
        o = self.selected_doc()
        if o is None:
            self.notify("Select a document first", severity="warning")
        return o

    def action_keep(self, o: int | None = None) -> None:
        o = self._need_doc() if o is None else o
        if o is not None:
            self.decide("keep", o)

    def action_remove(self, o: int | None = None) -> None:
        o = self._need_doc() if o is None else o
        if o is not None:
            self.decide("remove", o)

    def action_not_duplicate(self, o: int | None = None, other: int | None = None) -> None:
        o = self._need_doc() if o is None else o
        if o is None:
            return
        other = self.kept_of(o) if other is None else other
        if other == o:
            self.notify("This is the kept document: select another member to split it off", severity="warning")
            return
        if self.exact_root(o) == self.exact_root(other):
            self.notify("These have the same text: exact copies cannot be split (use k or x)", severity="warning")
            return
        self.decide("not_duplicate", min(o, other), max(o, other), cursor=o)

    def action_accept(self) -> None:
        if self._label is None:
            return
        members = self.index.members(self._label)
        ids = self.project.ids_for(members.tolist())
        self.decide("accept", self._label, value=json.dumps(ids, ensure_ascii=False))

    def action_bulk_accept(self) -> None:
        """Accept many clusters at once, with their count shown first; one undo step takes it back."""
        def valid(text: str) -> str | None:
            try:
                v = float(text)
            except ValueError:
                return "Type a number such as 0.95 (1 = exact copies only)"
            return None if self.floor <= v <= 1.0 else f"Between the scan's floor {self.floor:.2f} and 1"

        def chosen(text: str | None) -> None:
            if not text or self.index is None:
                return
            index, at_least = self.index, float(text)
            picked = np.flatnonzero(~index.decided & (index.min_sim >= at_least - 1e-9))
            if not len(picked):
                self.notify(f"No undecided cluster has all its similarities ≥ {at_least:.2f}", severity="warning")
                return
            labels = [int(index.labels[p]) for p in picked]
            removed = int(index.sizes[picked].sum()) - len(picked)

            def confirmed(answer: str | None) -> None:
                if answer:
                    self._accept_many(labels)

            self.app.push_screen(AskScreen(
                f"Accept {len(labels):,} clusters ({removed:,} documents removed)? Type yes (u undoes it in one step)",
                placeholder="yes", validate=lambda t: None if t.strip().lower() in ("y", "yes") else
                "Type yes to accept them, esc to cancel"), confirmed)

        self.app.push_screen(AskScreen("Accept every undecided cluster whose lowest similarity is at least "
                                       "(1 = exact copies only)", "1.00", validate=valid), chosen)

    def _accept_many(self, labels: list[int]) -> None:
        index, threshold, policy, author = self.index, self.threshold, self.policy, self.app.author
        members = [index.members(label).tolist() for label in labels]

        def job(project: Project) -> int:
            clusters = [(project.ids_for([label])[0], project.ids_for(ms)) for label, ms in zip(labels, members)]
            accepted = decisions.accept_clusters(project, clusters, threshold, policy, author=author)
            project.set_meta(ui_state=json.dumps({"threshold": threshold, "policy": policy}))  # export's default
            return accepted

        def saved(n: int) -> None:
            self.notify(f"Saved: accepted {n:,} clusters (u undoes them in one step)", timeout=4)
            self.schedule_recluster()

        self.app.writer.submit(job, saved, what="the bulk accept")

    def action_note(self) -> None:
        o = self._need_doc()
        if o is None:
            return

        def done(value: str | None) -> None:
            if value:
                self.decide("note", o, value=value)

        doc_id = self.project.ids_for([o])[0]
        self.app.push_screen(AskScreen(f"Note on {literal_line(doc_id, 80)}", placeholder="why this decision?"), done)

    def action_undo(self) -> None:
        self.app.writer.submit(decisions.undo, lambda d: self._undone(d, "Undone", "Nothing to undo"), what="the undo")

    def action_redo(self) -> None:
        self.app.writer.submit(decisions.redo, lambda d: self._undone(d, "Redone", "Nothing to redo"), what="the redo")

    def _undone(self, d: decisions.Decision | None, done: str, nothing: str) -> None:
        self.notify(nothing if d is None else f"{done}: {d.describe()}", markup=False, timeout=3)
        if d is not None:
            # The cursor goes to the document the decision was about (its cluster may be far
            # down the list, or out of it under a filter: then it stays where it is).
            about = decisions.ords_for_ids(self.project, [d.doc_id]).get(d.doc_id)
            self._focus_doc = about if about is not None else self.selected_doc()
            self.schedule_recluster()

    def action_open_pair(self) -> None:
        o = self.selected_doc()
        if o is None or self._label is None:
            return
        members = self.index.members(self._label)
        if len(members) < 2:
            return
        if self.kept_of(o) == o:  # the kept document itself: compare it with its closest member
            o = next((int(m) for m in members if self.kept_of(int(m)) != int(m)), o)
        from .pair import PairScreen

        self.app.push_screen(PairScreen(self.review, self._label, o))

    def action_tune(self) -> None:
        from .tune import TuneScreen

        self.app.push_screen(TuneScreen(self.review))

    # export
    def action_export(self) -> None:
        if self.partial:
            inputs = " ".join(shlex.quote(p) for p in self.partial.get("inputs", []))
            self.notify(f"This project holds only the documents with a duplicate; write the curated corpus on the "
                        f"cluster:\ndedup-tui cluster-export {inputs} --db {shlex.quote(str(self.spec.db))} "
                        f"--threshold {self.threshold:.2f} --policy {self.policy} --out CURATED_DIR",
                        title="Partial view", severity="warning", timeout=20, markup=False)
            return
        default = default_export_path(self.spec.db)
        if self.last_export is not None:
            default = self.last_export
        self.app.push_screen(ExportScreen(default, self.threshold, self.policy, self.floor,
                                          project_protected(self.project)), self._export_chosen)

    def _export_chosen(self, request: ExportRequest | None) -> None:
        if request is None:
            return
        self.last_export = request.out
        self.notify(f"Exporting to {request.out}…", markup=False, timeout=2)
        self.run_export(request)

    @work(thread=True, exclusive=True, group="export", exit_on_error=False)
    def run_export(self, request: ExportRequest) -> None:
        project = Project(self.spec.db)
        try:
            logs = request.logs
            result = decisions.export_curated(
                project, request.threshold, request.policy, request.out, fmt=request.fmt,
                removed_out=decisions.beside(request.out, "removed.jsonl") if logs else None,
                decisions_out=decisions.beside(request.out, "decisions.jsonl") if logs else None,
                manifest_out=decisions.beside(request.out, "manifest.json") if logs else None,
                graph=self.graph,
            )
        finally:
            project.close()
        self.post_message(ExportFinished(result))

    def on_export_finished(self, message: ExportFinished) -> None:
        r = message.result
        self.notify(
            f"Exported {r.kept:,} kept documents to {r.out}; {r.removed:,} removed "
            f"({r.exact:,} exact, {r.near:,} near, {r.reviewer:,} by reviewer), {r.decisions:,} decisions applied",
            markup=False, timeout=8,
        )
