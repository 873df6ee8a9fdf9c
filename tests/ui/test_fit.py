"""Nothing that matters cut at 80x24 and 120x40: ids shortened in the middle, the status line,
the list's title with its filter, the prompts and the footer whole (tests/fixtures/long_ids.jsonl:
ids sharing a 40-character start, a 54-character field name)."""

from __future__ import annotations

import io
import os
import re

import pytest
from rich.cells import cell_len
from textual.widgets import Label, Static

from dedup_tui.ui.app import create_app
from dedup_tui.ui.screens.dialogs import AskScreen
from dedup_tui.ui.text import shorten_middle

from .conftest import plain_screen, press_decision, settle
from .test_snapshots import LONG_FIELD, long_ids_corpus

LONG = "usr/share/man/man1/gcloud_beta_compute_instances_network_interfaces_list.1"


def test_shorten_middle_keeps_start_and_end():
    assert shorten_middle("short.1", 20) == "short.1"
    cut = shorten_middle(LONG, 24)
    assert cell_len(cut) == 24 and cut.startswith("usr/share") and cut.endswith("_list.1") and "…" in cut
    # ids that differ only at the end stay different
    other = LONG.replace("_list.1", "_describe.1")
    assert shorten_middle(other, 24) != cut and shorten_middle(other, 24).endswith("_describe.1")
    # wide characters count as two cells; controls are escaped, never shown raw
    assert cell_len(shorten_middle("日本語の長い識別子のファイル名.txt", 11)) <= 11
    assert "\n" not in shorten_middle("a\nb" * 20, 10)
    assert shorten_middle(LONG, 1) == "…" and shorten_middle(LONG, 0) == ""


def rendered(widget) -> str:
    content = widget.visual if hasattr(widget, "visual") else widget.render()
    return getattr(content, "plain", str(content))


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_status_line_and_titles_whole(tmp_path, size):
    app = create_app(long_ids_corpus(tmp_path), author="tester")
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        main = app.main
        main.model.set_filter("undecided")
        main._after_relist()
        await pilot.press("s", "s", "s")  # closest to the threshold first: the longest sort name
        await settle(pilot)
        screen = plain_screen(app)
        status = main.status_line(size[0] - 2).plain
        # the sort in the list title's words, the policy named as such (at 80 columns it read
        # "sort nearest threshold · … · components" beside "closest to the threshold first")
        for part in (
            "closest to the threshold first" if size[0] >= 120 else "sort closest to threshold",
            "undecided",
            "keep",
            "policy components",
        ):
            assert part in status
        for row in status.split("\n"):
            assert row in screen  # the status line is on screen whole
        title = rendered(main.query_one("#clusters-title", Static))
        assert "closest to the threshold first · undecided only" in title
        assert title in screen  # the title with its filter, whole
        assert main.query_one("#clusters-title", Static).region.width >= cell_len(title)
        # the summary: one line at 120 columns
        summary = rendered(main.query_one("#summary", Static))
        if size[0] >= 120:
            assert "\n" not in summary and summary in screen
        rows = summary.split("\n")
        assert len(rows) <= 2 and all(cell_len(row) <= size[0] - 2 and row in screen for row in rows)
        assert "removed" in rows[-1] and "kept" in summary


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_member_rows_give_why_and_text_their_room(tmp_path, size):
    app = create_app(long_ids_corpus(tmp_path), author="tester")
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("tab", "down")
        await settle(pilot)
        table = app.main.query_one("#members")
        width = table.scrollable_content_region.width
        for row in table._shown_rows:
            _o, _status, _style, _sim, doc_id, _reason, _text = row
            assert cell_len(doc_id) < len(LONG) and "…" in doc_id  # shortened in the middle
            assert doc_id.endswith(".1")
        laid = [table.get_row_at(i)[0] for i in range(table.row_count)]
        for line, row in zip(laid, table._shown_rows):
            assert row[5] in line.plain  # the why column whole
            assert cell_len(line.plain) <= width  # nothing past the pane's edge
            assert len(line.plain.rstrip().rsplit("  ", 1)[-1]) >= 6  # a text column, not two characters


async def test_keep_by_long_field_status_wraps_never_cuts(tmp_path):
    app = create_app(long_ids_corpus(tmp_path), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.session.set_keep_rule(f"max:{LONG_FIELD}")
        await settle(pilot)
        status = app.main.status_line(78).plain
        assert f"max:{LONG_FIELD}" in status.replace("\n", "")
        assert LONG_FIELD in plain_screen(app).replace("\n", "")


@pytest.mark.parametrize(
    "key, words",
    [
        (
            "A",
            "Accept every listed cluster to review whose lowest similarity is at least this (1 = exact copies only):",
        ),
        ("F", "Filter: size>=N size<=N sim>=X sim<=X (lowest similarity), undecided, near, exact; empty for all"),
        (
            "ctrl+k",
            "Keep rule: max:FIELD or min:FIELD (highest / lowest value; no value comes last), first or "
            "longest. Clusters you decided keep theirs.",
        ),
    ],
)
async def test_prompts_are_whole_at_80x24(tmp_path, key, words):
    app = create_app(long_ids_corpus(tmp_path), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press(key)
        await pilot.pause()
        assert isinstance(app.screen, AskScreen)
        label = app.screen.query_one("#ask-title", Label)
        assert rendered(label) == words
        shown = " ".join(line.strip(" ▊█▎") for line in plain_screen(app).splitlines())
        assert " ".join(words.split()) in " ".join(shown.split())


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
@pytest.mark.parametrize("keys", [(), ("T",)])
async def test_footer_ends_with_a_whole_key(tmp_path, size, keys):
    app = create_app(long_ids_corpus(tmp_path), author="tester")
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        if keys:
            await pilot.press(*keys)
            await settle(pilot)
        footer = app.screen.query_one("AppFooter")
        palette = footer.query("FooterKey.-command-palette")
        right_edge = palette.first().region.x if palette else size[0]
        shown = [k for k in footer.query("FooterKey") if k.display and not k.has_class("-command-palette")]
        assert len(shown) >= 5
        for key in shown:
            assert key.region.width > 0 and key.region.right <= right_edge, (str(key.render()), key.region)


async def test_label_queue_header_whole_at_80x24(tmp_path):
    app = create_app(long_ids_corpus(tmp_path), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("T")
        await settle(pilot)
        await pilot.press("L")
        await settle(pilot)
        header = rendered(app.screen.query_one("#label-header", Static))
        first, keys = header.split("\n")[:2]
        assert cell_len(first) <= 78 and "pair 1/" in first
        assert keys.startswith("1 duplicate") and keys.endswith("esc back") and cell_len(keys) <= 78


async def test_title_keeps_a_long_typed_filter_at_120x40(tmp_path):
    app = create_app(long_ids_corpus(tmp_path), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        main.model.set_filter("size>=2,sim<=0.99,undecided")
        main._after_relist()
        await pilot.press("s", "s", "s")
        await settle(pilot)
        widget = main.query_one("#clusters-title", Static)
        title = rendered(widget)
        assert all(term in title for term in ("size>=2", "sim<=0.99", "undecided"))
        assert widget.region.width * widget.region.height >= cell_len(title)
        screen = " ".join(plain_screen(app).split())
        assert "sim<=0.99" in screen and "undecided" in screen


async def chains_table(app, pilot):
    """The tuning screen at threshold 0.7 on the chain corpus: the screen and its chains table."""
    from textual.widgets import DataTable

    from dedup_tui.ui.screens.tune import TuneScreen

    await settle(pilot)
    app.session.set_threshold(0.7)
    await settle(pilot)
    await pilot.press("T")
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, TuneScreen) and screen.report is not None and screen.report.chains
    return screen, screen.query_one("#chains", DataTable)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_tuning_chains_table_whole(tmp_path, size):
    """The tuning screen's chained clusters: every header and every row within the pane (at 120
    columns the header was cut at "most distant pa"), long ids shortened in the middle."""
    from rich.text import Text

    from ..engine.test_tune import CHAIN
    from .conftest import write_corpus

    docs = [{"id": f"{LONG[:-2]}_{i}.1", "text": t} for i, t in CHAIN]
    app = create_app(write_corpus(tmp_path / "chain.jsonl", docs), author="tester")
    async with app.run_test(size=size) as pilot:
        _screen, table = await chains_table(app, pilot)
        room = table.scrollable_content_region.width
        widths = [column.get_render_width(table) for column in table.ordered_columns]
        assert sum(widths) <= room  # nothing past the pane's right edge: no header or cell cut
        text = plain_screen(app)
        for column in table.ordered_columns:
            assert column.label.plain in text
        for r in range(table.row_count):
            cells = [c.plain if isinstance(c, Text) else str(c) for c in table.get_row_at(r)]
            assert all(cell_len(c) <= w - 2 for c, w in zip(cells, widths))
            assert "…" in cells[0] and cells[0].endswith(".1")  # the kept id shortened in the middle


@pytest.mark.parametrize("size", [(120, 40), (80, 24), (160, 40)])
async def test_cycling_the_sort_never_moves_the_screen(size, corpus):
    """The status line goes beside the threshold or on a line of its own as the longest sort
    name allows: `s` changes words, never where every other line is."""
    app = create_app(corpus, author="tester")
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        main = app.main
        while main.model.view.filter != "near":  # a short filter: the shorter sorts fit beside the threshold
            await pilot.press("f")
            await settle(pilot)
        where = lambda: (main.query_one("#status").display, main.query_one("#clusters").region)  # noqa: E731
        before = where()
        sorts = set()
        for _ in range(4):
            await pilot.press("s")
            await settle(pilot)
            sorts.add(main.model.view.sort)
            assert where() == before
            status = main.status_line(size[0] - 2).plain
            assert status in plain_screen(app).replace("\n", " ") or status.split(" · ")[0] in plain_screen(app)
        assert len(sorts) == 4
        assert not any(m.startswith(("Sorted", "Showing")) for m in app.told)  # the status line says it


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_member_ids_that_differ_in_the_middle_stay_apart(tmp_path, size):
    """Manual pages' ids share a start and an end (man1/gcloud_ai_endpoints_list.1,
    man1/gcloud_ai_index-endpoints_list.1): shortened in the middle, a member and the kept one
    read the same (man1/gclou…ndpoints_list.1); each member is shortened where it differs from
    the kept one."""
    from .conftest import write_corpus
    from .test_pair_view import VARIANTS, variant_docs

    app = create_app(write_corpus(tmp_path / "pages.jsonl", variant_docs()), author="tester")
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        table = app.main.query_one("#members")
        rows = {row[4]: row for row in table._shown_rows}
        assert len(rows) == len(table._shown_rows) == len(VARIANTS) + 1, list(rows)  # each reads differently
        assert all("…" in doc_id for doc_id in rows)  # all shortened (else this shows nothing)
        ids = dict(zip(table._members.tolist(), app.main.session.project.ids_for(table._members.tolist())))
        kept = next(ids[row[0]] for row in table._shown_rows if row[1].startswith("KEPT"))
        for o, _status, _style, _sim, doc_id, *_ in table._shown_rows:
            if ids[o] != kept:  # it shows the first characters where it differs from the kept id
                at = len(os.path.commonprefix([ids[o], kept]))
                assert ids[o][at : at + 2] in doc_id, (ids[o], doc_id)
        assert table._shown_rows[1][4] in plain_screen(app)


def test_ids_of_one_family_are_shortened_to_where_they_differ():
    """Issue 39: at 120x40 the members column showed lib…-amd…oss and lib…11-d…oss for cross
    toolchain packages that share "lib" and "-amd64-cross": shown, they tell nothing apart."""
    from dedup_tui.ui.text import shorten_each

    ids = [
        "libasan8-amd64-cross",
        "libgcc-11-dev-amd64-cross",
        "libstdc++-11-dev-amd64-cross",
        "libx32stdc++6-amd64-cross",
        "libstdc++6-amd64-cross",
        "libgfortran-11-dev-amd64-cross",
    ]
    short = shorten_each(ids, 12)
    assert short == ["libasan8-am…", "…gcc-11-dev…", "…stdc++-11-…", "…x32stdc++6…", "libstdc++6-…", "…gfortran-1…"]
    assert len(set(short)) == len(ids) and all(len(s) <= 12 for s in short)


def test_shorten_each_tells_apart_what_the_middle_cut_makes_alike():
    from dedup_tui.ui.text import shorten_each

    ids = [
        f"man1/gcloud_ai_{name}_list.1"
        for name in ("models", "indexes", "index-endpoints", "model-monitoring-jobs", "hp-tuning-jobs", "endpoints")
    ]
    ids += ["man1/gcloud_alpha_ai_models_list.1", "man1/gcloud_beta_ai_models_list.1", "short.1", "short.1"]
    for width in (14, 20, 26, 34):
        shown = shorten_each(ids, width)
        assert all(cell_len(s) <= width for s in shown)
        assert len(set(shown)) == len(set(ids))  # alike only when the ids are the same
        for doc_id, s in zip(ids, shown):
            assert doc_id.endswith(s.rsplit("…", 1)[-1])  # never cut at the end
    # ids that the middle cut already tells apart are shortened in the middle, as before
    assert shorten_each([LONG, LONG.replace("_list.1", "_describe.1")], 24) == [
        shorten_middle(LONG, 24),
        shorten_middle(LONG.replace("_list.1", "_describe.1"), 24),
    ]


async def test_cluster_list_ids_that_differ_in_the_middle_stay_apart(tmp_path):
    """At 120x40 the cluster list gives a kept id 18 cells: a page of gcloud manual pages all
    read man1/g…_describe.1."""
    from .conftest import write_corpus

    names = ["compute_instances", "compute_disks", "container_clusters", "sql_instances", "dns_zones"]
    docs = []
    for k, name in enumerate(names):
        words = [f"w{(i * 7 + k * 13) % 97}x{k}y{i}" for i in range(120)]
        for variant in ("", "beta_"):
            docs.append({"id": f"man1/gcloud_alpha_{variant}{name}_describe.1", "text": " ".join(words)})
            words = words[:-1] + ["changed"]
    app = create_app(write_corpus(tmp_path / "pages.jsonl", docs), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = app.main.query_one("#clusters")
        assert table.row_count == len(names)
        kept = [table.get_row_at(r)[0].plain.split()[4] for r in range(table.row_count)]
        assert all("…" in k for k in kept)  # shortened (else this shows nothing)
        assert len(set(kept)) == len(names), kept


async def test_tuning_chains_most_distant_pair_under_the_table_at_120x40(tmp_path):
    """At 120x40 the chains table's side pane left each id of the most distant pair 5 cells
    (m…t.1 / m…t.1) and the kept id 8: the pair moves under the table, for the selected chain,
    and the kept id takes its room."""
    from ..engine.test_tune import CHAIN
    from .conftest import write_corpus

    docs = [{"id": f"{LONG[:-2]}_{i}.1", "text": t} for i, t in CHAIN]
    app = create_app(write_corpus(tmp_path / "chain.jsonl", docs), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        screen, table = await chains_table(app, pilot)
        assert [c.label.plain for c in table.ordered_columns][1:] == ["size", "weakest", "cut"]  # no pair column
        assert cell_len(table.get_row_at(0)[0].plain) >= 20
        far = rendered(screen.query_one("#chain-far", Static))
        ch = screen.selected_chain()
        a, b = far.replace("most distant:", "").replace("and:", "").split()
        assert cell_len(a) >= 20 and cell_len(b) >= 20 and a != b
        assert ch.far_ids[0].endswith(a.rsplit("…", 1)[-1]) and ch.far_ids[1].endswith(b.rsplit("…", 1)[-1])
        shown = plain_screen(app)
        assert a in shown and b in shown


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_summary_counts_one_in_the_singular(tmp_path, size):
    """1,500 manual pages with one exact copy read "1 exact groups (1 copies)"."""
    from .conftest import write_corpus

    words = [f"word{i}" for i in range(80)]
    docs = [
        {"id": "a", "text": " ".join(words)},
        {"id": "b", "text": " ".join(words)},
        {"id": "c", "text": " ".join(reversed(words)) + " other"},
    ]
    app = create_app(write_corpus(tmp_path / "one.jsonl", docs), author="tester")
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        summary = " ".join(rendered(app.main.query_one("#summary", Static)).split())
        assert "1 exact group (1 copy)" in summary or "1 exact (1 copy)" in summary, summary
        assert "1 cluster" in summary
        assert not re.search(r"(?<![\d,])1 (exact groups|copies|near pairs|pairs|clusters)\b", summary), summary


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_search_results_dialog_fits_with_its_keys(tmp_path, size):
    """A search matching hundreds of documents listed them all in a dialog taller than the
    screen: the line saying enter goes to one and esc closes was below the last row."""
    from textual.widgets import Input, OptionList

    from dedup_tui.ui.screens.dialogs import SearchResultsScreen

    from .conftest import write_corpus

    docs = [{"id": f"doc-{i:03d}", "text": f"common words here and number {i} " + "x" * (i % 7)} for i in range(120)]
    app = create_app(write_corpus(tmp_path / "many.jsonl", docs), author="tester")
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        await pilot.pause()
        app.screen.query_one(Input).value = "common words"
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SearchResultsScreen) and screen.query_one(OptionList).option_count == 120
        dialog = screen.query_one("#search-results")
        assert dialog.region.bottom <= size[1]
        assert "enter: go to it" in plain_screen(app) and "esc: close" in plain_screen(app)
        await pilot.press("end", "enter")  # the last match is reachable
        await settle(pilot)
        assert app.main.project.ids_for([app.main.selected_doc()])[0] == docs[-1]["id"]


async def test_preview_title_never_wraps_its_similarity_away_at_120x40(tmp_path):
    """The sample at 120x40: "kept note-0206  ·   keys act on ▸  note-0204  Jaccard" with the
    value on the title's hidden second line (the room was counted one cell too wide)."""
    from .conftest import write_corpus

    words = [f"word{i}" for i in range(60)]
    docs = [{"id": "note-0206", "text": " ".join(words)}, {"id": "note-0204", "text": " ".join(words[:-1] + ["x"])}]
    app = create_app(write_corpus(tmp_path / "notes.jsonl", docs), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("tab", "down")
        await settle(pilot)
        widget = app.main.query_one("#preview-title", Static)
        title = rendered(widget)
        assert "keys act on" in title and "\n" not in title
        assert cell_len(title) <= widget.content_size.width, (title, widget.content_size)
        if "Jaccard" in title:
            assert re.search(r"Jaccard \d\.\d\d", plain_screen(app))


async def test_preview_title_tells_the_two_ids_apart_at_120x40(tmp_path):
    """ "kept man1…ancel.1  ·  keys act on ▸  man1…ancel.1": the preview's two ids read the same."""
    from .conftest import write_corpus

    words = [f"word{i}" for i in range(60)]
    docs = [
        {"id": "man1/gcloud_ai_custom-jobs_cancel.1", "text": " ".join(words)},
        {"id": "man1/gcloud_alpha_ai_custom-jobs_cancel.1", "text": " ".join(words[:-1] + ["x"])},
    ]
    app = create_app(write_corpus(tmp_path / "pages.jsonl", docs), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("tab", "down")
        await settle(pilot)
        title = rendered(app.main.query_one("#preview-title", Static))
        kept, acted = re.match(r"kept (\S+)\s+·\s+keys act on ▸\s+(\S+)", title).groups()
        assert "…" in kept + acted and kept != acted, title
        assert "alpha"[:3] in acted


async def test_decisions_confirm_one_toast_at_a_time(corpus):
    """Triage in the pair view at a key a second stacked a "Saved: remove …" toast per key over
    the right-hand document at 80x24: a decision's confirmation replaces the one before (every
    one is still told)."""
    from dedup_tui.ui.screens.pair import PairScreen

    app = create_app(corpus, author="tester")
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("tab", "d")
        await settle(pilot)
        assert isinstance(app.screen, PairScreen)
        for _ in range(3):
            await press_decision(pilot, "x")
            await settle(pilot)
        await pilot.pause()
        assert sum(m.startswith("Saved: remove") for m in app.told) == 3
        assert len(app.screen.query("Toast")) == 1  # three before
        shown = plain_screen(app)
        assert shown.count("Saved: remove") == 1 and app.told[-1].split()[-1] in shown  # the newest one
        app.notify("something else")  # others still stack beside it
        await pilot.pause()
        await pilot.pause()
        assert len(app.screen.query("Toast")) == 2


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_export_dialog_names_the_keep_rule_it_follows(corpus, size):
    """The export follows the project's keep rule, which the dialog never named (it covers the
    status line that does): "longest" picked other documents than the reviewer may think."""
    from textual.widgets import Button

    from dedup_tui.ui.screens.dialogs import ExportScreen

    app = create_app(corpus, author="tester")
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        app.session.set_keep_rule("longest")
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        assert isinstance(app.screen, ExportScreen)
        shown = plain_screen(app)
        assert "Keep rule: longest text (K, ^k change it; your decisions win)" in shown
        assert app.screen.query_one("#export-dialog").region.bottom <= size[1]
        assert app.screen.query_one("#export-ok", Button).region.bottom <= size[1]
        # with the overwrite question (three lines at 80 columns) the dialog still fits
        path = app.screen.query_one("#export-path").value
        from pathlib import Path

        Path(path).write_text("")
        for name in ("removed.jsonl", "decisions.jsonl", "manifest.json"):
            Path(path).with_name(Path(path).stem + "." + name).write_text("")
        await pilot.click("#export-ok")
        await pilot.pause()
        assert str(app.screen.query_one("#export-ok", Button).label) == "Overwrite"
        assert app.screen.query_one("#export-dialog").region.bottom <= size[1], app.screen.query_one(
            "#export-dialog"
        ).region


async def test_help_says_how_to_close_it_on_its_first_screen(corpus):
    """At 80x24 "esc closes this help" was at the end of eight pages of keys."""
    from dedup_tui.ui.screens.help import HelpScreen

    app = create_app(corpus, author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "esc, q or ? closes this help" in plain_screen(app)
        footer = plain_screen(app).splitlines()[-1]  # its own keys, not the main screen's k x n a u e
        assert "Close" in footer and "Keep" not in footer and "Remove" not in footer, footer
        await pilot.press("q")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


async def test_member_line_tells_its_ids_apart_at_120x40(tmp_path):
    """ "man1/g…_describe.1 1,788 chars · near duplicate (≥ 0.80) · duplicate of man1/g…_describe.1":
    the selected page and the one it duplicates read the same in the line under the members."""
    from .conftest import write_corpus

    words = [f"word{i}" for i in range(60)]
    docs = [
        {"id": "man1/gcloud_alpha_compute_commitments_describe.1", "text": " ".join(words)},
        {
            "id": "man1/gcloud_alpha_compute_sole-tenancy_node-templates_describe.1",
            "text": " ".join(words[:-1] + ["x"]),
        },
    ]
    app = create_app(write_corpus(tmp_path / "pages.jsonl", docs), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("tab", "down")
        await settle(pilot)
        line = " ".join(rendered(app.main.query_one("#member-info", Static)).split())
        this, kept = re.match(r"(\S+) [\d,]+ chars .* duplicate of (\S+)", line).groups()
        assert this != kept, line
        assert docs[1]["id"].endswith(this.rsplit("…", 1)[-1]) and docs[0]["id"].endswith(kept.rsplit("…", 1)[-1])


async def test_an_exact_copy_of_a_removed_member_does_not_claim_the_kept_text(tmp_path):
    """An exact copy whose first copy is itself a near duplicate removed against another: its why
    read "same text as the kept one" (the 64k families: k0053734 beside the kept k0006351, its
    text that of the removed k0028586). It is removed against the kept one, the document the
    preview and the pair view show beside it (its keeper was its removed first copy)."""
    from dedup_tui.ui.widgets.tables import short_why, why

    from .conftest import write_corpus

    words = [f"word{i}" for i in range(60)]
    docs = [
        {"id": "kept", "text": " ".join(words)},
        {"id": "near", "text": " ".join(words[:-1] + ["x"])},
        {"id": "copy-of-near", "text": " ".join(words[:-1] + ["x"])},
    ]
    app = create_app(write_corpus(tmp_path / "c.jsonl", docs), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        index = app.main.index
        kept, near, copy = range(3)
        cluster = int(index.clustering.cluster[copy])
        assert int(index.clustering.keeper[copy]) == kept  # removed against the kept one, via its first copy
        assert app.main.model.kept_of(copy) == kept  # what the pair view compares it with
        assert why(index, copy, cluster) == "same text as another member"
        assert short_why(index, copy, cluster) == "copy of a member"  # ("same text" read as the kept one's)
        sim = f"{float(index.clustering.similarity[near]):.2f}"
        assert f"{float(index.clustering.similarity[copy]):.2f}" == sim != "1.00"  # the column means one thing
        await pilot.press("tab", "down", "down")  # the members: kept, near, copy-of-near (ties in corpus order)
        await settle(pilot)
        assert app.main.model.cursor.doc == copy
        line = " ".join(rendered(app.main.query_one("#member-info", Static)).split())
        # the line says what the removed log says: duplicate of the kept one, linked via its first copy
        assert "duplicate of kept · linked via near (1.00)" in line and f"{sim} with the kept one" in line, line
        exact_of_kept = [{"id": "a", "text": " ".join(words)}, {"id": "b", "text": " ".join(words)}]
    app = create_app(write_corpus(tmp_path / "d.jsonl", exact_of_kept), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        index = app.main.index
        assert why(index, 1, int(index.clustering.cluster[1])) == "same text as the kept one"


@pytest.mark.parametrize(
    "screen_keys, words", [(("T",), (") Target ↑", "( Target ↓")), (("tab", "d"), ("} Next cluster",))]
)
async def test_footer_words_read_whole_at_80x24(corpus, screen_keys, words):
    """The tuning footer read "+ Target + - Target -", the pair view's "} Next cl."."""
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press(*screen_keys)
        await settle(pilot)
        footer = " ".join(plain_screen(app).splitlines()[-1].split())
        for word in words:
            assert " ".join(word.split()).replace(" ", "") in footer.replace(" ", ""), footer


async def test_help_says_what_enter_does_in_the_cluster_list(corpus):
    """enter on the cluster list moves to the members (only the focus colour changes); help
    listed it as "pair: compare with the kept document"."""
    from dedup_tui.ui.screens.help import keys_table

    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.main.query_one("#clusters").has_focus
        await pilot.press("enter")
        await settle(pilot)
        assert app.main.query_one("#members").has_focus and app.screen is app.main
    from rich.console import Console

    console = Console(width=400, record=True, file=io.StringIO())
    console.print(keys_table(None))
    assert "in the cluster list: go to its members first" in console.export_text()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_family_of_ids_reads_apart_in_the_members_column(tmp_path, size):
    from .conftest import write_corpus

    names = ["asan8", "gcc-11-dev", "stdc++-11-dev", "x32stdc++6", "stdc++6", "gfortran-11-dev"]
    words = [f"word{i}" for i in range(40)]
    docs = [
        {"id": f"lib{name}-amd64-cross-toolchain-package", "text": " ".join(words + [f"tail{i}"])}
        for i, name in enumerate(names)
    ]
    app = create_app(write_corpus(tmp_path / "cross.jsonl", docs), author="tester")
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        table = app.main.query_one("#members")
        shown = {row[0]: row[4] for row in table._shown_rows}
        assert len(shown) == len(names) and len(set(shown.values())) == len(names)
        for o, doc_id in shown.items():
            name = names[o]
            assert name[:3] in doc_id or "…" not in doc_id, (name, doc_id)  # where they differ is shown
