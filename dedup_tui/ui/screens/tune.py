"""The tuning screen (distribution, sweeps, S-curve, label statistics, chaining) and the
borderline labelling queue. Numbers come from engine.curate.tune, computed in worker threads."""

from __future__ import annotations

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Container, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Static
from textual.worker import WorkerState, get_current_worker

from ...engine.curate import tune
from ...engine.curate.decisions import ords_for_ids
from ...engine.scanning.lsh import candidate_probability
from ...engine.store import Project
from ..actions import LABEL_ACTIONS, TUNE_ACTIONS
from ..text import first_fitting, literal_line, shorten_each, shorten_middle
from ..widgets.charts import HistogramChart, LineChart
from ..widgets.docview import DocView, compose_side_by_side
from ..widgets.footer import AppFooter
from ..widgets.pair_diff import PairDiff
from ..window import PAIR_LINES, PAIR_WINDOW, Shown, pair_notice, windows


class TuneReady(Message):
    def __init__(self, generation: int, report: tune.TuneReport) -> None:
        super().__init__()
        self.generation, self.report = generation, report


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.0%}" if x in (0.0, 1.0) else f"{x * 100:.1f}%"


def stats_renderable(r: tune.TuneReport) -> Table | Text:
    """Label statistics, the recommendation and the shingle-size scores, as one rich table."""
    out = Table.grid(padding=(0, 1))
    out.add_column()
    e = r.estimates
    c = r.label_counts
    head = Text()
    head.append("Labels ", style="bold")
    head.append(f"{c['duplicate']} duplicate · {c['not_duplicate']} not · {c['skip']} skipped")
    out.add_row(head)
    scan = Text()
    scan.append("Scan ", style="bold")
    scan.append(f"k={r.k}, floor {r.floor:.2f}; ")
    if r.curve is None:
        scan.append("exhaustive: every pair ≥ floor found")
    else:
        _xs, _ps, bands, rows = r.curve
        p_t, p_f = candidate_probability([r.threshold, r.floor], bands, rows)
        scan.append(f"LSH {bands}×{rows}: P(found) {p_t:.3f} at {r.threshold:.2f}, {p_f:.3f} at the floor")
    out.add_row(scan)
    if e is None:
        out.add_row(
            Text(
                "No labels yet: press L to label pairs sampled around the threshold; "
                "precision, recall and a recommended threshold follow from them.",
                style="dim",
            )
        )
    else:
        # what the labels say at the threshold and the recommendation first (at 80x24 the bins
        # below them scroll), then the bins they come from
        p, rec = e.at(r.threshold)
        now = Text()
        now.append(f"At {r.threshold:.2f}: ", style="bold")
        now.append(f"precision ≈ {_pct(p)}, recall ≈ {_pct(rec)}")
        out.add_row(now)
        recommend = Text()
        recommend.append(f"Target {e.target:.0%} ( ): ", style="bold")
        if e.too_few_labels:
            recommend.append(
                f"too few labels to recommend ({e.labelled} of {tune.MIN_LABELS_TO_RECOMMEND}; L labels more)",
                style="italic",
            )
        elif e.recommended is None:
            recommend.append("no threshold reaches it yet", style="italic")
        else:
            recommend.append(f"{e.recommended:.2f}", style="bold reverse")
            recommend.append(
                f"  precision ≈ {_pct(e.recommended_precision)} (worst case "
                f"{_pct(e.recommended_precision_low)}), recall ≈ {_pct(e.recommended_recall)}  (= applies)"
            )
        out.add_row(recommend)
        t = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold")
        for name, just in (
            ("bin", "left"),
            ("pairs", "right"),
            ("lab.", "right"),
            ("prec.", "right"),
            ("95% Wilson", "left"),
        ):
            t.add_column(name, justify=just, no_wrap=True)
        for b in e.bins:
            n = b.duplicate + b.not_duplicate
            if not n:
                continue
            here = b.lo <= r.threshold < b.hi or (b.hi == 1.0 and r.threshold >= b.lo)
            style = "bold" if here else ""
            t.add_row(
                f"{b.lo:.2f}–{b.hi:.2f}",
                f"{b.population:,}",
                str(n),
                _pct(b.precision),
                f"{b.ci[0]:.2f}–{b.ci[1]:.2f}",
                style=style,
            )
        out.add_row(t)
    if r.shingles:
        s = Text()
        s.append("Shingle size on your labels ", style="bold")
        s.append("(ROC AUC · best F1)\n", style="dim")
        best = max((x for x in r.shingles if x.auc is not None), key=lambda x: x.auc, default=None)
        for sc in r.shingles:
            style = "bold" if best is not None and sc.k == best.k else ""
            auc = "—" if sc.auc is None else f"{sc.auc:.3f}"
            f1 = "—" if sc.f1 is None else f"{sc.f1:.2f}"
            s.append(f" k={sc.k}: {auc} · {f1}{' ← scan' if sc.k == r.k else ''}\n", style=style)
        out.add_row(s)
    return out


class TuneScreen(Screen):
    # narrow terminals show the numbers or the plots, v switches (both do not fit at 80x24)
    BINDINGS = [a.binding() for a in TUNE_ACTIONS]
    ACTIONS = TUNE_ACTIONS
    NARROW = 110

    def __init__(self, session) -> None:
        super().__init__()
        self.session = session
        self.report: tune.TuneReport | None = None
        self.target = tune.DEFAULT_TARGET_PRECISION
        self._generation = 0
        self.svg_path = session.spec.db.with_name(session.spec.db.stem + ".tuning.svg")
        self.labels_path = session.spec.db.with_name(session.spec.db.stem + ".labels.jsonl")
        self._far_below = False  # the chains' most distant pairs are under the table (no room in it)

    def compose(self) -> ComposeResult:
        yield Static("", id="tune-header")
        with Container(id="tune-body"):
            with Vertical(id="tune-plots"):
                yield HistogramChart("Pair similarities (log scale)", id="hist")
                yield LineChart("Kept documents vs threshold", id="sweep")
            with Vertical(id="tune-side"):
                with VerticalScroll(id="tune-stats-scroll"):
                    yield Static("", id="tune-stats")
                yield Static("", id="chains-title", classes="pane-title")
                yield DataTable(id="chains", cursor_type="row", zebra_stripes=True)
                yield Static("", id="chain-far")
        yield AppFooter()

    def on_mount(self) -> None:
        table = self.query_one("#chains", DataTable)
        table.add_columns(*self.CHAIN_HEADERS[0])  # (fitted to the pane when the report comes)
        self.update_header()
        self.refresh_report()
        table.focus()

    def on_resize(self) -> None:
        self.set_class(self.size.width < self.NARROW or self.size.height < 30, "-narrow")
        self.update_header()
        self.refresh_bindings()
        if self.report is not None:
            self.call_after_refresh(self.fill_chains)  # the side pane's new width

    def action_toggle_plots(self) -> None:
        self.toggle_class("-plots")
        self.update_header()

    def on_screen_resume(self) -> None:
        if self.report is not None:
            # after the labels just made are written (computing before showed "No labels yet");
            # the previous numbers stay on screen until the new ones are ready
            self.app.writer.submit(lambda project: None, lambda _r: self.refresh_report(), what="the report")

    # -- computing ------------------------------------------------------------------------
    def refresh_report(self) -> None:
        self._generation += 1
        self.update_header()
        self.compute(self._generation, self.session.threshold, self.target)

    @work(thread=True, exclusive=True, group="tune", exit_on_error=False)
    def compute(self, generation: int, threshold: float, target: float) -> None:
        project = Project(self.session.spec.db)
        try:
            report = tune.report(project, self.session.graph, threshold, target)
        finally:
            project.close()
        if not get_current_worker().is_cancelled:
            self.post_message(TuneReady(generation, report))

    def on_tune_ready(self, message: TuneReady) -> None:
        if message.generation != self._generation:
            return
        self.report = r = message.report
        curve = None
        if r.curve is not None:
            _xs, _ps, bands, rows = r.curve
            curve = lambda s: candidate_probability(s, bands, rows)  # noqa: E731
        hist = self.query_one("#hist", HistogramChart)
        title = Text("Similarities ", style="bold")
        title.append(f"{r.pairs:,} pairs (log)", style="dim")
        if r.curve is not None:
            title.append("  • ", style=hist.style_of("curve"))
            title.append("S-curve ", style="bold")
            title.append(f"{r.curve[2]}×{r.curve[3]}: P(found)", style="dim")
        else:
            title.append("  exhaustive scan: all found", style="dim")
        hist.chart_title = title
        hist.set_data(self.session.graph.jaccard, r.floor, 1.0, curve, r.threshold)
        sweep = self.query_one("#sweep", LineChart)
        k_c, k_g = r.sweep.at(r.threshold)
        st = Text("Kept documents ", style="bold")
        st.append("● components", style=sweep.style_of("a"))
        st.append(f" {k_c:,}  ")
        st.append("◆ greedy", style=sweep.style_of("b"))
        st.append(f" {k_g:,}  at {r.threshold:.2f}")
        sweep.chart_title = st
        sweep.set_data(r.sweep.thresholds, [r.sweep.components, r.sweep.greedy], r.threshold)
        self.query_one("#tune-stats", Static).update(stats_renderable(r))
        self.fill_chains()
        self.update_header()
        self.refresh_bindings()

    # the chains table's headers, shorter as the pane narrows (a header wider than the pane was cut)
    CHAIN_HEADERS = [
        ("cluster (kept)", "size", "weakest", "most distant pair", "cut"),
        ("kept", "size", "weakest", "farthest pair", "cut"),
        ("kept", "size", "min", "far pair", "cut"),
    ]
    FAR_ID_MIN = 20  # cells of each most distant id below which the pair leaves the table for a line under it

    def _chains_room(self) -> int:
        """The cells a chains row may take: the side pane's width less a vertical scrollbar."""
        side = self.query_one("#tune-side").size.width
        if not side:
            side = self.app.size.width if self.app.size.width < self.NARROW else self.app.size.width * 2 // 5 - 1
        return max(30, side - 2)

    def fill_chains(self) -> None:
        """The chained clusters, every column and header whole in the pane: ids shortened where
        they differ. When the pane leaves the most distant pair's ids fewer than FAR_ID_MIN cells
        each (ma…ist.1 / m…t.1 at 120x40), the pair is shown under the table for the selected
        chain instead, its ids whole or nearly."""
        r = self.report
        table = self.query_one("#chains", DataTable)
        row = table.cursor_row
        room = self._chains_room()
        sizes = [f"{ch.size:,}" for ch in r.chains]
        weakest = [f"< {ch.weakest:.2f}" if ch.below_floor else f"{ch.weakest:.3f}" for ch in r.chains]
        cuts = [str(len(ch.cut)) for ch in r.chains]
        kept_ids = [literal_line(ch.label_id) for ch in r.chains]
        pad = 2 * len(self.CHAIN_HEADERS[0])  # DataTable's one cell of padding each side of each column
        for headers in self.CHAIN_HEADERS:
            fixed = pad + sum(
                max([cell_len(h), *map(cell_len, values)])
                for h, values in ((headers[1], sizes), (headers[2], weakest), (headers[4], cuts))
            )
            ids = room - fixed
            kept_w = min(40, max(cell_len(headers[0]), ids * 2 // 5))
            far_w = ids - kept_w
            if far_w >= cell_len(headers[3]):
                break
        each = max(4, (far_w - 3) // 2)  # the two ids of the most distant pair, " / " between them
        self._far_below = each < self.FAR_ID_MIN and any(
            cell_len(literal_line(i)) > each for ch in r.chains for i in ch.far_ids
        )
        table.clear(columns=True)
        if self._far_below:  # four columns: the kept id gets what the pair had
            for long in self.CHAIN_HEADERS:
                headers = (long[0], long[1], long[2], long[4])
                kept_w = min(
                    40,
                    room
                    - 2 * len(headers)
                    - sum(
                        max([cell_len(h), *map(cell_len, values)])
                        for h, values in zip(headers[1:], (sizes, weakest, cuts))
                    ),
                )
                if kept_w >= cell_len(headers[0]):
                    break
        table.add_columns(*headers)
        for i, (ch, kept) in enumerate(zip(r.chains, shorten_each(kept_ids, kept_w))):
            cells = [Text(kept), sizes[i], weakest[i]]
            if not self._far_below:
                a, b = shorten_each([literal_line(x) for x in ch.far_ids], each)
                cells.append(Text(f"{a} / {b}"))
            table.add_row(*cells, cuts[i], key=str(i))
        if r.chains:
            table.move_cursor(row=min(row, len(r.chains) - 1), animate=False)
        self.show_far_pair()
        title = Text(f"Chained clusters at {r.threshold:.2f}: {len(r.chains)}", style="bold")
        side = self.query_one("#tune-side").size.width or self.app.size.width
        self.query_one("#chains-title", Static).update(
            first_fitting(
                [
                    Text.assemble(title, (f"  (< {r.threshold - 0.2:.2f} inside) b break · g open", "dim")),
                    Text.assemble(title, ("  b break · g open", "dim")),
                    title,
                ],
                side - 2,
            )
        )

    def show_far_pair(self) -> None:
        """Under the chains table, when the table has no room for it: the selected chain's two most
        distant members, on one line when they fit, else one line each."""
        far = self.query_one("#chain-far", Static)
        ch = self.selected_chain() if self._far_below else None
        far.display = ch is not None
        if ch is None:
            return
        width = self._chains_room()
        a, b = (literal_line(x) for x in ch.far_ids)
        each = (width - 17) // 2
        if cell_len(a) + cell_len(b) <= 2 * each or each >= self.FAR_ID_MIN:
            a, b = shorten_each([a, b], each) if cell_len(a) + cell_len(b) > 2 * each else (a, b)
            far.update(Text.assemble(("most distant: ", "dim"), a, (" / ", "dim"), b))
            return
        a, b = shorten_each([a, b], max(8, width - 14))
        far.update(Text.assemble(("most distant: ", "dim"), a, ("\n         and: ", "dim"), b))

    @on(DataTable.RowHighlighted, "#chains")
    def _chain_highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self.show_far_pair()

    def update_header(self) -> None:
        width = max(20, self.app.size.width - 2)
        e = self.report.estimates if self.report is not None else None
        tail = Text()
        if e is not None and e.too_few_labels:
            tail.append(f"  too few labels ({e.labelled}/{tune.MIN_LABELS_TO_RECOMMEND})", style="dim")
        elif e is not None and e.recommended is not None:
            tail.append("  recommended ", style="dim")
            tail.append(f"{e.recommended:.2f}", style="bold")
            tail.append(" (=)", style="dim")
        if (
            self.report is None
            or self.report.threshold != self.session.threshold
            or (self.report.estimates is not None and self.report.estimates.target != self.target)
        ):
            tail.append("  computing…", style="dim italic")

        def head(threshold: str, target: str) -> Text:
            t = Text()
            t.append(" TUNING ", style="reverse bold")
            t.append(f" threshold {self.session.threshold:.2f} ", style="bold")
            t.append(threshold.format(policy=self.session.policy), style="dim")
            t.append(target.format(target=self.target), style="dim")
            return Text.assemble(t, tail)

        line = first_fitting(
            [
                head("({policy}; + - moves)", " · target precision {target:.0%} (( ) moves)"),
                head("+ -", " · target {target:.0%} ( )"),
                head("", " · target {target:.0%}"),
            ],
            width,
        )
        keys = "L: label pairs · S: SVG · j: labels JSONL · esc: back"
        if self.has_class("-narrow"):
            keys = ("v: numbers · " if self.has_class("-plots") else "v: plots · ") + keys
        line.append("\n" + keys, style="dim")
        self.query_one("#tune-header", Static).update(line)

    def on_worker_state_changed(self, event) -> None:
        if event.state == WorkerState.ERROR and event.worker.group == "tune":
            self.notify(
                f"{type(event.worker.error).__name__}: {event.worker.error}", severity="error", markup=False, timeout=10
            )

    # -- actions ---------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "apply":
            e = self.report.estimates if self.report is not None else None
            return None if e is None or e.recommended is None or e.too_few_labels else True
        if action == "toggle_plots":
            return self.has_class("-narrow")
        if action in ("split_chain", "open_chain"):
            return None if self.report is None or not self.report.chains else True
        return True

    def action_close(self) -> None:
        self.dismiss()

    def action_label_pairs(self) -> None:
        self.app.push_screen(LabelScreen(self.session, self.session.threshold))

    def action_apply(self) -> None:
        e = self.report.estimates if self.report is not None else None
        if e is None or e.recommended is None or e.too_few_labels:
            self.notify(
                "No recommendation yet: label pairs first (L)"
                if e is None or not e.too_few_labels
                else f"Too few labels to recommend ({e.labelled}; at least {tune.MIN_LABELS_TO_RECOMMEND} needed)",
                severity="warning",
            )
            return
        self.session.set_threshold(e.recommended)
        self.notify(
            f"Threshold {e.recommended:.2f} applied: estimated precision {_pct(e.recommended_precision)}, "
            f"recall {_pct(e.recommended_recall)}",
            timeout=4,
        )
        self.refresh_report()

    def action_threshold(self, delta: float) -> None:
        self.session.step_threshold(delta)
        self.refresh_report()

    def action_target(self, delta: float) -> None:
        self.target = round(min(max(self.target + delta, 0.5), 0.999), 3)
        self.refresh_report()

    def selected_chain(self) -> tune.Chain | None:
        table = self.query_one("#chains", DataTable)
        if self.report is None or not self.report.chains or table.row_count == 0:
            return None
        return self.report.chains[min(table.cursor_row, len(self.report.chains) - 1)]

    def action_split_chain(self) -> None:
        ch = self.selected_chain()
        if ch is None:
            return
        if self.session.act(lambda: self.session.model.plan_split_chain(ch)):
            self.app.writer.submit(lambda project: None, lambda _r: self.refresh_report(), what="the report")

    def action_open_chain(self) -> None:
        ch = self.selected_chain()
        if ch is None:
            return
        session = self.session
        if session.policy != "components":
            self.notify("Chains are components clusters: policy switched to components", timeout=3)
            session.show_document(ch.label, now=False)  # selected once the re-clustering is shown
            session.set_policy("components")
        else:
            session.show_document(ch.label)
        self.dismiss()

    def action_save_svg(self) -> None:
        path = self.app.save_screenshot(filename=self.svg_path.name, path=str(self.svg_path.parent))
        self.notify(f"Saved {path}", markup=False, timeout=4)

    def action_export_labels(self) -> None:
        n = tune.export_labels(self.session.project, self.labels_path)
        self.notify(f"Wrote {n:,} labels to {self.labels_path}", markup=False, timeout=4)


class LabelScreen(Screen):
    """Pairs sampled around the threshold, one at a time: 1 duplicate, 2 not, 0 skip (labels
    have keys of their own: they are evidence for tuning, never decisions)."""

    BINDINGS = [a.binding() for a in LABEL_ACTIONS]
    ACTIONS = LABEL_ACTIONS
    NARROW = 100
    SYNC_DIFF_CHARS = 20_000  # shorter pairs are diffed at once, longer ones in a worker

    def __init__(self, session, threshold: float) -> None:
        super().__init__()
        self.session = session
        self.threshold = threshold
        self.queue: list[tune.QueuePair] = []
        self.pos = 0
        self.done: list[tuple[str, str, str]] = []  # (a_id, b_id, label) in this session
        self.changed_decisions = False
        self.layout_choice: str | None = None
        self.current: tune.QueuePair | None = None
        self._ids: tuple[str, str] = ("", "")
        self.shown: list[Shown] = [Shown("", 0), Shown("", 0)]  # what is shown of each (a window of a huge one)
        self._round = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="label-header")
        with PairDiff():
            yield from compose_side_by_side()
        yield AppFooter()

    def on_mount(self) -> None:
        self.session.intake.forget("label")  # (a pair drawn in an earlier queue is not on screen now)
        self.refill()
        self.show_next()
        self.query_one("#right-doc", DocView).focus()

    def on_resize(self) -> None:
        stacked = self.size.width < self.NARROW if self.layout_choice is None else self.layout_choice == "stacked"
        self.set_class(stacked, "-stacked")

    def _labelled_ords(self) -> set[tuple[int, int]]:

        labs = tune.labels(self.session.project)
        ords = ords_for_ids(self.session.project, [x.a_id for x in labs] + [x.b_id for x in labs])
        return {(ords[x.a_id], ords[x.b_id]) for x in labs if x.a_id in ords and x.b_id in ords}

    def refill(self) -> None:
        floor, exclude = self.session.floor, self._labelled_ords()
        for span in (0.2, 0.4, 1.0):  # widen when nothing is left to label near the threshold
            self.queue = tune.label_queue(
                self.session.graph, self.threshold, floor, per_bin=10, span=span, exclude=exclude, seed=self._round
            )
            if self.queue:
                break
        self._round += 1
        self.pos = 0

    def show_next(self) -> None:
        if self.pos >= len(self.queue):
            self.refill()
        if not self.queue:
            self.current = None
            self.query_one(PairDiff).show(None, Shown("", 0), None)
            self.update_header("Every stored pair is labelled. esc: back to the tuning screen.")
            return
        q = self.current = self.queue[self.pos]
        project = self.session.project
        self._ids = tuple(project.ids_for([q.a, q.b]))
        # a window of a huge document (reading, wrapping and the diff bounded by it)
        self.shown = windows(project, [q.a, q.b], PAIR_WINDOW, PAIR_LINES)
        self.query_one("#label-header", Static).set_class(any(s.cut for s in self.shown), "-cut")  # a line says so
        self.query_one(PairDiff).show((q.a, q.b), *self.shown, sync_chars=self.SYNC_DIFF_CHARS)
        for side, doc_id in (("left", self._ids[0]), ("right", self._ids[1])):
            t = Text()
            t.append(f"{side}: ", style="dim")
            t.append(shorten_middle(doc_id, 60), style="bold")
            self.query_one(f"#{side}-title", Static).update(t)
        self.update_header()
        self.session.intake.showing("label", (q.a, q.b))  # a label key counts once the pair is on screen

    def on_pair_diff_shown(self, message: PairDiff.Shown) -> None:
        if self.current is not None and message.key == (self.current.a, self.current.b):
            self.session.intake.drawn("label", message.key)

    def update_header(self, note: str | None = None) -> None:
        q = self.current
        counts = {lab: sum(1 for *_x, lab_ in self.done if lab_ == lab) for lab in tune.LABELS}
        session = f"{counts['duplicate']} dup, {counts['not_duplicate']} not, {counts['skip']} skipped"

        def head(where: str, done: str) -> Text:
            t = Text()
            t.append(" LABEL ", style="reverse bold")
            if q is not None:
                edges = tune.bin_edges(self.session.floor)
                t.append(f" Jaccard {q.similarity:.3f} ", style="bold")
                t.append(
                    where.format(
                        lo=edges[q.bin], hi=edges[q.bin + 1], t=self.threshold, at=self.pos + 1, n=len(self.queue)
                    ),
                    style="dim",
                )
            t.append(done.format(session=session), style="dim")
            return t

        width = max(20, self.app.size.width - 2)
        t = first_fitting(
            [
                head(" bin {lo:.2f}–{hi:.2f} · threshold {t:.2f} · pair {at}/{n}", " · this session: {session}"),
                head(" bin {lo:.2f}–{hi:.2f} · pair {at}/{n}", " · session: {session}"),
                head(" pair {at}/{n}", " · {session}"),
            ],
            width,
        )
        t.append("\n")
        keys = first_fitting(
            [
                Text("1 duplicate · 2 not a duplicate (splits the pair) · 0 skip · u undo · esc back"),
                Text("1 duplicate · 2 not (splits the pair) · 0 skip · u undo · esc back"),
            ],
            width,
        )
        t.append(note or keys.plain, style="italic" if note else "dim")
        cut = pair_notice(*self.shown) if q is not None else ""
        if cut:
            t.append("\n")
            t.append(" LONG ", style="reverse bold")
            t.append(" " + cut, style="italic")
        self.query_one("#label-header", Static).update(t)

    # -- actions ---------------------------------------------------------------------------
    def action_label(self, label: str) -> None:
        q = self.current
        if q is None or not self.session.intake.admit("label", (q.a, q.b), "pair"):
            return
        a_id, b_id, threshold, policy, author = (
            self._ids[0],
            self._ids[1],
            self.threshold,
            self.session.policy,
            self.app.author,
        )
        self.app.writer.submit(
            lambda project: tune.set_label(project, a_id, b_id, label, q.similarity, threshold, policy, author=author),
            what="the label",
        )
        self.done.append((self._ids[0], self._ids[1], label))
        if label == "not_duplicate":
            self.changed_decisions = True
        self.pos += 1
        self.show_next()

    def action_undo_label(self) -> None:
        if not self.done:
            self.notify("No label to take back in this session", severity="warning")
            return
        a_id, b_id, label = self.done.pop()
        self.app.writer.submit(lambda project: tune.remove_label(project, a_id, b_id), what="taking the label back")
        if label == "not_duplicate":
            self.changed_decisions = True
        # show that pair again
        found = ords_for_ids(self.session.project, [a_id, b_id])
        a, b = sorted((found[a_id], found[b_id]))
        back = next((i for i, q in enumerate(self.queue) if (q.a, q.b) == (a, b)), None)
        if back is not None:
            self.pos = back
        self.show_next()
        self.notify(
            f"Took back: {label} for {literal_line(a_id, 80)} / {literal_line(b_id, 80)}", markup=False, timeout=2
        )

    def action_toggle_layout(self) -> None:
        self.layout_choice = "side" if self.has_class("-stacked") else "stacked"
        self.on_resize()

    def action_close(self) -> None:
        if self.changed_decisions:  # after the labels queued before it are written
            self.app.writer.submit(lambda project: None, lambda _r: self.session.recluster(), what="the view")
        self.dismiss()
