"""Every key, from the same action table as the bindings and the command palette."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..actions import EXTRA_KEYS, MAIN_ACTIONS, PAIR_ACTIONS, REVIEW_ACTIONS, TUNE_ACTIONS


def keys_table() -> Table:
    table = Table(box=None, expand=True, show_header=True, header_style="bold", padding=(0, 1))
    table.add_column("Key", no_wrap=True, style="bold")
    table.add_column("Action")
    table.add_column("Where", style="dim", no_wrap=True)
    seen = set()
    for keys, text, section in EXTRA_KEYS:
        table.add_row(Text(keys), Text(text), Text(section))
    for act in MAIN_ACTIONS + PAIR_ACTIONS + TUNE_ACTIONS + REVIEW_ACTIONS:
        keys = ", ".join([act.display] + [k for k in act.key.split(",")[1:] if k not in ("question_mark",)])
        if (keys, act.section) in seen:
            continue
        seen.add((keys, act.section))
        table.add_row(Text(keys), Text(act.title), Text(act.section))
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,f1,question_mark", "close", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(Text("dedup-tui keys", style="bold"), id="help-title")
            yield Static(keys_table())
            yield Static(Text(
                "Decisions are saved in the project at once and follow document ids, so they survive "
                "threshold changes and restarts. esc closes this help.", style="dim"))

    def action_close(self) -> None:
        self.dismiss(None)
