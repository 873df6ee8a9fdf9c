"""The app with a reference source: its documents are marked, listed by the reference filter,
and a remove on one is refused with a message (nothing recorded)."""

from __future__ import annotations

from click.testing import CliRunner

from dedup_tui.cli import main as cli_main
from dedup_tui.engine.curate import decisions
from dedup_tui.engine.store import Project
from dedup_tui.ui.app import create_app

from .conftest import corpus_docs, press_decision, settle, write_corpus


def screen_text(app) -> str:
    return app.export_screenshot().replace("&#160;", " ")


async def test_references_are_marked_filtered_and_never_removed(tmp_path):
    docs = corpus_docs()
    data = write_corpus(tmp_path / "data.jsonl", docs[:60])
    evals = write_corpus(
        tmp_path / "evals.jsonl", [{"id": f"eval{i}", "text": d["text"]} for i, d in enumerate(docs[:60:6])]
    )
    db = tmp_path / "p.db"
    r = CliRunner().invoke(cli_main, ["scan", str(db), str(data), "--reference", str(evals)])
    assert r.exit_code == 0, r.output
    app = create_app(str(db), author="tester")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        main = app.main
        assert main.summary_text(200).plain.startswith(f"{60 + 10} documents (2 sources, 1 reference)")
        assert main.summary_text(60).plain.startswith(f"{60 + 10} docs (2 src, 1 ref)")
        while main.model.view.filter != "reference":
            await pilot.press("f")
            await settle(pilot)
        listed = [int(label) for label in main.index.labels]
        assert listed and all(main.index.clustering.is_reference(o) for o in listed)
        assert "ref eval" in screen_text(app)
        await pilot.press("tab")
        main.query_one("#members").move_cursor(row=0)  # the cluster's kept document: the reference
        await pilot.pause()
        ref = main.selected_doc()
        assert main.index.clustering.is_reference(ref)
        assert "REF" in screen_text(app) and "reference" in screen_text(app)
        await press_decision(pilot, "x")
        await settle(pilot)
        assert "never removed" in " ".join(str(n.message) for n in app._notifications)
        with Project(db) as project:
            assert decisions.all_decisions(project) == []


async def test_the_app_loads_a_corpus_with_its_references(tmp_path):
    docs = corpus_docs()
    data = write_corpus(tmp_path / "data.jsonl", docs[:40])
    evals = write_corpus(
        tmp_path / "evals.jsonl", [{"id": f"eval{i}", "text": d["text"]} for i, d in enumerate(docs[:40:8])]
    )
    db = tmp_path / "p.db"
    app = create_app(str(data), db=str(db), author="tester", references=[str(evals)])
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        main = app.main
        assert main.summary_text(200).plain.startswith("45 documents (2 sources, 1 reference)")
        assert any(main.index.clustering.is_reference(int(label)) for label in main.index.labels)
    with Project(db) as project:
        roles = project.source_roles()
        paths = project.source_paths()
        assert {paths[s]: roles[s] for s in paths} == {str(data.resolve()): None, str(evals.resolve()): "reference"}


def test_references_open_only_with_a_corpus(tmp_path):
    import pytest

    from dedup_tui.engine.errors import ProjectError
    from dedup_tui.engine.opening import prepare

    docs = corpus_docs()
    data = write_corpus(tmp_path / "data.jsonl", docs[:20])
    evals = write_corpus(tmp_path / "evals.jsonl", docs[20:24])
    db = tmp_path / "p.db"
    r = CliRunner().invoke(cli_main, ["scan", str(db), str(data)])
    assert r.exit_code == 0, r.output
    with pytest.raises(ProjectError, match=r"dedup-tui load .* --reference FILE"):
        prepare(str(db), references=[str(evals)])
    r = CliRunner().invoke(cli_main, ["open", str(data), "--reference", str(db)])
    assert r.exit_code == 2 and "is a project, not a corpus file" in r.output
