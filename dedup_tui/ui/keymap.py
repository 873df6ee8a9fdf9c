"""The user's keymap file: binding id -> keys, checked before any of it reaches the app.

What is valid is applied; every entry that is not is reported (one line each, its strings shown
through `literal_line`) and the binding keeps its default keys. An entry is ignored when its id
is not a binding's, its value is not a string of key names, a key name is not one Textual knows,
a key is reserved (quitting, moving the focus, moving in lists), or the key is already another
binding's on the same screen: a keymap never takes a key from another binding silently (mapping
main.remove to q would make q remove a document instead of quitting).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from textual.keys import _character_to_key, format_key, key_to_character

from .actions import AUDIT_ACTIONS, LABEL_ACTIONS, MAIN_ACTIONS, PAIR_ACTIONS, TUNE_ACTIONS, Act
from .text import literal_line

SCREENS = {
    "main": MAIN_ACTIONS,
    "pair": PAIR_ACTIONS,
    "tune": TUNE_ACTIONS,
    "label": LABEL_ACTIONS,
    "audit": AUDIT_ACTIONS,
}
ACTS = {a.id: a for acts in SCREENS.values() for a in acts}
# Binding ids renamed with the labelling queue (issue 42: "review" meant five things): a keymap
# naming an old id still applies, with a line saying its new name.
RENAMED_IDS = {"tune.review": "tune.label-pairs", **{"review." + a.id.partition(".")[2]: a.id for a in LABEL_ACTIONS}}

MODIFIERS = ("ctrl", "shift", "alt", "meta", "super", "hyper")
NAMED_KEYS = {
    "backspace",
    "delete",
    "insert",
    "enter",
    "escape",
    "tab",
    "space",
    "up",
    "down",
    "left",
    "right",
    "home",
    "end",
    "pageup",
    "pagedown",
    *(f"f{i}" for i in range(1, 25)),
    # the names Textual gives the ASCII punctuation keys: question_mark, plus, at, slash ...
    *(_character_to_key(chr(c)) for c in range(0x21, 0x7F) if not chr(c).isalnum()),
}
# Keys the app or its widgets use whatever the keymap says: a binding given one would never fire
# (or would take the key from the lists and documents).
RESERVED = {
    "ctrl+q": "quits the app",
    "ctrl+c": "copies or quits",
    "tab": "moves the focus",
    "shift+tab": "moves the focus",
    **dict.fromkeys(
        ("up", "down", "left", "right", "pageup", "pagedown", "home", "end", "ctrl+home", "ctrl+end"),
        "moves in the lists and documents",
    ),
}
MAX_REPORTED = 8  # lines of a report; the rest are counted


def keymap_path() -> Path:
    """DEDUP_TUI_KEYMAP, else $XDG_CONFIG_HOME/dedup-tui/keymap.json (~/.config/...)."""
    if os.environ.get("DEDUP_TUI_KEYMAP"):
        return Path(os.environ["DEDUP_TUI_KEYMAP"])
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "dedup-tui" / "keymap.json"


@dataclass
class Keymap:
    """What a keymap file asks for: the entries applied and a line per entry ignored."""

    path: Path | None = None
    keys: dict[str, str] = field(default_factory=dict)  # binding id -> Textual key names, comma separated
    ignored: list[str] = field(default_factory=list)  # already escaped for showing
    renamed: list[str] = field(default_factory=list)  # old binding ids applied under their new names

    def report(self) -> str | None:
        """One message for the reviewer (None when nothing was ignored or renamed)."""
        if not self.ignored:
            return "\n".join(self.renamed) if self.renamed else None
        shown = self.ignored[:MAX_REPORTED]
        more = len(self.ignored) - len(shown)
        where = literal_line(str(self.path), 80) if self.path else "the keymap"
        applied = f"{len(self.keys)} applied, " if self.keys else ""
        return (
            f"{where}: {applied}{len(self.ignored)} ignored (those bindings keep their default keys):\n"
            + "\n".join("• " + line for line in shown)
            + (f"\n… and {more} more" if more else "")
            + "".join("\n" + line for line in self.renamed)
        )

    def display(self, act: Act) -> str:
        """How the help screen and the palette show the act's keys (the remapped ones if any)."""
        keys = self.keys.get(act.id)
        if keys is None:
            return act.display
        return ", ".join(literal_line(format_key(k)) for k in keys.split(","))


def key_name(text: str) -> str | None:
    """`text` as the key name Textual matches ("?" -> "question_mark", "ctrl+k"), or None
    when it is not a key Textual can report."""
    *mods, base = text.split("+") if text != "+" else ["+"]
    if len(set(mods)) != len(mods) or any(m not in MODIFIERS for m in mods):
        return None
    if len(base) == 1:
        if not base.isprintable() or base.isspace() or base == "," or literal_line(base) != base:
            return None
        base = _character_to_key(base)
    elif base not in NAMED_KEYS:
        if not base.replace("_", "").isascii() or not base.replace("_", "").isalpha() or not base.islower():
            return None
        char = key_to_character(base)  # a character's name, as Textual names keys: section_sign
        if char is None or len(char) != 1 or not char.isprintable() or char.isspace() or literal_line(char) != char:
            return None
        if _character_to_key(char) != base:
            return None
    return "+".join([*mods, base])


def _kind(value) -> str:
    return {
        bool: "true/false",
        int: "a number",
        float: "a number",
        list: "a list",
        dict: "an object",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def check_keymap(data, path: Path | None = None) -> Keymap:
    """The valid entries of a keymap's parsed JSON, and why each other one is ignored."""
    out = Keymap(path)
    if not isinstance(data, dict):
        out.ignored.append(
            f'expected a JSON object of binding id -> keys (such as {{"main.remove": "delete,x"}}), got {_kind(data)}'
        )
        return out
    order = []
    for binding_id, value in data.items():
        shown_id = literal_line(binding_id, 40)
        if binding_id in RENAMED_IDS:
            binding_id = RENAMED_IDS[binding_id]
            out.renamed.append(f"{shown_id} is now named {binding_id}: applied; rename it in the keymap")
        order.append(binding_id)
        act = ACTS.get(binding_id)
        if act is None:
            out.ignored.append(f"{shown_id}: no such binding id (the help screen's ids: main.remove, pair.keep, ...)")
            continue
        if not isinstance(value, str):
            out.ignored.append(f'{shown_id}: the keys must be a string such as "delete,x", not {_kind(value)}')
            continue
        names, bad = [], []
        for part in value.split(","):
            part = part.strip()
            name = key_name(part) if part else None
            if name is None:
                bad.append(part)
            elif name not in names:
                names.append(name)
        if bad or not names:
            what = ", ".join(f"'{literal_line(b, 30)}'" for b in bad[:3]) if any(bad) else "an empty key"
            out.ignored.append(
                f"{shown_id}: {what} is not a key name (key names: x, K, delete, ctrl+k, f5, question_mark)"
            )
            continue
        reserved = next((n for n in names if n in RESERVED), None)
        if reserved:
            out.ignored.append(f"{shown_id}: {reserved} {RESERVED[reserved]} and cannot be remapped")
            continue
        out.keys[binding_id] = ",".join(names)
    _refuse_clashes(out, order)
    return out


def _refuse_clashes(out: Keymap, order: list[str]) -> None:
    """Drop the entries that give a key another binding of the same screen has (after the
    keymap), naming both; of two entries giving one key, the later in the file is dropped. A
    dropped entry's binding gets its default keys back, which may clash in turn: repeated."""
    while True:
        clash = _first_clash(out.keys)
        if clash is None:
            return
        key, ids = clash
        remapped = [i for i in ids if i in out.keys]
        victim = max(remapped, key=order.index)
        other = next(i for i in ids if i != victim)
        whose = " in this keymap" if other in out.keys else ""
        out.ignored.append(
            f"{victim}: {literal_line(format_key(key), 20)} is {other}'s key{whose} "
            f"({ACTS[other].title}); not taken from it"
        )
        del out.keys[victim]


def _first_clash(keys: dict[str, str]) -> tuple[str, list[str]] | None:
    """The first key two bindings of one screen would have (one of them remapped), with their ids."""
    for acts in SCREENS.values():
        owners: dict[str, list[Act]] = {}
        for act in acts:
            for key in keys.get(act.id, act.key).split(","):
                owners.setdefault(key, []).append(act)
        for key, holders in owners.items():
            if len({a.action for a in holders}) > 1 and any(a.id in keys for a in holders):
                return key, [a.id for a in holders]
    return None


def load_keymap(path: Path | None = None) -> Keymap:
    """The keymap file checked (no file: no remapping, nothing to report)."""
    path = path or keymap_path()
    if not path.exists():
        return Keymap(path)
    if not path.is_file():  # a FIFO would wait for a writer forever, before the first screen
        return Keymap(path, ignored=["not a regular file: every binding keeps its default keys"])
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return Keymap(path, ignored=[f"not read ({literal_line(str(exc), 120)}): every binding keeps its default keys"])
    return check_keymap(data, path)
