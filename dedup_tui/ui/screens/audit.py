"""The audit screen (`V`): the sampled removals nobody decided, one pair at a time, 1 / 2 / 0,
with the estimate of wrong removals in its header. engine.curate.audit draws the sample and
estimates; labels are saved through the app's writer and are never decisions."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import get_current_worker

from ...engine.curate import audit as auditing
from ...engine.store import Project
from ..actions import AUDIT_ACTIONS
from ..diff import diff
from ..text import first_fitting, shorten_middle
from ..widgets.docview import DocView, compose_side_by_side
from ..widgets.footer import AppFooter
from ..window import PAIR_LINES, windows

DIFF_CHARS = 20_000  # the pair's diff is computed on the UI thread up to this length, as the labelling queue does


class AuditReady(Message):
    def __init__(self, generation: int, result: auditing.Audit) -> None:
        super().__init__()
        self.generation = generation
        self.result = result


class AuditScreen(Screen):
    BINDINGS = [a.binding() for a in AUDIT_ACTIONS]
    ACTIONS = AUDIT_ACTIONS
    NARROW = 100
    DEFAULT_CSS = """
    #audit-header { height: 3; padding: 0 1; background: $boost; }
    AuditScreen.-stacked #pair-body { layout: vertical; }
    AuditScreen.-stacked #pair-body .side { width: 1fr; height: 1fr; }
    """

    def __init__(self, session) -> None:
        super().__init__()
        self.session = session
        self.threshold = session.threshold
        self.policy = session.policy
        self.result: auditing.Audit | None = None
        self.todo: list[auditing.SampledPair] = []
        self.current: auditing.SampledPair | None = None
        self.labelled = 0
        self._generation = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="audit-header")
        yield from compose_side_by_side()
        yield AppFooter()

    def on_mount(self) -> None:
        self.session.intake.forget("audit")  # (a pair drawn in an earlier audit is not on screen now)
        self.update_header("Drawing the sample…")
        self.recompute()

    def on_resize(self) -> None:
        self.set_class(self.size.width < self.NARROW, "-stacked")

    # -- the sample and the estimate --------------------------------------------------------
    def recompute(self) -> None:
        self._generation += 1
        self.compute(self._generation)

    @work(thread=True, exclusive=True, group="audit", exit_on_error=False)
    def compute(self, generation: int) -> None:
        project = Project(self.session.spec.db, readonly=True)
        try:
            result = auditing.run_audit(project, self.threshold, self.policy, graph=self.session.graph)
        finally:
            project.close()
        if not get_current_worker().is_cancelled:
            self.post_message(AuditReady(generation, result))

    def on_audit_ready(self, message: AuditReady) -> None:
        if message.generation != self._generation:
            return
        first = self.result is None
        self.result = message.result
        if first:
            self.todo = self.result.unlabelled()
            self.show_next()
        else:
            self.update_header()

    def show_next(self) -> None:
        self.current = self.todo.pop(0) if self.todo else None
        left_view, right_view = self.query_one("#left-doc", DocView), self.query_one("#right-doc", DocView)
        pair = self.current
        if pair is None:
            left_view.set_document("")
            right_view.set_document("")
            self.update_header()
            return
        left, right = windows(self.session.project, [pair.a, pair.b], 100_000, PAIR_LINES)
        spans = diff(left.text, right.text) if len(left.text) + len(right.text) <= DIFF_CHARS else None
        left_view.set_document(left.text, spans.left if spans else (), length=left.length)
        right_view.set_document(right.text, spans.right if spans else (), length=right.length)
        names = ("removed", "kept") if pair.side == "removed" else ("kept", "kept")
        for side, name, doc_id in (("left", names[0], pair.a_id), ("right", names[1], pair.b_id)):
            title = Text()
            title.append(f"{name}: ", style="dim")
            title.append(shorten_middle(doc_id, 60), style="bold")
            self.query_one(f"#{side}-title", Static).update(title)
        self.update_header()
        self.session.intake.showing("audit", pair.key)
        self.call_after_refresh(self.session.intake.drawn, "audit", pair.key)

    def update_header(self, note: str | None = None) -> None:
        width = max(20, self.app.size.width - 2)
        t = Text()
        t.append(" AUDIT ", style="reverse bold")
        r = self.result
        if r is not None:
            t.append(" " + r.headline(), style="bold")
        t.append("\n")
        pair = self.current
        if note is not None:
            t.append(note, style="italic")
        elif r is None:
            t.append("Drawing the sample…", style="dim")
        elif pair is None:
            t.append(f"Every sampled pair is labelled ({self.labelled} this time). esc: back", style="dim")
        else:
            where = first_fitting(
                [
                    Text(
                        f"{pair.key} · {'a removal' if pair.side == 'removed' else 'two kept documents'} · similarity "
                        f"{pair.similarity:.3f} · band {pair.stratum} · {len(self.todo) + 1} to label"
                    ),
                    Text(f"{pair.key} · {pair.similarity:.3f} · {len(self.todo) + 1} to label"),
                ],
                width,
            )
            t.append(where.plain, style="dim")
        t.append("\n")
        t.append(
            first_fitting(
                [
                    Text("1 duplicate · 2 not a duplicate · 0 skip · esc back (labels are never decisions)"),
                    Text("1 dup · 2 not · 0 skip · esc back"),
                ],
                width,
            ).plain,
            style="dim",
        )
        self.query_one("#audit-header", Static).update(t)

    # -- actions ---------------------------------------------------------------------------
    def action_label(self, value: str) -> None:
        pair = self.current
        if pair is None:
            return
        if not self.session.intake.admit("audit", pair.key, "pair"):  # pressed before this pair was on screen
            return
        self.app.writer.submit(
            lambda project: auditing.label(project, pair, value, author=self.app.author),
            lambda _r: self.recompute(),
            what="the audit label",
        )
        self.labelled += 1
        self.show_next()

    def action_close(self) -> None:
        if self.result is not None and self.labelled:  # the last audit, for export's manifest
            threshold, policy, graph = self.threshold, self.policy, self.session.graph
            self.app.writer.submit(
                lambda project: auditing.save(project, auditing.run_audit(project, threshold, policy, graph=graph)),
                what="the audit",
            )
        self.dismiss()
