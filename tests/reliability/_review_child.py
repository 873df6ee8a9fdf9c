"""Run the review app headless on a project, record decisions with keys, then wait to be killed.

Used by the interruption and two-window tests: `python _review_child.py PROJECT.db N` prints
`DECIDED <n> <json list of (kind, doc_id)>` once N decisions are committed, then
`READY` and sleeps with the app (and its lock) open until it is killed.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from dedup_tui.engine.curate import decisions
from dedup_tui.engine.store import Project
from dedup_tui.ui.app import create_app


async def settle(app, pilot) -> None:
    for _ in range(200):
        await app.workers.wait_for_complete()
        await pilot.pause()
        main = app.main
        if not (main.scanning or main.busy or any(w.is_running for w in app.workers)):
            return
    raise SystemExit("the app did not settle")


async def until_drawn(app, pilot) -> None:
    """The document a decision key acts on is drawn (the app drops a key typed ahead of the
    screen on purpose; tests/ui/conftest.py's press_decision)."""
    for _ in range(200):
        doc = app.main.selected_doc()
        if doc is None or app.session.intake.on_screen("main") == doc:
            return
        await pilot.pause()
    raise SystemExit("the document under the cursor was never drawn")


async def main(db: str, n: int) -> None:
    app = create_app(db, author="killed-reviewer")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        await pilot.press("enter")  # into the members of the first cluster
        keys = ["down", "x", "k", "down", "m"]
        done = 0
        for key in keys:
            if done >= n:
                break
            if key in ("x", "k"):
                await until_drawn(app, pilot)
            await pilot.press(key)
            if key == "m":
                await pilot.press(*"kept-for-a-reason", "enter")
            await settle(app, pilot)
            if key in ("x", "k", "m"):
                done += 1
        project = Project(db, readonly=True)
        recorded = [(d.kind, d.doc_id, d.value) for d in decisions.active(project)]
        project.close()
        print("DECIDED", len(recorded), json.dumps(recorded), flush=True)
        print("READY", flush=True)
        while True:  # the app stays open, its lock held, until the test kills this process
            await asyncio.sleep(0.05)
            time.sleep(0.01)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
