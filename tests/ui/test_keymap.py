"""The keymap file: what is valid is applied, every other entry is reported (escaped) and keeps
its binding's default keys; no key is ever taken from another binding silently; a keymap that is
a FIFO is reported, not waited on (issue 25's third attack)."""

from __future__ import annotations

import io
import json
import os
import threading
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table
from textual.binding import Binding
from textual.widgets import Static

from dedup_tui.engine.curate import decisions
from dedup_tui.engine.store import Project
from dedup_tui.ui.app import create_app
from dedup_tui.ui.keymap import ACTS, check_keymap, key_name, load_keymap
from dedup_tui.ui.screens.dialogs import AskScreen
from dedup_tui.ui.screens.help import HelpScreen

from .conftest import plain_screen, settle

TITLE_SEQUENCE = "\u001b]2;KM\u0007"  # sets the terminal's title if it ever reaches it raw


@pytest.mark.parametrize(
    "text, name",
    [
        ("x", "x"),
        ("K", "K"),
        ("?", "question_mark"),
        ("question_mark", "question_mark"),
        ("+", "plus"),
        ("delete", "delete"),
        ("f12", "f12"),
        ("ctrl+k", "ctrl+k"),
        ("alt+shift+x", "alt+shift+x"),
        ("ctrl+plus", "ctrl+plus"),
        ("ctrl+@", "ctrl+at"),
        ("é", "é"),
        ("section_sign", "section_sign"),
        (TITLE_SEQUENCE, None),
        ("\x1b", None),
        ("\u202e", None),
        ("Ctrl+k", None),
        ("ctrl+ctrl+k", None),
        ("ctrl+", None),
        ("", None),
        (" ", None),
        ("foo", None),
        ("f25", None),
        ("latin_small_letter_e_with_acute", None),
        ("x\x07", None),
    ],
)
def test_key_names_are_the_ones_textual_reports(text, name):
    assert key_name(text) == name


def test_a_valid_keymap_is_applied_whole_and_normalised():
    keymap = check_keymap({"main.remove": "delete, x", "main.note": "M", "pair.keep": "+,K", "label.label-skip": "S"})
    assert keymap.keys == {"main.remove": "delete,x", "main.note": "M", "pair.keep": "plus,K", "label.label-skip": "S"}
    assert keymap.ignored == [] and keymap.report() is None


def test_the_labelling_queues_old_binding_ids_still_apply_with_their_new_names_said():
    keymap = check_keymap({"review.label-skip": "S", "tune.review": "ctrl+l", "main.note": "M"})
    assert keymap.keys == {"label.label-skip": "S", "tune.label-pairs": "ctrl+l", "main.note": "M"}
    assert keymap.ignored == []
    assert keymap.report() == (
        "review.label-skip is now named label.label-skip: applied; rename it in the keymap\n"
        "tune.review is now named tune.label-pairs: applied; rename it in the keymap"
    )


@pytest.mark.parametrize(
    "entry, said",
    [
        ({"main.no-such-action": "z"}, "main.no-such-action: no such binding id"),
        ({"main.remove": 7}, 'main.remove: the keys must be a string such as "delete,x", not a number'),
        ({"main.remove": ["x"]}, "not a list"),
        ({"main.remove": None}, "not null"),
        ({"main.remove": ""}, "main.remove: an empty key is not a key name"),
        ({"main.remove": "delete,,x"}, "an empty key is not a key name"),
        ({"main.remove": "Delete"}, "main.remove: 'Delete' is not a key name"),
        ({"main.remove": TITLE_SEQUENCE}, "main.remove: '\\x1b]2;KM\\x07' is not a key name"),
        ({"main.remove": "down"}, "main.remove: down moves in the lists and documents and cannot be remapped"),
        ({"main.remove": "ctrl+q"}, "main.remove: ctrl+q quits the app"),
        ({"main.remove": "tab"}, "main.remove: tab moves the focus"),
        ({"main.remove": "q"}, "main.remove: q is main.quit's key (app: quit); not taken from it"),
        ({"main.remove": "delete,k"}, "main.remove: k is main.keep's key (decide: keep this document"),
        ({"pair.keep": "escape"}, "pair.keep: esc is pair.close's key (pair: back to the clusters)"),
    ],
)
def test_each_bad_entry_is_ignored_and_said_why(entry, said):
    keymap = check_keymap({**entry, "main.note": "M"})
    assert keymap.keys == {"main.note": "M"}  # the valid entry beside it is applied
    assert len(keymap.ignored) == 1 and said in keymap.ignored[0]
    assert "\x1b" not in keymap.report() and "\x07" not in keymap.report()


def test_a_key_taken_twice_goes_to_the_first_entry_and_defaults_come_back_in_turn():
    # two entries give E: the later one is refused, naming the first
    keymap = check_keymap({"main.export": "E", "main.tune": "E"})
    assert keymap.keys == {"main.export": "E"}
    assert keymap.ignored == [
        "main.tune: E is main.export's key in this keymap (export: write the curated corpus); not taken from it"
    ]
    # keep and remove swapped: both applied
    assert check_keymap({"main.keep": "x", "main.remove": "k"}).keys == {"main.keep": "x", "main.remove": "k"}
    # remove's entry refused (q is quit's): remove keeps x, so keep -> x is refused, so keep keeps k, so
    # not-duplicate -> k is refused too
    keymap = check_keymap({"main.remove": "q", "main.keep": "x", "main.not-duplicate": "k"})
    assert keymap.keys == {}
    assert [line.split(":")[0] for line in keymap.ignored] == ["main.remove", "main.keep", "main.not-duplicate"]
    # the same key on two screens is no clash; the same action's two bindings neither
    assert check_keymap({"pair.keep": "K", "main.open-pair": "enter"}).keys == {
        "pair.keep": "K",
        "main.open-pair": "enter",
    }


def test_unreadable_files_and_other_json_are_reported(tmp_path, monkeypatch):
    path = tmp_path / "keymap.json"
    assert load_keymap(path).keys == {} and load_keymap(path).report() is None  # no file: nothing to say
    path.write_text('{"main.remove": "delete",')
    assert "not read" in load_keymap(path).report()
    path.write_bytes(b'{"main.remove": "\xff"}')
    assert "not read" in load_keymap(path).report()
    path.write_text('["main.remove", "delete"]')
    keymap = load_keymap(path)
    assert (
        keymap.keys == {}
        and "expected a JSON object of binding id -> keys" in keymap.report()
        and "got a list" in keymap.report()
    )
    # the report names the file, escaped like everything shown
    odd = tmp_path / "key\x1bmap.json"
    odd.write_text(json.dumps({"main.nope": "z"}))
    monkeypatch.chdir(tmp_path)  # a path short enough to be shown whole, whatever the temporary folder
    assert load_keymap(Path(odd.name)).report().startswith("key\\x1bmap.json: 1 ignored")


def test_every_binding_id_can_be_checked():
    # the ids the help screen names are the ones a keymap may use, and each one's own keys are valid
    for binding_id, act in ACTS.items():
        keymap = check_keymap({binding_id: act.key})
        assert keymap.keys == {binding_id: act.key} and keymap.ignored == [], binding_id


async def test_the_app_applies_the_valid_entries_and_reports_the_rest(corpus, tmp_path, monkeypatch):
    path = tmp_path / "keymap.json"
    path.write_text(json.dumps({"main.remove": "q", "main.keep": TITLE_SEQUENCE, "main.note": "M", "main.accept": 7}))
    monkeypatch.setenv("DEDUP_TUI_KEYMAP", str(path))
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 40), notifications=True) as pilot:  # toasts shown, as in a terminal
        await settle(pilot)
        report = next(m for m in app.told if "ignored" in m)
        assert "main.remove: q is main.quit's key (app: quit); not taken from it" in report
        assert "main.keep: '\\x1b]2;KM\\x07' is not a key name" in report
        assert "main.accept: the keys must be a string" in report
        shown = plain_screen(app)
        assert "1 applied, 3 ignored" in shown and "\\x1b]2;KM\\x07" in shown
        assert "\x1b" not in app.export_screenshot() and "\x07" not in app.export_screenshot()
        # and a key display that got past the check anyway would still be shown inert
        assert app.get_key_display(Binding(TITLE_SEQUENCE, "noop")) == "\\x1b]2;KM\\x07"
        # the valid entry works: M notes, m no longer does
        await pilot.press("tab", "down", "m")
        await pilot.pause()
        assert not isinstance(app.screen, AskScreen)
        await pilot.press("M")
        await pilot.pause()
        assert isinstance(app.screen, AskScreen)
        await pilot.press("escape")
        await pilot.pause()
        # the help screen shows the key the keymap gave
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        tables = [w.content for w in app.screen.query(Static) if isinstance(w.content, Table)]
        console = Console(width=120, record=True, file=io.StringIO())
        console.print(tables[0])
        rows = [" ".join(line.split()) for line in console.export_text().splitlines()]
        assert "M decide: add a note to this document Decisions" in rows
        assert "m decide: add a note to this document Decisions" not in rows
        await pilot.press("escape")
        await pilot.pause()
        # q still quits, and removes no document
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running
    with Project(app.spec.db) as project:
        assert decisions.active(project) == []


def test_a_keymap_that_is_a_fifo_is_reported_not_waited_on(tmp_path):
    from dedup_tui.ui.keymap import load_keymap

    fifo = tmp_path / "keymap.json"
    os.mkfifo(fifo)
    result: list = []
    reader = threading.Thread(target=lambda: result.append(load_keymap(fifo)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert any("not a regular file" in line for line in result[0].ignored)
