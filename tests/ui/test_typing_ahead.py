"""Typing ahead (issue 39, part 1): a decision key acts on the document that was on screen when it
was pressed. Keys that arrive before the next document is drawn are dropped, with one notice that
replaces itself, and a burst never crosses into a cluster that was not drawn.

The bursts are Key events posted at once: no redraw can happen between them, as when a reviewer
types faster than the screen follows."""

from __future__ import annotations

from textual import events

from dedup_tui.engine.curate import decisions
from dedup_tui.engine.store import Project
from dedup_tui.ui.app import create_app
from dedup_tui.ui.screens.pair import PairScreen

from .conftest import WORDS, press_decision, settle, until_drawn, write_corpus


def two_clusters(lines: bool = False) -> list[dict]:
    """A cluster of three (a kept page and two variants), then a cluster of two. lines: the
    page in lines of ten words (the pair view aligns them and counts the changes)."""
    base = [WORDS[(i * 7) % len(WORDS)] + str(i) for i in range(300)]

    def page(words: list[str]) -> str:
        return "\n".join(" ".join(words[i : i + 10]) for i in range(0, len(words), 10)) if lines else " ".join(words)

    docs = [{"id": "page", "text": page(base)}]
    for k in range(2):
        words = list(base)
        words[10 + 40 * k] = words[11 + 40 * k] = f"VARIANT{k}"
        docs.append({"id": f"page-variant-{k}", "text": page(words)})
    other = [WORDS[(i * 5) % len(WORDS)] + "x" + str(i) for i in range(200)]
    docs.append({"id": "other-a", "text": " ".join(other)})
    docs.append({"id": "other-b", "text": " ".join(other[:-1] + ["CHANGED"])})
    return docs


def burst(app, key: str, count: int) -> None:
    """`count` presses of `key` arriving together (before anything is drawn again)."""
    for _ in range(count):
        app.post_message(events.Key(key, key))


def removed_ids(app) -> list[str]:
    return removed_ids_in(app.spec.db)


def removed_ids_in(db) -> list[str]:
    with Project(db) as project:
        return [d.doc_id for d in decisions.active(project) if d.kind == "remove"]


def ignored_notices(app) -> list[str]:
    return [t for t in app.told if "ignored" in t]


async def open_first_pair(app, pilot) -> PairScreen:
    main = app.main
    label = int(main.index.labels[0])
    member = next(m for m in main.model.members(label) if not main.model.is_kept(m))
    main.model.select(member)
    main.render_list()
    await pilot.pause()
    main.action_open_pair()
    await settle(pilot)
    assert isinstance(app.screen, PairScreen)
    return app.screen


async def test_a_burst_in_the_pair_view_decides_only_the_document_on_screen(tmp_path):
    app = create_app(write_corpus(tmp_path / "c.jsonl", two_clusters()), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await open_first_pair(app, pilot)
        shown = app.main.project.ids_for([screen.right])[0]
        await until_drawn(pilot, "pair", screen.right)  # (the burst's first key decides it)
        burst(app, "x", 5)
        await settle(pilot)
        assert removed_ids(app) == [shown]
        assert not any(i.startswith("other") for i in removed_ids(app))  # never into the next cluster
        assert ignored_notices(app)[-1] == "4 keys ignored: the next document was not on screen yet"
        # the notice replaced itself: one on screen, however many keys were dropped
        assert sum("ignored" in str(n.message) for n in app._notifications) == 1


async def test_a_burst_in_the_members_pane_decides_only_the_document_on_screen(tmp_path):
    app = create_app(write_corpus(tmp_path / "c.jsonl", two_clusters()), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        main.query_one("#members").focus()
        label = int(main.index.labels[0])
        member = next(m for m in main.model.members(label) if not main.model.is_kept(m))
        main.model.select(member)
        main.render_list()
        await settle(pilot)
        shown = main.project.ids_for([member])[0]
        await until_drawn(pilot, "main", member)  # (the burst's first key decides it)
        burst(app, "x", 5)
        await settle(pilot)
        assert removed_ids(app) == [shown]
        assert ignored_notices(app)[-1] == "4 keys ignored: the next document was not on screen yet"


async def test_a_key_after_the_redraw_decides_the_next_document(tmp_path):
    """The normal case: x, the next document drawn, x again: both decided."""
    app = create_app(write_corpus(tmp_path / "c.jsonl", two_clusters()), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await open_first_pair(app, pilot)
        first = app.main.project.ids_for([screen.right])[0]
        await press_decision(pilot, "x")
        await settle(pilot)
        second = app.main.project.ids_for([screen.right])[0]
        assert second != first
        await press_decision(pilot, "x")  # once the next document is drawn
        await settle(pilot)
        assert removed_ids(app) == [first, second]
        assert not ignored_notices(app)


async def test_movement_keys_are_never_dropped(tmp_path):
    """Down twice at once moves twice (only decisions wait for the screen)."""
    app = create_app(write_corpus(tmp_path / "c.jsonl", two_clusters()), author="tester")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        main = app.main
        members = main.query_one("#members")
        members.focus()
        members.move_cursor(row=0)
        await settle(pilot)
        assert members.cursor_row == 0 and members.row_count == 3
        burst(app, "down", 2)
        await settle(pilot)
        assert members.cursor_row == 2
        assert not ignored_notices(app)


def test_a_burst_typed_in_the_browser_decides_only_the_document_on_screen(tmp_path):
    """The same app served to a browser: five x typed at once in the pair view (xterm.js sends
    them as fast as Selenium types) remove the one document shown, and the screen says how many
    keys were ignored."""
    import re

    import pytest

    from dedup_tui.engine.ingest import load_corpus
    from dedup_tui.engine.scanning.local import scan

    from ..browser_session import Browser, Served, missing

    if missing() is not None:
        pytest.skip(missing())
    db = tmp_path / "served.db"
    with Project(db, create=True) as project:
        load_corpus(project, [write_corpus(tmp_path / "c.jsonl", two_clusters(lines=True))])
        scan(project)
    served = Served(db)
    browser = None
    try:
        browser = Browser(tmp_path / "chrome")
        browser.open(served.url)
        browser.wait_for(lambda s: "clusters:" in s)
        browser.keys("\t")  # the members: the cursor on the first member to review
        shown = browser.wait_for(lambda s: re.search(r"keys act on ▸\s+(page-variant-\d)", s) is not None)
        target = re.search(r"keys act on ▸\s+(page-variant-\d)", shown).group(1)
        browser.keys("\n")  # the pair view, once its diff is drawn (the header counts the changes)
        browser.wait_for(lambda s: "JACCARD" in s and target in s and re.search(r"\d changes? \(", s) is not None)
        # The app notes a document as drawn just after it writes the frame: a browser polled by
        # Selenium can answer the frame within those few ms (no person can). One more frame (]:
        # the first change) comes after that note.
        browser.keys("]")
        browser.wait_for(lambda s: "change 1/" in s)
        browser.keys("xxxxx")
        browser.wait_for(lambda s: "ignored: the next" in re.sub(r"[\s▌▎▊]+", " ", s))
        browser.wait_for(lambda _s: removed_ids_in(db) != [])  # (written by the writer thread)
        removed = removed_ids_in(db)
        # the one document on screen; keys typed after a redraw (Selenium types them one by one)
        # may decide the next member, never the next cluster, which was not drawn
        assert removed[0] == target and len(removed) < 5 and not any(i.startswith("other") for i in removed)
    finally:
        left = served.stop() + (browser.quit() if browser is not None else [])
    assert left == [], f"processes left running: {left}"
