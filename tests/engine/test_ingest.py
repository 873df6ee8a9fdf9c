"""Bad input and odd-but-valid input: one-line errors naming file and line, atomic loads,
--skip-bad, and corpora that must load unchanged (BOM, CRLF, quoted newlines, empty texts,
hostile ids and field names, a 10 MB document)."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import string
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from dedup_tui.cli import main
from dedup_tui.engine.errors import CorpusError
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.store import Project
from dedup_tui.engine.store.records import unpack_record

from ..conftest import cli, write_jsonl

BAD = Path(__file__).parents[1] / "fixtures" / "bad"


def documents(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT ord, doc_id, text, source_id, line, record FROM documents ORDER BY ord").fetchall()
    return [(*r[:5], unpack_record(r[2], r[5], r[1])) for r in rows]  # (stored without its text: records.py)


def sources(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT * FROM sources ORDER BY id").fetchall()


def assert_one_error_line(result, path: Path | str, line: int | None) -> str:
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert len(lines) == 1, result.output
    (message,) = lines
    assert message.startswith("error: ")
    where = f"{path}:{line}:" if line is not None else f"{path}:"
    assert where in message, message
    assert "\x1b" not in message
    return message


# fixture, line of the first bad record, what the message says, ids loaded with --skip-bad, skipped lines
RECORD_ERRORS = [
    ("malformed.jsonl", 3, "malformed JSON", ["m1", "m2", "m4"], [3]),
    ("truncated.jsonl", 3, "malformed JSON", ["t1", "t2"], [3]),
    ("invalid_utf8.jsonl", 2, "invalid UTF-8", ["u1", "u3"], [2]),
    ("missing_text.jsonl", 2, 'text field "text" is missing', ["x1", "x3"], [2]),
    ("nonstring_text.jsonl", 2, 'text field "text" is a number, not a string', ["n1", "n5"], [2, 3, 4]),
    ("null_id.jsonl", 2, 'id field "id" is null', ["i1", "i3"], [2]),
    ("duplicate_ids.jsonl", 3, 'duplicate id "d1"', ["d1", "d2", "d4"], [3]),
    ("not_an_object.jsonl", 2, "expected a JSON object", ["o1", "o3"], [2]),
    ("missing_column.csv", 3, "expected 3 columns, found 2", ["c1", "c3"], [3]),
    ("malformed.csv", 3, "malformed CSV", ["c1", "c3"], [3]),
    ("invalid_utf8.csv", 3, "invalid UTF-8", ["c1", "c3"], [3]),
    ("missing_column.tsv", 3, "expected 3 columns, found 4", ["t1", "t3"], [3]),
    ("empty_id.csv", 3, 'id field "id" is empty', ["c1", "c3"], [3]),
    ("empty_id.jsonl", 2, 'id field "id" is empty', ["j1", "j3"], [2]),
]

# files that cannot give a single document: an error even with --skip-bad
FILE_ERRORS = [
    ("empty.jsonl", 1, "empty file"),
    ("empty.csv", 1, "empty file"),
    ("blank_lines_only.jsonl", 1, "empty file"),
    ("binary.jsonl", 1, "invalid UTF-8"),
]


@pytest.mark.parametrize("name,line,says,_ids,_skipped", RECORD_ERRORS)
def test_bad_record_is_one_line_error_and_no_project_is_left(tmp_path, name, line, says, _ids, _skipped):
    db = tmp_path / "p.db"
    path = BAD / name
    message = assert_one_error_line(cli("load", path, "--db", db), path, line)
    assert says in message
    assert not db.exists(), "a failed load into a new project must not leave a project file behind"


@pytest.mark.parametrize("name,line,says", FILE_ERRORS)
@pytest.mark.parametrize("skip_bad", [False, True])
def test_file_without_documents_is_an_error(tmp_path, name, line, says, skip_bad):
    db = tmp_path / "p.db"
    path = BAD / name
    args = ["load", path, "--db", db] + (["--skip-bad"] if skip_bad else [])
    message = assert_one_error_line(cli(*args), path, line)
    if not skip_bad or name != "binary.jsonl":
        assert says in message
    else:
        assert "no good documents" in message
    assert not db.exists()


@pytest.mark.parametrize(
    "name,line,says,_ids,_skipped", RECORD_ERRORS + [(n, line, s, None, None) for n, line, s in FILE_ERRORS]
)
def test_failed_load_leaves_existing_project_untouched(tmp_path, name, line, says, _ids, _skipped):
    db = tmp_path / "p.db"
    first = write_jsonl(tmp_path / "first.jsonl", [("p1", "already here"), ("p2", "and this")])
    assert cli("load", first, "--db", db).exit_code == 0
    before_docs, before_sources = documents(db), sources(db)
    assert len(before_docs) == 2
    path = BAD / name
    message = assert_one_error_line(cli("load", path, "--db", db), path, line)
    assert says in message
    assert documents(db) == before_docs
    assert sources(db) == before_sources


@pytest.mark.parametrize("name,line,says,ids,skipped", RECORD_ERRORS)
def test_skip_bad_loads_the_good_records_and_reports_the_bad_lines(tmp_path, name, line, says, ids, skipped):
    db = tmp_path / "p.db"
    path = BAD / name
    result = cli("load", path, "--db", db, "--skip-bad")
    assert result.exit_code == 0, result.output
    assert [d[1] for d in documents(db)] == ids
    assert f"loaded {len(ids)} documents" in result.output
    shown = ", ".join(map(str, skipped))
    report = [line for line in result.output.splitlines() if line.startswith("skipped")]
    assert report == [
        f"skipped {len(skipped)} bad record(s) in {path}: lines {shown} (first: line {line}: {says}"
        + report[0].split(says, 1)[-1]
    ]
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT documents, skipped_lines FROM sources").fetchall()
    assert stored == [(len(ids), json.dumps(skipped))]


def test_many_skipped_lines_are_summarised_and_all_stored(tmp_path):
    path = tmp_path / "many_bad.jsonl"
    lines = [json.dumps({"id": f"g{i}", "text": f"t{i}"}) if i % 2 else "{broken" for i in range(60)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    db = tmp_path / "p.db"
    result = cli("load", path, "--db", db, "--skip-bad")
    assert result.exit_code == 0
    bad = list(range(1, 61, 2))
    assert (
        f"skipped 30 bad record(s) in {path}: lines {', '.join(map(str, bad[:20]))} ... (all in the sources table)"
        in result.output
    )
    with sqlite3.connect(db) as conn:
        assert json.loads(conn.execute("SELECT skipped_lines FROM sources").fetchone()[0]) == bad
    assert len(documents(db)) == 30


def test_engine_error_carries_path_and_line(tmp_path):
    with Project(tmp_path / "p.db", create=True) as project:
        with pytest.raises(CorpusError) as info:
            load_corpus(project, [BAD / "malformed.jsonl"])
        assert (info.value.path, info.value.line) == (str(BAD / "malformed.jsonl"), 3)
        assert project.document_count() == 0
        assert project.conn.execute("SELECT count(*) FROM sources").fetchone()[0] == 0
        report = load_corpus(project, [BAD / "malformed.jsonl"], skip_bad=True)
    assert report.documents == 3 and report.skipped == {str(BAD / "malformed.jsonl"): [3]}
    assert report.skipped_count == 1


def test_second_file_bad_means_nothing_from_the_first(tmp_path):
    db = tmp_path / "p.db"
    good = BAD / "clean.jsonl"
    bad = BAD / "malformed.jsonl"
    assert_one_error_line(cli("load", good, bad, "--db", db), bad, 3)
    assert not db.exists()
    with Project(tmp_path / "q.db", create=True) as project:
        with pytest.raises(CorpusError):
            load_corpus(project, [good, bad])
        assert project.document_count() == 0


def test_duplicate_id_across_loads(tmp_path):
    db = tmp_path / "p.db"
    a = write_jsonl(tmp_path / "a.jsonl", [("same", "one text"), ("other", "two text")])
    b = write_jsonl(tmp_path / "b.jsonl", [("new", "three text"), ("same", "four text")])
    assert cli("load", a, "--db", db).exit_code == 0
    before = documents(db)
    message = assert_one_error_line(cli("load", b, "--db", db), b, 2)
    assert 'duplicate id "same" (already in the project)' in message
    assert documents(db) == before
    result = cli("load", b, "--db", db, "--skip-bad")
    assert result.exit_code == 0, result.output
    assert 'lines 2 (first: line 2: duplicate id "same" (already in the project))\n' in result.output
    docs = documents(db)
    assert [d[1] for d in docs] == ["same", "other", "new"]
    assert [d[0] for d in docs] == [0, 1, 2], "corpus order stays contiguous when records are skipped"


def test_a_batch_written_while_the_next_is_read_keeps_the_first_bad_records_error(tmp_path, monkeypatch):
    """Batches are written on a thread while the next is read: a clash in the batch under way
    (line 2) is the error, not a malformed line read meanwhile (line 5); the load adds nothing."""
    from dedup_tui.engine import ingest

    monkeypatch.setattr(ingest, "BATCH", 3)
    monkeypatch.setattr(ingest, "THREADED_TEXT_CHARS", 1)
    db = tmp_path / "p.db"
    assert cli("load", write_jsonl(tmp_path / "a.jsonl", [("same", "one text")]), "--db", db).exit_code == 0
    before = documents(db)
    b = tmp_path / "b.jsonl"
    b.write_text(
        '{"id": "x", "text": "t"}\n{"id": "same", "text": "t"}\n{"id": "y", "text": "t"}\n'
        '{"id": "z", "text": "t"}\n{"id": \n'
    )
    message = assert_one_error_line(cli("load", b, "--db", db), b, 2)
    assert 'duplicate id "same" (already in the project)' in message
    assert documents(db) == before


def test_skip_bad_with_every_id_already_in_the_project_is_a_one_line_error(tmp_path):
    db = tmp_path / "p.db"
    a = write_jsonl(tmp_path / "a.jsonl", [("same", "one text"), ("other", "two text")])
    b = write_jsonl(tmp_path / "b.jsonl", [("other", "three text"), ("same", "four text")])
    assert cli("load", a, "--db", db).exit_code == 0
    before = documents(db)
    message = assert_one_error_line(cli("load", b, "--db", db, "--skip-bad"), b, 1)
    assert message.endswith(
        "no good documents in this file (2 bad record(s) skipped, at lines 1, 2); "
        'first: duplicate id "other" (already in the project)'
    )
    assert documents(db) == before


def test_hostile_id_in_an_error_is_shown_on_one_inert_line(tmp_path):
    nasty = "a\nb\x1b]52;c;aGk=\x07\x1b[31m"
    path = write_jsonl(tmp_path / "n.jsonl", [(nasty, "one"), (nasty, "two")])
    message = assert_one_error_line(cli("load", path, "--db", tmp_path / "p.db"), path, 2)
    assert "\x07" not in message and "\\u001b" in message and "\\n" in message


def test_unknown_format_missing_file_and_broken_gzip(tmp_path):
    db = tmp_path / "p.db"
    weird = tmp_path / "corpus.bin"
    weird.write_bytes(b"\x00\x01")
    message = assert_one_error_line(cli("load", weird, "--db", db), weird, None)
    assert "unknown corpus format" in message
    missing = tmp_path / "nope.jsonl"
    assert "no such file" in assert_one_error_line(cli("load", missing, "--db", db), missing, None)
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(b"this is not gzip data\n")
    assert "cannot read" in assert_one_error_line(cli("load", gz, "--db", db), gz, 1)
    assert not db.exists()


def test_unreadable_corpus_file(tmp_path, monkeypatch):
    import builtins

    from dedup_tui.engine.readers import files

    path = tmp_path / "locked.jsonl"
    write_jsonl(path, [("a", "text")])

    def denied(file, *args, **kwargs):
        if Path(file) == path:
            raise PermissionError(13, "Permission denied", str(file))
        return builtins.open(file, *args, **kwargs)

    monkeypatch.setattr(files, "open", denied, raising=False)
    message = assert_one_error_line(cli("load", path, "--db", tmp_path / "p.db"), path, None)
    assert "cannot read (Permission denied)" in message
    assert not (tmp_path / "p.db").exists()


def test_float_and_object_ids_are_rejected(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text(
        '{"id": 1, "text": "a"}\n{"id": 2.5, "text": "b"}\n{"id": {"x": 1}, "text": "c"}\n', encoding="utf-8"
    )
    message = assert_one_error_line(cli("load", path, "--db", tmp_path / "p.db"), path, 2)
    assert 'id field "id" is a floating-point number, not a string or integer' in message
    result = cli("load", path, "--db", tmp_path / "p.db", "--skip-bad")
    assert "skipped 2 bad record(s)" in result.output and "lines 2, 3 " in result.output


def test_plain_text_file_error_hints_at_folders(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("just some prose\n", encoding="utf-8")
    message = assert_one_error_line(cli("load", path, "--db", tmp_path / "p.db"), path, 1)
    assert "malformed JSON" in message and "folder of .txt files" in message


def test_not_a_project_file(tmp_path):
    db = tmp_path / "p.db"
    db.write_text("hello, I am not SQLite\n" * 100)
    result = cli("load", BAD / "clean.jsonl", "--db", db)
    assert result.exit_code == 1
    assert len(result.output.splitlines()) == 1 and "not a dedup-tui project" in result.output
    assert db.read_text() == "hello, I am not SQLite\n" * 100


def _unreadable_folder(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "texts"
    folder.mkdir()
    for name, text in (("a.txt", "first file"), ("b.txt", "second file"), ("c.txt", "third file")):
        (folder / name).write_text(text, encoding="utf-8")
    locked = folder / "b.txt"
    locked.chmod(0)
    try:
        locked.read_bytes()
    except PermissionError:
        pass
    else:  # running as root: chmod does not stop reads, so simulate the denial
        real = Path.read_bytes

        def read_bytes(self):
            if self == locked:
                raise PermissionError(13, "Permission denied", str(self))
            return real(self)

        monkeypatch.setattr(Path, "read_bytes", read_bytes)
    return folder


def test_folder_with_unreadable_file(tmp_path, monkeypatch):
    folder = _unreadable_folder(tmp_path, monkeypatch)
    db = tmp_path / "p.db"
    message = assert_one_error_line(cli("load", folder, "--db", db), folder, 2)
    assert "b.txt: cannot read (Permission denied)" in message
    assert not db.exists()
    result = cli("load", folder, "--db", db, "--skip-bad")
    assert result.exit_code == 0, result.output
    assert [d[1] for d in documents(db)] == ["a.txt", "c.txt"]
    assert f"skipped 1 bad record(s) in {folder}: lines 2 (first: line 2: b.txt: cannot read" in result.output
    (folder / "b.txt").chmod(0o644)


def test_folder_with_invalid_utf8_file(tmp_path):
    folder = tmp_path / "texts"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("fine", encoding="utf-8")
    (folder / "sub" / "z.txt").write_bytes(b"caf\xe9")
    message = assert_one_error_line(cli("load", folder, "--db", tmp_path / "p.db"), folder, 2)
    assert "sub/z.txt: invalid UTF-8" in message


# -- valid oddities ----------------------------------------------------------------------


def _load(tmp_path, *paths, name="p.db", extra=()) -> Path:
    db = tmp_path / name
    result = cli("load", *paths, "--db", db, *extra)
    assert result.exit_code == 0, result.output
    return db


@pytest.mark.parametrize("variant", ["bom.jsonl", "crlf.jsonl", "bom_crlf.jsonl", "bom.csv", "crlf.csv"])
def test_bom_and_crlf_load_like_clean_files(tmp_path, variant):
    clean = "clean.csv" if variant.endswith(".csv") else "clean.jsonl"
    want = [(d[1], d[2]) for d in documents(_load(tmp_path, BAD / clean, name="clean.db"))]
    got = [(d[1], d[2]) for d in documents(_load(tmp_path, BAD / variant))]
    assert got == want
    assert len(got) == 3 and not any("\r" in t or "\ufeff" in t or "\ufeff" in i for i, t in got)


def test_csv_quoted_newline_is_one_document(tmp_path):
    docs = documents(_load(tmp_path, BAD / "quoted_newlines.csv"))
    assert [(d[1], d[2], d[4]) for d in docs] == [("q1", "line one\nline two", 2), ("q2", "plain row", 4)]


def test_empty_and_whitespace_texts_are_documents(tmp_path):
    db = _load(tmp_path, BAD / "empty_texts.jsonl")
    assert [(d[1], d[2]) for d in documents(db)] == [
        ("e1", ""),
        ("e2", "   "),
        ("e3", "\t\n "),
        ("e4", "real words here"),
    ]
    result = cli("scan", "--db", db)
    assert result.exit_code == 0, result.output
    out = tmp_path / "kept.jsonl"
    assert cli("export", "--db", db, "--threshold", "0.9", "--out", out).exit_code == 0
    kept = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    # the three blank texts normalise to "" and are exact duplicates of the first
    assert kept == ["e1", "e4"]


def test_missing_id_field_uses_line_numbers(tmp_path):
    docs = documents(_load(tmp_path, BAD / "no_ids.jsonl"))
    assert [(d[1], d[4]) for d in docs] == [("1", 1), ("2", 2), ("4", 4)]


def test_ids_on_some_records_only_is_an_error(tmp_path):
    late = tmp_path / "late.jsonl"
    late.write_text('{"text":"one"}\n{"id":"x","text":"two"}\n', encoding="utf-8")
    message = assert_one_error_line(cli("load", late, "--db", tmp_path / "p.db"), late, 2)
    assert 'id field "id" is present, but line 1 has none' in message
    early = tmp_path / "early.jsonl"
    early.write_text('{"id":"x","text":"one"}\n{"text":"two"}\n', encoding="utf-8")
    message = assert_one_error_line(cli("load", early, "--db", tmp_path / "p.db"), early, 2)
    assert 'id field "id" is missing (line 1 has one)' in message


def test_gzipped_jsonl_and_truncated_gzip(tmp_path):
    import gzip

    data = (BAD / "clean.jsonl").read_bytes()
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(gzip.compress(data * 1))
    want = [(d[1], d[2]) for d in documents(_load(tmp_path, BAD / "clean.jsonl", name="clean.db"))]
    assert [(d[1], d[2]) for d in documents(_load(tmp_path, gz))] == want
    lines = "".join(json.dumps({"id": f"g{i}", "text": f"text {i}"}) + "\n" for i in range(2000)).encode()
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(lines)[:-200])
    message = assert_one_error_line(cli("load", cut, "--db", tmp_path / "cut.db"), cut, None)
    assert "cannot read" in message
    assert not (tmp_path / "cut.db").exists()


def test_csv_with_a_column_name_used_twice(tmp_path):
    path = tmp_path / "twice.csv"
    path.write_text("id,text,text\na,b,c\n", encoding="utf-8")
    message = assert_one_error_line(cli("load", path, "--db", tmp_path / "p.db"), path, 1)
    assert 'column names used twice: "text"' in message


def test_parquet_without_pyarrow_or_not_parquet(tmp_path):
    junk = tmp_path / "c.parquet"
    junk.write_bytes(b"PAR1 but not really")
    message = assert_one_error_line(cli("load", junk, "--db", tmp_path / "p.db"), junk, None)
    assert "pyarrow" in message or "not a readable Parquet file" in message
    assert not (tmp_path / "p.db").exists()


def test_hostile_ids_and_field_names_round_trip(tmp_path):
    src = BAD / "hostile.jsonl"
    db = _load(tmp_path, src)
    ids = [d[1] for d in documents(db)]
    assert ids == ["x'); DROP TABLE documents; --", '"quoted" id']
    assert cli("scan", "--db", db).exit_code == 0
    out = tmp_path / "kept.jsonl"
    assert cli("export", "--db", db, "--threshold", "1.0", "--out", out).exit_code == 0
    assert out.read_bytes() == src.read_bytes()


def test_hostile_field_names_given_as_options(tmp_path):
    id_field, text_field = "i'd\"; DROP TABLE sources;--", "te\"xt'); --"
    records = [{id_field: "r1", text_field: "one text", "x": 1}, {id_field: "r2", text_field: "two text", "x": 2}]
    src = write_jsonl(tmp_path / "h.jsonl", records)
    db = _load(tmp_path, src, extra=("--id-field", id_field, "--text-field", text_field))
    assert [(d[1], d[2]) for d in documents(db)] == [("r1", "one text"), ("r2", "two text")]
    csv_src = tmp_path / "h.csv"
    csv_src.write_text('"i\'d"";x","te""xt\'); --"\nc1,first\nc2,second\n', encoding="utf-8")
    db2 = _load(tmp_path, csv_src, name="c.db", extra=("--id-field", "i'd\";x", "--text-field", text_field))
    assert [(d[1], d[2]) for d in documents(db2)] == [("c1", "first"), ("c2", "second")]
    assert cli("scan", "--db", db2).exit_code == 0
    out = tmp_path / "kept.jsonl"
    assert cli("export", "--db", db2, "--threshold", "1.0", "--out", out).exit_code == 0
    assert [json.loads(line) for line in out.read_text().splitlines()] == [
        {"i'd\";x": "c1", text_field: "first"},
        {"i'd\";x": "c2", text_field: "second"},
    ]


def test_ten_megabyte_document_loads_and_scans(tmp_path):
    rng = random.Random(3)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(5000)]
    parts, size = [], 0
    while size < 10_000_000:
        w = rng.choice(words)
        parts.append(w)
        size += len(w) + 1
    big = " ".join(parts)
    src = write_jsonl(
        tmp_path / "big.jsonl", [("big", big), ("small", "a small document"), ("small2", "a small document!")]
    )
    db = _load(tmp_path, src)
    result = cli("scan", "--db", db)
    assert result.exit_code == 0, result.output
    assert "1 near pairs" in result.output or "1 near pair" in result.output
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT length(text) FROM documents WHERE doc_id = 'big'").fetchone()[0] == len(big)
    big_csv = tmp_path / "big.csv"
    with open(big_csv, "w", encoding="utf-8", newline="") as fh:
        fh.write(f'id,text\nbig,"{big}"\n')
    assert [d[1] for d in documents(_load(tmp_path, big_csv, name="csv.db"))] == ["big"]


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_project_left_by_failed_load_into_new_db_does_not_exist_but_existing_empty_file_is_kept(tmp_path):
    # An existing empty file at --db is not ours to delete.
    db = tmp_path / "p.db"
    db.touch()
    assert_one_error_line(cli("load", BAD / "malformed.jsonl", "--db", db), BAD / "malformed.jsonl", 3)
    assert db.exists()
    assert documents(db) == []


# -- arbitrary bytes ---------------------------------------------------------------------

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_pieces = st.sampled_from(
    [
        b'{"id":"a","text":"x"}',
        b'{"text":1}',
        b'{"id":null,"text":"y"}',
        b"id,text",
        b'"q"',
        b"a,b",
        b"\n",
        b"\r\n",
        b"\r",
        b"\xef\xbb\xbf",
        b"\xff\xfe",
        b"\x00",
        b'"',
        b",",
        b"\t",
        b"{",
        b"}",
        b"\xe9",
        b"\xf0\x9f\x98",
        b"\\ud800",
        b"text",
    ]
)
_corpus_bytes = st.one_of(st.binary(max_size=200), st.lists(_pieces, max_size=30).map(b"".join))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_corpus_bytes, suffix=st.sampled_from([".jsonl", ".csv", ".tsv", ".txt"]), skip_bad=st.booleans())
@example(data=b"SQLite format 3\x00" + bytes(30), suffix=".jsonl", skip_bad=False)  # (found by hypothesis)
def test_arbitrary_bytes_load_or_fail_on_one_line(tmp_path_factory, data, suffix, skip_bad):
    tmp = tmp_path_factory.mktemp("fuzz")
    path = tmp / f"corpus{suffix}"
    path.write_bytes(data)
    db = tmp / "p.db"
    result = cli("load", path, "--db", db, *(["--skip-bad"] if skip_bad else []))
    if result.exit_code == 0:
        assert documents(db), "a successful load holds documents"
    else:
        assert result.exit_code == 1
        lines = result.output.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {path}"), result.output
        assert not db.exists()


# -- interruption during load ------------------------------------------------------------


def test_cancelled_load_writes_nothing(tmp_path):
    import threading

    from dedup_tui.engine.errors import Cancelled
    from dedup_tui.engine.progress import Control

    path = write_jsonl(tmp_path / "many.jsonl", [(f"d{i}", f"text number {i}") for i in range(12_000)])
    project = Project(tmp_path / "p.db", create=True)
    load_corpus(project, [BAD / "clean.jsonl"])
    cancel = threading.Event()
    seen = []

    def progress(stage, done, total):
        seen.append(done)
        cancel.set()

    with pytest.raises(Cancelled):
        load_corpus(project, [path], control=Control(progress, cancel))
    assert seen == [5000]
    assert [d for (d,) in project.conn.execute("SELECT doc_id FROM documents ORDER BY ord")] == ["a", "b", "c"]
    assert project.conn.execute("SELECT count(*) FROM sources").fetchone()[0] == 1
    project.close()


def test_ctrl_c_during_load_exits_130_and_leaves_no_new_project(tmp_path, monkeypatch):
    from dedup_tui.engine import ingest

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ingest, "load_corpus", interrupted)  # (what the CLI's load-and-scan calls)
    db = tmp_path / "p.db"
    result = CliRunner().invoke(main, ["load", str(BAD / "clean.jsonl"), "--db", str(db)])
    assert result.exit_code == 130
    assert result.output.splitlines() == ["error: interrupted; the project is unchanged"]
    assert not db.exists()


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_kill_9_during_load_leaves_previous_documents(tmp_path):
    import signal
    import subprocess
    import sys

    db = tmp_path / "p.db"
    assert cli("load", BAD / "clean.jsonl", "--db", db).exit_code == 0
    before = documents(db)
    many = write_jsonl(tmp_path / "many.jsonl", [(f"d{i}", f"document number {i}") for i in range(150_000)])
    proc = subprocess.Popen(
        [sys.executable, "-m", "dedup_tui", "load", str(many), "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wal = Path(str(db) + "-wal")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and proc.poll() is None:
        if wal.exists() and wal.stat().st_size > 1_000_000:  # inserts are under way
            break
        time.sleep(0.01)
    if proc.poll() is not None:
        pytest.skip("the load finished before it could be killed")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    project = Project(db)
    assert [d[1:] for d in documents(db)] == [d[1:] for d in before]
    assert project.conn.execute("SELECT count(*) FROM sources").fetchone()[0] == 1
    project.close()


@pytest.mark.parametrize(
    "record, what",
    [
        ('{"id": "a", "text": "bad \\ud800 text"}', "text"),
        ('{"id": "bad\\udc00id", "text": "fine"}', "id"),
    ],
)
def test_an_unpaired_surrogate_escape_in_jsonl_is_a_one_line_error(tmp_path, record, what):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "ok", "text": "fine \\u00e9 text"}\n' + record + "\n", encoding="utf-8")
    r = cli("load", str(corpus), "--db", str(tmp_path / "c.db"))
    message = assert_one_error_line(r, corpus, 2)
    assert f"{what} contains an unpaired surrogate" in message


@pytest.mark.parametrize(
    "line",
    [
        '{"a": 1}',
        ' {"a": 1}',
        '{"a": 1}  ',
        '\t{"a": [1, 2.5e3, "x\\u00e9"]}\r ',
        '{"a": 1} x',
        '{"a": 1}\u00a0',
        '{"a": 1}{"b": 2}',
        "",
        "  ",
        '{"a": }',
        '"s"',
        "NaN",
        "[1, 2]",
    ],
)
def test_fast_json_line_parse_equals_json_loads(line):
    from dedup_tui.engine.readers import parse_json_line

    try:
        want = ("ok", json.loads(line))
    except json.JSONDecodeError as exc:
        want = ("error", exc.msg, exc.colno)
    try:
        got = ("ok", parse_json_line(line))
    except json.JSONDecodeError as exc:
        got = ("error", exc.msg, exc.colno)
    assert got == want


def test_jsonl_chunks_read_as_line_by_line(tmp_path, monkeypatch):
    """Ordinary chunks are checked a chunk at a time, the rest line by line: both give the same
    records (ids, texts, bytes, line numbers) and the same errors, on a file mixing both."""
    from dedup_tui.engine.readers import jsonl

    rng = random.Random(8)
    good = [
        lambda i: json.dumps({"id": f"d{i}", "text": f"text {i} é"}),
        lambda i: json.dumps({"id": i, "text": f'a "id" and "id" and "text" {i}'}),  # names in the text
        lambda i: json.dumps({"id": f"d{i}", "text": f"\\ud83d\\ude00 {i}"}).replace("\\\\", "\\"),  # a pair
        lambda i: json.dumps({"text": f"t{i}", "id": f"x{i}", "n": [1, {"a": None}]}, ensure_ascii=False) + "\r",
    ]
    bad = [
        '{"id": "b1", "text": 5}',
        '{"id": "b2"}',
        "[1, 2]",
        '{"id": null, "text": "x"}',
        "",
        "   ",
        '{"id": "b3", "text": "\\ud800"}',
        '{"id": "b4", "text": "x", "text": "y"}',
        '{"id": true, "text": "x"}',
        '{"id": "", "text": "x"}',
        '{"id": "b5", "text": "x"}  ',
        "{",
        '{"id": 1.5, "text": "x"}',
    ]
    lines = []
    for i in range(3000):
        lines.append(rng.choice(bad) if rng.random() < 0.01 else rng.choice(good)(i))
    src = tmp_path / "mixed.jsonl"
    src.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode("utf-8") + b"\n")

    def read():
        errors = []
        records = [(r.line, r.doc_id, r.text, r.record) for r in jsonl.read_jsonl(src, "id", "text", errors)]
        return records, [(e.line, e.message) for e in errors]

    monkeypatch.setattr(jsonl, "CHUNK_BYTES", 2000)
    chunked = read()
    monkeypatch.setattr(jsonl, "CHUNKED", False)
    assert chunked == read()
    assert len(chunked[0]) > 2900 and chunked[1]
    assert chunked[0][0][3].startswith(b"{")  # the BOM is not part of the first record


@pytest.mark.parametrize("chunked", [True, False])
def test_integer_ids_come_back_as_numbers_in_pairs_and_logs(tmp_path, monkeypatch, chunked):
    """A corpus whose ids are JSON integers gets them back as integers in pairs, the removed and
    decisions logs; a corpus of string ids (even "7") keeps strings; so does a mixed one."""
    from dedup_tui.engine.curate import decisions
    from dedup_tui.engine.readers import jsonl

    monkeypatch.setattr(jsonl, "CHUNKED", chunked)
    base = "the quick brown fox jumps over the lazy dog and runs far away"
    ints = write_jsonl(
        tmp_path / "ints.jsonl",
        [
            {"id": 7, "text": base},
            {"id": 12, "text": base + "!"},
            {"id": 30, "text": "something else entirely, a different text"},
        ],
    )
    strs = write_jsonl(tmp_path / "strs.jsonl", [{"id": "7", "text": base}, {"id": "12", "text": base + "!"}])
    mixed = write_jsonl(tmp_path / "mixed.jsonl", [{"id": 7, "text": base}, {"id": "12", "text": base + "!"}])
    for src, want in ((ints, (7, 12)), (strs, ("7", "12")), (mixed, ("7", "12"))):
        db = _load(tmp_path, src, name=f"{src.stem}.db")
        assert cli("scan", "--db", db).exit_code == 0
        project = Project(db)
        decisions.record(project, "not_duplicate", str(want[1]), str(want[0]), author="t")
        decisions.record(project, "remove", str(want[1]), author="t")
        project.close()
        out = tmp_path / f"{src.stem}.pairs.jsonl"
        assert cli("pairs", "--db", db, "--out", out).exit_code == 0
        pair = json.loads(out.read_text().splitlines()[0])
        assert (pair["a"], pair["b"]) == want
        kept = tmp_path / f"{src.stem}.kept.jsonl"
        r = cli(
            "export",
            "--db",
            db,
            "--threshold",
            "0.8",
            "--out",
            kept,
            "--removed",
            tmp_path / f"{src.stem}.rm.jsonl",
            "--decisions-log",
            tmp_path / f"{src.stem}.dec.jsonl",
        )
        assert r.exit_code == 0, r.output
        removed = [json.loads(x) for x in (tmp_path / f"{src.stem}.rm.jsonl").read_text().splitlines()]
        assert [row["id"] for row in removed] == [want[1]]
        logged = [json.loads(x) for x in (tmp_path / f"{src.stem}.dec.jsonl").read_text().splitlines()]
        assert (logged[0]["doc_id"], logged[0]["other_id"]) == (want[1], want[0])
        assert kept.read_text().splitlines()[0] == src.read_text().splitlines()[0]  # records unchanged


# -- the readers' public interface and the loader's writer ---------------------------------


def test_every_format_reads_to_the_same_records_through_open_reader(tmp_path):
    """One corpus in each format, read through readers.open_reader: CSV, TSV and Parquet give
    their column names first, then every format the same ids and texts in order; a bad record
    goes into the errors list, not out as an exception, and reading goes on."""
    import csv

    import pyarrow as pa
    import pyarrow.parquet as pq

    from dedup_tui.engine.readers import FIELD_FORMATS, BadRecord, Record, detect_format, open_reader

    rows = [("a.txt", "first text"), ("b.txt", 'a "quoted", text\twith tab'), ("c.txt", "third\nline")]
    lines = [json.dumps({"id": i, "text": t}) for i, t in rows]
    (tmp_path / "c.jsonl").write_text(
        "\n".join(lines[:1] + ['{"id": "bad", "text": 5}'] + lines[1:]) + "\n", encoding="utf-8"
    )
    for name, delimiter in (("c.csv", ","), ("c.tsv", "\t")):
        with open(tmp_path / name, "w", encoding="utf-8", newline="") as fh:
            csv.writer(fh, delimiter=delimiter).writerows([("id", "text")] + rows)
    pq.write_table(pa.table({"id": [i for i, _ in rows], "text": [t for _, t in rows]}), tmp_path / "c.parquet")
    folder = tmp_path / "folder"
    folder.mkdir()
    for doc_id, text in rows:
        (folder / doc_id).write_text(text, encoding="utf-8")

    for path in (tmp_path / "c.jsonl", tmp_path / "c.csv", tmp_path / "c.tsv", tmp_path / "c.parquet", folder):
        fmt = detect_format(path)
        errors: list[BadRecord] = []
        items = list(open_reader(path, fmt, "id", "text", errors, id_required=fmt != "txt"))
        if fmt in FIELD_FORMATS:
            assert items.pop(0) == ["id", "text"], path
        assert all(type(r) is Record for r in items), path
        assert [(r.doc_id, r.text) for r in items] == rows, path
        if fmt == "jsonl":
            assert [(e.line, e.message) for e in errors] == [(2, 'text field "text" is a number, not a string')]
            assert [r.line for r in items] == [1, 3, 4]
        else:
            assert errors == [], path


def test_documents_writer_continues_ords_and_looks_up_ids_only_in_a_project_that_had_documents(tmp_path):
    from dedup_tui.engine.store import transaction
    from dedup_tui.engine.store.documents import DocumentsWriter

    project = Project(tmp_path / "p.db", create=True)
    try:
        with transaction(project.conn):
            writer = DocumentsWriter(project)
            source = writer.add_source(tmp_path / "new.jsonl", "jsonl", "0" * 64, 10, None, "id", "text")
            assert writer.add_documents(source, []) == 0
            assert writer.add_documents(source, [("x", "one", 1, b"{}"), ("y", "two", 2, b"{}")]) == 2
            assert writer.ids_in_project(["x", "z"]) == set()  # an empty project: nothing to clash with
            writer.finish_source(source, 2, [])
        assert writer.loaded_at(tmp_path / "new.jsonl", "0" * 64) is None  # read when the writer was made
        with transaction(project.conn):
            writer = DocumentsWriter(project)
            assert writer.loaded_at(tmp_path / "new.jsonl", "0" * 64) is not None
            assert writer.loaded_at(tmp_path / "new.jsonl", None) is None  # a folder has no sha
            assert writer.ids_in_project(["x", "z", "y"]) == {"x", "y"}
            assert writer.add_documents(source, [("z", "three", 3, b"{}")]) == 1
        got = project.conn.execute(
            "SELECT ord, doc_id, length, exact_hash IS NOT NULL FROM documents ORDER BY ord"
        ).fetchall()
        assert got == [(0, "x", 3, 1), (1, "y", 3, 1), (2, "z", 5, 1)]
    finally:
        project.close()
