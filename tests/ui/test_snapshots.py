"""SVG snapshots of the key screens (pytest --snapshot-update to accept changes after review)."""

from __future__ import annotations

import shutil
from pathlib import Path

from textual.widgets import Input

from dedup_tui.ui.app import create_app

from .conftest import settle


def test_main_screen_80x24(snap_compare, corpus):
    assert snap_compare(create_app(corpus, author="tester"), terminal_size=(80, 24), run_before=settle)


def test_main_screen_light_wide(snap_compare, corpus):
    async def before(pilot):
        pilot.app.theme = "textual-light"
        await settle(pilot)

    assert snap_compare(create_app(corpus, author="tester"), terminal_size=(140, 36), run_before=before)


def test_pair_view(snap_compare, corpus):
    async def before(pilot):
        await settle(pilot)
        await pilot.press("tab", "down", "enter")
        await settle(pilot)

    assert snap_compare(create_app(corpus, author="tester"), terminal_size=(120, 30), run_before=before)


def test_help_screen(snap_compare, corpus):
    async def before(pilot):
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(create_app(corpus, author="tester"), terminal_size=(80, 24), run_before=before)


def test_export_dialog(snap_compare, corpus):
    async def before(pilot):
        await settle(pilot)
        await pilot.press("e")
        await pilot.pause()
        for inp in pilot.app.screen.query(Input):
            inp.cursor_blink = False
        pilot.app.screen.query_one("#export-path", Input).value = "curated.jsonl"
        pilot.app.screen.query_one("#export-ok").focus()  # no text cursor in the picture
        await pilot.pause()

    assert snap_compare(create_app(corpus, author="tester"), terminal_size=(100, 30), run_before=before)


def test_triage_screen_120x40(snap_compare, corpus):
    """The main screen as a reviewer works in it: a cluster, its members, the preview diff."""

    async def before(pilot):
        await settle(pilot)
        await pilot.press("tab", "down")
        await settle(pilot)

    assert snap_compare(create_app(corpus, author="tester"), terminal_size=(120, 40), run_before=before)


def _pages(tmp_path):
    from .conftest import write_corpus

    page = [f"## Section {i}\nThe option --flag{i} sets the value number {i} of the tool." for i in range(40)]
    changed = list(page)
    changed[5] = changed[5].replace("value number 5", "value NUMBER five")
    changed[25] = changed[25] + "\nAn extra line only the second page has."
    return write_corpus(
        tmp_path / "pages.jsonl",
        [{"id": "page-a", "text": "\n".join(page)}, {"id": "page-b", "text": "\n".join(changed)}],
    )


def _aligned_pair(keys=()):
    async def before(pilot):
        await settle(pilot)
        await pilot.press("tab", "down", "d")
        await settle(pilot)
        if keys:
            await pilot.press(*keys)
            await pilot.pause()

    return before


def test_pair_view_lines_aligned_80x24(snap_compare, tmp_path):
    assert snap_compare(
        create_app(_pages(tmp_path), author="tester"),
        terminal_size=(80, 24),
        run_before=_aligned_pair(["right_square_bracket", "right_square_bracket"]),
    )


def test_pair_view_lines_aligned_120x40(snap_compare, tmp_path):
    assert snap_compare(
        create_app(_pages(tmp_path), author="tester"), terminal_size=(120, 40), run_before=_aligned_pair()
    )


def test_pair_view_80x24(snap_compare, corpus):
    async def before(pilot):
        await settle(pilot)
        await pilot.press("tab", "down", "enter")
        await settle(pilot)

    assert snap_compare(create_app(corpus, author="tester"), terminal_size=(80, 24), run_before=before)


def _picker(tmp_path):
    from dedup_tui.engine.ingest import sample_fields
    from dedup_tui.ui.setup import FieldPickerApp

    from .conftest import write_corpus

    src = write_corpus(
        tmp_path / "content.jsonl",
        [
            {"key": f"k{i}", "title": f"Title {i}", "body": f"The body of document {i}, its text.", "score": i}
            for i in range(5)
        ],
    )
    return FieldPickerApp(src, sample_fields(src), f'{src.name}:1: text field "text" is missing')


def test_field_picker_80x24(snap_compare, tmp_path):
    assert snap_compare(_picker(tmp_path), terminal_size=(80, 24))


def test_field_picker_120x40(snap_compare, tmp_path):
    assert snap_compare(_picker(tmp_path), terminal_size=(120, 40))


def test_rescan_dialog_80x24(snap_compare, corpus):
    async def before(pilot):
        await settle(pilot)
        await pilot.press("R")
        await pilot.pause()
        for inp in pilot.app.screen.query(Input):
            inp.cursor_blink = False
        pilot.app.screen.query_one("#rescan-ok").focus()
        await pilot.pause()

    assert snap_compare(create_app(corpus, author="tester"), terminal_size=(80, 24), run_before=before)


# -- long ids and long field names (tests/fixtures/long_ids.jsonl: man pages whose ids share a
# 40-character start and differ at the end, records with a 54-character field name) --------------
LONG_IDS = Path(__file__).parent.parent / "fixtures" / "long_ids.jsonl"
LONG_FIELD = "last_modified_date_of_the_upstream_package_description"


def long_ids_corpus(tmp_path) -> Path:
    return Path(shutil.copy(LONG_IDS, tmp_path / "long_ids.jsonl"))


def _members_focused(keys=()):
    async def before(pilot):
        await settle(pilot)
        await pilot.press("tab", "down", *keys)
        await settle(pilot)

    return before


def test_main_screen_long_ids_80x24(snap_compare, tmp_path):
    assert snap_compare(
        create_app(long_ids_corpus(tmp_path), author="tester"), terminal_size=(80, 24), run_before=_members_focused()
    )


def test_main_screen_long_ids_120x40(snap_compare, tmp_path):
    assert snap_compare(
        create_app(long_ids_corpus(tmp_path), author="tester"), terminal_size=(120, 40), run_before=_members_focused()
    )


def test_main_screen_keep_by_long_field_120x40(snap_compare, tmp_path):
    """The keep rule on a long field name: the status line holds it whole (wrapped, never cut)."""

    async def before(pilot):
        await settle(pilot)
        pilot.app.session.set_keep_rule(f"max:{LONG_FIELD}")
        await settle(pilot)
        await pilot.press("tab", "down")
        await settle(pilot)
        pilot.app.clear_notifications()
        await pilot.pause()

    assert snap_compare(
        create_app(long_ids_corpus(tmp_path), author="tester"), terminal_size=(120, 40), run_before=before
    )


def labelled_long_ids_project(tmp_path) -> Path:
    """The long-ids corpus scanned, every stored pair labelled (9: too few to recommend)."""
    from dedup_tui.engine.curate import tune
    from dedup_tui.engine.ingest import load_corpus
    from dedup_tui.engine.scanning.local import scan
    from dedup_tui.engine.store import Project
    from dedup_tui.engine.store.scans import load_graph

    db = tmp_path / "long_ids.db"
    project = Project(db, create=True)
    try:
        load_corpus(project, [long_ids_corpus(tmp_path)])
        scan(project)
        graph = load_graph(project)
        ids = project.ids_for(list(range(graph.n)))
        for a, b, j in zip(graph.a.tolist(), graph.b.tolist(), graph.jaccard.tolist()):
            tune.set_label(project, ids[a], ids[b], "duplicate" if j >= 0.85 else "not_duplicate", j, author="tester")
    finally:
        project.close()
    return db


async def _tuning(pilot, keys=()):
    await settle(pilot)
    await pilot.press("T")
    await settle(pilot)
    if keys:
        await pilot.press(*keys)
        await pilot.pause()


def test_tuning_screen_80x24(snap_compare, tmp_path):
    assert snap_compare(
        create_app(labelled_long_ids_project(tmp_path), author="tester"), terminal_size=(80, 24), run_before=_tuning
    )


def test_tuning_screen_plots_80x24(snap_compare, tmp_path):
    async def before(pilot):
        await _tuning(pilot, ["v"])

    assert snap_compare(
        create_app(labelled_long_ids_project(tmp_path), author="tester"), terminal_size=(80, 24), run_before=before
    )


def test_tuning_screen_120x40(snap_compare, tmp_path):
    assert snap_compare(
        create_app(labelled_long_ids_project(tmp_path), author="tester"), terminal_size=(120, 40), run_before=_tuning
    )


def test_label_queue_80x24(snap_compare, tmp_path):
    """The borderline labelling queue on long ids: its header's two lines whole."""

    async def before(pilot):
        await _tuning(pilot, ["L"])
        await settle(pilot)

    assert snap_compare(
        create_app(long_ids_corpus(tmp_path), author="tester"), terminal_size=(80, 24), run_before=before
    )


def _with_references(tmp_path) -> Path:
    """The long-ids pages, every fifth one also in an evaluation set loaded as a reference."""
    import json

    from click.testing import CliRunner

    from dedup_tui.cli import main as cli_main

    corpus = long_ids_corpus(tmp_path)
    rows = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    evals = tmp_path / "evals.jsonl"
    evals.write_text(
        "".join(json.dumps({"id": f"eval/{r['id']}", "text": r["text"]}) + "\n" for r in rows[::5]), encoding="utf-8"
    )
    db = tmp_path / "refs.db"
    result = CliRunner().invoke(cli_main, ["scan", str(db), str(corpus), "--reference", str(evals)])
    assert result.exit_code == 0, result.output
    return db


def test_main_screen_with_references_120x40(snap_compare, tmp_path):
    assert snap_compare(
        create_app(_with_references(tmp_path), author="tester"), terminal_size=(120, 40), run_before=_members_focused()
    )


def test_read_only_view_80x24(snap_compare, tmp_path):
    assert snap_compare(
        create_app(_with_references(tmp_path), author="tester", read_only=True),
        terminal_size=(80, 24),
        run_before=_members_focused(),
    )
