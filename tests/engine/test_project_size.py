"""The project file's size: a lean scan keeps no band keys (the next scan after a load is a full
one, with the same pairs); the packed pairs are stored narrow and read back exactly."""

from __future__ import annotations

import numpy as np

from dedup_tui.engine.scanning import local
from dedup_tui.engine.scanning.incremental import LEAN_NOTE
from dedup_tui.engine.store import Project
from dedup_tui.engine.store.scans import stored_scan_key_bytes

from ..conftest import ok, write_jsonl
from .test_incremental import LSH, assert_same, families, full_rescan_of, load, stored


def test_a_lean_scan_keeps_no_band_keys_and_the_next_scan_is_full(tmp_path):
    docs = families(20, (2, 5), 30, seed=12)
    with Project(tmp_path / "p.db", create=True) as project:
        load(project, tmp_path, "first", docs[:60])
        local.scan(project, LSH)
        assert stored_scan_key_bytes(project) > 0  # (a normal scan keeps them: the lean one drops them)
        load(project, tmp_path, "second", docs[60:80])
        r = local.scan(project, LSH, lean=True)
        assert not r.incremental
        assert stored_scan_key_bytes(project) == 0
        assert project.conn.execute("SELECT count(*) FROM scan_band_keys").fetchone()[0] == 0
        load(project, tmp_path, "third", docs[80:])
        r = local.scan(project, LSH)
        assert not r.incremental and r.full_reason == LEAN_NOTE
        assert_same(stored(project), full_rescan_of(tmp_path, project))
        assert stored_scan_key_bytes(project) > 0  # a normal scan keeps them again


def test_cli_scan_lean_says_the_next_scan_is_full(tmp_path):
    docs = families(20, (2, 5), 30, seed=13)
    db = tmp_path / "p.db"
    out = ok("scan", db, write_jsonl(tmp_path / "a.jsonl", docs[:70]), "--method", "lsh", "--lean").output
    assert "lean: no band keys kept; the next scan after a load compares every document again" in out
    ok("load", db, write_jsonl(tmp_path / "b.jsonl", docs[70:]))
    out = ok("scan", db, "--method", "lsh").output
    assert f"full scan: {LEAN_NOTE}" in out and "incremental scan:" not in out
    assert "--lean" in ok("scan", "--help").output


def test_packed_pairs_round_trip_exactly(tmp_path):
    """Narrow packed pairs (32-bit ords, similarities as codes into their distinct values) read
    back bit for bit, also past 65,536 distinct similarities (stored as they are then): far past
    it, where a hash of their bits decides at once, and just past it, where the hashes collide
    too often to decide (derived._surely_more_distinct_than)."""
    from dedup_tui.engine.store.derived import _surely_more_distinct_than, write_pair_arrays
    from dedup_tui.engine.store.scans import read_pair_arrays

    rng = np.random.default_rng(3)
    with Project(tmp_path / "p.db", create=True) as project:
        for distinct in (40, 90_000, 66_000):
            n = 90_000
            a = np.sort(rng.integers(0, 50_000, n))
            b = a + 1 + rng.integers(0, 10_000, n)
            pool = rng.random(distinct)
            j = rng.permutation(np.r_[pool, rng.choice(pool, n - distinct)])
            assert len(np.unique(j)) == distinct
            assert _surely_more_distinct_than(j, 2**16) == (distinct == 90_000)
            write_pair_arrays(project.conn, a, b, j, np.arange(10))
            got = read_pair_arrays(project)
            assert got is not None
            assert np.array_equal(got[0], a) and np.array_equal(got[1], b)
            assert got[2].tobytes() == j.astype("<f8").tobytes()


def test_records_are_stored_without_their_text_and_export_whole(tmp_path):
    """A JSONL line of just an id and a text as json.dumps writes them is stored as one byte; one
    holding its text that way is stored without it (NUL, offset, the rest); and the export writes
    every line back byte for byte, also where the text is escaped otherwise, short, or appears
    twice in its line."""
    lines = [
        '{"id": "a", "text": "a text long enough to be left out of its record", "n": 1}',
        '{"id": "b", "text": "caf\\u00e9 escaped otherwise than json.dumps writes it"}',
        '{"id": "c", "text": "short"}',
        '{"text": "the same words twice over", "id": "d", "copy": "the same words twice over"}',
        '{"id": "e", "text": "quotes \\" and a tab \\t and \\\\ in a text that is long", "z": null}',
        '{"id": "f", "text": "caf\\u00E9"}',
        '{"id": "g", "text": "brief", "n": 2}',
    ]
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(("\n".join(lines) + "\n").encode())
    db = tmp_path / "p.db"
    ok("scan", db, corpus)
    with Project(db) as project:
        stored = dict(project.conn.execute("SELECT doc_id, record FROM documents"))
        assert stored["a"][:1] == b"\x00" and len(stored["a"]) < len(lines[0]) - 40
        assert stored["b"] == b"\x02" and stored["c"] == b"\x01"  # just an id and a text: a byte
        assert stored["f"] == lines[5].encode() and stored["g"] == lines[6].encode()  # stored whole
        assert stored["d"][:1] == b"\x00" and stored["e"][:1] == b"\x00"
        assert [r[4] for r in project.records()] == [line.encode() for line in lines]
    ok("export", db, "--threshold", "0.99", "--out", tmp_path / "out.jsonl")
    assert (tmp_path / "out.jsonl").read_bytes() == corpus.read_bytes()


def test_a_texts_json_string_is_what_json_dumps_writes():
    """records._token makes a text's JSON string from its UTF-8 bytes (given, or encoded there):
    the bytes in quotes when nothing needs escaping, the five escapes json.dumps writes as
    \\\\, \\", \\n, \\r, \\t by byte replacements, and any other control character by json's
    own encoder; short texts and long ones alike."""
    import json
    import random

    from dedup_tui.engine.store.records import _token

    rng = random.Random(5)
    plain = [chr(c) for c in range(0x20, 0x30)] + ["\t", "\n", "\r", "é", "\u2028", "\ud800", "\U0001f600", "\x7f", "a"]
    for length in (0, 1, 40, 3000):
        for other in ["", "a", *map(chr, range(0x20))]:  # (one control character of any kind, or none)
            chars = rng.choices(plain if length % 2 == 0 else ["a", "é", " "], k=length)
            chars.insert(rng.randrange(len(chars) + 1), other)
            text = "".join(chars)
            expected = json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")
            assert _token(text) == expected
            assert _token(text, text.encode("utf-8", "surrogatepass")) == expected
