"""The line ends an export keeps: each JSONL record's own (CRLF, or LF for a last line without
one), a BOM dropped as the file's encoding mark, and CSV written as RFC 4180 whatever the input's
line ends; and CRLF with blank CRLF lines loads the same documents as LF. (From
tests/engine/test_input_edges.py and test_ingest.py.)"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from dedup_tui.engine.store.records import unpack_record

from ..conftest import cli, ok

BAD = Path(__file__).parents[1] / "fixtures" / "bad"


def _documents(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT doc_id, text, record FROM documents ORDER BY ord").fetchall()
    return [(d, t, unpack_record(t, r, d)) for d, t, r in rows]  # (stored without its text: records.py)


def _export_jsonl(tmp_path: Path, corpus: Path, *extra) -> bytes:
    db, out = tmp_path / "p.db", tmp_path / "kept.jsonl"
    ok("load", corpus, "--db", db)
    ok("scan", db)
    ok("export", db, "--threshold", "0.9", "--out", out, *extra)
    return out.read_bytes()


def _lines(records: list[dict], ends: list[bytes]) -> list[bytes]:
    return [json.dumps(r).encode() + end for r, end in zip(records, ends)]


WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november".split()
RECORDS = [{"id": f"r{i}", "text": " ".join(WORDS[i:] + WORDS[:i][::-1])} for i in range(6)]


def test_crlf_jsonl_is_exported_with_crlf(tmp_path):
    lines = _lines(RECORDS, [b"\r\n"] * 6)
    corpus = tmp_path / "crlf.jsonl"
    corpus.write_bytes(b"".join(lines))
    assert _export_jsonl(tmp_path, corpus) == b"".join(lines)


def test_mixed_line_ends_are_kept_line_by_line(tmp_path):
    records = RECORDS + [{"id": "dup", "text": RECORDS[2]["text"]}]  # removed: an exact duplicate of r2
    ends = [b"\r\n", b"\n", b"\r\n", b"\r\n", b"\n", b"\n", b"\r\n"]
    lines = _lines(records, ends)
    corpus = tmp_path / "mixed.jsonl"
    corpus.write_bytes(b"".join(lines))
    assert _export_jsonl(tmp_path, corpus) == b"".join(lines[:6])


def test_line_by_line_reading_keeps_line_ends_too(tmp_path, monkeypatch):
    from dedup_tui.engine.readers import jsonl

    monkeypatch.setattr(jsonl, "CHUNKED", False)
    lines = _lines(RECORDS, [b"\r\n", b"\n"] * 3)
    corpus = tmp_path / "mixed.jsonl"
    corpus.write_bytes(b"".join(lines))
    assert _export_jsonl(tmp_path, corpus) == b"".join(lines)


def test_a_last_line_without_a_line_end_is_exported_with_lf(tmp_path):
    """Each exported record ends its line, so the records of a file loaded after it (or a line
    appended later) never run into it."""
    lines = _lines(RECORDS, [b"\r\n"] * 5 + [b""])
    corpus = tmp_path / "unterminated.jsonl"
    corpus.write_bytes(b"".join(lines))
    assert _export_jsonl(tmp_path, corpus) == b"".join(lines) + b"\n"


def test_crlf_and_blank_crlf_lines_load_the_same_documents_as_lf(tmp_path):
    lf, crlf = tmp_path / "lf.jsonl", tmp_path / "crlf.jsonl"
    lf.write_bytes(b"".join(_lines(RECORDS, [b"\n"] * 6)))
    crlf.write_bytes(b"\r\n".join(_lines(RECORDS, [b"\r\n"] * 6)))  # a blank CRLF line between records
    ok("load", lf, "--db", tmp_path / "lf.db")
    ok("load", crlf, "--db", tmp_path / "crlf.db")
    want = [(d[0], d[1]) for d in _documents(tmp_path / "lf.db")]
    got = _documents(tmp_path / "crlf.db")
    assert [(d[0], d[1]) for d in got] == want
    assert [d[2] for d in got] == [line[:-1] for line in _lines(RECORDS, [b"\r\n"] * 6)]


def test_csv_export_is_rfc4180_whatever_the_input_line_ends(tmp_path):
    corpus = tmp_path / "lf.csv"
    corpus.write_bytes(b'id,text\na,"alpha bravo charlie\nover two lines"\nb,delta echo foxtrot golf\n')
    db, out = tmp_path / "p.db", tmp_path / "kept.csv"
    ok("load", corpus, "--db", db)
    ok("scan", db)
    ok("export", db, "--threshold", "0.9", "--format", "csv", "--out", out)
    assert out.read_bytes() == (b'id,text\r\na,"alpha bravo charlie\nover two lines"\r\nb,delta echo foxtrot golf\r\n')


def test_jsonl_with_bom_and_crlf_exports_its_lines_with_crlf_and_no_bom(tmp_path):
    db = tmp_path / "p.db"
    ok("load", BAD / "bom_crlf.jsonl", "--db", db)
    assert cli("scan", "--db", db).exit_code == 0
    out = tmp_path / "kept.jsonl"
    assert cli("export", "--db", db, "--threshold", "1.0", "--out", out).exit_code == 0
    source = (BAD / "bom_crlf.jsonl").read_bytes()
    assert source.startswith(b"\xef\xbb\xbf") and source.count(b"\r\n") == 3
    assert out.read_bytes() == source[3:]  # the BOM is the file's encoding mark; each line end as it was
