"""The pair view as a place to decide (issue 23): changes visited one by one and marked, both ids
in the header at 80x24, the main screen's decision keys on the right-hand document, next member
and next cluster."""

from __future__ import annotations

import re

from dedup_tui.engine.curate import decisions
from dedup_tui.engine.store import Project
from dedup_tui.ui.actions import PAIR_ACTIONS
from dedup_tui.ui.app import create_app
from dedup_tui.ui.screens.dialogs import AskScreen
from dedup_tui.ui.screens.help import HelpScreen
from dedup_tui.ui.screens.pair import PairScreen
from dedup_tui.ui.text import shorten_apart
from dedup_tui.ui.widgets.aligned import AlignedDiffView

from .conftest import WORDS, plain_screen, press_decision, settle, until_drawn, write_corpus

VARIANTS = ["alpha", "beta", "preview", "ga", "legacy"]


def page_id(variant: str) -> str:
    return f"man1/gcloud_{variant}_access-context-manager_levels_list.1"


def variant_docs() -> list[dict]:
    """One cluster: a 400-word page and variants each with two of its words changed (ids that
    share their start and their end, as manual pages' do), then a second cluster of two."""
    base = [WORDS[(i * 7) % len(WORDS)] + str(i) for i in range(400)]
    page = lambda words: "\n".join(" ".join(words[i : i + 10]) for i in range(0, len(words), 10))  # noqa: E731
    docs = [{"id": page_id("base"), "text": page(base)}]
    for k, variant in enumerate(VARIANTS):
        words = list(base)
        words[10 + 40 * k] = words[11 + 40 * k] = variant.upper()
        docs.append({"id": page_id(variant), "text": page(words)})
    other = [WORDS[(i * 5) % len(WORDS)] + "x" + str(i) for i in range(300)]
    docs.append({"id": "other-a", "text": " ".join(other)})
    docs.append({"id": "other-b", "text": " ".join(other[:-1] + ["CHANGED"])})
    return docs


async def open_member(app, pilot, member_index: int) -> PairScreen:
    """The pair view on member `member_index` (0: the first after the kept one) of the largest cluster."""
    main, model = app.main, app.main.model
    label = int(main.index.labels[0])
    members = [m for m in model.members(label) if not model.is_kept(m)]
    model.select(members[member_index])
    main.render_list()
    await pilot.pause()
    main.action_open_pair()
    await settle(pilot)
    assert isinstance(app.screen, PairScreen)
    return app.screen


def header(screen) -> str:
    return str(screen.query_one("#pair-header").render())


async def test_changes_are_visited_in_order_both_ways_and_the_current_one_is_marked(tmp_path):
    """Twelve changes, the last five within one screen of the end (the scroll cannot put them at
    the top): ] visits 1..12, [ 12..1, each marked ▶ and no other."""
    lines = [f"OPTION {i}\nThe option --flag{i} sets the value number {i} of the tool." for i in range(70)]
    changed = list(lines)
    for i in (3, 12, 20, 28, 36, 44, 52, 60, 63, 65, 67, 69):
        changed[i] = changed[i].replace(f"number {i}", f"NUMBER {i}")
    docs = [{"id": "page-a", "text": "\n".join(lines)}, {"id": "page-b", "text": "\n".join(changed)}]
    app = create_app(write_corpus(tmp_path / "pages.jsonl", docs), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("tab", "down", "d")
        await settle(pilot)
        screen = app.screen
        view = screen.query_one("#aligned-doc", AlignedDiffView)
        assert screen.aligned and view.change_count == 12

        def marked() -> list[int]:
            """The visual lines drawn with the ▶ mark (the screen's own render)."""
            top = int(view.scroll_y)
            return [top + y for y in range(view.scrollable_content_region.height) if "▶" in view.render_line(y).text]

        visited = []
        for _ in range(12):
            await pilot.press("right_square_bracket")
            await pilot.pause()
            at = int(re.search(r"change (\d+)/12", header(screen))[1])
            visited.append(at)
            assert marked() == [view.change_lines(at - 1).start]
        assert visited == list(range(1, 13))
        await pilot.press("right_square_bracket")  # none below: it says so and stays
        await pilot.pause()
        assert view.current_change() == 12 and app.told[-1] == "No more changes below"
        back = []
        for _ in range(11):
            await pilot.press("left_square_bracket")
            await pilot.pause()
            back.append(view.current_change())
            assert marked() == [view.change_lines(back[-1] - 1).start]
        assert back == list(range(11, 0, -1))


def test_ids_are_shortened_where_they_differ():
    a, b = page_id("alpha"), page_id("beta")
    for width in (20, 26, 34):
        sa, sb = shorten_apart(a, b, width), shorten_apart(b, a, width)
        assert len(sa) <= width and len(sb) <= width and sa != sb
        assert "alph" in sa and "beta" in sb  # where they differ
        assert a.endswith(sa.rsplit("…", 1)[1])  # never cut at the end
    assert shorten_apart("short", "other", 20) == "short"


def test_ids_of_wide_characters_fit_their_cells():
    from rich.cells import cell_len

    a, b = "文書/" + "長い名前" * 6 + "_甲.txt", "文書/" + "長い名前" * 6 + "_乙.txt"
    for width in (12, 20, 33):
        sa, sb = shorten_apart(a, b, width), shorten_apart(b, a, width)
        assert cell_len(sa) <= width and cell_len(sb) <= width and sa != sb
    assert shorten_apart("名前", "other", 4) == "名前"


async def test_the_header_shows_both_ids_at_80x24(tmp_path):
    app = create_app(write_corpus(tmp_path / "v.jsonl", variant_docs()), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = await open_member(app, pilot, 0)
        left = str(screen.query_one("#left-title").render())
        right = str(screen.query_one("#right-title").render())
        left_id, right_id = screen.session.project.ids_for([screen.left, screen.right])
        assert left.startswith("left: ") and right.startswith("right: ")
        shown_left, shown_right = left.split()[1], right.split()[1]
        assert "…" in shown_left and shown_left != shown_right
        assert left_id.endswith(shown_left.rsplit("…", 1)[1]) and right_id.endswith(shown_right.rsplit("…", 1)[1])
        text = plain_screen(app)
        assert shown_left in text and shown_right in text  # on screen, not wrapped away
        first_line = text.splitlines()[0]
        assert "JACCARD" in first_line and "member 1/" in first_line  # the header's first line fits


async def test_n_splits_off_and_goes_to_the_next_member_of_the_cluster(tmp_path):
    app = create_app(write_corpus(tmp_path / "v.jsonl", variant_docs()), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = await open_member(app, pilot, 1)
        members = [int(m) for m in screen.members()]
        assert "member 2/5" in header(screen)
        split, following = screen.right, members[2]
        await press_decision(pilot, "n")
        await settle(pilot)
        assert app.screen is screen and screen.right == following
        assert "member 2/4" in header(screen)  # the next member, where the split one was
        with Project(app.spec.db) as project:
            made = decisions.active(project)
            assert {d.kind for d in made} == {"not_duplicate"}
            assert {d.doc_id for d in made} == set(project.ids_for([split]))


async def test_n_on_an_exact_copy_stays_in_the_cluster(tmp_path):
    """The split-off document's exact copies leave with it: n goes on to the next member of the
    cluster being reviewed, not to one of those copies in their new cluster."""
    docs = variant_docs()
    alpha = next(d for d in docs if d["id"] == page_id("alpha"))
    docs.insert(3, {"id": "alpha-copy-1", "text": alpha["text"]})
    docs.append({"id": "alpha-copy-2", "text": alpha["text"]})
    app = create_app(write_corpus(tmp_path / "v.jsonl", docs), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        main = app.main
        main.model.select(main.project.find_documents("alpha-copy-1")[0])
        main.render_list()
        await pilot.pause()
        main.action_open_pair()
        await settle(pilot)
        screen = app.screen
        label = screen.cluster_id
        copies = set(main.project.find_documents("alpha-copy-2") + main.project.find_documents(page_id("alpha")))
        members = [int(m) for m in screen.members()]
        expected = next(m for m in members[members.index(screen.right) + 1 :] if m not in copies)
        await until_drawn(pilot, "pair", screen.right)
        await pilot.press("n")
        await settle(pilot)
        assert screen.cluster_id == label and screen.right == expected
        assert "member 1/4" in header(screen)  # alpha and its two copies left


async def test_accept_needs_every_member_shown_then_accepts_and_moves_on(tmp_path):
    app = create_app(write_corpus(tmp_path / "v.jsonl", variant_docs()), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = await open_member(app, pilot, 0)
        label = screen.cluster_id
        await press_decision(pilot, "a")
        await settle(pilot)
        assert isinstance(app.screen, AskScreen)  # asks first, with the count: esc decides nothing
        assert app.screen.title_text.startswith("Accept the cluster, with 4 members you have not seen?")
        await pilot.press("escape")
        await settle(pilot)
        with Project(app.spec.db) as project:
            assert decisions.active(project) == []
        for _ in range(4):
            await pilot.press("greater_than_sign")
            await settle(pilot)
        assert screen.unseen() == []
        await press_decision(pilot, "a")
        await settle(pilot)
        with Project(app.spec.db) as project:
            assert [d.kind for d in decisions.active(project)] == ["accept"]
        assert screen.cluster_id != label  # on to the next cluster with a member to review


async def test_next_and_previous_cluster(tmp_path):
    app = create_app(write_corpus(tmp_path / "v.jsonl", variant_docs()), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = await open_member(app, pilot, 0)
        labels = [int(x) for x in app.main.index.labels]
        assert screen.cluster_id == labels[0] and "cluster 1/2" in header(screen)
        await pilot.press("right_curly_bracket")
        await settle(pilot)
        assert screen.cluster_id == labels[1] and "cluster 2/2" in header(screen)
        assert app.main.project.ids_for([screen.right]) == ["other-b"]
        await pilot.press("right_curly_bracket")  # the last one: it says so
        await settle(pilot)
        assert screen.cluster_id == labels[1] and "last cluster" in app.told[-1]
        await pilot.press("left_curly_bracket")
        await settle(pilot)
        assert screen.cluster_id == labels[0]
        await pilot.press("greater_than_sign")
        await settle(pilot)
        shown = screen.right
        await pilot.press("escape")
        await settle(pilot)
        assert app.main.model.cursor.doc == shown
        members = app.main.query_one("#members")  # the main screen's list is on it too
        assert members.coordinate_to_cell_key(members.cursor_coordinate).row_key.value == str(shown)


async def test_every_pair_view_key_is_in_the_help(tmp_path):
    """The help screen lists each of the pair view's keys with what it does (and ? opens it there)."""
    from rich.console import Console

    from dedup_tui.ui.screens.help import keys_table

    console = Console(width=200, record=True)
    console.print(keys_table())
    lines = console.export_text().splitlines()
    for act in PAIR_ACTIONS:
        assert any(line.strip().startswith(act.display) and act.title in line for line in lines), act.title
    app = create_app(write_corpus(tmp_path / "v.jsonl", variant_docs()), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await open_member(app, pilot, 0)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)


async def test_titles_show_whole_ids_before_the_reason_at_120x40(tmp_path):
    """At 120x40 "right: man1…_alpha_…ncel.1  near · near duplicate (≥ 0.80)": the id, which
    fits whole in the title, was cut to make room for a reason the header already gives."""
    words = [WORDS[(i * 7) % len(WORDS)] + str(i) for i in range(300)]
    docs = [
        {"id": "man1/gcloud_ai_endpoints_list.1", "text": " ".join(words)},
        {"id": "man1/gcloud_ai_index-endpoints_list.1", "text": " ".join(words[:-2] + ["INDEX", "ENDPOINTS"])},
    ]
    app = create_app(write_corpus(tmp_path / "pages.jsonl", docs), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await open_member(app, pilot, 0)
        left = str(screen.query_one("#left-title").render())
        right = str(screen.query_one("#right-title").render())
        assert left.split()[1] == docs[0]["id"] and right.split()[1] == docs[1]["id"], (left, right)
        assert "KEPT" in left and "near" in right
        text = plain_screen(app)
        assert docs[0]["id"] in text and docs[1]["id"] in text


async def test_a_reopened_pair_view_starts_afresh(tmp_path):
    """The pair view is kept for the next opening (no new screen to compose): what an earlier
    opening saw or toggled does not carry over. Members seen then are not seen now: `a` still
    asks for every member to be shown in this opening."""
    app = create_app(write_corpus(tmp_path / "v.jsonl", variant_docs()), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        first = await open_member(app, pilot, 0)
        for _ in range(4):  # every member shown ...
            await pilot.press("greater_than_sign")
            await settle(pilot)
        assert first.unseen() == []
        await pilot.press("c", "o")  # case ignored, runs of lines unfolded
        await settle(pilot)
        assert first.normalized and not first.query_one("#aligned-doc", AlignedDiffView).folded
        await pilot.press("escape")
        await settle(pilot)
        again = await open_member(app, pilot, 2)
        assert again is first  # the same screen, shown again
        members = [m for m in app.main.model.members(again.cluster_id) if not app.main.model.is_kept(m)]
        assert again.right == members[2] and not again.normalized
        assert again.query_one("#aligned-doc", AlignedDiffView).folded
        with Project(app.spec.db) as project:
            shown_id = project.ids_for([again.right])[0]
        assert "member 3/5" in header(again)
        assert shown_id.split("_")[1] in str(again.query_one("#right-title").render())  # (its variant: beta, ga...)
        assert len(again.unseen()) == 4  # ... in the earlier opening: only the one shown now is seen
        await press_decision(pilot, "a")
        await settle(pilot)
        assert isinstance(app.screen, AskScreen)  # asks first, with the count: esc decides nothing
        assert app.screen.title_text.startswith("Accept the cluster, with 4 members you have not seen?")
        await pilot.press("escape")
        await settle(pilot)
        with Project(app.spec.db) as project:
            assert decisions.active(project) == []


async def test_the_first_opening_counts_the_changes_it_marks(tmp_path):
    """Short documents of several lines open line-aligned, diffed at once: the header counted
    the changes of a layout not made yet (the view had no width) and said "no changed lines"
    while the rows were marked changed (issue 39)."""
    lines = [f"line {i}: the package provides the library module number {i} for tools" for i in range(8)]
    changed = list(lines)
    changed[3] = changed[3].replace("library", "plugin")
    changed[6] = changed[6] + " and more"
    docs = [{"id": "pkg-a", "text": "\n".join(lines)}, {"id": "pkg-b", "text": "\n".join(changed)}]
    app = create_app(write_corpus(tmp_path / "short.jsonl", docs), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("tab", "enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PairScreen) and screen.aligned
        view = screen.query_one("#aligned-doc", AlignedDiffView)
        assert view.change_count == 2 and "no changed lines" not in header(screen)
        assert "2 changes" in header(screen), header(screen)
