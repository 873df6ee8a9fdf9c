"""The app opens a folder of shards: loads each (the last one read shown under the progress
title), and on reopening warns of a shard added since."""

from __future__ import annotations

from dedup_tui.engine.opening import prepare
from dedup_tui.ui.app import create_app

from .conftest import corpus_docs, settle, write_corpus


async def test_the_app_opens_a_folder_of_shards_and_shows_each_shard_read(tmp_path):
    docs = corpus_docs()
    data = tmp_path / "data"
    data.mkdir()
    for number, start in enumerate(range(0, 30, 10)):
        write_corpus(data / f"part-{number}.jsonl", docs[start : start + 10])
    db = tmp_path / "p.db"
    app = create_app(str(data), db=str(db), author="tester")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        main = app.main
        assert main.summary_text(200).plain.startswith("30 documents (3 sources)")
        assert str(main.query_one("#progress-shard").content) == f"shard 3/3 {data / 'part-2.jsonl'}: 10 documents"
    assert prepare(str(data), db=str(db)).warning is None
    write_corpus(data / "part-3.jsonl", docs[30:35])
    warning = prepare(str(data), db=str(db)).warning
    assert warning is not None and "shards in data added since: 1 (part-3.jsonl): this project" in warning
