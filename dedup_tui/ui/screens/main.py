"""The main screen: threshold, counts, the cluster list (paged), members, and decisions.

It is layout and rendering: the view, the list, the cursor, the queue and the decisions are the
review model's (`dedup_tui.review.Review`, at `self.model`). Keys become intents to the review
session (`dedup_tui.review.session.ReviewSession`, at `self.session`), which has the plans written
by the app's writer thread and the list rebuilt off the UI thread; this screen draws the result.
"""

from __future__ import annotations

import shlex
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from rich.cells import cell_len
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Container, Vertical
from textual.coordinate import Coordinate
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Static
from textual.widgets.data_table import CellDoesNotExist
from textual.worker import WorkerState

from ...engine.curate import curated, decisions, keep_rules
from ...engine.curate.decisions import Overrides
from ...engine.errors import Cancelled, DedupError
from ...engine.graph.clustering import links_to_kept
from ...engine.opening import default_export_path
from ...engine.orchestration import LoadAndScan
from ...engine.outputs import project_protected
from ...engine.progress import Control
from ...engine.ray.partial import PartialView
from ...engine.scanning.settings import ScanSettings
from ...engine.store import Project
from ...engine.store.scans import load_graph
from ...review import Request, Review
from ...review.index import FILTERS, SORTS, load_snapshot, save_snapshot, view_key
from ..actions import MAIN_ACTIONS
from ..messages import (
    ExportFinished,
    GraphReady,
    PipelineStopped,
    SearchDone,
    ShardProgress,
    StageProgress,
    ViewReady,
)
from ..readonly import open_project
from ..state import AppHost, ReviewChanged, ReviewSession
from ..text import first_fitting, literal_line, shorten_each, shorten_middle
from ..widgets.docview import DocView
from ..widgets.footer import AppFooter
from ..widgets.pair_diff import PairDiff
from ..widgets.progress import ScanProgress
from ..widgets.quiet import update_static
from ..widgets.tables import ClusterTable, MemberTable, compared_with, why
from ..window import PREVIEW_LINES, PREVIEW_WINDOW, Shown, short_notice, windows
from .dialogs import AskScreen, ExportRequest, ExportScreen, RescanScreen, SearchResultsScreen

# the sorts in fewer words, the same words as the list's title (SORTS): "most similar" there read
# "highest similarity first" here
SHORT_SORTS = {
    "size": "largest",
    "high": "highest similarity",
    "low": "lowest similarity",
    "borderline": "closest to threshold",
}


class MainScreen(Screen):
    BINDINGS = [a.binding() for a in MAIN_ACTIONS]
    ACTIONS = MAIN_ACTIONS
    PAGE = 100
    NARROW = 110
    PAIR_SCREEN = "pair"
    partial: PartialView | None = None  # an imported cluster scan

    def __init__(self, spec, session: ReviewSession) -> None:
        super().__init__()
        self.spec = spec
        self.session = session
        self.model: Review | None = None  # made on mount, with the UI thread's connection
        self.page = 0
        self.scanning = False
        self.last_export = None
        self._cancel = threading.Event()
        self._snapshot_generation: int | None = None  # the session's generation when a stored view was shown
        self._snapshot_key: str | None = None  # key of the view snapshot the project holds
        self._opening = False  # reading a scanned project (not loading or scanning it)
        self._matches: list = []  # the last search's matches, stepped with . and ,
        self._match_at = -1
        self._shown_cluster: int | None = None  # the cluster whose members are on screen
        self._last_move = 0.0  # time.monotonic() of the last move to another cluster
        self._rows: dict[int, tuple[str, int, str]] = {}  # ord -> (id, length, its text's start) read
        self._members_timer: Timer | None = None  # members shown once a held key rests
        self._pair_screen = None  # the pair view, once opened (kept installed for the next opening)

    # what the screens on top and the tests read (the model's, for the most part)
    project = property(lambda self: self.session.project)
    graph = property(lambda self: self.session.graph)
    index = property(lambda self: self.session.index)
    threshold = property(lambda self: self.session.threshold)
    policy = property(lambda self: self.session.policy)
    floor = property(lambda self: self.session.floor)

    @property
    def sort(self) -> str:
        """The list's sort and filter as stored ("sort" or "sort:filter")."""
        return str(self.model.view.listing)

    @property
    def busy(self) -> bool:
        """A list is being rebuilt, or one is waiting to be."""
        return self.session.busy

    @property
    def _cluster_id(self) -> int | None:
        return self.model.cursor.cluster_id if self.model is not None and self.model.index is not None else None

    # -- layout -------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Vertical(id="top"):
            yield Static("", id="threshold")
            yield Static("", id="status")
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
                with PairDiff(id="preview"):
                    yield DocView(id="preview-kept", classes="side")
                    yield DocView(id="preview-member", classes="side")
        yield AppFooter()

    SHORT = 30  # rows: below this the triage preview gives its room to the lists

    def on_resize(self) -> None:
        self.set_class(self.size.width < self.NARROW, "-narrow")
        self.set_class(self.size.height < self.SHORT, "-short")
        if self.model is not None:
            self.update_top()
        if self.index is not None:
            self.call_after_refresh(self.render_list)

    def on_mount(self) -> None:
        project = Project(self.spec.db)
        self.model = Review(project, author=self.app.author)
        self.session.model = self.model
        self.session.attach(AppHost(self.app), self)
        self.session.shown.model = self.model
        self.query_one("#members", MemberTable).row_drawn = self.session.shown.add
        for table in (self.query_one("#members", MemberTable), self.query_one("#clusters", ClusterTable)):
            table.id_extra = lambda: self.model.view.id_widening
        self.partial = getattr(self.app, "partial", None)
        for preview in self.query(DocView):
            preview.can_focus = False  # tab moves between the two lists; enter opens the pair to scroll
        self.query_one("#progress", ScanProgress).display = False
        self.update_top()
        has_documents = project.has_documents()
        needs_scan = bool(self.spec.corpus) or not has_documents or project.scan_state != "complete"
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
        self.run_pipeline(load, scan_it, self.model.view)

    @work(thread=True, exclusive=True, group="pipeline", exit_on_error=False)
    def run_pipeline(self, load: bool, scan_it: bool, view) -> None:
        project = open_project(self.spec.db, getattr(self.app, "read_only", None), create=True)
        # damaged scan data rebuilt while reading it (notify is thread-safe)
        project.on_notice = lambda note: self.notify(note, severity="warning", markup=False, timeout=15)
        control = Control(
            progress=lambda s, d, t: self.post_message(StageProgress(s, d, t)),
            cancel=self._cancel,
            on_shard=lambda shard: self.post_message(ShardProgress(shard.describe())),
        )
        # (settings none chosen: the last scan's, so new documents are scanned incrementally)
        job = LoadAndScan(
            self.spec.corpus if load and project.document_count() == 0 else (),
            settings=self.spec.scan_settings,
            load_options=self.spec.load_options,
        )
        try:
            if job.loading:
                job.load(project, control)
            if scan_it or project.scan_state != "complete":
                job.scan(project, control)
            control.report("graph", 0, 0)
            floor = float((project.scan_params() or {}).get("floor", 0.0))
            view = replace(view, threshold=min(max(view.threshold, floor), 1.0))
            request = Request(view, None, 0)
            overrides = Overrides.load(project)
            # Reopening: the view stored when the app last showed it comes up at once; the pairs
            # (hundreds of ms at a million documents) are read meanwhile, for the next change.
            stored, key = load_snapshot(project, overrides, view.threshold, view.policy, view.listing)
            if stored is not None:
                self._snapshot_key = key
                painted = threading.Event()
                self.post_message(ViewReady(stored, floor, painted))
                # Reading the pairs competes with the first paint of the list for the GIL: start
                # once the list is on screen (bounded, in case the view is not shown at all).
                painted.wait(timeout=1.0)  # (bounded: a list never shown, an app closing)
            graph = load_graph(project)
            graph.warm(view.policy, overrides.split_pairs)  # the first threshold change should not pay for these
            if stored is not None:
                self.post_message(GraphReady(graph, floor, scan_it))
                return
            index = self.model.compute(project, request, graph, overrides)
            self.post_message(GraphReady(graph, floor, scan_it, index))
            if not project.readonly:  # a read-only window (or file) stores nothing
                self._snapshot_key = save_snapshot(project, index)
        except Cancelled:
            loaded = project.has_documents()
            self.post_message(
                PipelineStopped(
                    (
                        "Cancelled: the documents are loaded, the scan did not finish. "
                        if load and loaded
                        else "Cancelled: the project is unchanged. "
                    )
                    + "Press R to scan again.",
                    True,
                )
            )
        except DedupError as exc:
            self.post_message(PipelineStopped(str(exc) + " (R scans again)", False))
        finally:
            job.close()
            project.close()

    def on_stage_progress(self, message: StageProgress) -> None:
        self.query_one("#progress", ScanProgress).report(message.stage, message.done, message.total)

    def on_shard_progress(self, message: ShardProgress) -> None:
        self.query_one("#progress", ScanProgress).shard(message.line)

    def _set_floor(self, floor: float) -> None:
        self.model.floor = floor
        self.model.view = replace(self.model.view, threshold=min(max(self.model.view.threshold, floor), 1.0))

    def on_view_ready(self, message: ViewReady) -> None:
        index = message.index
        self._set_floor(message.floor)
        if self.index is None and self.model.shows_view(index):
            self._snapshot_generation = self.session.generation
            self.show_index(index, None)
            self.query_one("#clusters", ClusterTable).after_paint(message.painted.set)
        else:
            message.painted.set()

    def on_graph_ready(self, message: GraphReady) -> None:
        self.scanning = False
        self._rows.clear()  # (a scan may have loaded other documents)
        self.model.graph = message.graph
        self._set_floor(message.floor)
        self.session.new_graph()  # views of another graph are of no use
        self.query_one("#progress", ScanProgress).stop()
        self.refresh_bindings()
        index = message.index
        if index is None and self._snapshot_generation == self.session.generation:
            return  # the stored view on screen is still what the settings ask for
        if index is None or not self.session.show_built(index):
            self.session.schedule_recluster(keep_order=False)

    def on_unmount(self) -> None:
        self.save_view()
        self.session.remember_view()

    def save_view(self) -> None:
        """Store the view on screen for the next opening, unless it is stored already or stale."""
        index = self.index
        if index is None or self.project is None or self.session.busy or self.model.needs_rebuild():
            return
        try:
            stale = (
                view_key(self.project, index.overrides, index.threshold, index.policy, index.listing)
                != self._snapshot_key
            )
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
            self.notify(
                "This project was imported from a cluster scan: scan again with dedup-tui cluster-scan "
                "(--floor, --k) and import that.",
                title="Partial view",
                severity="warning",
                timeout=12,
                markup=False,
            )
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

    # -- search: every document by id or text, then its cluster ------------------------------
    def action_search(self) -> None:
        def done(query: str | None) -> None:
            if query:
                self.run_search(query, self.model)

        self.app.push_screen(
            AskScreen("Find documents (an id, the start of ids, or words from the text)", placeholder="id or text"),
            done,
        )

    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def run_search(self, query: str, model: Review) -> None:
        """(A worker thread: what it reads is given, on the UI thread.)"""
        with Project(self.spec.db) as project:
            found = model.search(project, query)
        self.post_message(SearchDone(query, found))

    def on_search_done(self, message: SearchDone) -> None:
        shown = literal_line(message.query, 60)
        self._matches, self._match_at = list(message.matches), -1
        if not self._matches:
            self.notify(f"No document has the id or text {shown!r}", severity="warning", markup=False)
            return
        if len(self._matches) == 1:
            self.action_next_match(1)
            return

        def chosen(at: int | None) -> None:
            if at is not None:
                self._match_at = at - 1
                self.action_next_match(1)

        self.app.push_screen(SearchResultsScreen(message.query, self._matches), chosen)

    def action_next_match(self, delta: int) -> None:
        """. and , step through the last search's matches; each says where it is."""
        if not self._matches:
            self.notify("No search yet: / finds documents", severity="warning")
            return
        self._match_at = (self._match_at + delta) % len(self._matches)
        m = self._matches[self._match_at]
        cluster_id, status = self.model.whereabouts(m.doc) if self.index is not None else (None, m.status)
        where = f"match {self._match_at + 1}/{len(self._matches)}" + (
            " (. next, , previous)" if len(self._matches) > 1 else ""
        )
        self.notify(f"{shorten_middle(m.doc_id, 60)}: {status} · {where}", markup=False, timeout=5)
        if cluster_id is not None:
            self.model.select(m.doc)
            self.render_list()
            self.query_one("#members", MemberTable).focus()

    def on_worker_state_changed(self, event) -> None:
        if event.state == WorkerState.ERROR:
            if event.worker.group == "pipeline":
                self.scanning = False
                self.query_one("#progress", ScanProgress).stop(f"Failed: {event.worker.error}")
            self.notify(
                f"{type(event.worker.error).__name__}: {event.worker.error}", severity="error", markup=False, timeout=10
            )

    # -- showing --------------------------------------------------------------------------
    def show_index(self, index, request: Request | None) -> None:
        """A new cluster list (the session's): drawn, and the screen on top told."""
        first = self.index is None
        self.model.show(index, request)
        self.update_top()
        self.render_list()
        if first:  # check_action only depends on whether there is an index (and on scanning)
            self.refresh_bindings()
        if self.app.screen is not self:  # a screen on top (pair view, tuning) follows the new clustering
            self.app.screen.post_message(ReviewChanged())

    def after_paint(self, fn: Callable[[], object]) -> None:
        self.query_one("#clusters", ClusterTable).after_paint(fn)

    def shows_rows(self) -> bool:
        return self.app.screen is self

    def update_top(self) -> None:
        view = self.model.view if self.model is not None else None
        width = max(20, self.app.size.width - 2)  # #top's padding
        t = Text()
        t.append(" THRESHOLD ", style="reverse bold")
        t.append(f" {view.threshold:.2f} " if view else " … ", style="bold")
        if self.floor:
            t.append(f"  floor {self.floor:.2f}", style="dim")
        status = self.status_line(width)
        hints = Text("   + - ±.01  ^→ ^← ±.05  t", style="dim")

        def lines(status: Text) -> list[Text]:
            return [Text.assemble(t, hints, "   ", status), Text.assemble(t, "   ", status), Text.assemble(t, hints), t]

        # where the status goes (beside the threshold or on a line of its own) is chosen for the
        # longest sort name: cycling the sort (s) never moves every line of the screen by one
        fits = lines(self.status_line(width, widest=True))
        at = next((i for i, candidate in enumerate(fits) if candidate.cell_len <= width), len(fits) - 1)
        line = lines(status)[at]
        update_static(self.query_one("#threshold", Static), line)
        status_own_line = at >= 2  # the status line is never cut: a line of its own
        self.query_one("#status", Static).display = status_own_line
        if status_own_line:
            update_static(self.query_one("#status", Static), status)
        update_static(self.query_one("#summary", Static), self.summary_text(width))

    def status_line(self, width: int, widest: bool = False) -> Text:
        """sort · filter · keep rule · policy: whole, in as many words as the width allows (a
        typed filter or a long field name may wrap it, never cut it). widest: the widest line
        of any sort (where it goes is chosen for that one)."""
        view = self.model.view if self.model is not None else None
        if view is None:
            return Text("")
        if widest:
            return max(
                (first_fitting(self._status_variants(view, sort), width) for sort in SORTS),
                key=lambda text: text.cell_len,
            )
        return first_fitting(self._status_variants(view, view.sort), width)

    def _status_variants(self, view, sort: str) -> list[Text]:
        """The status line in three levels of words, for this sort."""
        kept_by = self.index.clustering.kept_by if self.index is not None else None
        flt = view.filter
        named = FILTERS.get(flt, flt.replace(",", " "))
        keep_long = {"first": "first in corpus", "longest": "longest text"}.get(kept_by or "", kept_by or "…")
        short_sort = SHORT_SORTS.get(sort, sort)

        def line(parts: list[tuple[str, str, str]]) -> Text:
            out = Text()
            for i, (label, value, keys) in enumerate(parts):
                if i:
                    out.append(" · ", style="dim")
                if label:
                    out.append(label, style="dim")
                out.append(value, style="bold")
                if keys:
                    out.append(f" ({keys})", style="dim")
            return out

        return [
            line(
                [
                    ("sort ", SORTS[sort], "s"),
                    ("filter ", named, "f F"),
                    ("keep ", keep_long, "K ^k"),
                    ("policy ", view.policy, "p"),
                ]
            ),
            line(
                [
                    ("sort ", SORTS[sort], ""),
                    ("filter ", flt.replace(",", " "), ""),
                    ("keep ", keep_long, ""),
                    ("policy ", view.policy, ""),
                ]
            ),
            line(
                [
                    ("sort ", short_sort, ""),
                    ("filter ", flt.replace(",", " "), ""),
                    ("keep ", kept_by or "…", ""),
                    ("policy ", view.policy, ""),
                ]
            ),
            line(
                [
                    ("sort ", short_sort, ""),
                    ("filter ", flt.replace(",", " "), ""),
                    ("keep ", kept_by or "…", ""),
                    ("", view.policy, ""),
                ]
            ),
        ]

    def summary_text(self, width: int) -> Text:
        """The counts on one line, in fewer words when narrow; on two lines (broken between two
        counts) only when even those do not fit."""
        if self.index is None:
            return Text(
                ("Opening…" if self._opening else "Scanning…") if self.scanning else "No clusters yet", style="dim"
            )
        view = self.model.view
        c = self.index.counts
        stale = self.model.needs_rebuild() and (self.index.threshold, self.index.policy) != (
            view.threshold,
            view.policy,
        )
        partial = self.partial
        corpus_docs = partial.corpus_documents if partial else c.documents
        kept = f"{corpus_docs - c.removed:,}" if partial else f"{c.kept:,}"
        decided_clusters = c.decided_clusters + self.model.newly_decided_clusters()
        to_review = c.clusters - decided_clusters
        t = f"{self.index.threshold:.2f}"
        sources, references = self._source_counts(c.documents)
        roles = ""
        if sources > 1 or references:
            roles = f" ({sources:,} sources" + (
                f", {references:,} reference{'s' if references > 1 else ''})" if references else ")"
            )
        short_roles = (
            f" ({sources:,} src, {references:,} ref)" if references else (f" ({sources:,} src)" if roles else "")
        )
        full = [
            (
                f"{c.documents:,}",
                f" of {corpus_docs:,} documents (those with a duplicate)" if partial else " documents" + roles,
            ),
            (
                f"{c.exact_groups:,}",
                f" exact group{'s' * (c.exact_groups != 1)} ({c.exact_duplicates:,} "
                f"cop{'y' if c.exact_duplicates == 1 else 'ies'})",
            ),
            (f"{c.pairs_at_threshold:,}", f" near pair{'s' * (c.pairs_at_threshold != 1)} ≥ {t}"),
            (
                f"{c.clusters:,}",
                f" cluster{'s' * (c.clusters != 1)}: {decided_clusters:,} decided, {to_review:,} to review",
            ),
            (kept, " kept"),
            (f"{c.removed:,}", " removed"),
        ]
        short = [
            (f"{c.documents:,}", f" of {corpus_docs:,} documents" if partial else " docs" + short_roles),
            (f"{c.exact_groups:,}", f" exact ({c.exact_duplicates:,} cop{'y' if c.exact_duplicates == 1 else 'ies'})"),
            (f"{c.pairs_at_threshold:,}", f" pair{'s' * (c.pairs_at_threshold != 1)} ≥ {t}"),
            (f"{c.clusters:,}", f" cluster{'s' * (c.clusters != 1)} ({to_review:,} to review)"),
            (kept, " kept"),
            (f"{c.removed:,}", " removed"),
        ]

        def line(parts, breaks_at: int | None = None) -> Text:
            out = Text()
            for i, (num, label) in enumerate(parts):
                if i:
                    out.append("\n" if i == breaks_at else " · ", style="dim")
                out.append(num, style="bold")
                out.append(label)
            if stale:
                out.append("  (updating…)", style="dim italic")
            return out

        one = first_fitting([line(full), line(short)], width)
        if one.cell_len <= width:
            return one
        for parts in (full, short):  # two lines: the break after the most counts that fit on the first
            for at in range(len(parts) - 1, 0, -1):
                two = line(parts, at)
                if all(cell_len(row) <= width for row in two.plain.split("\n")):
                    return two
        return line(short)

    def _source_counts(self, documents: int) -> tuple[int, int]:
        """(sources, of them references), read once per document count (a load changes them)."""
        cached = getattr(self, "_sources_seen", None)
        if cached is None or cached[0] != documents:
            roles = self.project.source_roles()
            cached = (documents, len(roles), sum(1 for role in roles.values() if role == "reference"))
            self._sources_seen = cached
        return cached[1], cached[2]

    ROW_CHARS = 240  # the characters of each document's start kept for the lists' rows
    ROWS_KEPT = 50_000  # documents' rows kept (emptied beyond it)

    def _previews(self, ords: list[int], chars: int = 200) -> dict[int, tuple[str, int, str]]:
        """ord -> (id, length, the text's first `chars` characters): read without loading a
        huge text whole (SQLite's substr() would, on the UI thread, for every row shown). Rows
        read before are not read again (kept, up to ROWS_KEPT): the documents do not change
        while a scan's pairs are shown."""
        if chars > self.ROW_CHARS:
            return self.project.text_windows(ords, chars)
        found = {o: r for o in ords if (r := self._rows.get(o)) is not None}
        missing = [o for o in ords if o not in found]
        if missing:
            read = self.project.text_windows(missing, self.ROW_CHARS)
            self._keep_rows(read)
            found.update(read)
        return {o: (r[0], r[1], r[2][:chars]) for o in ords if (r := found.get(o)) is not None}

    def _ids(self, ords: list[int]) -> list[str]:
        """The documents' ids (from the rows read, else from the project)."""
        rows = self._rows
        if all(o in rows for o in ords):
            return [rows[o][0] for o in ords]
        return self.project.ids_for(ords)

    def _keep_rows(self, rows: dict[int, tuple[str, int, str]]) -> None:
        if len(self._rows) + len(rows) > self.ROWS_KEPT:
            self._rows.clear()
        self._rows.update(rows)

    @property
    def pages(self) -> int:
        return max(1, -(-len(self.index.labels) // self.PAGE)) if self.index is not None else 1

    def render_list(self) -> None:
        """The page holding the cursor's cluster, its members, the cursor on its document."""
        pos = self.model.position
        if pos is not None:
            self.page = pos // self.PAGE
        self.show_page(pos)

    def show_page(self, pos: int | None = None) -> None:
        index = self.index
        table = self.query_one("#clusters", ClusterTable)
        self.page = min(self.page, self.pages - 1)
        start = self.page * self.PAGE
        stop = min(start + self.PAGE, len(index.labels))
        cluster_ids = [int(x) for x in index.labels[start:stop]]
        previews = {o: (d, t) for o, (d, _n, t) in self._previews(cluster_ids).items()}
        table.fill(index, start, stop, previews, progress=self.model.progress if self.model.has_pending else None)
        update_static(self.query_one("#clusters-title", Static), self.clusters_title(start, stop))
        if stop > start:
            if pos is None or not start <= pos < stop:  # the cursor is not on this page: its first cluster
                self.model.select_position(start)
                pos = start
            table.move_cursor(row=pos - start, animate=False)
            self.show_members()
        else:
            self._shown_cluster = None
            self.query_one("#members", MemberTable).clear()
            update_static(self.query_one("#members-title", Static), Text("No clusters at this threshold", style="dim"))
            update_static(self.query_one("#member-info", Static), "")
            update_static(self.query_one("#preview-title", Static), "")

    def clusters_title(self, start: int, stop: int) -> Text:
        """'Clusters 1–100 of 2,345 · page 1/24 (< >) · largest first · undecided only': the sort
        and the filter whole, the words around them fewer when the pane is narrow."""
        shown = f"{start + 1 if stop else 0:,}–{stop:,} of {len(self.index.labels):,}"
        listing = self.model.view.listing.describe()
        width = (self.app.size.width if self.app.size.width < self.NARROW else self.app.size.width // 2) - 2

        view = self.model.view
        short_listing = SHORT_SORTS.get(view.sort, view.sort) + (
            "" if view.filter == "all" else " · " + view.filter.replace(",", " ")
        )

        def title(head: str, page: str, keys: str, listing: str = listing) -> Text:
            out = Text(head, style="bold")
            if self.pages > 1:
                out.append(page, style="dim")
            out.append(" · ", style="dim")
            out.append(listing)
            out.append(keys, style="dim")
            return out

        # the last one wraps (the title grows to two rows) rather than lose its filter
        return first_fitting(
            [
                title(f"Clusters {shown}", f" · page {self.page + 1}/{self.pages} (< >)", " (s, f)"),
                title(f"Clusters {shown}", f" · page {self.page + 1}/{self.pages}", ""),
                title(shown, f" · p{self.page + 1}/{self.pages}", ""),
                title(shown, f" · p{self.page + 1}/{self.pages}", "", short_listing),
            ],
            width,
        )

    def show_members(self) -> None:
        """The cursor's cluster's members, the cursor's document selected."""
        if self._members_timer is not None:
            self._members_timer.stop()
            self._members_timer = None
        cluster_id, focus_doc = self.model.cursor.cluster_id, self.model.cursor.doc
        self._shown_cluster = cluster_id
        index = self.index
        members = index.members(cluster_id)
        table = self.query_one("#members", MemberTable)
        hit = np.flatnonzero(members == focus_doc) if focus_doc is not None else np.empty(0, np.int64)
        # enough chunks to show the document to focus
        count = (int(hit[0]) // table.CHUNK + 1) * table.CHUNK if len(hit) else table.CHUNK
        rows = self._previews(members[:count].tolist(), 240)
        table.fill(
            index,
            cluster_id,
            members,
            rows,
            count,
            decided=self.model.is_decided,
            being_removed=self.model.is_being_removed,
        )
        self.update_members_title()
        table.move_cursor(row=int(hit[0]) if len(hit) else 0, animate=False)
        self.show_member_info()

    def update_members_title(self) -> None:
        table = self.query_one("#members", MemberTable)
        title = Text()
        title.append(f"{table.total:,} members", style="bold")
        if self._shown_cluster is not None:
            done, total = self.model.progress(self._shown_cluster)
            title.append(f" · {done}/{total} reviewed", style="bold green" if done >= total else "bold")
        if table.loaded < table.total:
            title.append(f" ({table.loaded:,} shown, more as you scroll)", style="dim")
        width = (self.app.size.width if self.app.size.width < self.NARROW else self.app.size.width // 2) - 2
        update_static(
            self.query_one("#members-title", Static),
            first_fitting(
                [
                    Text.assemble(title, ("  enter: diff · k keep · x remove · n not dup · N none · a accept", "dim")),
                    Text.assemble(title, ("  enter diff · k x n N a", "dim")),
                    title,
                ],
                width,
            ),
        )

    def show_member_info(self) -> None:
        o = self.model.cursor.doc if self.index is not None else None
        info = self.query_one("#member-info", Static)
        if o is None:
            update_static(info, "")
            return
        c = self.index.clustering
        doc_id, length, _ = self._previews([o], 1)[o]
        pane = self.app.size.width if self.app.size.width < self.NARROW else self.app.size.width // 2
        kept, kept_sim = compared_with(c, o)  # the kept document, as in the list and the pair view
        keeper_id = self._ids([kept])[0] if kept is not None else None
        via = via_sim = None
        if keeper_id is not None and self.graph is not None:  # (the same link the removed log gives)
            via, via_sim = links_to_kept(self.graph, c, [o])
            via, via_sim = (via, via_sim) if via[0] >= 0 else (None, None)
        via_id = self._ids([int(via[0])])[0] if via is not None and via[0] >= 0 else None
        # ids whole (to 80 cells, and never folded inside: a folded id ran into its length, ".1362
        # chars" for "….1  362 chars") where the line holds them in its rows, else shortened
        for id_width in (min(80, pane - 16), max(16, (pane - 24) // 2), 16):
            t = self._member_line(o, doc_id, length, keeper_id, via_id, via_sim, id_width, kept_sim)
            if -(-cell_len(t.plain) // max(1, pane - 2)) <= 3:  # (word wrapping may add a row: 4 hold it)
                break
        for note in decisions.notes_for(self.project, doc_id):
            t.append("\nnote: ", style="italic")
            t.append(literal_line(note))
        update_static(info, t)
        self.show_preview(o)

    def _member_line(
        self, o: int, doc_id: str, length: int, keeper_id, via_id, via_sim, id_width: int, sim: float = float("nan")
    ) -> Text:
        """The selected document: its id, length, why; what it duplicates (the kept document, which
        it is compared with everywhere), and through whom (the member it copies or that links it)."""
        ids = [literal_line(i) for i in (doc_id, keeper_id, via_id) if i is not None]
        short = dict(zip(ids, shorten_each(ids, id_width)))  # apart where they would read alike
        t = Text()
        t.append(short[literal_line(doc_id)], style="bold")
        t.append(f"  {length:,} chars · {why(self.index, o, self._shown_cluster)}")
        if self.model.is_decided(o):
            t.append(" · decided", style="green")
        if keeper_id is not None:
            t.append(" · duplicate of ")
            t.append(short[literal_line(keeper_id)], style="bold")
            if via_sim is None:
                t.append(f" (Jaccard {sim:.2f})" if not np.isnan(sim) else " (joined through other members)")
            elif via_id is not None:  # chained: say through whom (a pair the reviewer rejected is never cited)
                t.append(" · linked via ")
                t.append(short[literal_line(via_id)], style="bold")
                t.append(f" ({via_sim[0]:.2f})")
                if not np.isnan(sim):
                    t.append(f"; {sim:.2f} with the kept one", style="dim")
        return t

    # -- triage preview: the selected member against its kept document, differences marked --
    PREVIEW_SYNC_CHARS = 4000  # below this the diff is computed at once (a few ms)

    def show_preview(self, o: int) -> None:
        """The document the keys act on (`o`) and its kept document; on the kept document itself,
        it beside its closest member. The title names which one the keys act on."""
        c = self.index.clustering
        target = self._preview_target = o
        self.session.intake.showing("main", target)
        kept, sim = compared_with(c, o)  # the kept document (the pair view's left side too)
        if kept is None:  # the kept document itself: show it beside its closest member
            kept, o = o, self.model.closest_member(o)
        # the start of a huge document: reading, wrapping and the diff stay bounded on any size
        left_shown, right_shown = windows(self.project, [kept, o], PREVIEW_WINDOW, PREVIEW_LINES)
        ids = self._ids([kept, o])
        pane = self.app.size.width if self.app.size.width < self.NARROW else self.app.size.width // 2
        id_width = max(12, (pane - 2 - 36) // 2)  # both ids and the words between them on the title's line
        short = shorten_each([literal_line(i) for i in ids], id_width)  # apart where they would read alike
        title = Text()
        if target == kept:
            title.append(" keys act on ▸ ", style="bold reverse")
            title.append(" KEPT ", style="bold green")
            title.append(short[0], style="bold")
            if o != kept:
                title.append("  ·  beside " if pane < 100 else "  ·  beside its closest member ", style="dim")
                title.append(short[1], style="dim")
        else:
            title.append("kept ", style="dim")
            title.append(short[0], style="bold")
            title.append("  ·  ", style="dim")
            title.append(" keys act on ▸ ", style="bold reverse")
            title.append(" " + short[1], style="bold")
            room = self.query_one("#preview-title", Static).content_size.width or pane - 3  # (border, padding)
            if not np.isnan(sim) and title.cell_len + 14 <= room:  # else it wrapped onto the hidden second line
                title.append(f"  Jaccard {sim:.2f}", style="dim")
        cut = left_shown.cut or (right_shown.cut and o != kept)
        # the title's second line says how much is shown (the class on the title alone: restyling the screen
        # on every move between a huge document and a short one took 30 ms)
        self.query_one("#preview-title", Static).set_class(cut, "-cut")
        if cut:
            title.append("\n")
            title.append(
                short_notice(left_shown, right_shown if o != kept else Shown("", 0), ("kept", "other")),
                style="italic bold",
            )
        update_static(self.query_one("#preview-title", Static), title)
        self.query_one("#preview", PairDiff).show(
            (kept, o), left_shown, right_shown if o != kept else None, sync_chars=self.PREVIEW_SYNC_CHARS
        )
        self._drawn_after_refresh()

    def _drawn_after_refresh(self) -> None:
        """The document the keys act on is on screen (its row and its preview) once this redraw is."""
        self.call_after_refresh(self.session.intake.drawn, "main", self._preview_target)

    def _admitted(self) -> bool:
        """Whether the decision key being handled saw the cursor's document on screen (no
        document at all: the model says so)."""
        doc = self.model.cursor.doc if self.index is not None else None
        return doc is None or self.session.intake.admit("main", doc)

    @staticmethod
    def _current(event: DataTable.RowHighlighted) -> bool:
        """Whether a highlight is of the row the table's cursor is on now: the same row number
        and the same row key. One queued before a refill may carry the row number the cursor is
        on again but another document: acting on it moved the cursor to that document."""
        table = event.data_table
        if event.row_key is None or event.row_key.value is None or event.cursor_row != table.cursor_row:
            return False
        try:
            return table.coordinate_to_cell_key(Coordinate(event.cursor_row, 0)).row_key == event.row_key
        except CellDoesNotExist:
            return False

    HELD = 0.09  # s: cluster moves closer together than this are a held key (or fast typing)
    QUIET = 0.06  # s: then the members and the preview follow once the cursor rested this long

    @on(DataTable.RowHighlighted, "#clusters")
    def _cluster_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.index is None or not self._current(event):
            return  # stale: posted while the page was refilled, before the cursor was put back
        cluster_id = int(event.row_key.value)
        if cluster_id != self.model.cursor.cluster_id:  # the reviewer moved: the cluster's first member to review
            self.model.select_cluster(cluster_id)
            now = time.monotonic()
            held, self._last_move = now - self._last_move < self.HELD, now
            if held:  # only the cursor moves while the key is held; the rest once it rests
                if self._members_timer is not None:
                    self._members_timer.stop()
                self._members_timer = self.set_timer(self.QUIET, self._members_after_rest)
            else:
                self.show_members()

    def _members_after_rest(self) -> None:
        self._members_timer = None
        if self.index is not None and self.model.cursor.cluster_id is not None:
            self.show_members()

    @on(DataTable.RowHighlighted, "#members")
    def _member_highlighted(self, event: DataTable.RowHighlighted) -> None:
        table = self.query_one("#members", MemberTable)
        if table.wants_more():
            table.extend(self._previews(table.pending(), 240))
            self.update_members_title()
        if self.index is None or not self._current(event) or self._shown_cluster != self.model.cursor.cluster_id:
            return
        doc = int(event.row_key.value)
        if doc != self.model.cursor.doc:
            self.model.select(doc)
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
        """The document the keys act on."""
        return self.model.cursor.doc if self.model is not None and self.index is not None else None

    # -- actions --------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_scan":
            return self.scanning
        if action == "rescan":
            return not self.scanning
        if action == "search":
            return None if self.index is None else True
        if action in ("tune", "audit"):  # works on the stored pairs themselves
            return None if self.graph is None else True
        if action in (
            "keep",
            "remove",
            "not_duplicate",
            "none_duplicates",
            "accept",
            "bulk_accept",
            "note",
            "open_pair",
            "export",
            "page",
            "cycle_sort",
            "cycle_filter",
            "type_filter",
            "cycle_keep_rule",
            "keep_by_field",
            "undo",
            "redo",
            "next_match",
            "cluster",
            "change",
        ):
            return None if self.index is None else True
        return True

    def action_threshold(self, delta: float) -> None:
        self.session.step_threshold(delta)

    def action_cluster(self, delta: int) -> None:
        """} {: the next or previous cluster of the list (its first member to review), as in the
        pair view."""
        pos = self.model.position
        if pos is None:
            return
        if not 0 <= pos + delta < len(self.index.labels):
            self.notify("This is the " + ("last" if delta > 0 else "first") + " cluster of the list", timeout=2)
            return
        self.model.select_position(pos + delta)
        self.render_list()

    def action_change(self, _delta: int) -> None:
        self.notify("] [ go through the changes in the pair view (enter opens it); + - move the threshold", timeout=4)

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
                self.session.set_threshold(float(value))

        self.app.push_screen(AskScreen("Threshold", f"{self.threshold:.2f}", validate=validate), done)

    def action_toggle_policy(self) -> None:
        self.session.toggle_policy()

    def action_id_width(self, cells: int) -> None:
        """Widen (cells > 0) or narrow the id columns, in the view stored with the project."""
        members = self.query_one("#members", MemberTable)
        extra = self.model.view.id_widening
        now, then = members.id_room(extra), members.id_room(extra + cells)
        if then == now:
            self.notify(
                f"The id column is {now} cells, as {'wide' if cells > 0 else 'narrow'} as it goes here", timeout=2
            )
            return
        self.model.set_id_widening(members.widening_for(then))
        self.session.remember_view()
        if self.index is not None:
            self.render_list()
        self.notify(f"The id column is {then} cells ({'I' if cells > 0 else 'i'} takes it back)", timeout=2)

    def action_cycle_sort(self) -> None:
        self.model.cycle_sort()
        self._after_relist()  # (the status line and the list's title name it: no toast over the preview)

    def _after_relist(self) -> None:
        self.session.remember_view()
        self.update_top()
        self.page = 0
        if self.model.needs_rebuild():
            self.session.schedule_recluster(keep_order=False)  # the filter needs every cluster: rebuilt
        elif self.index is not None:
            self.render_list()

    def action_cycle_keep_rule(self) -> None:
        """Which document a cluster keeps when the reviewer did not choose, for the project (the
        app, the policies and every export follow it)."""
        rules = list(keep_rules.KEEP_RULES)
        current = keep_rules.keep_rule(self.project)
        self.session.set_keep_rule(rules[(rules.index(current) + 1) % len(rules)] if current in rules else "first")

    def action_keep_by_field(self) -> None:
        """Keep the document with the highest / lowest value of a record field (newest date, best score)."""

        def done(rule: str | None) -> None:
            if rule:
                self.session.set_keep_rule(rule)

        current = keep_rules.keep_rule(self.project)
        db = self.spec.db

        def parse(text: str) -> str:  # a field no record has is refused here, with the fields there are
            with Project(db) as project:
                return keep_rules.check_keep_rule(project, text)

        self.app.push_screen(
            AskScreen(
                "Keep rule: max:FIELD or min:FIELD (highest / lowest value; no value comes "
                "last), first or longest. Clusters you decided keep theirs.",
                current if ":" in current else "",
                placeholder="e.g. max:date, max:score",
                parse=parse,
            ),
            done,
        )

    def action_cycle_filter(self) -> None:
        """Which clusters the list shows: all, undecided, with a near duplicate, exact copies only
        (from a typed filter: all)."""
        self.model.cycle_filter()
        self._after_relist()  # (the status line and the list's title name it: no toast over the preview)

    def action_type_filter(self) -> None:
        """Filter by size and lowest similarity, with or without the named filters."""

        def done(flt: str | None) -> None:
            if flt is not None:
                self.model.set_filter(flt)
                self._after_relist()
                self.notify(
                    "Showing every cluster" if flt == "all" else f"Showing clusters: {flt.replace(',', ', ')}",
                    timeout=3,
                )

        current = self.model.view.filter
        from ...review.index import parse_filter

        self.app.push_screen(
            AskScreen(
                "Filter: size>=N size<=N sim>=X sim<=X (lowest similarity), undecided, near, exact; empty for all",
                "" if current == "all" else current.replace(",", " "),
                placeholder="e.g. size>=5 sim<=0.9 undecided",
                parse=parse_filter,
            ),
            done,
        )

    def action_page(self, delta: int) -> None:
        new = min(max(self.page + delta, 0), self.pages - 1)
        if new != self.page:
            self.page = new
            self.model.select_position(new * self.PAGE)
            self.render_list()

    # -- decisions: on the document on screen (the session's key intake), by the session ------
    def action_keep(self) -> None:
        if self._admitted():
            self.session.keep()

    def action_remove(self) -> None:
        if self._admitted():
            self.session.remove()  # asks first when it is a kept document

    def action_not_duplicate(self) -> None:
        if self._admitted():
            self.session.separate()

    def action_none_duplicates(self) -> None:
        if not self._admitted():
            return
        cluster_id = self._cluster_id
        self.session.decide_cluster(
            "Say none are duplicates",
            self.session.shown.unseen(cluster_id),
            lambda: self.model.plan_none_duplicates(cluster_id),
        )

    def action_accept(self) -> None:
        if not self._admitted():
            return
        cluster_id = self._cluster_id
        self.session.decide_cluster(
            "Accept the cluster", self.session.shown.unseen(cluster_id), lambda: self.model.plan_accept(cluster_id)
        )

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
            at_least = float(text)
            cluster_ids, removed = self.model.bulk_candidates(at_least)
            if not cluster_ids:
                self.notify(
                    f"No listed cluster to review has all its similarities ≥ {at_least:.2f}", severity="warning"
                )
                return

            def confirmed(answer: str | None) -> None:
                if answer:
                    self.session.act(lambda: self.model.plan_bulk_accept(cluster_ids))

            self.app.push_screen(
                AskScreen(
                    f"Accept {len(cluster_ids):,} clusters ({removed:,} documents removed)? "
                    "Type yes (u undoes it in one step)",
                    placeholder="yes",
                    validate=lambda t: (
                        None if t.strip().lower() in ("y", "yes") else "Type yes to accept them, esc to cancel"
                    ),
                ),
                confirmed,
            )

        self.app.push_screen(
            AskScreen(
                "Accept every listed cluster to review whose lowest similarity is at "
                "least this (1 = exact copies only):",
                "1.00",
                validate=valid,
            ),
            chosen,
        )

    def action_note(self) -> None:
        o = self.selected_doc()
        if o is None:
            self.notify("Select a document first", severity="warning")
            return

        def done(value: str | None) -> None:
            if value:
                self.session.act(lambda: self.model.plan_note(value, o))

        doc_id = self.project.ids_for([o])[0]
        self.app.push_screen(AskScreen(f"Note on {shorten_middle(doc_id, 60)}", placeholder="why this decision?"), done)

    def action_undo(self) -> None:
        self.session.undo()

    def action_redo(self) -> None:
        self.session.redo()

    def action_open_pair(self) -> None:
        o = self.selected_doc()
        if o is None or self._cluster_id is None:
            return
        members = self.index.members(self._cluster_id)
        if len(members) < 2:
            return
        if self.model.is_kept(o):  # the kept document itself: compare it with its closest member
            o = self.model.closest_member(o)
        from .pair import PairScreen

        if self._pair_screen is None:  # one pair view, installed: esc keeps it for the next opening
            self._pair_screen = PairScreen(self.session, self._cluster_id, o)
            self.app.install_screen(self._pair_screen, name=self.PAIR_SCREEN)
        else:
            self._pair_screen.reopen(self._cluster_id, o)
        self.app.push_screen(self.PAIR_SCREEN)

    def action_tune(self) -> None:
        from .tune import TuneScreen

        self.app.push_screen(TuneScreen(self.session))

    def action_audit(self) -> None:
        from .audit import AuditScreen

        self.app.push_screen(AuditScreen(self.session))

    # export
    def action_export(self) -> None:
        if self.partial:
            inputs = " ".join(shlex.quote(p) for p in self.partial.inputs)
            self.notify(
                f"This project holds only the documents with a duplicate; write the curated corpus on the "
                f"cluster:\ndedup-tui cluster-export {shlex.quote(str(self.spec.db))} {inputs} "
                f"--threshold {self.threshold:.2f} --policy {self.policy} --out CURATED_DIR",
                title="Partial view",
                severity="warning",
                timeout=20,
                markup=False,
            )
            return
        default = default_export_path(self.spec.db)
        if self.last_export is not None:
            default = self.last_export
        kept_by = self.index.clustering.kept_by if self.index is not None else None
        self.app.push_screen(
            ExportScreen(
                default, self.threshold, self.policy, self.floor, project_protected(self.project), keep=kept_by or ""
            ),
            self._export_chosen,
        )

    def _export_chosen(self, request: ExportRequest | None) -> None:
        if request is None:
            return
        self.last_export = request.out
        self.notify(f"Exporting to {request.out}…", markup=False, timeout=2)
        self.run_export(request, self.graph)

    @work(thread=True, exclusive=True, group="export", exit_on_error=False)
    def run_export(self, request: ExportRequest, graph) -> None:
        """(A worker thread: what it reads is given, on the UI thread.)"""
        project = Project(self.spec.db)
        try:
            logs = request.logs
            result = curated.export_curated(
                project,
                request.threshold,
                request.policy,
                request.out,
                fmt=request.fmt,
                removed_out=curated.beside(request.out, "removed.jsonl") if logs else None,
                decisions_out=curated.beside(request.out, "decisions.jsonl") if logs else None,
                manifest_out=curated.beside(request.out, "manifest.json") if logs else None,
                graph=graph,
            )
        finally:
            project.close()
        self.post_message(ExportFinished(result))

    def on_export_finished(self, message: ExportFinished) -> None:
        r = message.result
        self.notify(
            f"Exported {r.kept:,} kept documents to {r.out}; {r.removed:,} removed "
            f"({r.exact:,} exact, {r.near:,} near, {r.reviewer:,} by reviewer), {r.decisions_line()}",
            markup=False,
            timeout=8,
        )
