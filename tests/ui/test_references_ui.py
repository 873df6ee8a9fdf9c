"""The app with a reference source: its documents are marked, listed by the reference filter,
and a remove on one is refused with a message (nothing recorded)."""

from __future__ import annotations

from click.testing import CliRunner

from dedup_tui.cli import main as cli_main
from dedup_tui.engine import decisions
from dedup_tui.engine.store import Project
from dedup_tui.ui.app import create_app

from .conftest import corpus_docs, settle, write_corpus


def screen_text(app) -> str:
    return app.export_screenshot().replace("&#160;", " ")


async def test_references_are_marked_filtered_and_never_removed(tmp_path):
    docs = corpus_docs()
    data = write_corpus(tmp_path / "data.jsonl", docs[:60])
    evals = write_corpus(tmp_path / "evals.jsonl", [{"id": f"eval{i}", "text": d["text"]}
                                                    for i, d in enumerate(docs[:60:6])])
    db = tmp_path / "p.db"
    r = CliRunner().invoke(cli_main, ["scan", str(db), str(data), "--reference", str(evals)])
    assert r.exit_code == 0, r.output
    app = create_app(str(db), author="tester")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        main = app.main
        assert main.summary_text(200).plain.startswith(f"{60 + 10} documents (2 sources, 1 a reference)")
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
        await pilot.press("x")
        await settle(pilot)
        assert "never removed" in " ".join(str(n.message) for n in app._notifications)
        with Project(db) as project:
            assert decisions.all_decisions(project) == []
