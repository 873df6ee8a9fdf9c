"""Issue 39, part 1: each member has one reference document, the same in the members list,
the preview, the pair view (and the removed log): the document its cluster keeps. An exact copy
of another member showed "exact 1.00 same text" in the list, was compared with that member in
the preview and with the kept document (at another similarity) in the pair view."""

from __future__ import annotations

from dedup_tui.ui.app import create_app
from dedup_tui.ui.screens.pair import PairScreen
from dedup_tui.ui.widgets.docview import DocView

from .conftest import settle, write_corpus


async def test_an_exact_copy_of_a_member_is_shown_against_the_kept_document_everywhere(tmp_path):
    words = [f"word{i}" for i in range(60)]
    near_text = " ".join(words[:-4] + ["x", "y", "z", "w"])
    docs = [
        {"id": "kept", "text": " ".join(words)},
        {"id": "near", "text": near_text},
        {"id": "copy-of-near", "text": near_text},
    ]
    app = create_app(write_corpus(tmp_path / "c.jsonl", docs), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        c = main.index.clustering
        kept, near, copy = range(3)
        assert (
            int(c.keeper[copy]) == kept and int(c.cluster[copy]) == kept
        )  # (removed against the kept one, via its first copy)
        near_sim = float(c.similarity[near])
        assert near_sim < 1.0
        members = main.query_one("#members")
        main.model.select(copy)
        main.render_list()
        await settle(pilot)
        row = members.get_row(str(copy))[0].plain
        assert f"{near_sim:.2f}" in row and "1.00" not in row and "copy of a member" in row, row
        info = str(main.query_one("#member-info").render())
        assert "duplicate of kept" in info and "linked via near (1.00)" in info, info
        assert f"{near_sim:.2f} with the kept one" in info, info
        texts = app.main.project.texts_for([kept, copy])
        assert main.query_one("#preview-kept", DocView).text == texts[0]  # the kept one, not `near`
        assert f"Jaccard {near_sim:.2f}" in str(main.query_one("#preview-title").render())
        await pilot.press("tab", "enter")
        await settle(pilot)
        pair = app.screen
        assert isinstance(pair, PairScreen) and (pair.left, pair.right) == (kept, copy)
