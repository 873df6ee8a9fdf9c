"""Small modal dialogs: type a threshold, add a note, export."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from ...engine.curate.curated import beside
from ...engine.curate.export import FORMATS
from ...engine.errors import DedupError
from ...engine.graph.pairs import POLICIES, Policy
from ...engine.outputs import OutputError, check_outputs
from ..text import literal_line, shorten_middle


class AskScreen(ModalScreen[str | None]):
    """One line of input; dismisses with the text (validated) or None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, value: str = "", placeholder: str = "", validate=None, parse=None) -> None:
        """validate(text) returns an error message or None; parse(text) returns what to dismiss
        with, or raises ValueError / DedupError whose message is shown."""
        super().__init__(classes="dialog-screen")
        self.title_text, self.value, self.placeholder, self.validate_fn = title, value, placeholder, validate
        self.parse_fn = parse

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(Text(literal_line(self.title_text, 300)), classes="dialog-title", id="ask-title")
            yield Input(self.value, placeholder=self.placeholder, id="ask")
            yield Label("", id="ask-error", classes="error")
            yield Label(Text("enter: OK   esc: cancel", style="dim"))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        value = event.value.strip()
        if self.validate_fn is not None:
            error = self.validate_fn(value)
            if error:
                self.query_one("#ask-error", Label).update(Text(error))
                return
        if self.parse_fn is not None:
            try:
                value = self.parse_fn(value)
            except (ValueError, DedupError) as exc:
                self.query_one("#ask-error", Label).update(Text(literal_line(str(exc), 300)))
                return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)


@dataclass
class ExportRequest:
    out: Path
    fmt: str
    threshold: float
    policy: Policy
    logs: bool  # also write removed log, decisions log and manifest beside


class _Form:
    """A dialog's OK and Cancel buttons, enter in one of its inputs and esc: submit() (which
    dismisses when the values are good) or dismiss(None)."""

    OK = ""  # the OK button's id

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == self.OK:
            self.submit()
        else:
            self.dismiss(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.submit()

    def action_cancel(self) -> None:
        self.dismiss(None)


class SearchResultsScreen(ModalScreen[int | None]):
    """Every match of a search, each with where it is at the current view; enter jumps to one
    (then . and , step through the others)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, query: str, matches: list) -> None:
        super().__init__(classes="dialog-screen")
        self.query_text, self.matches = query, matches

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="search-results"):
            more = " (the first 1,000)" if len(self.matches) >= 1000 else ""
            yield Label(
                Text(f"{len(self.matches):,} documents match {literal_line(self.query_text, 50)!r}{more}"),
                classes="dialog-title",
            )
            yield OptionList(
                *[
                    Option(Text.assemble((shorten_middle(m.doc_id, 48), "bold"), "  ", (m.status, "dim")), id=str(i))
                    for i, m in enumerate(self.matches)
                ],
                id="matches",
            )
            yield Label(Text("enter: go to it (then . next, , previous)   esc: close", style="dim"))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(int(event.option.id))

    def action_cancel(self) -> None:
        self.dismiss(None)


class ExportScreen(_Form, ModalScreen[ExportRequest | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    OK = "export-ok"

    def __init__(
        self,
        out: Path,
        threshold: float,
        policy: Policy,
        floor: float,
        protected: dict[Path, str] | None = None,
        keep: str = "",
    ) -> None:
        super().__init__(classes="dialog-screen")
        self.out, self.threshold, self.policy, self.floor = out, threshold, policy, floor
        self.keep = keep  # the project's keep rule (first, longest, max:FIELD, ...): the export follows it
        self.protected = protected or {}  # the project and its corpus: never written
        self._confirmed: tuple | None = None  # (path, logs) the user agreed to overwrite

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="export-dialog"):
            yield Label("Export the curated corpus", classes="dialog-title" + (" -above-keep" if self.keep else ""))
            if self.keep:  # the export follows it: say so where the reviewer decides to write
                rule = {"first": "first in corpus order", "longest": "longest text"}.get(self.keep, self.keep)
                yield Label(
                    Text.assemble(
                        ("Keep rule: ", "dim"), literal_line(rule), (" (K, ^k change it; your decisions win)", "dim")
                    ),
                    id="export-keep",
                )
            yield Label("Path")
            yield Input(str(self.out), id="export-path")
            with Horizontal(classes="row"):
                with Vertical():
                    yield Label("Format")
                    yield Select([(f, f) for f in FORMATS], value="jsonl", allow_blank=False, id="export-format")
                with Vertical():
                    yield Label("Threshold")
                    yield Input(f"{self.threshold:.2f}", id="export-threshold")
                with Vertical():
                    yield Label("Policy")
                    yield Select([(p, p) for p in POLICIES], value=self.policy, allow_blank=False, id="export-policy")
            yield Checkbox("Also write removed log, decisions log and manifest beside it", True, id="export-logs")
            yield Static("", id="export-error", classes="error")
            with Horizontal(classes="buttons"):
                yield Button("Export", variant="primary", id="export-ok")
                yield Button("Cancel", id="export-cancel")

    def on_input_changed(self, event: Input.Changed) -> None:
        if (
            self._confirmed is not None
            and event.input.id == "export-path"
            and str(Path(event.value.strip()).expanduser()) != self._confirmed[0]
        ):
            self._confirmed = None
            self.query_one("#export-ok", Button).label = "Export"
            self.query_one("#export-error", Static).update("")

    def submit(self) -> None:
        error = self.query_one("#export-error", Static)
        path = self.query_one("#export-path", Input).value.strip()
        try:
            threshold = float(self.query_one("#export-threshold", Input).value)
        except ValueError:
            error.update(Text("The threshold must be a number"))
            return
        if not self.floor <= threshold <= 1.0:
            error.update(Text(f"The threshold must be between the scan's floor {self.floor:.2f} and 1"))
            return
        if not path:
            error.update(Text("Give a path to write to"))
            return
        logs = self.query_one("#export-logs", Checkbox).value
        fmt = str(self.query_one("#export-format", Select).value)
        out = Path(path).expanduser()
        suffix = out.suffix.lower().lstrip(".")
        if suffix in FORMATS and suffix != fmt:
            error.update(Text(f"The path ends in .{suffix} but the format is {fmt}: change one of them"))
            return
        outputs = {"kept records": out}
        if logs:
            outputs |= {
                "removed log": beside(out, "removed.jsonl"),
                "decisions log": beside(out, "decisions.jsonl"),
                "manifest": beside(out, "manifest.json"),
            }
        try:
            check_outputs(outputs, True, self.protected, streams=False)
        except OutputError as exc:
            error.update(Text(str(exc)))
            return
        targets = list(outputs.values())
        existing = [t for t in targets if t.exists()]
        if existing and self._confirmed != (str(out), logs):
            self._confirmed = (str(out), logs)
            names = ", ".join(literal_line(t.name, 60) for t in existing)
            error.update(Text(f"Already exists: {names}. Press Overwrite to replace (or change the path)."))
            self.query_one("#export-ok", Button).label = "Overwrite"
            return
        self.dismiss(
            ExportRequest(
                out,
                fmt,
                threshold,
                str(self.query_one("#export-policy", Select).value),
                self.query_one("#export-logs", Checkbox).value,
            )
        )


class RescanScreen(_Form, ModalScreen[tuple[float, int] | None]):
    """Scan again, with another floor (the lowest similarity stored: thresholds below it need
    it lowered) or shingle size. Dismisses with (floor, k) or None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    OK = "rescan-ok"

    def __init__(self, floor: float, k: int) -> None:
        super().__init__(classes="dialog-screen")
        self.floor, self.k = floor, k

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="rescan-dialog"):
            yield Label("Scan again", classes="dialog-title")
            with Horizontal(classes="row"):
                with Vertical():
                    yield Label("Floor (lowest similarity kept)")
                    yield Input(f"{self.floor:g}", id="rescan-floor")
                with Vertical():
                    yield Label("Shingle size k (characters)")
                    yield Input(str(self.k), id="rescan-k")
            yield Static(
                Text(
                    "A lower floor lets the threshold go lower and stores more pairs; the decisions you made stay.",
                    style="dim",
                )
            )
            yield Static("", id="rescan-error", classes="error")
            with Horizontal(classes="buttons"):
                yield Button("Scan", variant="primary", id="rescan-ok")
                yield Button("Cancel", id="rescan-cancel")

    def submit(self) -> None:
        error = self.query_one("#rescan-error", Static)
        try:
            floor = float(self.query_one("#rescan-floor", Input).value)
        except ValueError:
            error.update(Text("The floor must be a number such as 0.5"))
            return
        if not 0 < floor <= 1:
            error.update(Text("The floor must be above 0 and at most 1"))
            return
        try:
            k = int(self.query_one("#rescan-k", Input).value)
        except ValueError:
            error.update(Text("k must be a whole number of characters, such as 5"))
            return
        if not 1 <= k <= 64:
            error.update(Text("k must be between 1 and 64"))
            return
        self.dismiss((floor, k))
