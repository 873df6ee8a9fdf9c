"""Every key, from the same action table as the bindings and the command palette."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..actions import AUDIT_ACTIONS, EXTRA_KEYS, LABEL_ACTIONS, MAIN_ACTIONS, PAIR_ACTIONS, TUNE_ACTIONS
from ..keymap import Keymap
from ..widgets.footer import AppFooter


def keys_table(keymap: Keymap | None = None) -> Table:
    """Every key, as the user's keymap (if any) left it."""
    keymap = keymap or Keymap()
    table = Table(box=None, expand=True, show_header=True, header_style="bold", padding=(0, 1))
    table.add_column("Key", no_wrap=True, style="bold")
    table.add_column("Action")
    table.add_column("Where", style="dim", no_wrap=True)
    seen = set()
    for keys, text, section in EXTRA_KEYS:
        table.add_row(Text(keys), Text(text), Text(section))
    for act in MAIN_ACTIONS + PAIR_ACTIONS + TUNE_ACTIONS + LABEL_ACTIONS + AUDIT_ACTIONS:
        if act.id in keymap.keys:
            keys = keymap.display(act)
        else:
            keys = ", ".join([act.display] + [k for k in act.key.split(",")[1:] if k not in ("question_mark",)])
        if (keys, act.section) in seen:
            continue
        seen.add((keys, act.section))
        table.add_row(Text(keys), Text(act.title), Text(act.section))
    return table


GLOSSARY = [
    (
        "similarity",
        "Jaccard of the two texts' sets of 5-character pieces (shingles), after lowercasing "
        "and collapsing whitespace: 1.0 is the same text.",
    ),
    ("threshold", "the similarity at or above which two documents count as duplicates (+ - ctrl+→ ctrl+← t)."),
    ("floor", "the lowest similarity the scan stored: the threshold cannot go below it without a rescan."),
    ("cluster", "documents joined by duplicate pairs at the threshold; one of them is kept."),
    (
        "kept",
        "the cluster's document that stays in the export: the first in corpus order, unless you keep another (k).",
    ),
    (
        "policy",
        "how clusters form. components: every chain of duplicate pairs joins one cluster. "
        "greedy: in corpus order, a document is removed if it is a duplicate of one already kept.",
    ),
    (
        "chained",
        "a member in its cluster through other members, not by its own pair with the kept one "
        '("linked via ..."): worth a look when the ends of the chain differ a lot.',
    ),
    (
        "exact",
        "the same text as another member after normalisation: removed against the kept one, "
        "linked via its first copy when the kept text is another.",
    ),
    (
        "decided",
        "a cluster or document with a decision of yours (k, x, n, a): it overrides the policy in every export.",
    ),
]


def glossary_table() -> Table:
    table = Table(box=None, expand=True, show_header=False, padding=(0, 1))
    table.add_column("Word", no_wrap=True, style="bold")
    table.add_column("Meaning")
    for word, meaning in GLOSSARY:
        table.add_row(Text(word), Text(meaning))
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,f1,question_mark", "close", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            # how to leave it on its first line: the end of a long list said so, and the footer
            # under it shows the keys of the screen beneath
            yield Static(
                Text.assemble(("dedup-tui keys", "bold"), ("   esc, q or ? closes this help; ↓ pgdn scroll", "dim")),
                id="help-title",
            )
            yield Static(keys_table(getattr(self.app, "keymap", None)))
            yield Static(Text("Words", style="bold"), id="glossary-title")
            yield Static(glossary_table())
            yield Static(
                Text(
                    "Decisions are saved in the project at once and follow document ids, so they survive "
                    "threshold changes and restarts. esc closes this help.",
                    style="dim",
                )
            )
        yield AppFooter()  # its own keys: the main screen's footer under it offered k, x, ... that do nothing here

    def action_close(self) -> None:
        self.dismiss(None)
