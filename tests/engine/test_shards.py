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
