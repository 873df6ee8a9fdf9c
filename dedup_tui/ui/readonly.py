"""A read-only window: a second view of a project another dedup-tui window has open (a second
browser on `dedup-tui serve`), or one opened with `--read-only`.

It changes nothing on disk. Two guards make sure of it:

- every action of the app's screens goes through `DedupApp.run_action` (keys, footer clicks and
  the command palette all do), which asks `refusal()` here first. Only the actions listed in
  ALLOWED run; any other one of those screens is refused with a message, so an action added
  later is refused until someone decides it only reads;
- the project connections a read-only window writes through (the writer's, the scan
  pipeline's) are opened read-only (`open_project`), so a write that slips past the first guard
  fails in SQLite and is reported as not saved.

What a read-only window may still change is its own view (threshold, policy, sort, filter,
pages, the pair view's layout): shown in this window, never saved to the project.
"""

from __future__ import annotations

from pathlib import Path

from textual.actions import parse

from ..engine.store import Project
from ..engine.store.locks import COMMAND_HOLDER
from .actions import AUDIT_ACTIONS, LABEL_ACTIONS, MAIN_ACTIONS, PAIR_ACTIONS, TUNE_ACTIONS, Act

# The actions a read-only window runs, by screen (Act.screen): moving, reading, comparing, and
# view settings that stay in this window. Every other action of these screens is refused.
ALLOWED: dict[str, frozenset[str]] = {
    "main": frozenset(
        {
            "help",
            "command_palette",
            "quit",
            "cancel_scan",
            "search",
            "next_match",
            "threshold",
            "type_threshold",
            "toggle_policy",
            "cycle_sort",
            "cycle_filter",
            "type_filter",
            "page",
            "open_pair",
            "tune",
            "audit",
            "cluster",
            "change",
            "id_width",
        }
    ),
    "pair": frozenset(
        {
            "close",
            "step",
            "cluster",
            "toggle_layout",
            "toggle_normalized",
            "toggle_aligned",
            "change",
            "toggle_fold",
            "help",
        }
    ),
    "tune": frozenset({"close", "apply", "toggle_plots", "target", "threshold", "open_chain", "help"}),
    "label": frozenset({"close", "toggle_layout", "help"}),
    "audit": frozenset({"close", "help"}),
}

# What a refused action would have done, said in its refusal (the tests check that every action
# of the tables is either allowed or named here).
DECIDE = "decisions cannot be made here"
REFUSED: dict[str, dict[str, str]] = {
    "main": {
        "rescan": "the project cannot be scanned from here",
        "keep": DECIDE,
        "remove": DECIDE,
        "not_duplicate": DECIDE,
        "none_duplicates": DECIDE,
        "accept": DECIDE,
        "bulk_accept": DECIDE,
        "note": "notes cannot be added here",
        "undo": DECIDE,
        "redo": DECIDE,
        "export": "nothing is exported from here",
        "cycle_keep_rule": "the keep rule cannot be changed here",
        "keep_by_field": "the keep rule cannot be changed here",
    },
    "pair": {
        "keep": DECIDE,
        "remove": DECIDE,
        "not_duplicate": DECIDE,
        "none_duplicates": DECIDE,
        "accept": DECIDE,
        "note": "notes cannot be added here",
        "undo": DECIDE,
        "redo": DECIDE,
    },
    "tune": {
        "label_pairs": "pairs cannot be labelled here",
        "split_chain": DECIDE,
        "save_svg": "no file is saved from here",
        "export_labels": "nothing is exported from here",
    },
    "label": {"label": "pairs cannot be labelled here", "undo_label": "pairs cannot be labelled here"},
    "audit": {"label": "pairs cannot be labelled here"},
}

TABLES: dict[str, list[Act]] = {
    "main": MAIN_ACTIONS,
    "pair": PAIR_ACTIONS,
    "tune": TUNE_ACTIONS,
    "label": LABEL_ACTIONS,
    "audit": AUDIT_ACTIONS,
}


def action_name(act: Act) -> str:
    """The action an Act runs, without its namespace and arguments: "app.help" -> "help"."""
    return parse(act.action)[1]


def screen_of(target) -> str | None:
    """Which of the app's screens `target` is ("main", "pair", ...), by the actions it declares;
    None for anything else (the app, dialogs, widgets: none of them writes)."""
    acts = getattr(target, "ACTIONS", None)
    if not acts:
        return None
    return acts[0].screen


def refused_change(target, action: str) -> str | None:
    """Why a read-only window refuses to run `action` on `target` ("decisions cannot be made
    here", ...); None when it may run it."""
    screen = screen_of(target)
    if screen is None or action in ALLOWED.get(screen, ()):
        return None
    return REFUSED.get(screen, {}).get(action, "the project cannot be changed here")


def target_of(app, action, default_namespace, namespaces) -> tuple[object, str]:
    """The object an action runs on and its name, as `App.run_action` will resolve them."""
    if isinstance(action, tuple):
        destination, name, _params = action
    else:
        destination, name, _params = parse(action)
    if not destination:
        return (app if default_namespace is None else default_namespace), name
    if namespaces is not None and destination in namespaces:
        return namespaces[destination], name
    return getattr(app, destination, app), name


def refusal_message(refused: str, db: Path, holder: str | None) -> str:
    """One line: what was refused, and where (or when) it can be done."""
    if holder is None:
        where = "it was opened with --read-only"
    elif holder == COMMAND_HOLDER:
        where = "a load or scan holds the project until it ends; reopen it then"
    else:
        where = f"decide in the window that has {db.name} open"
    return f"Read-only view: {refused} ({where})"


def describe(db: Path, holder: str | None) -> str:
    """Why this window is read-only, for its notice and its refusals."""
    if holder is None:
        return f"{db.name} was opened with --read-only: nothing is saved from this window."
    if holder == COMMAND_HOLDER:
        return (
            f"{db.name} is being changed by {holder}, which holds the project until it ends: reopen it then "
            f"to review. This window shows the project as it was when it opened; nothing is saved from it."
        )
    return (
        f"{db.name} is open in {holder}: decide there. This window shows the project as it was when it "
        f"opened (reopen it to see newer decisions); nothing is saved from it."
    )


def open_project(db: Path, read_only: str | None, create: bool = False) -> Project:
    """A connection to write through: read-only (SQLite refuses every write) in a read-only
    window, saying why when something tries."""
    if read_only is None:
        return Project(db, create=create)
    project = Project(db, readonly=True)
    project.readonly_reason = "a read-only view"
    return project
