"""Pilot tests: the real app, keys in, state, database and files asserted."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from textual.widgets import Input, OptionList

from dedup_tui.engine.curate import decisions, keep_rules
from dedup_tui.engine.errors import Cancelled
from dedup_tui.engine.graph.clustering import KEPT, cluster
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store import Project
from dedup_tui.engine.store.scans import load_graph
from dedup_tui.ui.app import create_app
from dedup_tui.ui.messages import StageProgress
from dedup_tui.ui.screens.dialogs import ExportScreen, SearchResultsScreen
from dedup_tui.ui.screens.help import HelpScreen
from dedup_tui.ui.screens.pair import PairScreen
from dedup_tui.ui.widgets.docview import DocView

from .conftest import corpus_docs, press_decision, settle, write_corpus


def screen_text(app) -> str:
    return app.export_screenshot().replace("&#160;", " ")


def engine_numbers(db, threshold, policy):
    project = Project(db)
    try:
        c = cluster(load_graph(project), threshold, policy)
    finally:
        project.close()
    return c.cluster_count, c.kept_count, c.removed_count


def shown(app):
    c = app.main.index.counts
    return c.clusters, c.kept, c.removed


async def test_open_scan_threshold_and_policy(corpus):
    messages = []
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36), message_hook=messages.append) as pilot:
        await settle(pilot)
        main = app.main
        db = main.spec.db
        assert db == corpus.with_name("corpus.db") and db.exists()
        assert any(isinstance(m, StageProgress) and m.stage == "load" for m in messages)
        assert main.index is not None and main.threshold == 0.8
        assert shown(app) == engine_numbers(db, 0.8, "components")
        assert main.index.counts.documents == len(corpus_docs())
        summary = str(main.query_one("#summary").render())
        assert f"{main.index.counts.clusters} clusters" in summary
        for keys, expected in ((["plus"], 0.81), (["ctrl+left"], 0.76), (["minus"] * 3, 0.73)):
            await pilot.press(*keys)
            await settle(pilot)
            assert main.threshold == pytest.approx(expected)
            assert main.index.threshold == pytest.approx(expected)
            assert shown(app) == engine_numbers(db, expected, "components")
        await pilot.press("p")
        await settle(pilot)
        assert main.policy == "greedy"
        assert shown(app) == engine_numbers(db, 0.73, "greedy")
        # typed threshold
        await pilot.press("t")
        await pilot.pause()
        inp = app.screen.query_one(Input)
        inp.value = "0.9"
        await pilot.press("enter")
        await settle(pilot)
        assert main.threshold == 0.9 and shown(app) == engine_numbers(db, 0.9, "greedy")
        # the floor bounds the threshold
        for _ in range(12):
            await pilot.press("ctrl+left")
        await settle(pilot)
        assert main.threshold == main.floor == 0.5
    # the threshold and policy are remembered in the project
    app2 = create_app(db, author="tester")
    async with app2.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert app2.main.threshold == 0.5 and app2.main.policy == "greedy"


async def test_sort_and_pages(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        main = app.main
        main.PAGE = 3
        main.show_page()
        table = main.query_one("#clusters")
        assert table.row_count == 3 and main.pages == -(-len(main.index.labels) // 3)
        await pilot.press("greater_than_sign")
        assert main.page == 1 and table.row_count == 3
        await pilot.press("less_than_sign", "less_than_sign")
        assert main.page == 0
        sizes = [int(s) for s in main.index.sizes]
        assert sizes == sorted(sizes, reverse=True)
        await pilot.press("s")
        assert main.sort == "high"
        hi = [float(x) for x in main.index.max_sim]
        assert hi == sorted(hi, reverse=True)
        await pilot.press("s", "s")
        assert main.sort == "borderline"
        gaps = [abs(float(x) - main.threshold) for x in main.index.min_sim]
        assert gaps == sorted(gaps)


async def test_not_duplicate_accept_and_note(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = app.main
        graph = main.graph
        # find a cluster of two near duplicates (not exact copies)
        idx = main.index
        for pos, label in enumerate(idx.labels.tolist()):  # noqa: B007 - pos: where the loop stopped
            members = idx.members(label)
            if len(members) == 2 and graph.exact_of[members].max() < 0:
                break
        else:
            pytest.fail("no near pair cluster in the fixture")
        main.page, row = divmod(pos, main.PAGE)
        main.show_page()
        main.query_one("#clusters").move_cursor(row=row)
        await pilot.pause()
        assert main.model.cursor.cluster_id == label
        other = int(members[1])
        await pilot.press("tab")
        await press_decision(pilot, "n")  # on the first member to review
        await settle(pilot)
        # split at every threshold: the other document is now alone and kept
        assert main.index.clustering.keeper[other] == -1
        assert main.index.position(label) is None
        project = Project(main.spec.db)
        d = decisions.active(project)[-1]
        assert d.kind == "not_duplicate" and (d.doc_id, d.other_id) == tuple(project.ids_for([other, label]))
        # accept the (new) first cluster and add a note
        main.query_one("#clusters").focus()
        await pilot.press("home")
        await press_decision(pilot, "a")
        await settle(pilot)
        assert decisions.active(project)[-1].kind == "accept"
        await pilot.press("m")
        await pilot.pause()
        app.screen.query_one(Input).value = "[bold]checked[/bold] by hand"
        await pilot.press("enter")
        await settle(pilot)
        note = decisions.active(project)[-1]
        assert note.kind == "note" and note.value == "[bold]checked[/bold] by hand"
        assert "[bold]checked[/bold]" in str(main.query_one("#member-info").render())
        project.close()


async def test_pair_view_literal_text_and_sync(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = app.main
        project = main.project
        ords = project.conn.execute("SELECT ord FROM documents WHERE text LIKE 'Markup%' ORDER BY ord").fetchall()
        first, second = ords[0][0], ords[1][0]
        label = int(main.index.clustering.cluster[second])
        assert label == first
        main.page, row = divmod(main.index.position(label), main.PAGE)
        main.show_page()
        main.query_one("#clusters").move_cursor(row=row)
        await pilot.pause()
        await pilot.press("tab", "down", "enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PairScreen)
        left, right = screen.query_one("#left-doc", DocView), screen.query_one("#right-doc", DocView)
        assert "[bold]not bold[/bold]" in left.text and "\\x1b[31m" in left.text and "\x1b" not in left.text
        assert right._spans, "the differences are highlighted"
        text = screen_text(app)
        assert "[bold]not" in text and "[link=https://example.com]" in text
        assert "JACCARD" in str(screen.query_one("#pair-header").render())
        # stacked when narrow, side by side when wide
        assert not screen.has_class("-stacked")
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert screen.has_class("-stacked")
        await pilot.press("w")
        assert not screen.has_class("-stacked")
        # decide from the pair view
        before = screen.right
        await pilot.press("greater_than_sign")
        await settle(pilot)
        assert len(screen.members()) == 1 or screen.right != before
        await pilot.press("less_than_sign")
        await settle(pilot)
        assert screen.right == before
        await press_decision(pilot, "x")
        await settle(pilot)
        assert decisions.active(main.project)[-1].kind == "remove"
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is main


async def test_long_document_scrolls_together(tmp_path):
    big = " ".join(f"word{i % 997} line{i}" for i in range(12000))  # ~150 KB
    docs = [
        {"id": "big1", "text": big},
        {"id": "big2", "text": big.replace("line5000 ", "changed ")},
        {"id": "other", "text": "something else entirely, short"},
    ]
    app = create_app(write_corpus(tmp_path / "big.jsonl", docs), author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("tab", "down", "enter")
        await settle(pilot)
        screen = app.screen
        left, right = screen.query_one("#left-doc", DocView), screen.query_one("#right-doc", DocView)
        assert left.line_count > 1000 and right.max_scroll_y > 0
        await pilot.press("pagedown", "pagedown", "end")
        await pilot.pause()
        assert right.scroll_y == right.max_scroll_y
        assert left.scroll_y == pytest.approx(left.max_scroll_y, abs=1)
        assert any(kind == "change" for _, _, kind in right._spans)


async def test_export_dialog_writes_files(corpus, tmp_path):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = app.main
        await pilot.press("tab", "down")
        kept_doc = main.project.ids_for([main.selected_doc()])[0]
        await press_decision(pilot, "k")
        await settle(pilot)
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExportScreen)
        out = tmp_path / "exported" / "curated.jsonl"
        app.screen.query_one("#export-path", Input).value = str(out)
        app.screen.query_one("#export-threshold", Input).value = "0.75"
        await pilot.click("#export-ok")
        await settle(pilot)
        assert app.screen is main
        kept = [json.loads(line)["id"] for line in out.read_text().splitlines()]
        assert kept_doc in kept
        project = Project(main.spec.db)
        c = keep_rules.cluster_with_decisions(project, load_graph(project), 0.75, "components")
        assert len(kept) == c.kept_count
        removed = [json.loads(line) for line in (out.parent / "curated.removed.jsonl").read_text().splitlines()]
        assert len(removed) == c.removed_count
        log = [json.loads(line) for line in (out.parent / "curated.decisions.jsonl").read_text().splitlines()]
        assert log[0]["kind"] == "keep" and log[0]["doc_id"] == kept_doc and log[0]["author"] == "tester"
        manifest = json.loads((out.parent / "curated.manifest.json").read_text())
        assert manifest["threshold"] == 0.75 and manifest["counts"]["kept"] == len(kept)
        project.close()


async def test_help_and_palette(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        help_text = screen_text(app)
        assert "show help and keys" in help_text
        await pilot.press("escape")
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        before = app.main.threshold
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"raise by 0.05")
        await pilot.pause()
        await pilot.press("enter")
        await settle(pilot)
        assert app.main.threshold == pytest.approx(before + 0.05)


async def test_escape_cancels_scan(corpus, monkeypatch):
    started = threading.Event()

    def slow_scan(project, settings, control, full=False, ahead=None, memory=None, lean=False):
        for i in range(1000):
            control.report("signatures", i, 1000)
            started.set()
            if control.cancel.wait(0.01):
                raise Cancelled("cancelled")
        raise AssertionError("the scan was not cancelled")

    monkeypatch.setattr("dedup_tui.engine.scanning.local.scan", slow_scan)
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert app.main.scanning
        started.wait(5)
        await pilot.press("escape")
        await settle(pilot)
        main = app.main
        assert not main.scanning and main.index is None
        assert "Cancelled" in str(main.query_one("#progress-title").render())
        project = Project(main.spec.db)
        assert project.scan_state != "complete" and project.document_count() == len(corpus_docs())
        project.close()


def test_sample_is_copied_outside_the_package(tmp_path, monkeypatch):
    from dedup_tui.engine import opening

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    spec = opening.prepare()
    assert spec.db.parent == tmp_path / "data" / "dedup-tui" / "sample"
    assert spec.corpus == [spec.db.parent / "notes.jsonl"]
    assert opening.SAMPLE.parent not in spec.db.parents


def test_literal_escapes():
    from dedup_tui.ui.text import escape_spans, literal, snippet

    assert literal("a\x1b[31mb\x07\u202e") == "a\\x1b[31mb\\x07\\u202e"
    shown, spans = escape_spans("x\x1by")
    assert shown == "x\\x1by" and spans == [(1, 5)]
    assert snippet("[bold]\n  hi", 20) == "[bold] hi"


async def test_diff_on_the_kept_row_compares_it_with_its_closest_member(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = app.main
        label = int(main.index.labels[0])
        main.page = 0
        main.show_page()
        main.query_one("#clusters").move_cursor(row=0)
        await pilot.pause()
        await pilot.press("tab", "home", "d")  # the members table's first row is the kept one
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PairScreen)
        assert screen.left == label and screen.right != label
        c = main.index.clustering
        best = max((o for o in main.index.members(label) if o != label), key=lambda o: c.similarity[o])
        assert c.similarity[screen.right] == c.similarity[best]


async def test_a_busy_project_never_blocks_the_ui_or_crashes_it(corpus, tmp_path, monkeypatch):
    """Another process holds the project's write lock (a long load): `x` and `]` are handled at
    once (the UI thread never waits on SQLite), the decision is reported not saved, and once the
    lock is gone the same key saves it."""
    import sqlite3

    from dedup_tui.ui import writer

    monkeypatch.setattr(writer, "BUSY_TIMEOUT_MS", 100)
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        await pilot.press("tab", "down")
        target = main.selected_doc()
        threshold = main.threshold
        other = sqlite3.connect(app.spec.db, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # the write lock, as a load holds it
        try:
            await press_decision(pilot, "x")
            await pilot.press("plus")
            assert main.threshold == pytest.approx(threshold + 0.01)  # handled while the write waits
            await settle(pilot)
            messages = list(app.told)
            assert any("Not saved: the project is busy" in m and "remove " in m for m in messages)
        finally:
            other.execute("ROLLBACK")
            other.close()
        project = Project(app.spec.db)
        assert decisions.active(project) == []
        main.query_one("#members").focus()
        main.query_one("#members").move_cursor(
            row=[int(o) for o in main.index.members(main.model.cursor.cluster_id)].index(target)
            if target in main.index.members(main.model.cursor.cluster_id)
            else 0
        )
        await press_decision(pilot, "x")
        await settle(pilot)
        assert [d.kind for d in decisions.active(project)] == ["remove"]
        project.close()


def test_binding_ids_are_unique():
    from dedup_tui.ui.actions import LABEL_ACTIONS, MAIN_ACTIONS, PAIR_ACTIONS, TUNE_ACTIONS

    ids = [a.id for a in MAIN_ACTIONS + PAIR_ACTIONS + TUNE_ACTIONS + LABEL_ACTIONS]
    assert len(ids) == len(set(ids))
    assert {
        "main.remove",
        "main.threshold-up-0.01",
        "main.threshold-down-0.01",
        "pair.keep",
        "label.label-not-duplicate",
    } <= set(ids)


async def test_a_keymap_file_remaps_a_key(corpus, tmp_path, monkeypatch):
    keymap = tmp_path / "keymap.json"
    keymap.write_text(json.dumps({"main.remove": "delete", "main.no-such-action": "z"}))
    monkeypatch.setenv("DEDUP_TUI_KEYMAP", str(keymap))
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert any("main.no-such-action: no such binding id" in m for m in app.told)
        await pilot.press("tab", "down")
        target = app.main.selected_doc()
        await pilot.press("delete")
        await settle(pilot)
        project = Project(app.spec.db)
        assert [(d.kind, d.doc_id) for d in decisions.active(project)] == [("remove", project.ids_for([target])[0])]
        project.close()


async def test_triage_on_one_screen(corpus):
    """The preview shows the selected member against its kept document with the differences
    marked; each decision moves the cursor to the next member without one, then to the next
    cluster without one, so a reviewer goes through clusters with x / k alone."""
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        # a cluster with a near (not exact) member
        c = main.index.clustering
        near = next(
            int(m)
            for m in np.flatnonzero(c.keeper >= 0)
            if main.model.root(int(m)) != main.model.root(int(c.keeper[m]))
        )
        main.query_one("#clusters").move_cursor(row=main.index.position(int(c.cluster[near])))
        await pilot.pause()
        await pilot.press("tab")
        main.query_one("#members").move_cursor(
            row=[int(m) for m in main.index.members(main.model.cursor.cluster_id)].index(near)
        )
        await pilot.pause()
        member = main.selected_doc()
        assert member == near
        kept = int(main.index.clustering.keeper[member])
        kept_view, member_view = main.query_one("#preview-kept", DocView), main.query_one("#preview-member", DocView)
        assert (kept_view.text, member_view.text) == tuple(main.project.texts_for([kept, member]))
        assert member_view._spans and kept_view._spans  # the differences are marked on both sides
        first_label = main.model.cursor.cluster_id
        main.query_one("#members").move_cursor(row=1)  # the first member after the kept one
        await pilot.pause()
        members = [int(m) for m in main.index.members(first_label)]
        undecided = [m for m in members if main.index.clustering.keeper[m] >= 0]
        for expected_next in undecided[1:]:
            await press_decision(pilot, "x")
            await settle(pilot)
            assert main.selected_doc() == expected_next
        await press_decision(pilot, "x")  # the cluster's last undecided member: on to the next cluster
        await settle(pilot)
        assert main.model.cursor.cluster_id != first_label
        assert not main.index.decided[main.index.position(main.model.cursor.cluster_id)]
        assert main.index.clustering.keeper[main.selected_doc()] >= 0  # a member to decide on
        project = Project(app.spec.db)
        assert sorted(d.doc_id for d in decisions.active(project)) == sorted(project.ids_for(undecided))
        project.close()


@pytest.mark.parametrize("screen_keys", [(), ("tab", "down", "d")])
async def test_every_footer_key_is_visible_at_80x24(corpus, screen_keys):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        if screen_keys:
            await pilot.press(*screen_keys)
            await settle(pilot)
        footer = app.screen.query_one("AppFooter")
        keys = [k for k in footer.query("FooterKey") if not k.has_class("-command-palette")]
        assert len(keys) >= 6
        palette = footer.query("FooterKey.-command-palette")
        right_edge = palette.first().region.x if palette else 80
        for key in keys:
            assert key.region.width > 0 and key.region.right <= right_edge, (str(key.render()), key.region)


async def test_the_pair_view_never_hides_a_character(tmp_path):
    """Two ~15 KB near-duplicates: every wrapped line fits the width left by the scrollbar, no
    horizontal scrollbar, and the lines hold every character of both documents."""
    words = " ".join(f"word{i % 97}x{i}" for i in range(1500))
    docs = [{"id": "a", "text": words}, {"id": "b", "text": words.replace("word5x", "WORD5x")}]
    app = create_app(write_corpus(tmp_path / "long.jsonl", docs), author="tester")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("tab", "down", "d")
        await settle(pilot)
        assert isinstance(app.screen, PairScreen)
        for view_id, text in (("#left-doc", docs[0]["text"]), ("#right-doc", docs[1]["text"])):
            view = app.screen.query_one(view_id, DocView)
            width = view.scrollable_content_region.width
            assert view.max_scroll_y > 0 and view.max_scroll_x == 0
            assert all(line.cell_len <= width for line in view._lines)
            assert "".join(line.plain for line in view._lines).replace(" ", "") == text.replace(" ", "")


async def test_find_a_document_by_id_or_text_and_jump_to_its_cluster(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        c = main.index.clustering
        labels = [int(x) for x in main.index.labels]
        target_label = labels[-1]  # the last cluster in the list, likely off the first rows
        member = int(next(m for m in main.index.members(target_label) if c.keeper[m] >= 0))
        doc_id, text = main.project.ids_for([member])[0], main.project.texts_for([member])[0]
        for query in (doc_id, text[5:40].upper()):
            main.query_one("#clusters").move_cursor(row=0)
            await pilot.pause()
            await pilot.press("slash")
            await pilot.pause()
            app.screen.query_one(Input).value = query
            await pilot.press("enter")
            await settle(pilot)
            if isinstance(app.screen, SearchResultsScreen):  # several matches: every one listed
                options = app.screen.query_one(OptionList)
                assert options.option_count == len(main.project.find_documents(query, limit=1000)) > 1
                await pilot.press("enter")
                await settle(pilot)
            assert main.model.cursor.cluster_id == target_label
            found = main.selected_doc()
            assert found == member or query != doc_id  # by id: that very document
            assert text[5:40].lower() in main.project.texts_for([found])[0].lower()
        await pilot.press("slash")
        await pilot.pause()
        app.screen.query_one(Input).value = "no such words anywhere 123"
        await pilot.press("enter")
        await settle(pilot)
        assert any("No document has the id or text" in m for m in app.told)


async def test_a_cancelled_scan_can_be_started_again(tmp_path, monkeypatch):
    """esc during the first scan of a new corpus: the message says the documents are loaded and
    R scans again; R then gives the clusters."""
    from dedup_tui.engine.scanning import local  # (what the app's load-and-scan calls)

    from .conftest import corpus_docs

    real_scan, calls = local.scan, []

    def scan_cancelled_once(project, settings, control, full=False, ahead=None, memory=None, lean=False):
        calls.append(1)
        if len(calls) == 1:
            raise Cancelled("cancelled")
        return real_scan(project, settings, control, full=full, ahead=ahead, memory=memory, lean=lean)

    monkeypatch.setattr(local, "scan", scan_cancelled_once)
    app = create_app(write_corpus(tmp_path / "c.jsonl", corpus_docs()), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        assert main.index is None
        assert any("the documents are loaded" in m and "Press R to scan again" in m for m in app.told)
        await pilot.press("R")
        await pilot.pause()
        await pilot.press("enter")  # the rescan dialog: the same floor and k
        await settle(pilot)
        assert main.index is not None and main.index.counts.clusters > 0 and len(calls) == 2


async def test_rescan_with_a_lower_floor_lets_the_threshold_go_lower(corpus):
    from dedup_tui.ui.screens.dialogs import RescanScreen

    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        assert main.floor == 0.5
        pairs_before = main.index.counts.stored_pairs
        await pilot.press("R")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, RescanScreen)
        assert (
            dialog.query_one("#rescan-floor", Input).value == "0.5"
            and dialog.query_one("#rescan-k", Input).value == "5"
        )
        dialog.query_one("#rescan-floor", Input).value = "1.5"
        await pilot.press("enter")
        await pilot.pause()
        assert "at most 1" in str(dialog.query_one("#rescan-error").render()) and app.screen is dialog
        dialog.query_one("#rescan-floor", Input).value = "0.3"
        await pilot.press("enter")
        await settle(pilot)
        assert main.floor == 0.3 and main.index.counts.stored_pairs > pairs_before
        with Project(app.spec.db) as project:
            assert project.scan_params()["floor"] == 0.3 and project.scan_params()["k"] == 5
        main.query_one("#clusters").focus()
        await pilot.press("t")
        await pilot.pause()
        app.screen.query_one(Input).value = "0.35"
        await pilot.press("enter")
        await settle(pilot)
        assert main.threshold == 0.35


async def test_the_pair_view_moves_on_after_a_decision(corpus):
    """x in the pair view: the next member without a decision is shown, with the member counter;
    k: the document just kept is on the left and the next undecided member on the right."""
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        label = next(int(x) for x, size in zip(main.index.labels, main.index.sizes) if size >= 3)
        main.query_one("#clusters").move_cursor(row=main.index.position(label))
        await pilot.pause()
        members = [int(m) for m in main.index.members(label)]
        await pilot.press("tab", "d")  # the cursor is on the first member to review
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PairScreen) and (screen.left, screen.right) == (label, members[1])
        await press_decision(pilot, "x")
        await settle(pilot)
        assert app.screen is screen and (screen.left, screen.right) == (label, members[2])
        assert "member 2/" in str(screen.query_one("#pair-header").render())
        await press_decision(pilot, "k")  # keep members[2]: it becomes the kept one, on the left
        await settle(pilot)
        assert screen.left == members[2] and screen.right not in (members[1], members[2])
        assert main.index.clustering.keeper[screen.right] == members[2]
        assert screen.query_one("#left-doc", DocView).text == main.project.texts_for([members[2]])[0]
        before = screen.right
        await pilot.press(">")
        await settle(pilot)
        assert screen.left == members[2] and (screen.right != before or len(screen.members()) == 1)


async def test_pair_view_case_toggle_and_stacked_titles(tmp_path):
    words = " ".join(f"word{i}" for i in range(80))
    docs = [
        {"id": "a", "text": "The Library opens at nine on Mondays. " + words + " and closes at five"},
        {"id": "b", "text": "the library opens at nine on mondays. " + words + " and closes at six"},
    ]
    app = create_app(write_corpus(tmp_path / "c.jsonl", docs), author="tester")
    async with app.run_test(size=(90, 30)) as pilot:  # narrow: stacked
        await settle(pilot)
        await pilot.press("tab", "down", "d")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PairScreen) and screen.has_class("-stacked")
        assert str(screen.query_one("#left-title").render()).startswith("top:")
        right = screen.query_one("#right-doc", DocView)
        marked = lambda: {right.text[s:e] for s, e, kind in right._spans if kind != "char"}  # noqa: E731
        assert "the" in {m.strip() for m in marked()}  # case differences shown by default
        await pilot.press("c")
        await settle(pilot)
        assert {m.strip() for m in marked()} == {"six"}
        assert "case and spacing ignored" in str(screen.query_one("#pair-header").render())


async def test_filters_undecided_near_and_exact(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        total = main.index.counts.clusters
        exact_only = int((main.index.min_sim >= 1.0).sum())
        await pilot.press("f")  # undecided: every cluster, none decided yet
        await settle(pilot)
        assert main.sort == "size:undecided" and len(main.index.labels) == total
        first = main.model.cursor.cluster_id
        await pilot.press("tab")
        await press_decision(pilot, "a")  # accept the selected cluster: decided, it stays in place
        await settle(pilot)
        assert len(main.index.labels) == total and main.index.labels[0] == first and main.index.decided[0]
        assert main.model.cursor.cluster_id != first  # the cursor went on to the next cluster
        await pilot.press("f", "f", "f", "f")  # the reviewer asks again: it leaves the list
        await settle(pilot)
        assert main.sort == "size:undecided"
        assert len(main.index.labels) == total - 1 and not main.index.decided.any()
        assert main.index.counts.clusters == total  # the summary still counts them all
        await pilot.press("f")  # with a near duplicate
        await settle(pilot)
        assert len(main.index.labels) == total - exact_only and not (main.index.min_sim >= 1.0).any()
        await pilot.press("f")  # exact copies only
        await settle(pilot)
        assert len(main.index.labels) == exact_only and (main.index.min_sim >= 1.0).all()
        await pilot.press("s")  # the sort changes within the filter
        await settle(pilot)
        assert main.sort == "high:exact" and len(main.index.labels) == exact_only
        await pilot.press("f")  # back to every cluster
        await settle(pilot)
        assert main.sort == "high" and len(main.index.labels) == total
        assert " only" not in str(main.query_one("#clusters-title").render())


async def test_keep_rule_key_changes_which_document_each_cluster_keeps(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        before = main.index.clustering.keeper.copy()
        await pilot.press("K")
        await settle(pilot)
        project = Project(app.spec.db)
        assert keep_rules.keep_rule(project) == "longest" and main.index.clustering.kept_by == "longest"
        c = main.index.clustering
        lengths = np.array([len(t) for t in project.texts_for(list(range(len(c.cluster))))])
        for label in main.index.labels:
            members = np.flatnonzero(c.cluster == label)
            assert c.reason[label] == KEPT and lengths[label] == lengths[members].max()
        assert main.index.counts.clusters == len(np.unique(before[before >= 0]))  # same clusters
        await pilot.press("K")  # back to the first in corpus order
        await settle(pilot)
        assert keep_rules.keep_rule(project) == "first"
        assert (main.index.clustering.keeper == before).all()
        project.close()


def test_the_sample_exports_to_the_current_folder_not_its_hidden_one(tmp_path, monkeypatch):
    from dedup_tui.engine.opening import default_export_path, prepare

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    sample = prepare()
    assert default_export_path(sample.db) == tmp_path / "notes.curated.jsonl"
    other = tmp_path / "work" / "corpus.db"
    assert default_export_path(other) == tmp_path / "work" / "corpus.curated.jsonl"


async def test_pair_view_aligns_the_lines_of_long_documents(tmp_path):
    """Two templated pages: lines side by side with gaps, ] and [ go from change to change,
    o unfolds the identical runs, every character of both documents is shown, l flows the text."""
    from dedup_tui.ui.widgets.aligned import AlignedDiffView

    page = [f"## Section {i}\nThe option --flag{i} sets the value number {i} of the tool." for i in range(60)]
    left = "\n".join(page)
    changed = list(page)
    changed[10] = changed[10].replace("value number 10", "value NUMBER ten")
    changed[40] = changed[40] + "\nAn extra line only the second page has."
    right = "\n".join(changed)
    docs = [{"id": "a", "text": left}, {"id": "b", "text": right}]
    app = create_app(write_corpus(tmp_path / "pages.jsonl", docs), author="tester")
    async with app.run_test(size=(100, 18)) as pilot:
        await settle(pilot)
        await pilot.press("tab", "down", "d")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PairScreen) and screen.aligned and screen.has_class("-aligned")
        view = screen.query_one("#aligned-doc", AlignedDiffView)
        assert view.change_count == 2 and view.display and not screen.query_one("#left-doc").display
        header = lambda: str(screen.query_one("#pair-header").render())  # noqa: E731
        assert "2 changes ([ ] go through them)" in header()
        folded_height = view.virtual_size.height
        await pilot.press("right_square_bracket")
        await pilot.pause()
        first = view.scroll_y
        assert first > 0 and "change 1/2" in header()
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert view.scroll_y > first and "change 2/2" in header()
        shown = screen_text(app)
        assert "An extra line only the second page has." in shown and "╱" in shown  # a gap opposite it
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert view.scroll_y == first
        assert "identical lines" in screen_text(app)
        await pilot.press("o")
        await pilot.pause()
        assert view.virtual_size.height > folded_height
        col = (view.scrollable_content_region.width - 1) // 2
        assert all(v[0] is None or v[0].cell_len <= col for v in view._visual)
        shown_left, shown_right = view.visible_text()
        # (as in the flowing view, a line wrapped at a space does not show that space)
        assert shown_left.replace(" ", "") == left.replace("\n", "").replace(" ", "")
        assert shown_right.replace(" ", "") == right.replace("\n", "").replace(" ", "")
        await pilot.press("w")  # aligned lines cannot be stacked: it says how to get there
        await pilot.pause()
        assert any("always side by side" in m for m in app.told)
        await pilot.press("l")
        await settle(pilot)
        assert not screen.aligned and screen.query_one("#left-doc").display and not view.display


def test_typed_filters_parse_to_a_canonical_view_and_refuse_nonsense():
    from dedup_tui.review.index import parse_filter

    assert parse_filter("size >= 5  sim<=0.9 undecided") == "undecided,size>=5,sim<=0.9"
    assert parse_filter("") == parse_filter("all") == "all"
    assert parse_filter("exact, size=2") == "exact,size=2"
    for bad, says in (
        ("size>=2.5", "whole number"),
        ("sim<=1.5", "between 0 and 1"),
        ("big", "unknown filter"),
        ("near exact", "exclude each other"),
        ("size>=x", "needs a number"),
    ):
        with pytest.raises(ValueError, match=says):
            parse_filter(bad)


async def test_filter_by_size_and_lowest_similarity(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        sizes, low = main.index.sizes.copy(), main.index.min_sim.copy()
        assert len(set(sizes.tolist())) > 1  # the corpus has clusters of several sizes
        cut = float(np.nanmedian(low))
        await pilot.press("F")
        await pilot.pause()
        app.screen.query_one(Input).value = f"size>=3 sim<={cut}"
        await pilot.press("enter")
        await settle(pilot)
        expected = int(((sizes >= 3) & (low <= cut)).sum())
        assert 0 < expected < len(sizes)
        assert len(main.index.labels) == expected
        assert (main.index.sizes >= 3).all() and (main.index.min_sim <= cut).all()
        assert f"size>=3, sim<={cut:g}" in str(main.query_one("#clusters-title").render())
        await pilot.press("F")
        await pilot.pause()
        app.screen.query_one(Input).value = "size>=lots"
        await pilot.press("enter")
        await pilot.pause()
        assert "needs a number" in str(app.screen.query_one("#ask-error").render())  # the dialog stays
        await pilot.press("escape")
        await pilot.press("f")  # from a typed filter, f goes back to every cluster
        await settle(pilot)
        assert len(main.index.labels) == len(sizes)


async def test_field_picker_offers_the_fields_and_checks_the_choice(tmp_path):
    """A JSONL corpus whose text is in `body`: the picker lists the fields with examples,
    guesses body and key, refuses a choice that cannot load (a numeric field as text) in place,
    and exits with options the corpus loads with."""
    from textual.widgets import Button, DataTable, Select

    from dedup_tui.engine.errors import CorpusError
    from dedup_tui.engine.ingest import check_corpus, sample_fields
    from dedup_tui.ui.setup import FieldPickerApp

    src = write_corpus(
        tmp_path / "c.jsonl",
        [{"key": f"k{i}", "n": i, "title": "t", "body": f"text number {i} here"} for i in range(5)],
    )
    with pytest.raises(CorpusError) as problem:
        check_corpus(src)
    fields = sample_fields(src)
    assert [name for name, _ in fields] == ["key", "n", "title", "body"] and dict(fields)[
        "body"
    ] == "text number 0 here"
    app = FieldPickerApp(src, fields, str(problem.value))
    async with app.run_test(size=(110, 36)) as pilot:
        await pilot.pause()
        assert app.query_one("#fields", DataTable).row_count == 4
        assert (
            app.query_one("#text-field", Select).value == "body" and app.query_one("#id-field", Select).value == "key"
        )
        app.query_one("#text-field", Select).value = "n"
        app.query_one("#picker-ok", Button).press()
        await pilot.pause()
        assert "not a string" in str(app.query_one("#picker-error").render()) and app.is_running
        app.query_one("#text-field", Select).value = "body"
        app.query_one("#picker-ok", Button).press()
        await pilot.pause()
    assert app.return_value == {"text_field": "body", "id_field": "key", "skip_bad": False}, str(
        app.query_one("#picker-error").render()
    )
    check_corpus(src, **app.return_value)  # loads with them
    assert sample_fields(tmp_path) == fields  # (a folder holding the .jsonl: a folder of shards, the first one's)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("a note", encoding="utf-8")
    assert sample_fields(notes) is None  # a folder of .txt files has no fields


async def test_a_review_at_the_default_threshold_is_what_export_uses(corpus, tmp_path):
    """Decisions made without ever moving the threshold: the CLI export still defaults to the
    view they were made in (it used to ask for --threshold, as if the project was never reviewed)."""
    from click.testing import CliRunner

    from dedup_tui.cli import main as cli_main

    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("tab", "down")
        await press_decision(pilot, "x")
        await settle(pilot)
        db = app.spec.db
    r = CliRunner().invoke(cli_main, ["export", "--db", str(db), "--out", str(tmp_path / "out.jsonl")])
    assert r.exit_code == 0, r.output
    assert "using threshold 0.80 and policy components, as the project was last reviewed" in r.output
    assert "1 decision applied" in r.output


async def test_end_goes_to_the_last_member_of_a_big_cluster(tmp_path):
    """Members come 100 at a time; End shows them all and selects the last (the least similar)."""
    base = "the shared words of a big family of near duplicate documents number "
    docs = [{"id": f"m{i:03d}", "text": base + "x" * (i % 7) + f" {i}"} for i in range(230)]
    app = create_app(write_corpus(tmp_path / "big.jsonl", docs), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        members = app.main.query_one("#members")
        assert members.total > members.CHUNK and members.loaded < members.total
        await pilot.press("tab", "end")
        await settle(pilot)
        assert members.loaded == members.total and members.cursor_row == members.total - 1
        last = app.main.index.members(app.main.model.cursor.cluster_id)[-1]
        assert app.main.selected_doc() == int(last)
        assert "shown, more as you scroll" not in str(app.main.query_one("#members-title").render())


async def test_keep_by_a_field_from_the_app(tmp_path):
    base = "the quarterly report shows revenue growth across every region we serve this year"
    docs = [
        {"id": "old", "text": base, "date": "2020-01-01"},
        {"id": "new", "text": base + " too", "date": "2024-06-30"},
    ]
    app = create_app(write_corpus(tmp_path / "dated.jsonl", docs), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        assert main.project.ids_for([int(main.index.labels[0])]) == ["old"]
        await pilot.press("ctrl+k")
        await pilot.pause()
        app.screen.query_one(Input).value = "newest"
        await pilot.press("enter")
        await pilot.pause()
        assert "unknown keep rule" in str(app.screen.query_one("#ask-error").render())
        app.screen.query_one(Input).value = "max:date"
        await pilot.press("enter")
        await settle(pilot)
        assert main.index.clustering.kept_by == "max:date"
        assert main.project.ids_for([int(main.index.labels[0])]) == ["new"]
        assert "highest date" in str(main.query_one("#members").get_row_at(0)[0])


async def test_export_dialog_refuses_a_stream_the_app_would_write_over_its_screen(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExportScreen)
        app.screen.query_one("#export-path", Input).value = "/dev/stdout"
        app.screen.query_one("#export-threshold", Input).value = "0.75"
        await pilot.click("#export-ok")
        await settle(pilot)
        assert isinstance(app.screen, ExportScreen)
        assert "is a stream" in screen_text(app)


async def test_the_app_starts_the_kernel_warmup_on_mount(corpus, monkeypatch):
    from dedup_tui.engine.compile import warmup

    started = threading.Event()
    monkeypatch.setenv("DEDUP_TUI_APP_WARMUP", "1")
    monkeypatch.setattr(warmup, "start", started.set)
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert started.wait(10), "the app did not start the warm-up"
    # switched off (the other screen tests): not started
    started.clear()
    monkeypatch.setenv("DEDUP_TUI_APP_WARMUP", "0")
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
    assert not started.is_set()


def _record_scans(monkeypatch) -> list:
    """The ScanResult of every scan the main screen runs, as it returns."""
    from dedup_tui.engine.scanning import local

    results = []
    real_scan = local.scan

    def recording_scan(*args, **kwargs):
        results.append(real_scan(*args, **kwargs))
        return results[-1]

    monkeypatch.setattr("dedup_tui.engine.scanning.local.scan", recording_scan)
    return results


async def test_the_app_scans_new_documents_incrementally(tmp_path, monkeypatch):
    """Opening a scanned project with documents loaded since: the app's scan is the engine's
    incremental one (the same function as the CLI's), and the view shows every document."""
    from dedup_tui.engine.ingest import load_corpus
    from dedup_tui.engine.opening import OpenSpec
    from dedup_tui.engine.scanning import local
    from dedup_tui.ui.app import DedupApp

    docs = corpus_docs()
    db = tmp_path / "p.db"
    settings = ScanSettings(floor=0.5, method="lsh")
    with Project(db, create=True) as project:
        load_corpus(project, [write_corpus(tmp_path / "first.jsonl", docs[: len(docs) // 2])])
        local.scan(project, settings)
        load_corpus(project, [write_corpus(tmp_path / "second.jsonl", docs[len(docs) // 2 :])])
    results = _record_scans(monkeypatch)
    app = DedupApp(OpenSpec(db, scan_settings=settings), author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert len(results) == 1 and results[0].incremental, results[0].full_reason
        assert results[0].new_documents == len(docs) - len(docs) // 2
        assert app.main.index.counts.documents == len(docs)
        assert shown(app) == engine_numbers(db, app.main.threshold, "components")


async def test_the_app_signs_a_corpus_while_it_loads(tmp_path, monkeypatch):
    """Opening a corpus: the app's scan starts from the signatures its load computed (the
    other core signs as the load writes), and finds what a separate load and scan find."""
    from dedup_tui.engine.ingest import load_corpus
    from dedup_tui.engine.opening import OpenSpec
    from dedup_tui.engine.scanning import local
    from dedup_tui.engine.scanning.ahead import SignedAhead
    from dedup_tui.ui.app import DedupApp

    corpus = write_corpus(tmp_path / "c.jsonl", corpus_docs())
    settings = ScanSettings(floor=0.5, method="lsh")
    with Project(tmp_path / "alone.db", create=True) as alone:
        load_corpus(alone, [corpus])
        local.scan(alone, settings)
        expected = sorted(alone.conn.execute("SELECT a, b, jaccard FROM pairs"))
    handed = []
    real_take = SignedAhead.take
    monkeypatch.setattr(
        SignedAhead, "take", lambda self, *a, **k: handed.append(real_take(self, *a, **k)) or handed[-1]
    )
    db = tmp_path / "p.db"
    Project(db, create=True).close()
    app = DedupApp(OpenSpec(db, corpus=[corpus], scan_settings=settings), author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert len(handed) == 1 and handed[0] is not None
    with Project(db) as project:
        assert sorted(project.conn.execute("SELECT a, b, jaccard FROM pairs")) == expected


async def test_the_app_keeps_the_last_scans_settings_for_new_documents(tmp_path, monkeypatch):
    """Opened without scan settings on a project scanned at floor 0.6 with documents loaded
    since: the app scans with the last scan's settings, incrementally, and its floor stays."""
    from dedup_tui.engine.ingest import load_corpus
    from dedup_tui.engine.scanning import local

    docs = corpus_docs()
    db = tmp_path / "p.db"
    with Project(db, create=True) as project:
        load_corpus(project, [write_corpus(tmp_path / "first.jsonl", docs[: len(docs) // 2])])
        local.scan(project, ScanSettings(floor=0.6, method="lsh", seed=3))
        load_corpus(project, [write_corpus(tmp_path / "second.jsonl", docs[len(docs) // 2 :])])
    results = _record_scans(monkeypatch)
    app = create_app(db, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert len(results) == 1 and results[0].incremental, results[0].full_reason
    with Project(db) as project:
        assert project.scan_params()["floor"] == 0.6 and project.scan_params()["seed"] == 3
