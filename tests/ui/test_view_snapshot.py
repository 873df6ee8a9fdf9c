"""Reopening a project shows the view stored when it was last shown, and only while it is valid."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_tui.engine.curate import decisions
from dedup_tui.engine.curate.decisions import Overrides
from dedup_tui.engine.curate.keep_rules import cluster_with_decisions
from dedup_tui.engine.graph import clustering
from dedup_tui.engine.scanning.local import scan
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store import Project
from dedup_tui.engine.store.scans import load_graph
from dedup_tui.review.index import (
    Listing,
    build_index,
    index_from_snapshot,
    load_snapshot,
    save_snapshot,
    snapshot_bytes,
)
from dedup_tui.ui.app import create_app
from dedup_tui.ui.messages import GraphReady, ViewReady

from ..conftest import ScannedCorpus
from .conftest import corpus_docs, settle, until_drawn


@pytest.fixture
def scanned_corpus() -> ScannedCorpus:
    """`scanned` (tests/conftest.py) is the app tests' corpus (tests/ui/conftest.py), scanned with the defaults."""
    return ScannedCorpus(corpus_docs())


def assert_same_index(got, want):
    for name in ("labels", "sizes", "max_sim", "min_sim", "decided", "_by_cluster", "_sorted_labels"):
        assert np.array_equal(getattr(got, name), getattr(want, name), equal_nan=True), name
    for name in ("keeper", "similarity", "reason", "cluster"):
        assert np.array_equal(getattr(got.clustering, name), getattr(want.clustering, name), equal_nan=True), name
    assert got.counts == want.counts
    assert (got.threshold, got.policy, got.sort) == (want.threshold, want.policy, want.sort)


def test_snapshot_round_trip_with_decisions(scanned):
    project = Project(scanned)
    graph = load_graph(project)
    first = build_index(graph, cluster_with_decisions(project, graph, 0.7, "greedy"), Overrides.load(project))
    label = int(first.labels[0])
    members = first.members(label)
    ids = project.ids_for([int(m) for m in members[:2]])
    decisions.record(project, "keep", ids[1], threshold=0.7, policy="greedy")
    decisions.record(project, "remove", ids[0], threshold=0.7, policy="greedy")
    ov = Overrides.load(project)
    want = build_index(graph, cluster_with_decisions(project, graph, 0.7, "greedy", overrides=ov), ov, Listing("low"))
    assert (want.clustering.reason == clustering.REVIEWER).any()
    got = index_from_snapshot(snapshot_bytes(want), ov)
    assert_same_index(got, want)
    assert list(got.members(label)) == list(want.members(label))
    # garbage is not a snapshot
    assert index_from_snapshot(b"\x00" * 20, ov) is None
    assert index_from_snapshot(snapshot_bytes(want)[:-9], ov) is None
    project.close()


def test_snapshot_is_only_used_for_the_same_scan_decisions_and_view(scanned):
    project = Project(scanned)
    graph = load_graph(project)
    ov = Overrides.load(project)
    index = build_index(graph, cluster_with_decisions(project, graph, 0.8, "components", overrides=ov), ov)
    save_snapshot(project, index)
    size, high = Listing("size"), Listing("high")
    assert load_snapshot(project, ov, 0.8, "components", size)[0] is not None
    for other_view in ((0.81, "components", size), (0.8, "greedy", size), (0.8, "components", high)):
        assert load_snapshot(project, ov, *other_view)[0] is None
    # a decision changes what the view would show
    decisions.record(project, "remove", project.ids_for([int(index.labels[0])])[0])
    ov2 = Overrides.load(project)
    assert load_snapshot(project, ov2, 0.8, "components", size)[0] is None
    decisions.undo(project)
    assert load_snapshot(project, Overrides.load(project), 0.8, "components", size)[0] is not None
    # a new scan replaces the pairs the view was built from
    scan(project, ScanSettings(floor=0.6))
    assert load_snapshot(project, Overrides.load(project), 0.8, "components", size)[0] is None
    project.close()


async def test_reopening_shows_the_stored_view_then_reads_the_pairs(scanned):
    db = scanned
    app = create_app(db, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("plus", "p")
        await settle(pilot)
        main = app.main
        assert (main.threshold, main.policy) == (0.81, "greedy")
        expected = main.index
    # closing stored the view on screen; reopening shows it before the pairs are read
    messages = []
    app = create_app(db, author="tester")
    async with app.run_test(size=(120, 36), message_hook=messages.append) as pilot:
        await settle(pilot)
        main = app.main
        ours = list({id(m): m for m in messages if isinstance(m, (ViewReady, GraphReady))}.values())  # bubbled: once
        assert [type(m) for m in ours] == [ViewReady, GraphReady]
        view = next(m for m in messages if isinstance(m, ViewReady))
        assert next(m for m in messages if isinstance(m, GraphReady)).index is None
        assert main.index is view.index and main.graph is not None
        assert_same_index(main.index, expected)
        assert main.query_one("#clusters").row_count == min(len(expected.labels), main.PAGE)
        # the next change re-clusters from the pairs as usual
        await pilot.press("minus")
        await settle(pilot)
        assert main.index.threshold == 0.8 and main.index is not view.index
    # a decision made elsewhere meanwhile: the stored view is not used
    project = Project(db)
    decisions.record(project, "remove", project.ids_for([int(expected.labels[0])])[0])
    project.close()
    messages = []
    app = create_app(db, author="tester")
    async with app.run_test(size=(120, 36), message_hook=messages.append) as pilot:
        await settle(pilot)
        assert not any(isinstance(m, ViewReady) for m in messages)
        assert app.main.index.clustering.reason[int(expected.labels[0])] == clustering.REVIEWER


async def test_a_large_cluster_shows_its_members_a_chunk_at_a_time(tmp_path):
    import random

    from dedup_tui.ui.widgets.tables import MemberTable

    from .conftest import WORDS, write_corpus

    rng = random.Random(5)
    base = [rng.choice(WORDS) for _ in range(60)]
    docs = []
    for i in range(260):  # a template family: one word changed in each copy
        words = list(base)
        words[rng.randrange(60)] = f"w{i}"
        docs.append({"id": f"t{i:03d}", "text": " ".join(words)})
    docs.append({"id": "other", "text": "something else entirely, not like the rest at all"})
    corpus = write_corpus(tmp_path / "family.jsonl", docs)
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = app.main
        label = int(main.index.labels[0])
        members = main.index.members(label)
        assert len(members) == 260
        table = main.query_one("#members", MemberTable)

        def shown_keys():
            return [int(table.coordinate_to_cell_key((r, 0)).row_key.value) for r in range(table.row_count)]

        assert shown_keys() == members[: MemberTable.CHUNK].tolist()
        assert "100 shown, more as you scroll" in str(main.query_one("#members-title").render())
        # a chunk with longer ids widens the id field of every row shown, not only its own
        table.extend({o: (f"a-much-longer-id-{o}", 10, "text") for o in table.pending()})
        rows = [table.get_row_at(r)[0].plain for r in range(table.row_count)]
        assert table.row_count == 2 * MemberTable.CHUNK
        why_at = {
            next(row.index(w) for w in ("first in corpus", "same text", "≥ 0.", "via a member") if w in row)
            for row in rows
        }
        assert len(why_at) == 1
        main.show_members()  # back to the first chunk, with the real ids
        await pilot.pause()
        assert shown_keys() == members[: MemberTable.CHUNK].tolist()
        table.focus()
        table.move_cursor(row=MemberTable.CHUNK - 1)  # the last row shown: the next chunk comes in below it
        await pilot.pause()
        assert table.cursor_row == MemberTable.CHUNK - 1
        assert shown_keys() == members[: 2 * MemberTable.CHUNK].tolist()
        await pilot.press("end")  # every member, the cursor on the last
        assert shown_keys() == members.tolist() and table.cursor_row == len(members) - 1
        await pilot.press("home")
        assert table.cursor_row == 0
        assert "more as you scroll" not in str(main.query_one("#members-title").render())
        # a decision on a member beyond the first chunk moves on to the next one, also there
        target = int(members[150])
        table.move_cursor(row=150)
        await pilot.pause()
        assert main.selected_doc() == target
        await until_drawn(pilot, "main", target)  # (a key before it is drawn is refused on purpose)
        await pilot.press("x")
        await settle(pilot)
        assert main.index.clustering.reason[target] == clustering.REVIEWER
        assert main.selected_doc() == int(members[151]) and table.row_count >= 152


async def test_the_next_threshold_step_each_way_is_prepared_ahead(corpus):
    from dedup_tui.review.index import view_key

    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = app.main
        await pilot.press("plus")  # 0.81: prepares 0.82 (this way) and 0.80
        await settle(pilot)
        project = Project(main.spec.db)

        def key(t):
            return view_key(project, decisions.Overrides.load(project), t, main.policy, main.model.view.listing)

        assert app.session.views.has(key(0.82)) and app.session.views.has(key(0.8))
        assert app.session.views.has(
            view_key(project, decisions.Overrides.load(project), 0.81, "greedy", main.model.view.listing)
        )
        assert app.session.views.has(key(0.86)) and app.session.views.has(key(0.76))  # } and {
        big_step = app.session.views.get(key(0.86), lambda: None)
        await pilot.press("ctrl+right")
        await settle(pilot)
        assert main.threshold == 0.86 and main.index is big_step
        await pilot.press("ctrl+left")
        await settle(pilot)
        assert main.threshold == 0.81
        prepared = app.session.views.get(key(0.82), lambda: None)
        await pilot.press("plus")
        await settle(pilot)
        assert main.threshold == 0.82 and main.index is prepared
        graph = load_graph(project)
        fresh = build_index(graph, cluster_with_decisions(project, graph, 0.82, main.policy), Overrides.load(project))
        assert_same_index(main.index, fresh)
        # a decision makes every prepared view stale: the next step re-clusters with it
        doc = int(main.index.labels[0])
        decisions.record(project, "remove", project.ids_for([doc])[0])
        assert not app.session.views.has(key(0.83))
        await pilot.press("plus")
        await settle(pilot)
        assert main.index.clustering.reason[doc] == clustering.REVIEWER
        project.close()
