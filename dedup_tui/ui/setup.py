"""Choosing the fields of a corpus that does not open as it is (its text is not in `text`, a bad
record stops it): the fields of its first records with an example each, the text and id field,
and whether to skip bad records. Runs before the review app, as an app of its own: no project
exists until the corpus can load.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Checkbox, DataTable, Label, Select, Static

from ..engine.errors import CorpusError
from ..engine.ingest import check_corpus
from .text import literal_line

LINE_NUMBERS = "(line numbers)"


class FieldPickerApp(App[dict | None]):
    """Exits with the load options ({"text_field", "id_field", "skip_bad"}) once the corpus
    passes check_corpus with them, or None when cancelled."""

    CSS = """
    Screen { align: center middle; }
    #picker { width: 100; max-width: 100%; height: auto; max-height: 100%; border: round $accent; padding: 0 1; }
    #picker-title { text-style: bold; margin-bottom: 1; }
    #fields { height: auto; max-height: 14; margin-bottom: 1; }
    .row { height: auto; }
    .row Vertical { height: auto; width: 1fr; }
    #picker-error { color: $error; height: auto; }
    .buttons { height: auto; align-horizontal: right; margin-top: 1; }
    .buttons Button { margin-left: 1; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    TITLE = "dedup-tui"

    def __init__(self, corpus: str | Path, fields: list[tuple[str, str]], problem: str, options: dict | None = None):
        super().__init__()
        self.corpus, self.fields, self.problem = Path(corpus), fields, problem
        self.options = options or {}

    def compose(self) -> ComposeResult:
        names = [name for name, _ in self.fields]
        text_guess = (
            self.options.get("text_field") if self.options.get("text_field") in names else _guess_text(self.fields)
        )
        id_guess = (
            self.options.get("id_field")
            if self.options.get("id_field") in names
            else next((n for n in names if n.lower() in ("id", "_id", "doc_id", "key", "uid", "uuid")), LINE_NUMBERS)
        )
        with Vertical(id="picker"):
            yield Label(
                Text(f"{literal_line(self.corpus.name, 60)} does not open as it is", style="bold"), id="picker-title"
            )
            yield Static(Text(literal_line(self.problem, 300), style="italic"))
            yield Label(Text("Fields of its first records:", style="dim"))
            yield DataTable(id="fields", cursor_type="row", zebra_stripes=True)
            with Horizontal(classes="row"):
                with Vertical():
                    yield Label("Text field")
                    yield Select(
                        [(literal_line(n, 40), n) for n in names], value=text_guess, allow_blank=False, id="text-field"
                    )
                with Vertical():
                    yield Label("Id field")
                    yield Select(
                        [(LINE_NUMBERS, LINE_NUMBERS)] + [(literal_line(n, 40), n) for n in names],
                        value=id_guess,
                        allow_blank=False,
                        id="id-field",
                    )
            yield Checkbox(
                "Skip bad records (counted, their line numbers kept)", bool(self.options.get("skip_bad")), id="skip-bad"
            )
            yield Static("", id="picker-error")
            with Horizontal(classes="buttons"):
                yield Button("Open", variant="primary", id="picker-ok")
                yield Button("Cancel", id="picker-cancel")

    def on_mount(self) -> None:
        table = self.query_one("#fields", DataTable)
        table.add_columns("field", "example")
        for name, example in self.fields:
            table.add_row(Text(literal_line(name, 30)), Text(literal_line(example, 80)))
        self.query_one("#text-field", Select).focus()

    def chosen(self) -> dict:
        id_field = self.query_one("#id-field", Select).value
        return {
            "text_field": self.query_one("#text-field", Select).value,
            "id_field": None if id_field == LINE_NUMBERS else id_field,
            "skip_bad": self.query_one("#skip-bad", Checkbox).value,
        }

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "picker-ok":
            self.submit()
        else:
            self.exit(None)

    def submit(self) -> None:
        options = self.chosen()
        try:
            check_corpus(self.corpus, **options)
        except CorpusError as exc:
            self.query_one("#picker-error", Static).update(Text(literal_line(str(exc), 300)))
            return
        self.exit(options)

    def action_cancel(self) -> None:
        self.exit(None)


def _guess_text(fields: list[tuple[str, str]]) -> str:
    """The field whose example is the longest text (a document's body, not its title or id)."""
    for name in ("text", "body", "content", "document", "description", "summary"):
        if any(n == name for n, _ in fields):
            return name
    return max(fields, key=lambda f: len(f[1]))[0]
