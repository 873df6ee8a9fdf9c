"""Hostile corpus text reaches the terminal only as inert, visible characters.

The assertions are on what the terminal would receive: the exact bytes Textual writes for a
full repaint of the screen (`render_full_update().render_segments(console)`, what the app's
driver writes on a real terminal). Textual's own CSI sequences (colours, cursor moves) are
allowed; nothing from the corpus may start an escape sequence, ring the bell, set the title,
write the clipboard (OSC 52), make a hyperlink (OSC 8), reorder text (bidi) or hide it
(zero-width), and a 20,000-character line without spaces never widens the layout.

Ids and field names with quotes and SQL in them: loading and exporting them unchanged is
tested in tests/engine/test_ingest.py (test_hostile_ids_and_field_names_round_trip,
test_hostile_field_names_given_as_options); here they also go through decisions and every log.
"""

from __future__ import annotations

import asyncio
import csv
import json
import re

import pytest
from rich.cells import cell_len
from textual.widgets import Footer, Input

from dedup_tui.engine.curate import curated, decisions
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.scanning.local import scan
from dedup_tui.engine.store import Project
from dedup_tui.ui.app import create_app
from dedup_tui.ui.screens.dialogs import AskScreen
from dedup_tui.ui.screens.pair import PairScreen
from dedup_tui.ui.text import literal, literal_line, snippet

from ..ui.conftest import press_decision, settle
from .conftest import write_jsonl

HOSTILE = (
    "[bold]B[/bold] [link=file:///etc/passwd]click[/link] [red on blue]x "
    "\x1b[31mred\x1b[0m \x1b[2J\x1b[H\x1b[10;10Hcursor \x1b[?1049l "
    "\x1b]0;pwned title\x07 \x1b]52;c;cHduZWQ=\x07clip \x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\ "
    "\x1bP+q\x1b\\dcs \u202eevil\u202c zw\u200b\u200c\u200d\ufeff\u2060 "
    "nul\x00 bel\x07 bs\x08 del\x7f c1\x9b31m\x9d0;t\x9c cr\rline\u2028para\u2029 vt\x0bff\x0c "
)
HOSTILE_ID = "id\x1b]0;t\x07[bold]\u202e\"'); DROP TABLE decisions; --\n"
BASE = " ".join(f"word{i}" for i in range(60))
OTHER = " ".join(f"other{i}" for i in range(60))
LONG = "y" * 20000
WIDTH, HEIGHT = 100, 32

# Sequences Textual itself writes: CSI with parameters, and nothing else.
_OWN_CSI = re.compile(r"\x1b\[[0-9;:?<>=]*[ -/]*[@-~]")
_INVISIBLE = (
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200b\u200c\u200d\u200e\u200f\ufeff\u2060\u2028\u2029"
)


def terminal_bytes(app) -> str:
    """What a full repaint writes to the terminal (the driver's input on a real terminal)."""
    update = app.screen._compositor.render_full_update()
    return update.render_segments(app.console)


def assert_inert(data: str) -> list[str]:
    """No escape sequence but Textual's own CSI, no control or invisible character; the
    screen's rows as text (each exactly the terminal's width)."""
    for seq in ("\x1b]", "\x1bP", "\x1b_", "\x1b^", "\x1bX", "\x07", "\x00", "\x9b", "\x9d", "\x90"):
        assert seq not in data, f"{seq!r} reached the terminal"
    rest = _OWN_CSI.sub("", data)
    bad = {c for c in rest if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F or c in _INVISIBLE}
    assert not bad, f"raw characters reached the terminal: {sorted(map(repr, bad))}"
    rows = rest.split("\n")
    rows = [r for r in rows if r]
    assert len(rows) == HEIGHT, len(rows)
    for row in rows:
        assert cell_len(row) == WIDTH, (cell_len(row), row[:120])
    return rows


@pytest.fixture
def hostile_corpus(tmp_path):
    docs = [
        {"id": HOSTILE_ID, "text": HOSTILE + BASE},
        {"id": "copy-of-hostile", "text": HOSTILE + BASE + " extra"},
        {"id": "long", "text": LONG + " " + BASE},
        {"id": "long-copy", "text": LONG + " " + BASE + " more"},
        {"id": "y" * 5000, "text": "an id of five thousand characters " + OTHER},
        {"id": "long-id-copy", "text": "an id of five thousand characters " + OTHER + " too"},
    ]
    return write_jsonl(tmp_path / "hostile.jsonl", docs)


async def _drive(corpus) -> dict[str, list[str]]:
    screens: dict[str, list[str]] = {}
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        await settle(pilot)
        main = app.main
        assert main.index.counts.clusters == 3
        labels = main.index.labels.tolist()
        ids = main.project.ids_for(labels)
        table = main.query_one("#clusters")
        table.move_cursor(row=ids.index(HOSTILE_ID))
        await settle(pilot)
        screens["main"] = assert_inert(terminal_bytes(app))

        await pilot.press("enter", "down")  # the hostile cluster's other member
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, PairScreen)
        screens["pair"] = assert_inert(terminal_bytes(app))
        await pilot.press("escape")
        await settle(pilot)

        await pilot.press("up", "m")  # the hostile-id document: a note dialog titled with its id
        await pilot.pause()
        assert isinstance(app.screen, AskScreen)
        screens["note"] = assert_inert(terminal_bytes(app))
        await pilot.press(*"[bold]n", "enter")
        await settle(pilot)
        screens["note-shown"] = assert_inert(terminal_bytes(app))

        await press_decision(pilot, "x")  # remove it (a kept document: asked first): a toast names it
        await pilot.pause()
        app.screen.query_one(Input).value = "yes"
        await pilot.press("enter")
        await settle(pilot)
        screens["toast"] = assert_inert(terminal_bytes(app))
        assert any("Saved: remove" in m for m in app.told)

        table.move_cursor(row=ids.index("long"))
        await settle(pilot)
        screens["long"] = assert_inert(terminal_bytes(app))
        assert app.screen.virtual_size.width <= WIDTH
        await pilot.press("enter", "down", "d")
        await settle(pilot)
        screens["long-pair"] = assert_inert(terminal_bytes(app))
        for view in app.screen.query("DocView"):
            assert view.virtual_size.width <= view.size.width and view.line_count > 20000 // WIDTH
        await pilot.press("escape")
        await settle(pilot)
        table.move_cursor(row=ids.index("y" * 5000))
        await settle(pilot)
        screens["long-id"] = assert_inert(terminal_bytes(app))
        for widget in app.screen.query("*"):
            if any(isinstance(w, Footer) for w in widget.ancestors_with_self):
                continue  # the footer's keys scroll sideways by design
            if widget.display and widget.region.width:
                assert widget.region.right <= WIDTH, widget
    return screens


def test_hostile_text_reaches_the_terminal_inert(hostile_corpus):
    screens = asyncio.run(_drive(hostile_corpus))
    main, pair = "\n".join(screens["main"]), "\n".join(screens["pair"])
    # Markup is shown as the characters it is made of.
    assert "[bold]B[/bold]" in pair and "[link=file:///etc/passwd]click[/link]" in pair
    assert "[red" in pair and "blue]x" in pair
    # Escape sequences are shown as visible escapes, never run.
    for shown in (
        "\\x1b[31mred\\x1b[0m",
        "\\x1b[2J\\x1b[H",
        "\\x1b]0;pwned",
        "title\\x07",
        "\\x1b]52;c;cHduZWQ=\\x07",
        "\\x1b]8;;http://evil/\\x1b\\link",
        "\\u202eevil\\u202c",
        "zw\\u200b\\u200c\\u200d\\ufeff\\u2060",
        "nul\\x00",
        "bel\\x07",
        "c1\\x9b31m\\x9d0;t\\x9c",
        "cr\\x0dline\\u2028para\\u2029",
    ):
        assert shown in pair, shown
    # The id is one visible line wherever it is shown (tables, member info, titles).
    assert "id\\x1b]0;t\\x07[bold]\\u202e\"');" in main and "DROP TABLE decisions" in main
    assert "id\\x1b]0;t\\x07[bold]\\u202e" in "\n".join(screens["note"])
    assert "note: [bold]n" in "\n".join(screens["note-shown"])


def test_literal_escapes_every_dangerous_character():
    dangerous = [chr(c) for c in range(0x20) if c not in (9, 10)] + [chr(c) for c in range(0x7F, 0xA0)]
    dangerous += list(_INVISIBLE) + ["\u00ad", "\u061c", "\ud800", "\udfff", "\U000e0041"]
    for ch in dangerous:
        shown = literal(ch)
        assert shown != ch and shown.isascii() and shown.isprintable(), repr(ch)
    assert literal("tab\tnew\nline") == "tab\tnew\nline"
    assert literal_line("tab\tnew\nline\r") == "tab\\x09new\\x0aline\\x0d"
    assert literal_line("x" * 50, 10) == "x" * 9 + "…"
    assert literal("[bold]é 日本 👍") == "[bold]é 日本 👍"  # ordinary text untouched
    assert snippet("a\u202eb\n\x1b]52;c;x\x07", 40) == "a\\u202eb \\x1b]52;c;x\\x07"


def test_hostile_ids_and_field_names_through_decisions_and_every_log(tmp_path):
    id_field, text_field = "i'd\"; DROP TABLE decisions;--", "te\"xt'); --"
    a, b = "a'); DELETE FROM decisions; --", 'b "quoted" \x1b]52;c;x\x07'
    records = [
        {id_field: a, text_field: BASE, "o'k": 1},
        {id_field: b, text_field: BASE + " x", "o'k": 2},
        {id_field: "c", text_field: "unrelated text entirely"},
    ]
    src = write_jsonl(tmp_path / "h.jsonl", records)
    project = Project(tmp_path / "h.db", create=True)
    load_corpus(project, [src], id_field=id_field, text_field=text_field)
    scan(project)
    decisions.record(project, "keep", b, author="o'brien\"; --")
    decisions.record(project, "note", a, value="'); DROP TABLE documents; --", author="t")
    out = tmp_path / "out.jsonl"
    r = curated.export_curated(
        project,
        0.8,
        "components",
        out,
        removed_out=tmp_path / "removed.jsonl",
        decisions_out=tmp_path / "log.jsonl",
        manifest_out=tmp_path / "m.json",
    )
    assert r.decisions == 2
    kept = [json.loads(x) for x in out.read_text().splitlines()]
    assert kept == [records[1], records[2]]
    assert json.loads((tmp_path / "removed.jsonl").read_text().splitlines()[0])["id"] == a
    log = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [(d["doc_id"], d["author"]) for d in log] == [(b, "o'brien\"; --"), (a, "t")]
    assert log[1]["value"] == "'); DROP TABLE documents; --"
    curated.export_curated(project, 0.8, "components", tmp_path / "out.csv", fmt="csv")
    with open(tmp_path / "out.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == [id_field, text_field, "o'k"] and rows[1][0] == b
    assert project.conn.execute("SELECT count(*) FROM documents").fetchone() == (3,)
    project.close()


def _hostile_chain_corpus(tmp_path):
    from ..engine.test_tune import CHAIN

    hostile = {"c0": "c0\x1b]2;PWNED\x07", "c6": "c6\x1b[2J"}
    return write_jsonl(tmp_path / "chain.jsonl", [{"id": hostile.get(i, i), "text": t} for i, t in CHAIN])


def test_hostile_ids_in_the_tuning_screen_are_inert(tmp_path):
    """The chain table and the labelling queue's titles show ids: escaped, never sent raw."""
    from dedup_tui.ui.screens.tune import LabelScreen, TuneScreen

    corpus = _hostile_chain_corpus(tmp_path)

    async def drive() -> tuple[list[str], list[str]]:
        app = create_app(corpus, author="tester")
        async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
            await settle(pilot)
            app.session.set_threshold(0.7)
            await settle(pilot)
            await pilot.press("T")
            await settle(pilot)
            assert isinstance(app.screen, TuneScreen)
            assert [ch.label_id for ch in app.screen.report.chains] == ["c0\x1b]2;PWNED\x07"]
            tune_rows = assert_inert(terminal_bytes(app))
            await pilot.press("L")
            await settle(pilot)
            labelling = app.screen
            assert isinstance(labelling, LabelScreen)
            while labelling.current is not None and not any(
                "\x1b" in i for i in app.main.project.ids_for([labelling.current.a, labelling.current.b])
            ):
                await press_decision(pilot, "0")  # skip
                await settle(pilot)
            assert labelling.current is not None  # a pair with a hostile id is on screen
            return tune_rows, assert_inert(terminal_bytes(app))

    tune_rows, queue_rows = asyncio.run(drive())
    assert "c0\\x1b]2;PWNED\\x07" in "\n".join(tune_rows)
    assert "\\x1b" in "\n".join(queue_rows)


def test_hostile_ids_in_the_cli_tune_report_are_inert(tmp_path):
    from click.testing import CliRunner

    from dedup_tui.cli import main

    corpus = _hostile_chain_corpus(tmp_path)
    db = tmp_path / "p.db"
    runner = CliRunner()
    assert runner.invoke(main, ["load", str(corpus), "--db", str(db)]).exit_code == 0
    assert runner.invoke(main, ["scan", "--db", str(db)]).exit_code == 0
    result = runner.invoke(main, ["tune", "--db", str(db), "--threshold", "0.7"])
    assert result.exit_code == 0
    assert "c0\\x1b]2;PWNED\\x07" in result.output
    assert "\x1b" not in result.output and "\x07" not in result.output
