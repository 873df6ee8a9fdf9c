"""The first run of bare `dedup-tui` says, in the app too, where it put the sample and its project."""

from __future__ import annotations

from dedup_tui.engine.opening import prepare
from dedup_tui.ui.app import DedupApp

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


async def test_a_cache_fallback_said_on_stderr_is_shown_in_the_app_too(tmp_path, monkeypatch):
    """The app hides stderr: a refused cache folder (said before the app opened) and a cache
    the disk cannot take (said from a scan's thread while it runs) reach the reviewer."""
    import threading

    from dedup_tui.engine.compile import kernel_cache

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setattr(kernel_cache, "_said", [])
    kernel_cache.notice("not caching compiled kernels in /tmp/x: it is a symbolic link")
    app = DedupApp(prepare(None, None), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        said_from_a_thread = threading.Thread(
            target=kernel_cache.notice, args=("cannot write compiled kernels to the cache /c: No space left on device",)
        )
        said_from_a_thread.start()
        said_from_a_thread.join()
        await settle(pilot)
        warnings = [n.message for n in app._notifications if n.severity == "warning"]
    assert "Not caching compiled kernels in /tmp/x: it is a symbolic link" in warnings
    assert "Cannot write compiled kernels to the cache /c: No space left on device" in warnings
    assert app._engine_notice not in kernel_cache._listeners  # the closed app hears no more
