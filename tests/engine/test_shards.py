"""Big corpora as shards: zstandard-compressed files (.jsonl.zst, .csv.zst, .tsv.zst), folders and
globs of shards, loaded in a stable order with progress per shard."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import zstandard

from ..conftest import cli


def documents(db: Path) -> list[tuple]:
    """(doc_id, text, line, record) of every document, in load order."""
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT doc_id, text, line, record FROM documents ORDER BY ord").fetchall()


def load(*args) -> None:
    result = cli("load", *args)
    assert result.exit_code == 0, result.output


def jsonl_lines(start: int, stop: int, with_ids: bool = True) -> bytes:
    records = ({"id": f"d{i}", "text": f"document {i} says {i * 7 % 13}"} for i in range(start, stop))
    if not with_ids:
        records = ({"text": r["text"]} for r in records)
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def compressed(data: bytes, frames: int = 1) -> bytes:
    """`data` as zstandard frames, one after another (as the zstd tool writes a file of several)."""
    step = -(-len(data) // frames)
    return b"".join(
        zstandard.ZstdCompressor(write_checksum=True).compress(data[i : i + step]) for i in range(0, len(data), step)
    )


def error_line(result) -> str:
    assert result.exit_code == 1, result.output
    (line,) = result.output.splitlines()
    assert line.startswith("error: ")
    return line


def test_zstd_files_load_the_same_documents_as_their_plain_versions(tmp_path):
    data = jsonl_lines(0, 3000)
    plain = tmp_path / "c.jsonl"
    plain.write_bytes(data)
    packed = tmp_path / "c.jsonl.zst"
    packed.write_bytes(compressed(data, frames=3))
    load(tmp_path / "plain.db", plain)
    load(tmp_path / "packed.db", packed)
    want = documents(tmp_path / "plain.db")
    assert len(want) == 3000
    assert documents(tmp_path / "packed.db") == want

    table = 'id\ttext\nt1\tfirst row\nt2\t"quoted\ttab"\n'
    (tmp_path / "c.tsv").write_text(table, encoding="utf-8")
    (tmp_path / "c.tsv.zst").write_bytes(compressed(table.encode()))
    load(tmp_path / "tsv.db", tmp_path / "c.tsv")
    load(tmp_path / "tsv-zst.db", tmp_path / "c.tsv.zst")
    assert documents(tmp_path / "tsv-zst.db") == documents(tmp_path / "tsv.db")
    assert [d[1] for d in documents(tmp_path / "tsv.db")] == ["first row", "quoted\ttab"]


def test_a_truncated_or_corrupt_zst_is_one_line_naming_the_file_and_nothing_loads(tmp_path):
    whole = compressed(jsonl_lines(0, 20000))
    cut = tmp_path / "cut.jsonl.zst"
    cut.write_bytes(whole[: len(whole) // 2])
    flipped = bytearray(whole)
    flipped[len(whole) // 2] ^= 0xFF
    damaged = tmp_path / "damaged.jsonl.zst"
    damaged.write_bytes(bytes(flipped))
    not_zstd = tmp_path / "text.csv.zst"
    not_zstd.write_bytes(b"id,text\na,b\n")
    for path, says in [
        (cut, "zstd data ends inside a frame"),
        (damaged, "corrupt zstd data"),
        (not_zstd, "corrupt zstd data: Unknown frame descriptor"),
    ]:
        for extra in ((), ("--skip-bad",)):
            db = tmp_path / f"{path.name}.db"
            message = error_line(cli("load", db, path, *extra))
            assert message.startswith(f"error: {path}:"), message
            assert says in message, message
            assert not db.exists()  # nothing of the file's first, readable, part was kept
    # the line reached is named: the half that decompressed was read up to it
    line = int(error_line(cli("load", tmp_path / "c.db", cut)).split(":")[2])
    assert 1000 < line <= 20000


def write_shards(folder: Path, data: bytes, sizes: list[int]) -> list[str]:
    """`data`'s lines cut into shards of `sizes` lines, every other one .jsonl.zst; their names."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = data.splitlines(keepends=True)
    names, at = [], 0
    for number, size in enumerate(sizes):
        piece = b"".join(lines[at : at + size])
        at += size
        name = f"part-{number}.jsonl" + (".zst" if number % 2 else "")
        (folder / name).write_bytes(compressed(piece) if number % 2 else piece)
        names.append(name)
    assert at == len(lines)
    return names


def test_a_folder_or_glob_of_shards_loads_like_the_concatenated_jsonl_with_progress_per_shard(tmp_path):
    from dedup_tui.engine.ingest import load_corpus
    from dedup_tui.engine.progress import Control
    from dedup_tui.engine.store import Project

    data = jsonl_lines(0, 1200)
    whole = tmp_path / "all.jsonl"
    whole.write_bytes(data)
    # part-10 after part-9 (natural order: a name-sorted load would put it second)
    sizes = [100, 150, 50, 100, 100, 100, 100, 100, 100, 100, 200]
    names = write_shards(tmp_path / "data", data, sizes)
    load(tmp_path / "whole.db", whole)
    want = [(doc_id, text) for doc_id, text, _, _ in documents(tmp_path / "whole.db")]

    heard, counted = [], []
    control = Control(lambda stage, done, total: counted.append(done), on_shard=heard.append)
    with Project(tmp_path / "folder.db", create=True) as project:
        report = load_corpus(project, [tmp_path / "data"], control=control)
    assert report.documents == 1200
    assert counted == sorted(counted) and counted[-1] == 1200  # (the count runs on across shards)
    assert [(d[0], d[1]) for d in documents(tmp_path / "folder.db")] == want
    assert [(s.number, s.total, Path(s.path).name, s.documents) for s in heard] == [
        (n, len(names), name, size) for n, (name, size) in enumerate(zip(names, sizes), start=1)
    ]
    assert heard[-1].describe() == f"shard 11/11 {tmp_path / 'data' / 'part-10.jsonl'}: 200 documents"

    load(tmp_path / "glob.db", str(tmp_path / "data" / "part-*.jsonl*"))
    assert [(d[0], d[1]) for d in documents(tmp_path / "glob.db")] == want
    # `scan` loads its corpus first, the same way
    result = cli("scan", tmp_path / "scanned.db", tmp_path / "data")
    assert result.exit_code == 0, result.output
    assert [(d[0], d[1]) for d in documents(tmp_path / "scanned.db")] == want


def test_shards_without_ids_get_their_shard_and_line_and_errors_name_the_shard(tmp_path):
    data = jsonl_lines(0, 30, with_ids=False)
    write_shards(tmp_path / "data" / "a", data, [10, 20])
    write_shards(tmp_path / "data" / "b", data, [30])  # b/part-0.jsonl: a name a/ has too
    load(tmp_path / "p.db", tmp_path / "data")
    ids = [d[0] for d in documents(tmp_path / "p.db")]
    # each shard's path in the folder, whatever the folder's own path
    want = [f"a/part-0.jsonl:{i}" for i in range(1, 11)] + [f"a/part-1.jsonl.zst:{i}" for i in range(1, 21)]
    assert ids == want + [f"b/part-0.jsonl:{i}" for i in range(1, 31)]
    load(tmp_path / "glob.db", str(tmp_path / "data" / "*" / "part-*"))  # (a pattern: from its first glob)
    assert [d[0] for d in documents(tmp_path / "glob.db")] == ids
    load(tmp_path / "a.db", tmp_path / "data" / "a")  # (one folder of shards: its ids still name them)
    assert [d[0] for d in documents(tmp_path / "a.db")] == [i.removeprefix("a/") for i in want]
    again = tmp_path / "data" / "a" / "part-0.jsonl"  # (its documents would load twice)
    message = error_line(cli("load", tmp_path / "twice.db", tmp_path / "data", again))
    assert message == f"error: {again}: given twice (itself, or in a folder or pattern also given)"

    bad = tmp_path / "bad"
    write_shards(bad, data, [10, 20])
    lines = data.splitlines(keepends=True)[10:]
    lines[4] = b'{"text": "cut\n'
    (bad / "part-1.jsonl.zst").write_bytes(compressed(b"".join(lines)))
    message = error_line(cli("load", tmp_path / "bad.db", bad))
    assert message.startswith(f"error: {bad / 'part-1.jsonl.zst'}:5: malformed JSON"), message
    assert not (tmp_path / "bad.db").exists()


def test_a_folder_of_text_documents_still_loads_and_one_with_shards_beside_is_refused(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("first note", encoding="utf-8")
    (notes / "b.md").write_text("second note", encoding="utf-8")
    load(tmp_path / "notes.db", notes)
    assert [(d[0], d[1]) for d in documents(tmp_path / "notes.db")] == [
        ("a.txt", "first note"),
        ("b.md", "second note"),
    ]

    (notes / "more.jsonl.zst").write_bytes(compressed(jsonl_lines(0, 3)))
    message = error_line(cli("load", tmp_path / "both.db", notes))
    assert message.startswith(f"error: {notes}: holds both 1 data shard(s) (.jsonl.zst) and 2 text document(s)")
    assert f"'{notes}/**/*.jsonl*'" in message
    message = error_line(cli("load", tmp_path / "none.db", str(tmp_path / "nothing-*.jsonl")))
    assert message == f"error: {tmp_path / 'nothing-*.jsonl'}: no file matches this pattern"


def test_the_terminal_shows_a_line_per_shard_and_nothing_when_not_a_terminal(tmp_path, capsys):
    from dedup_tui.cli import _TerminalProgress
    from dedup_tui.engine.progress import ShardLoaded

    shown = _TerminalProgress()
    shown.enabled = True  # (as on a terminal)
    shown.shard(ShardLoaded(3, 120, "data/part-0003.jsonl.zst", 41233))
    shown.shard(ShardLoaded(4, 120, "evals.jsonl", 7, reference=True))
    quiet = _TerminalProgress()
    quiet.enabled = False
    quiet.shard(ShardLoaded(5, 120, "data/part-0005.jsonl.zst", 1))
    assert capsys.readouterr().err.splitlines() == [
        "shard 3/120 data/part-0003.jsonl.zst: 41,233 documents",
        "shard 4/120 evals.jsonl (reference): 7 documents",
    ]


def test_cluster_scan_expands_a_folder_and_names_its_shards_ids_as_load_does(tmp_path):
    """The cluster commands' inputs (ray/pieces.py, no Ray needed to expand them): the same files
    in the same order, and the same generated ids, as `load` of the folder."""
    from dedup_tui.engine.ray.pieces import id_prefixes, labelled_inputs

    data = jsonl_lines(0, 30, with_ids=False)
    write_shards(tmp_path / "data" / "a", data, [10, 5, 5, 5, 5])  # part-0 ... part-4, 1 and 3 .zst
    write_shards(tmp_path / "data" / "b", data, [30])
    (tmp_path / "data" / "a" / "part-10.jsonl").write_bytes(jsonl_lines(0, 2, with_ids=False))
    load(tmp_path / "p.db", tmp_path / "data")
    with sqlite3.connect(tmp_path / "p.db") as conn:
        loaded = conn.execute("SELECT s.path, d.doc_id, d.line FROM documents d JOIN sources s ON s.id = d.source_id")
        want = {(path, doc_id) for path, doc_id, _ in loaded}
    files, labels, sharded = labelled_inputs([tmp_path / "data"])
    assert [f.relative_to(tmp_path / "data").as_posix() for f in files] == [
        "a/part-0.jsonl",
        "a/part-1.jsonl.zst",
        "a/part-2.jsonl",
        "a/part-3.jsonl.zst",
        "a/part-4.jsonl",
        "a/part-10.jsonl",
        "b/part-0.jsonl",
    ]
    prefixes = id_prefixes(files, labels, sharded)
    lines = [10, 5, 5, 5, 5, 2, 30]
    made = {
        (str(f.resolve()), f"{prefix}{n}")
        for f, prefix, count in zip(files, prefixes, lines)
        for n in range(1, count + 1)
    }
    assert made == want
