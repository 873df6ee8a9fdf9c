"""A decision is on screen at once, as it will stay: the removed member's row and its
cluster's count change with the key, and the re-clustering after the save changes neither.
Quitting while a save is under way does not hang. The cluster list's counts are never cut,
whatever a cluster's size."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

from textual.pilot import Pilot

from dedup_tui.engine.curate import decisions, keep_rules
from dedup_tui.engine.graph import clustering
from dedup_tui.engine.store import Project
from dedup_tui.ui.app import create_app

from .conftest import corpus_docs, press_decision, settle, write_corpus, writer_held


def row(table, key) -> str:
    return table.get_row(str(key))[0].plain


def tables(*shown) -> list[list[str]]:
    return [[table.get_row_at(i)[0].plain for i in range(table.row_count)] for table in shown]


async def on_a_member_to_review(pilot):
    """The app settled, the cursor on the first member to review of the first cluster:
    (main screen, cluster table, member table, the cluster's id, that member)."""
    await settle(pilot)
    main = pilot.app.main
    clusters, members = main.query_one("#clusters"), main.query_one("#members")
    cluster_id = main.model.cursor.cluster_id
    await pilot.press("tab")
    return main, clusters, members, cluster_id, main.selected_doc()


async def test_a_removal_shows_at_once_as_it_will_stay(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        main, clusters, members, cluster_id, target = await on_a_member_to_review(pilot)
        done, total = main.model.progress(cluster_id)
        assert done == 0 and total >= 1 and target != cluster_id
        assert row(clusters, cluster_id).startswith(f"0/{total} ")
        with writer_held(app) as gate:  # the removal is not saved (nor re-clustered) yet
            await check_removal_on_screen(pilot, main, clusters, members, cluster_id, target, total, gate)
        assert not any(m.startswith("Saved: remove") for m in app.told)  # the row says it: no toast over the preview


async def check_removal_on_screen(pilot, main, clusters, members, cluster_id, target, total, gate) -> None:
    decided_before = main.index.counts.decided_clusters
    await press_decision(pilot, "x")
    await pilot.pause()
    summary = str(main.query_one("#summary").render())
    to_review = main.index.counts.clusters - decided_before - (1 if total == 1 else 0)  # (a cluster it completes)
    assert re.search(rf"\b{to_review:,} to review", summary), summary
    assert main.index.clustering.reason[target] != clustering.REVIEWER  # the list does not hold it yet ...
    removed_row, cluster_row = row(members, target), row(clusters, cluster_id)
    assert removed_row.startswith("removed") and "by reviewer" in removed_row  # ... the screen shows it
    expected = "✓" if total == 1 else f"1/{total} "
    assert cluster_row.startswith(expected)
    gate.set()
    await settle(pilot)
    assert main.index.clustering.reason[target] == clustering.REVIEWER  # saved and re-clustered:
    assert row(members, target) == removed_row and row(clusters, cluster_id) == cluster_row  # nothing moved
    assert str(main.query_one("#summary").render()) == summary


async def test_a_keep_shows_its_cluster_before_its_write_as_the_saved_list_does(corpus):
    """A keep changes its cluster's kept document and every member's similarity to it: the list
    it leads to is worked out while the keep is written (not after), and is on screen before the
    project holds the decision; once saved and re-clustered from the project, every row of both
    tables is the same."""
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        main, clusters, members, old_kept, target = await on_a_member_to_review(pilot)
        assert target != old_kept and not main.model.is_kept(target)
        with writer_held(app):  # the keep is not saved yet
            await press_decision(pilot, "k")
            for _ in range(500):  # until the list worked out with it is shown (bounded)
                await pilot.pause()
                if not main.busy:
                    break
            with Project(app.spec.db) as project:
                assert decisions.active(project) == []
            assert main.index.clustering.cluster[old_kept] == target  # the cluster is filed under it
            assert main.index.position(target) is not None and main.index.position(old_kept) is None
            assert row(members, target).startswith("KEPT")
            shown = tables(clusters, members)
        await settle(pilot)
        with Project(app.spec.db) as project:
            assert [d.kind for d in decisions.active(project)] == ["keep"]
        assert tables(clusters, members) == shown


async def test_counts_of_a_large_cluster_are_never_cut(tmp_path):
    docs = corpus_docs() + [{"id": f"copy{i:04d}", "text": "the same notice, copied many times"} for i in range(1200)]
    app = create_app(write_corpus(tmp_path / "big.jsonl", docs), author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = app.main
        clusters = main.query_one("#clusters")
        big_cluster = next(int(c) for c in main.index.labels if len(main.index.members(int(c))) == 1200)
        text = row(clusters, big_cluster)
        assert text.startswith("0/1199 ") and " 1200 " in text, text
        header = str(clusters.columns["row"].label)
        assert header.index("size") > header.index("done") + len("0/1199")


def test_quitting_while_a_decision_is_saved_does_not_hang(tmp_path, corpus):
    """The UI thread closes the writer (waiting for the job under way) while that job's result
    is handed to the UI thread: handing it over must not wait for the UI thread. In a separate
    process, so that a hang is a failure (bounded), not a stuck test run."""
    script = textwrap.dedent(f"""
        import asyncio, threading
        from dedup_tui.ui.app import create_app
        from dedup_tui.ui.writer import ProjectWriter

        closing = threading.Event()
        close = ProjectWriter.close
        def closing_close(self):
            closing.set()
            close(self)
        ProjectWriter.close = closing_close

        async def main():
            app = create_app({str(corpus)!r}, author="tester")
            async with app.run_test() as pilot:
                while app.main.index is None:
                    await pilot.pause(0.05)
                # a save that ends only once the app is closing its writer, and tells the UI
                app.writer.submit(lambda project: closing.wait(20), lambda result: None, what="a slow write")
        asyncio.run(main())
        print("closed")
    """)
    env = {**__import__("os").environ, "DEDUP_TUI_APP_WARMUP": "0"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path
    )
    assert done.returncode == 0 and "closed" in done.stdout, done.stderr[-2000:]


async def test_a_new_keep_rule_sorts_the_list_again(corpus):
    """K keeps other documents: the similarities to the kept ones change, and the list is in
    its title's order afterwards (it kept the earlier order, then read 0.84, 0.83, 0.95...)."""
    import numpy as np

    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = app.main
        while main.model.view.sort != "high":
            await pilot.press("s")
            await settle(pilot)
        await pilot.press("K")  # the next keep rule
        await settle(pilot)
        after = np.nan_to_num(main.index.max_sim, nan=0.0)
        assert main.model.view.sort == "high"
        assert np.all(np.diff(after) <= 1e-12), "the list is not in its title's order"


async def test_what_a_key_shows_at_once_is_what_the_saved_list_shows(corpus):
    """A reviewer's random session (x k n u r ] [ p s K, the cursor moved between): whatever a
    decision, undo or redo shows with the key (before its write and re-clustering) is what the
    screen shows once they are done, for the rows it shows of the cluster, and the list then is
    the project's own clustering."""
    import random

    import numpy as np

    from dedup_tui.engine.store.scans import load_graph

    rng = random.Random(23)
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = app.main
        clusters, members = main.query_one("#clusters"), main.query_one("#members")
        checked = 0
        for _ in range(60):
            key = rng.choice(["x", "x", "u", "u", "r", "k", "n", "down", "tab", "plus", "minus", "p", "s", "K"])
            press = press_decision if key in ("x", "k", "n") else Pilot.press  # (a decision waits for its document)
            if key not in ("x", "u", "r"):
                await press(pilot, key)
                await settle(pilot)
            else:
                shown_before = main.index
                with writer_held(app):  # its write waits: what is on screen now is what the key showed at once
                    await press(pilot, key)
                    o, cid = main.selected_doc(), main.model.cursor.cluster_id
                    shown_at_once = main.index is not shown_before or (key == "x" and main.model.has_pending)
                    at_once = tables(clusters, members) if shown_at_once and o is not None else None
                await settle(pilot)
                if at_once is not None and main.selected_doc() == o and main.model.cursor.cluster_id == cid:
                    assert tables(clusters, members) == at_once, key  # the re-clustering changed no row
                    checked += 1
            with Project(app.spec.db) as project:
                graph = load_graph(project)
                fresh = keep_rules.cluster_with_decisions(project, graph, main.threshold, main.policy)
            assert np.array_equal(main.index.clustering.reason, fresh.reason)
            assert np.array_equal(main.index.clustering.cluster, fresh.cluster)
        assert checked >= 5  # (the keys that decided, with the cursor where it was)
