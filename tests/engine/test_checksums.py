"""Every stored document carries a checksum of what was loaded (id, source, line, text,
record), written by load and import; an export checks each document it writes against it, so a
flipped bit in the project file (which PRAGMA integrity_check does not see) is a one-line error
naming the document and the project, and nothing is written."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from dedup_tui.cli import main
from dedup_tui.engine.store import Project, document_checksum
from dedup_tui.engine.store.checksums import document_checksums
from dedup_tui.engine.store.records import unpack_record

from ..conftest import NEAR_CORPUS, write_jsonl


def run(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result


def stored_checksums_match(db: Path) -> int:
    """How many documents the project holds; asserts every one's checksum is its fields'."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT ord, doc_id, source_id, line, text, record, checksum FROM documents").fetchall()
    assert rows and all(r[6] == document_checksum(*r[:5], unpack_record(r[4], r[5], r[1])) for r in rows)
    return len(rows)


@pytest.fixture
def loaded(tmp_path):
    corpus = write_jsonl(tmp_path / "c.jsonl", NEAR_CORPUS)
    db = tmp_path / "p.db"
    assert run("load", corpus, "--db", db).exit_code == 0 and run("scan", "--db", db).exit_code == 0
    return tmp_path, corpus, db


def export_fails_naming(tmp_path: Path, db: Path, doc_id: str, fmt: str = "jsonl") -> None:
    out = tmp_path / f"out.{fmt}"
    r = run(
        "export",
        "--db",
        db,
        "--threshold",
        "0.9",
        "--format",
        fmt,
        "--out",
        out,
        "--removed",
        tmp_path / "removed.jsonl",
    )
    assert r.exit_code == 1, r.output
    assert r.output.count("\n") == 1 and r.output.startswith("error: ")
    assert (
        f"the stored record of document '{doc_id}' does not match its checksum: the project file is damaged" in r.output
    )
    assert str(db) in r.output
    assert not out.exists() and not (tmp_path / "removed.jsonl").exists()
    assert not list(tmp_path.glob(".out.*")) and not list(tmp_path.glob(".removed.*"))


def test_load_writes_a_checksum_per_document_and_exports_pass(loaded):
    tmp_path, corpus, db = loaded
    assert stored_checksums_match(db) == len(NEAR_CORPUS)
    for fmt in ("jsonl", "csv", "parquet"):
        r = run("export", "--db", db, "--threshold", "0.9", "--format", fmt, "--out", tmp_path / f"o.{fmt}")
        assert r.exit_code == 0, r.output
    assert (tmp_path / "o.jsonl").read_bytes() == corpus.read_bytes()


def _flip_byte(value: bytes, at: int) -> bytes:
    return value[:at] + bytes([value[at] ^ 0x01]) + value[at + 1 :]


# Each change is what one flipped bit does to one column of doc_C's row.
CHANGES = {
    "record": (  # (a record of just its id and text is stored as one byte: store/records.py)
        "UPDATE documents SET record = ? WHERE doc_id = 'doc_C'",
        lambda row: (_flip_byte(row["record"], min(20, len(row["record"]) - 1)),),
    ),
    "text": (
        "UPDATE documents SET text = ? WHERE doc_id = 'doc_C'",
        lambda row: (row["text"].replace("Machine", "Machind", 1),),
    ),
    "line": ("UPDATE documents SET line = ? WHERE doc_id = 'doc_C'", lambda row: (row["line"] ^ 4,)),
    "source": ("UPDATE documents SET source_id = ? WHERE doc_id = 'doc_C'", lambda row: (row["source_id"] ^ 2,)),
    "record type": ("UPDATE documents SET record = CAST(record AS TEXT) WHERE doc_id = 'doc_C'", lambda row: ()),
    "checksum": (
        "UPDATE documents SET checksum = ? WHERE doc_id = 'doc_C'",
        lambda row: (row["checksum"][:-1] + ("0" if row["checksum"][-1] != "0" else "1"),),
    ),
}


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
@pytest.mark.parametrize("column", list(CHANGES))
def test_a_changed_column_fails_the_export_and_writes_nothing(loaded, column, fmt):
    tmp_path, _corpus, db = loaded
    sql, params = CHANGES[column]
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        row = conn.execute("SELECT * FROM documents WHERE doc_id = 'doc_C'").fetchone()
        conn.execute(sql, params(row))
        assert tuple(conn.execute("PRAGMA integrity_check").fetchone()) == ("ok",)
    export_fails_naming(tmp_path, db, "doc_C", fmt)


def test_a_changed_id_is_named_as_stored(loaded):
    tmp_path, _corpus, db = loaded
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE documents SET doc_id = 'doc_G' WHERE doc_id = 'doc_C'")
    export_fails_naming(tmp_path, db, "doc_G")


def test_a_text_that_is_no_longer_utf8_is_named(loaded):
    """A flipped high bit makes a stored text invalid UTF-8, which SQLite reads back as an error."""
    tmp_path, _corpus, db = loaded
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE documents SET text = CAST(X'4dE16368696e65' AS TEXT) WHERE doc_id = 'doc_D'")
    export_fails_naming(tmp_path, db, "doc_D")


def test_a_bit_flipped_in_the_file_is_found(loaded):
    """The attack: one bit of the project file flipped inside a stored record. SQLite's own
    integrity check passes; the export refuses."""
    tmp_path, _corpus, db = loaded
    Project(db).close()  # the last connection closed: every page is in the main file
    data = bytearray(db.read_bytes())
    # (the record, just its id and text, is stored as one byte (store/records.py): the bit is
    # flipped in the text, which the record holds and the checksum covers)
    text = b"Machine learning requires large amounts of labeled data"
    at = data.find(text)
    assert at > 0 and data.find(text, at + 1) < 0
    data[at + 3] ^= 0x04
    db.write_bytes(bytes(data))
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    export_fails_naming(tmp_path, db, "doc_D")


def test_a_text_folder_changed_text_fails(tmp_path):
    """A folder of .txt files has no record: the export writes the stored id and text, which
    the checksum covers."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for doc_id, text in NEAR_CORPUS:
        (folder / f"{doc_id}.txt").write_text(text)
    db = tmp_path / "t.db"
    assert run("load", folder, "--db", db).exit_code == 0 and run("scan", "--db", db).exit_code == 0
    assert stored_checksums_match(db) == len(NEAR_CORPUS)
    assert run("export", "--db", db, "--threshold", "0.9", "--out", tmp_path / "ok.jsonl").exit_code == 0
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE documents SET text = 'the quick brown fox' WHERE doc_id = 'doc_A.txt'")
    export_fails_naming(tmp_path, db, "doc_A.txt")


def test_parquet_and_csv_corpora_get_checksums(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids, texts = zip(*NEAR_CORPUS)
    pq.write_table(pa.table({"id": list(ids), "text": list(texts), "n": list(range(len(ids)))}), tmp_path / "c.parquet")
    (tmp_path / "c.csv").write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in NEAR_CORPUS))
    for corpus in ("c.parquet", "c.csv"):
        db = tmp_path / f"{corpus}.db"
        assert run("load", tmp_path / corpus, "--db", db).exit_code == 0 and run("scan", "--db", db).exit_code == 0
        assert stored_checksums_match(db) == len(NEAR_CORPUS)
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE documents SET line = 1 WHERE doc_id = 'doc_E'")  # the row of another document
        export_fails_naming(tmp_path, db, "doc_E", "parquet" if corpus == "c.parquet" else "csv")


def test_an_imported_cluster_scan_gets_checksums(tmp_path):
    """import (of a cluster-scan folder, built here by hand) writes the same checksums as load."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dedup_tui.engine.ray.scandir import SCAN_FORMAT, SCAN_VERSION, import_scan
    from dedup_tui.engine.text.exact import exact_keys

    scan = tmp_path / "scan"
    (scan / "documents").mkdir(parents=True)
    docs = [(0, "doc_A", NEAR_CORPUS[0][1]), (1, "doc_B", NEAR_CORPUS[1][1]), (4, "doc_E", NEAR_CORPUS[0][1])]
    records = [json.dumps({"id": i, "text": t}).encode() for _o, i, t in docs]
    pq.write_table(
        pa.table(
            {
                "ord": pa.array([d[0] for d in docs], pa.int64()),
                "source": pa.array([0, 0, 0], pa.int64()),
                "doc_id": [d[1] for d in docs],
                "int_id": [False] * 3,
                "line": pa.array([d[0] + 1 for d in docs], pa.int64()),
                "length": pa.array([len(d[2]) for d in docs], pa.int64()),
                "exact_hash": exact_keys([d[2] for d in docs]),
                "text": pa.array([d[2] for d in docs], pa.large_string()),
                "record": pa.array(records, pa.large_binary()),
            }
        ),
        scan / "documents" / "part-00000.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "a_ord": pa.array([0], pa.int64()),
                "b_ord": pa.array([1], pa.int64()),
                "jaccard": pa.array([0.6], pa.float64()),
            }
        ),
        scan / "pairs.parquet",
    )
    pq.write_table(
        pa.table({"ord": pa.array([4], pa.int64()), "first_ord": pa.array([0], pa.int64())}),
        scan / "exact_groups.parquet",
    )
    (scan / "manifest.json").write_text(
        json.dumps(
            {
                "format": SCAN_FORMAT,
                "version": SCAN_VERSION,
                "created_at": "2026-01-01T00:00:00+0000",
                "inputs": [
                    {
                        "path": str(tmp_path / "c.jsonl"),
                        "format": "jsonl",
                        "sha256": "0" * 64,
                        "size_bytes": 1,
                        "documents": 5,
                        "skipped_lines": [],
                    }
                ],
                "params": {"k": 5, "floor": 0.5, "id_field": "id", "text_field": "text"},
            }
        )
    )
    import_scan(scan, tmp_path / "review.db").close()
    assert stored_checksums_match(tmp_path / "review.db") == 3
    with sqlite3.connect(tmp_path / "review.db") as conn:
        assert conn.execute("SELECT checksum FROM documents WHERE doc_id = 'doc_B'").fetchone()[0] == document_checksum(
            1, "doc_B", 1, 2, NEAR_CORPUS[1][1], records[1]
        )


def test_the_checksum_covers_every_field_and_its_type():
    """One value per document: the fast path (what load stores) and the general one agree, and
    a change of any field, or of a field's type (TEXT read back as a BLOB), changes it."""
    base = (3, "doc_1", 1, 7, "some text é", b'{"id": "doc_1", "text": "some text \\u00e9"}')
    value = document_checksum(*base)
    assert len(value) == 32 and int(value, 16) >= 0
    assert document_checksum(*base[:5], bytearray(base[5])) == value  # the general path
    long = (4, "doc_2", 1, 8, "long text é " * 400, b'{"id": "doc_2", "text": "' + b"long text \\u00e9 " * 400 + b'"}')
    rows = list(zip(base, long))
    assert document_checksums(*rows) == [value, document_checksum(*long)]  # (a load's batch: joined, and in parts)
    changes = {
        0: [4, None, "3"],
        1: ["doc_2", b"doc_1"],
        2: [2],
        3: [8, None, 7.0],
        4: ["some text e"],
        5: [base[5][:-1] + b"!", base[5].decode(), None],
    }
    changed = [base[:i] + (v,) + base[i + 1 :] for i, values in changes.items() for v in values]
    changed.append((3, "doc_", 1, 7, "1some text é", base[5]))  # the same bytes, split elsewhere
    values = {document_checksum(*c) for c in changed}
    assert len(values) == len(changed) and value not in values
    assert document_checksum(0, "a", 1, 2**70, "t", None) != document_checksum(0, "a", 1, 2**70 + 1, "t", None)


def test_a_changed_position_or_a_row_the_table_no_longer_finds_fails(loaded):
    """A flipped bit in a row id (ord) moves the row: checked by its checksum where it lands; and
    a kept document that SQLite no longer finds (a damaged table) fails the export, never left out."""
    tmp_path, _corpus, db = loaded
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE documents SET ord = 1000 WHERE doc_id = 'doc_E'")
    export_fails_naming(tmp_path, db, "doc_E")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE documents SET ord = 4 WHERE doc_id = 'doc_E'")
        conn.execute("DELETE FROM documents WHERE doc_id = 'doc_C'")  # what a search past a damaged row id sees
    r = run("export", "--db", db, "--threshold", "0.9", "--out", tmp_path / "out.jsonl")
    assert r.exit_code == 1 and r.output.count("\n") == 1
    assert (
        "the documents table gives 4 of the 5 kept documents between positions 0 and 4: the project file is damaged"
        in r.output
    )
    assert not (tmp_path / "out.jsonl").exists()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE documents SET ord = 2 WHERE doc_id = 'doc_E'")  # in doc_C's place
    export_fails_naming(tmp_path, db, "doc_E")


def test_a_checksum_that_is_no_longer_utf8_is_named(loaded):
    tmp_path, _corpus, db = loaded
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE documents SET checksum = CAST(X'61e162' AS TEXT) WHERE doc_id = 'doc_B'")
    export_fails_naming(tmp_path, db, "doc_B")
