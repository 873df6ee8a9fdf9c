"""The first run of bare `dedup-tui` says, in the app too, where it put the sample and its project."""

from __future__ import annotations

from dedup_tui.ui.app import DedupApp
from dedup_tui.ui.launch import prepare

from .conftest import settle


async def test_the_first_run_notice_is_shown_in_the_app_and_only_then(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    where = tmp_path / "data" / "dedup-tui" / "sample"
    for run in ("first", "second"):
        app = DedupApp(prepare(None, None), author="tester")
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            messages = [n.message for n in app._notifications]
            titles = [n.title for n in app._notifications]
        if run == "first":
            # under the title "First run", once: it read "First run / first run: copied the sample to ..."
            assert f"Copied the sample to {where}/ (notes.jsonl; your review goes in notes.db)" in messages
            assert "First run" in titles
        else:
            assert "First run" not in titles and not any("copied the sample" in m for m in messages)
