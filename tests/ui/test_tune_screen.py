"""Pilot tests for the tuning screen and the borderline labelling queue."""

from __future__ import annotations

import numpy as np

from dedup_tui.engine.curate import decisions, keep_rules, tune
from dedup_tui.engine.store import Project
from dedup_tui.engine.store.scans import load_graph
from dedup_tui.ui.app import create_app
from dedup_tui.ui.screens.main import MainScreen
from dedup_tui.ui.screens.tune import LabelScreen, TuneScreen
from dedup_tui.ui.widgets.docview import DocView

from ..engine.test_tune import CHAIN
from .conftest import press_decision, settle, write_corpus, writer_held


async def open_tuning(pilot) -> TuneScreen:
    await settle(pilot)
    await pilot.press("T")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, TuneScreen) and screen.report is not None
    return screen


async def test_label_keys(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        tune_screen = await open_tuning(pilot)
        main = app.main
        project = main.project
        await pilot.press("L")
        labelling = app.screen
        assert isinstance(labelling, LabelScreen) and labelling.current is not None
        seen = []
        for key, label in (("1", "duplicate"), ("2", "not_duplicate"), ("0", "skip")):
            q = labelling.current
            ids = project.ids_for([q.a, q.b])
            seen.append((tuple(ids), label))
            await press_decision(pilot, key)
            # the next pair is on screen at once, with its diff
            nxt = labelling.current
            assert nxt is not None and (nxt.a, nxt.b) != (q.a, q.b)
            left, right = project.texts_for([nxt.a, nxt.b])
            assert labelling.query_one("#right-doc", DocView).text == right
            assert labelling.query_one("#left-doc", DocView).text == left
            assert labelling.query_one("#right-doc", DocView)._spans or left == right
        stored = {(x.a_id, x.b_id): x.label for x in tune.labels(project)}
        assert stored == dict(seen)
        # "not a duplicate" is a decision: the pair is split
        (na, nb), _ = seen[1]
        active = [(d.kind, d.doc_id, d.other_id, d.author) for d in decisions.active(project)]
        assert active == [("not_duplicate", na, nb, "tester")]
        # u takes back the last label and shows that pair again
        await pilot.press("u")
        assert (tuple(project.ids_for([labelling.current.a, labelling.current.b])), "skip") == seen[2]
        assert len(tune.labels(project)) == 2
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is tune_screen
        assert tune_screen.report.label_counts == {"duplicate": 1, "not_duplicate": 1, "skip": 0}
        o = decisions.ords_for_ids(project, [na, nb])
        assert (o[na], o[nb]) in main.index.overrides.split_pairs
        # ... but a label is evidence for tuning, never a review: neither document counts as decided
        assert not main.model.is_decided(o[na]) and not main.model.is_decided(o[nb])


async def test_apply_recommended_threshold(corpus, tmp_path):
    from dedup_tui.engine.opening import prepare

    spec = prepare(corpus)
    # a scanned project with every stored pair labelled: duplicates from 0.75 up
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
    project = Project(spec.db)
    graph = load_graph(project)
    ids = project.ids_for(list(range(graph.n)))
    labelled = list(zip(graph.a.tolist(), graph.b.tolist(), graph.jaccard.tolist()))
    # enough labels to recommend: pairs the scan did not store, with similarities spread over the bins
    stored = set(zip(graph.a.tolist(), graph.b.tolist()))
    extra = [(a, b) for a in range(graph.n) for b in range(a + 1, graph.n) if (a, b) not in stored]
    for i, (a, b) in enumerate(extra[: max(0, tune.MIN_LABELS_TO_RECOMMEND - len(labelled))]):
        labelled.append((a, b, 0.5 + (i % 10) * 0.05 + 0.01))
    for a, b, j in labelled:
        tune.set_label(project, ids[a], ids[b], "duplicate" if j >= 0.75 else "not_duplicate", j, author="tester")
    project.close()
    app = create_app(spec.db, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_tuning(pilot)
        main = app.main
        e = screen.report.estimates
        assert e is not None and e.recommended is not None and e.recommended != main.threshold
        assert 0.7 <= e.recommended <= 0.8
        await pilot.press("equals_sign")
        await settle(pilot)
        assert main.threshold == e.recommended and main.index.threshold == e.recommended
        c = keep_rules.cluster_with_decisions(main.project, main.graph, e.recommended, main.policy)
        assert (main.index.counts.kept, main.index.counts.clusters) == (c.kept_count, c.cluster_count)
        assert screen.report.threshold == e.recommended
        # the target precision moves the recommendation; the plots export as SVG
        await pilot.press("right_parenthesis", "right_parenthesis")
        await settle(pilot)
        assert screen.report.estimates.target == 0.97
        await pilot.press("S")
        assert screen.svg_path.exists() and screen.svg_path.read_text().startswith("<svg")
        await pilot.press("j")
        assert len(screen.labels_path.read_text().splitlines()) == len(labelled)
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_palette_opens_tuning(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"tune: threshold")
        for _ in range(5):
            await pilot.pause()
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, TuneScreen)


async def test_split_and_open_chain(tmp_path):
    corpus = write_corpus(tmp_path / "chain.jsonl", [{"id": i, "text": t} for i, t in CHAIN])
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        main = app.main
        app.session.set_threshold(0.7)
        screen = await open_tuning(pilot)
        chains = screen.report.chains
        assert [ch.label_id for ch in chains] == ["c0"]
        far = chains[0].far
        await pilot.press("b")
        await settle(pilot)
        assert main.index.clustering.cluster[far[0]] != main.index.clustering.cluster[far[1]]
        # split in two: what is still flagged is a smaller chain
        assert all(ch.size < 7 for ch in screen.report.chains)
        # g goes to a flagged cluster in the main screen (switching to components): use the old list
        main.model.set_policy("greedy")
        screen.report.chains[:] = chains
        screen.fill_chains()
        await pilot.press("g")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen) and main.policy == "components"
        assert np.any(main.index.labels == main.model.cursor.cluster_id)


async def test_tuning_numbers_at_80x24_and_too_few_labels(tmp_path):
    """At 80x24 the numbers fill the body (per-bin precision, precision / recall at the
    threshold, the shingle sizes), v shows the plots; 12 labels are too few to recommend."""
    from .conftest import plain_screen
    from .test_snapshots import labelled_long_ids_project

    app = create_app(labelled_long_ids_project(tmp_path), author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_tuning(pilot)
        e = screen.report.estimates
        assert e.too_few_labels and e.labelled < tune.MIN_LABELS_TO_RECOMMEND
        shown = " ".join(plain_screen(app).split())
        assert "95% Wilson" in shown and "0.85–0.90" in shown  # the per-bin table
        assert f"At {screen.report.threshold:.2f}: precision ≈" in shown
        assert f"too few labels to recommend ({e.labelled} of {tune.MIN_LABELS_TO_RECOMMEND}; L labels more)" in shown
        # what the labels say at the threshold comes before the bins it is made of, each on one
        # line (at 80x24 the bins of a real project pushed the recommendation below the fold, cut
        # at "needed: l")
        lines = plain_screen(app).split("\n")
        at = next(i for i, line in enumerate(lines) if "precision ≈" in line)
        target = next(i for i, line in enumerate(lines) if "L labels more)" in line)
        bins = next(i for i, line in enumerate(lines) if "95% Wilson" in line)
        assert at < target < bins and "Target 95% ( ): too few labels" in lines[target]
        assert "k=5: 1.000" in shown
        assert "recommended" not in plain_screen(app).split("\n")[0]
        assert not screen.query_one("#hist").display or not screen.query_one("#tune-plots").display
        await pilot.press("equals_sign")  # no recommendation to apply: the threshold stays
        assert app.main.threshold == screen.report.threshold
        await pilot.press("v")
        await pilot.pause()
        assert screen.query_one("#tune-plots").display and not screen.query_one("#tune-side").display
        assert screen.query_one("#hist").region.height >= 6


async def test_no_labels_yet_never_flashes_after_a_label(corpus):
    """Back from labelling, the previous numbers stay until the report with the new label is
    ready (it was computed before the label was written and showed "No labels yet")."""
    from rich.console import Console

    app = create_app(corpus, author="tester")
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_tuning(pilot)
        assert screen.report.estimates is None
        await pilot.press("L")
        with writer_held(app):  # the writer is busy (a slow disk, a big write): the label waits
            await press_decision(pilot, "1")
            shown: list[str] = []
            stats = screen.query_one("#tune-stats")
            update = stats.update

            def recording(renderable):
                console = Console(width=100, record=True, file=open("/dev/null", "w"))
                console.print(renderable)
                shown.append(console.export_text())
                console.file.close()
                return update(renderable)

            stats.update = recording
            await pilot.press("escape")
            await pilot.pause()
        await settle(pilot)
        for _ in range(50):  # the report follows the writer's queue
            if screen.report.label_counts["duplicate"] == 1:
                break
            await pilot.pause(0.02)
        assert app.screen is screen
        assert screen.report.label_counts["duplicate"] == 1
        assert shown and not any("No labels yet" in text for text in shown), shown


def test_log_histogram_uses_its_height():
    """Counts of 100 to 10,000 filled the top half of the chart (scaled from zero): from the
    least count to the largest they use every step, evenly on the log scale."""
    from dedup_tui.ui.widgets.charts import log_heights

    heights = log_heights(np.array([0, 100, 1000, 10000]), 32)
    assert heights.tolist() == [0, 1, 16, 32]
    assert log_heights(np.array([0, 5, 5]), 8).tolist() == [0, 8, 8]
    assert log_heights(np.zeros(3, dtype=int), 8).tolist() == [0, 0, 0]
