"""The promises issue's attack list, each reproduction now asserting the promise: no command writes
onto the project, its companions or its corpus, or one file for two outputs; a scan is not kept
when documents were loaded under it; one BOM rule; a named id field must exist; scan settings out
of range are usage errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from dedup_tui.cli import main
from dedup_tui.engine.errors import ProjectError
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.scanning import candidates
from dedup_tui.engine.scanning import local as local
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store import Project

from ..conftest import NEAR_CORPUS, write_jsonl


def run(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result


@pytest.fixture
def project_files(tmp_path):
    corpus = write_jsonl(tmp_path / "c.jsonl", NEAR_CORPUS + [("dup", NEAR_CORPUS[0][1] + "!")])
    db = tmp_path / "P.db"
    assert run("load", corpus, "--db", db).exit_code == 0
    assert run("scan", "--db", db).exit_code == 0
    return tmp_path, corpus, db


def _fingerprint(*paths: Path) -> list[bytes | None]:
    return [p.read_bytes() if p.exists() else None for p in paths]


@pytest.mark.parametrize(
    "args",
    [
        ("pairs", "--db", "{db}", "--out", "{db}"),
        ("pairs", "--db", "{db}", "--out", "{db}", "--force"),
        ("pairs", "--db", "{db}", "--out", "{db}-wal", "--force"),
        ("pairs", "--db", "{db}", "--out", "{db}.lock", "--force"),
        ("pairs", "--db", "{db}", "--out", "{corpus}", "--force"),
        ("tune", "--db", "{db}", "--labels-out", "{db}"),
        ("tune", "--db", "{db}", "--labels-out", "{db}", "--force"),
        ("synth", "--out", "{db}", "--force"),
        ("export", "--db", "{db}", "--threshold", "0.5", "--out", "{db}", "--force"),
        ("export", "--db", "{db}", "--threshold", "0.5", "--out", "{corpus}", "--force"),
        ("export", "--db", "{db}", "--threshold", "0.5", "--out", "k.jsonl", "--removed", "{db}", "--force"),
    ],
)
def test_no_command_writes_onto_the_project_or_its_corpus(project_files, args, monkeypatch):
    tmp, corpus, db = project_files
    monkeypatch.chdir(tmp)
    before = _fingerprint(corpus)
    with Project(db) as project:
        pairs_before = project.conn.execute("SELECT count(*) FROM pairs").fetchone()[0]
    result = run(*[a.format(db=db, corpus=corpus) for a in args])
    assert result.exit_code == 1
    assert result.output.startswith("error: ") and result.output.count("\n") == 1
    assert _fingerprint(corpus) == before
    with Project(db) as project:  # still a project, with its documents and pairs
        assert project.document_count() == len(NEAR_CORPUS) + 1
        assert project.conn.execute("SELECT count(*) FROM pairs").fetchone()[0] == pairs_before


@pytest.mark.parametrize("log", ["--removed", "--decisions-log", "--manifest"])
def test_export_refuses_one_file_for_two_outputs(project_files, log):
    tmp, _corpus, db = project_files
    out = tmp / "k.jsonl"
    result = run("export", "--db", db, "--threshold", "0.5", "--out", out, log, tmp / "." / "k.jsonl", "--force")
    assert result.exit_code == 1
    assert "each needs its own file" in result.output
    assert not out.exists()


@pytest.mark.parametrize("cmd", [("pairs", "--out"), ("tune", "--labels-out"), ("synth", "--out")])
def test_existing_outputs_need_force(project_files, cmd):
    tmp, _corpus, db = project_files
    target = tmp / "exists.jsonl"
    precious = '{"id": 0, "text": "precious", "group": 0}\n'  # what synth writes: its --force may replace it
    target.write_text(precious)
    args = [cmd[0]] + ([] if cmd[0] == "synth" else ["--db", db]) + [cmd[1], target]
    refused = run(*args)
    assert refused.exit_code == 1 and "already exists (use --force to overwrite)" in refused.output
    assert target.read_text() == precious
    assert run(*args, "--force").exit_code == 0
    assert target.read_text() != precious


def test_beside_keeps_the_whole_stem():
    from dedup_tui.engine.curate.curated import beside

    assert beside("sample.curated.jsonl", "removed.jsonl").name == "sample.curated.removed.jsonl"
    assert beside("foo.removed.jsonl", "removed.jsonl").name == "foo.removed.removed.jsonl"
    assert beside("plain", "manifest.json").name == "plain.manifest.json"


def test_a_scan_is_not_kept_when_documents_are_loaded_under_it(tmp_path, monkeypatch):
    corpus = write_jsonl(tmp_path / "a.jsonl", NEAR_CORPUS)
    later = write_jsonl(tmp_path / "b.jsonl", [("late", NEAR_CORPUS[0][1])])
    project = Project(tmp_path / "p.db", create=True)
    load_corpus(project, [corpus])
    real_find_pairs = candidates.find_pairs

    def find_pairs_then_a_load_lands(*args, **kwargs):
        out = real_find_pairs(*args, **kwargs)
        other = Project(tmp_path / "p.db")  # another process's load, between the scan's read and write
        load_corpus(other, [later])
        other.close()
        return out

    monkeypatch.setattr(local, "find_pairs", find_pairs_then_a_load_lands)
    with pytest.raises(ProjectError, match="loaded while this scan ran"):
        local.scan(project, ScanSettings())
    assert project.scan_state != "complete"
    monkeypatch.setattr(local, "find_pairs", real_find_pairs)
    result = local.scan(project, ScanSettings())
    assert result.exact_duplicates == 1  # the late copy is found by the next scan
    project.close()


def test_bom_is_text_in_every_format(tmp_path):
    """A U+FEFF that starts a document's text is kept whatever the format; one before a JSONL
    file's first record is the file's encoding mark."""
    folder = tmp_path / "txt"
    folder.mkdir()
    (folder / "a.txt").write_bytes("\ufeffhello world".encode())
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_bytes(b"\xef\xbb\xbf" + json.dumps({"id": "a", "text": "\ufeffhello world"}).encode() + b"\n")
    texts = []
    for i, src in enumerate([folder, jsonl]):
        with Project(tmp_path / f"p{i}.db", create=True) as project:
            load_corpus(project, [src])
            texts.append(project.conn.execute("SELECT text FROM documents").fetchone()[0])
    assert texts == ["\ufeffhello world", "\ufeffhello world"]


def test_a_named_id_field_must_exist(tmp_path):
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"uid": "x", "text": "hello"}])
    result = run("load", corpus, "--db", tmp_path / "p.db", "--id-field", "uuid")
    assert result.exit_code == 1
    assert 'c.jsonl:1: no id field "uuid"' in result.output
    assert not (tmp_path / "p.db").exists()
    assert run("load", corpus, "--db", tmp_path / "p.db", "--id-field", "uid").exit_code == 0
    with Project(tmp_path / "p.db") as project:
        assert project.ids_for([0]) == ["x"]


def test_same_file_names_in_two_folders_get_distinct_ids(tmp_path):
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "data.jsonl").write_text(json.dumps({"text": f"text {sub}"}) + "\n")
    with Project(tmp_path / "p.db", create=True) as project:
        load_corpus(project, [tmp_path / "a" / "data.jsonl", tmp_path / "b" / "data.jsonl"])
        ids = project.ids_for([0, 1])
    assert len(set(ids)) == 2 and all(i.endswith("data.jsonl:1") for i in ids)


@pytest.mark.parametrize("args", [("--seed", "-1"), ("--seed", str(2**64)), ("--k", "0")])
def test_scan_settings_out_of_range_are_usage_errors(project_files, args):
    _tmp, _corpus, db = project_files
    result = run("scan", "--db", db, *args)
    assert result.exit_code == 2
    assert f"Invalid value for '{args[0]}': {args[1]} is not in the range" in result.output  # not an unknown option


def test_parquet_export_keeps_every_type(tmp_path):
    import datetime
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [t for _id, t in NEAR_CORPUS] + [NEAR_CORPUS[0][1]]  # the last one an exact copy: removed
    n = len(texts)
    table = pa.table(
        {
            "id": [f"d{i}" for i in range(n)],
            "text": texts,
            "when": pa.array([datetime.datetime(2020, 1, i + 1, 12, 30) for i in range(n)], pa.timestamp("us")),
            "price": pa.array([decimal.Decimal(f"{i}.25") for i in range(n)], pa.decimal128(10, 2)),
            "blob": pa.array([bytes([255, i]) for i in range(n)], pa.binary()),
            "tags": pa.array([[i, i + 1] for i in range(n)], pa.list_(pa.int16())),
        }
    )
    src = tmp_path / "c.parquet"
    pq.write_table(table, src)
    with Project(tmp_path / "p.db", create=True) as project:
        load_corpus(project, [src])
        local.scan(project, ScanSettings())
        from dedup_tui.engine.curate.curated import export_curated

        result = export_curated(project, 0.99, "components", tmp_path / "out.parquet", fmt="parquet")
    assert result.kept == n - 1
    got = pq.read_table(tmp_path / "out.parquet")
    assert got.schema == table.schema
    assert got.to_pylist() == table.slice(0, n - 1).to_pylist()


def test_huge_integers_and_deep_nesting_are_one_line_errors_or_kept(tmp_path):
    big = tmp_path / "big.jsonl"
    big.write_text('{"id": "a", "text": "x", "n": ' + "9" * 5000 + "}\n")
    assert run("load", big, "--db", tmp_path / "big.db").exit_code == 0  # an extra field: the record is kept whole
    assert (
        run("export", "--db", tmp_path / "big.db", "--threshold", "0.9", "--out", tmp_path / "o.jsonl").exit_code == 1
    )  # not scanned
    assert run("scan", "--db", tmp_path / "big.db").exit_code == 0
    assert (
        run("export", "--db", tmp_path / "big.db", "--threshold", "0.9", "--out", tmp_path / "o.jsonl").exit_code == 0
    )
    assert (tmp_path / "o.jsonl").read_bytes() == big.read_bytes()
    for name, line, message in [
        ("id", '{"text": "x", "id": ' + "9" * 5000 + "}", 'id field "id" is a number of 5,000 digits'),
        ("deep", '{"id": "a", "text": "x", "n": ' + "[" * 100000 + "]" * 100000 + "}", "nested too deeply"),
    ]:
        path = tmp_path / f"{name}.jsonl"
        path.write_text(line + "\n")
        result = run("load", path, "--db", tmp_path / f"{name}.db")
        assert result.exit_code == 1 and f"{name}.jsonl:1: " in result.output and message in result.output
        assert not (tmp_path / f"{name}.db").exists()


def test_parquet_with_invalid_utf8_is_a_one_line_error(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    bad = pa.array([b"fine text", b"bad \xff"], pa.binary()).view(pa.string())
    pq.write_table(pa.table({"id": ["a", "b"], "text": bad}), tmp_path / "c.parquet")
    result = run("load", tmp_path / "c.parquet", "--db", tmp_path / "p.db")
    assert result.exit_code == 1 and "c.parquet:2: invalid UTF-8" in result.output
    assert not (tmp_path / "p.db").exists()
    assert run("load", tmp_path / "c.parquet", "--db", tmp_path / "p.db", "--skip-bad").exit_code == 0
    with Project(tmp_path / "p.db") as project:
        assert project.document_count() == 1


def test_an_empty_file_is_not_a_project(tmp_path):
    (tmp_path / "x.db").touch()
    result = run("scan", "--db", tmp_path / "x.db")
    assert result.exit_code == 1 and "x.db: empty file, not a dedup-tui project" in result.output


def test_a_read_only_project_is_read_by_every_command_that_reads(project_files, monkeypatch):
    """A project whose file or folder cannot be written (simulated: the tests may run as root,
    who can write anything) opens read-only: reading commands work, writing ones say why not."""
    tmp, _corpus, db = project_files
    real_access = os.access
    monkeypatch.setattr(
        os,
        "access",
        lambda p, mode, **kw: (
            False
            if Path(p).resolve() in (db.resolve(), db.resolve().parent) and mode & os.W_OK
            else real_access(p, mode, **kw)
        ),
    )
    assert run("tune", "--db", db, "--labels-out", tmp / "labels.jsonl").exit_code == 0
    assert run("export", "--db", db, "--threshold", "0.5", "--out", tmp / "k.jsonl").exit_code == 0
    assert run("pairs", "--db", db, "--out", tmp / "p.jsonl").exit_code == 0
    result = run("scan", "--db", db)
    assert result.exit_code == 1 and "read-only" in result.output and result.output.count("\n") == 1


def test_a_failed_migration_backup_leaves_nothing_behind(project_files, monkeypatch):
    """Disk full while the backup copy is written (SQLite's max_page_count on the copy): a
    one-line error, no .bak or .bak.part left, the project unchanged and upgradable later."""
    import sqlite3

    from dedup_tui.engine import store

    _tmp, _corpus, db = project_files
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        conn.execute("DROP TABLE labels")

    class TinyDisk:
        def __getattr__(self, name):
            return getattr(sqlite3, name)

        def connect(self, path, *args, **kwargs):
            conn = sqlite3.connect(path, *args, **kwargs)
            if str(path).endswith(".part"):
                conn.execute("PRAGMA max_page_count = 2")
            return conn

    monkeypatch.setattr(store.schema, "sqlite3", TinyDisk())  # the backup copy is made in store/schema.py
    with pytest.raises(ProjectError, match=r"could not write the backup copy .*unchanged"):
        store.Project(db)
    assert not list(db.parent.glob("*.bak*"))
    monkeypatch.undo()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("2",)
    with store.Project(db) as project:
        assert project.get_meta("schema_version") == str(store.SCHEMA_VERSION)


def test_disk_full_during_a_load_says_so(tmp_path):
    """SQLite's max_page_count stands in for a full disk: the load fails with the real reason,
    one line, and the project keeps what it had."""

    first = write_jsonl(tmp_path / "a.jsonl", NEAR_CORPUS)
    big = write_jsonl(tmp_path / "b.jsonl", [(f"big{i}", f"document {i} " + "x" * 2000) for i in range(400)])
    with Project(tmp_path / "p.db", create=True) as project:
        load_corpus(project, [first])
        pages = project.conn.execute("PRAGMA page_count").fetchone()[0]
        project.conn.execute(f"PRAGMA max_page_count = {pages + 20}")
        with pytest.raises(Exception) as caught:
            load_corpus(project, [big])
        assert "full" in str(caught.value) and "no transaction" not in str(caught.value)
        assert project.document_count() == len(NEAR_CORPUS)
        assert not project.conn.in_transaction


@pytest.mark.parametrize(
    "tamper",
    [
        "UPDATE pair_arrays SET a = x'0102'",  # not a whole number of int64s
        "UPDATE pair_arrays SET a = zeroblob(length(a))",  # a = 0 everywhere: a >= b for some pairs
        "UPDATE pair_forest SET edges = x'ffffffffffffff7f'",  # an edge index far out of range
        "UPDATE exact_array SET exact_of = x'05'",  # wrong size
    ],
)
def test_tampered_packed_tables_are_ignored_for_the_pairs_table(project_files, tamper):
    import sqlite3

    tmp, _corpus, db = project_files
    assert (
        run(
            "export",
            "--db",
            db,
            "--threshold",
            "0.5",
            "--out",
            tmp / "before.jsonl",
            "--removed",
            tmp / "before.removed.jsonl",
        ).exit_code
        == 0
    )
    with sqlite3.connect(db) as conn:
        conn.execute(tamper)
    for cmd in (
        ["tune", "--db", db],
        [
            "export",
            "--db",
            db,
            "--threshold",
            "0.5",
            "--out",
            tmp / "after.jsonl",
            "--removed",
            tmp / "after.removed.jsonl",
            "--force",
        ],
    ):
        assert run(*cmd).exit_code == 0
    assert (tmp / "after.jsonl").read_bytes() == (tmp / "before.jsonl").read_bytes()
    assert (tmp / "after.removed.jsonl").read_bytes() == (tmp / "before.removed.jsonl").read_bytes()


def test_a_project_missing_a_table_is_named_damaged(project_files):
    import sqlite3

    _tmp, _corpus, db = project_files
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE runs")
    for cmd in (["scan", "--db", db], ["tune", "--db", db]):
        result = run(*cmd)
        assert result.exit_code == 1 and "damaged dedup-tui project: no runs table" in result.output


def test_two_versions_of_a_corpus_get_two_projects_and_a_foreign_project_is_refused(tmp_path):
    from dedup_tui.engine.opening import prepare

    v1 = write_jsonl(tmp_path / "pkg.v1.jsonl", NEAR_CORPUS)
    v2 = write_jsonl(tmp_path / "pkg.v2.jsonl", NEAR_CORPUS[:2])
    s1, s2 = prepare(v1), prepare(v2)
    assert (s1.db.name, s2.db.name) == ("pkg.v1.db", "pkg.v2.db")
    project = Project(s1.db)
    load_corpus(project, [v1])
    project.close()
    with pytest.raises(ProjectError, match=r"holds documents loaded from pkg.v1.jsonl, not from .*pkg.v2.jsonl"):
        prepare(v2, db=s1.db)
    assert prepare(v1).warning is None
    v1.write_text(v1.read_text() + json.dumps({"id": "new", "text": "a new one"}) + "\n")
    assert "pkg.v1.jsonl changed since it was loaded" in prepare(v1).warning


def test_an_unreadable_corpus_is_an_error_not_a_usage_error(tmp_path, monkeypatch):
    corpus = write_jsonl(tmp_path / "c.jsonl", NEAR_CORPUS)
    real_open = open

    def no_read(path, *args, **kwargs):
        if str(path) == str(corpus):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, m, **k: False if str(p) == str(corpus) else real_access(p, m, **k))
    monkeypatch.setattr("builtins.open", no_read)
    result = run("load", corpus, "--db", tmp_path / "p.db")
    assert (
        result.exit_code == 1 and result.output.startswith(f"error: {corpus}") and "Permission denied" in result.output
    )


@pytest.mark.parametrize(
    "args",
    [
        ("pairs", "--db", "P.db", "--min", "nan", "--out", "x.jsonl"),
        ("tune", "--db", "P.db", "--threshold", "1.5"),
        ("export", "--db", "P.db", "--threshold", "nan", "--out", "x.jsonl"),
    ],
)
def test_bad_numbers_are_usage_errors(project_files, args, monkeypatch):
    monkeypatch.chdir(project_files[0])
    result = run(*args)
    assert result.exit_code == 2
    option, value = args[3], args[4]
    assert f"Invalid value for '{option}': " in result.output and value in result.output  # not an unknown option


def test_a_mistyped_command_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run("exprot")
    assert result.exit_code == 2 and "did you mean `dedup-tui export`" in result.output


def test_an_export_removes_the_part_files_a_killed_export_left(project_files):
    tmp, _corpus, db = project_files
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = tmp / f".k.jsonl.{int(dead.stdout)}.abc123.part"
    orphan.write_text("half a file")
    live = tmp / f".k.jsonl.{os.getpid()}.xyz.part"  # a writer still running: left alone
    live.write_text("in progress")
    assert run("export", "--db", db, "--threshold", "0.5", "--out", tmp / "k.jsonl").exit_code == 0
    assert not orphan.exists() and live.exists()


def test_opening_a_corpus_that_cannot_load_refuses_at_once_and_leaves_nothing(tmp_path):
    """`dedup-tui content.csv` whose text column is `body`: one line naming the file, no empty
    project left behind; with --text-field it opens (the app loads with that field)."""
    from dedup_tui.engine.opening import prepare

    corpus = tmp_path / "content.csv"
    corpus.write_text("id,body\na,hello there\nb,general kenobi\n")
    result = run(corpus)
    assert result.exit_code == 1 and 'content.csv:1: no "text" column' in result.output
    assert not (tmp_path / "content.db").exists()
    spec = prepare(corpus, text_field="body")
    assert spec.load_options == {"text_field": "body"} and spec.corpus == [corpus]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    result = run(bad)
    assert result.exit_code == 1 and "bad.jsonl:1: malformed JSON" in result.output
    assert not (tmp_path / "bad.db").exists()


def test_results_of_a_scan_that_misses_documents_are_refused(project_files):
    """Documents loaded after the scan: export, pairs and tune say to scan again (they would
    keep the new copies without a word)."""
    tmp, _corpus, db = project_files
    more = write_jsonl(tmp / "more.jsonl", [("copy", NEAR_CORPUS[0][1])])
    assert run("load", more, "--db", db).exit_code == 0
    for cmd in (
        ["export", "--db", db, "--threshold", "0.5", "--out", tmp / "k.jsonl"],
        ["pairs", "--db", db, "--out", tmp / "p.jsonl"],
        ["tune", "--db", db],
    ):
        result = run(*cmd)
        assert result.exit_code == 1 and "documents were loaded after the last scan" in result.output
    assert run("scan", "--db", db).exit_code == 0
    assert run("export", "--db", db, "--threshold", "0.5", "--out", tmp / "k.jsonl").exit_code == 0


def test_damaged_scan_parameters_are_named(project_files):
    import sqlite3

    _tmp, _corpus, db = project_files
    for value in ("garbage", "[]", '{"floor": "x"}'):
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE meta SET value = ? WHERE key = 'scan_params'", (value,))
        for cmd in (["tune", "--db", db], ["export", "--db", db, "--threshold", "0.5", "--out", "k.jsonl"]):
            result = run(*cmd)
            assert result.exit_code == 1 and "scan parameters cannot be read" in result.output


def test_the_same_file_is_not_loaded_twice(project_files):
    _tmp, corpus, db = project_files
    result = run("load", corpus, "--db", db)
    assert result.exit_code == 1 and "already loaded into this project" in result.output
    with Project(db) as project:
        assert project.document_count() == len(NEAR_CORPUS) + 1


def test_a_text_folder_has_no_fields(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("hello")
    result = run("load", tmp_path / "docs", "--db", tmp_path / "p.db", "--text-field", "body")
    assert result.exit_code == 1 and "a folder of .txt files has no fields" in result.output


def test_long_integers_and_parquet_values_export_to_every_format(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    big = tmp_path / "big.jsonl"
    big.write_text('{"id": "a", "text": "hello there", "n": ' + "9" * 5000 + "}\n")
    assert run("load", big, "--db", tmp_path / "b.db").exit_code == 0
    assert run("scan", "--db", tmp_path / "b.db").exit_code == 0
    for fmt in ("csv", "parquet"):
        out = tmp_path / f"b.{fmt}"
        assert (
            run("export", "--db", tmp_path / "b.db", "--threshold", "0.9", "--out", out, "--format", fmt).exit_code == 0
        )
    assert "9" * 5000 in (tmp_path / "b.csv").read_text()
    table = pa.table(
        {
            "id": ["x", "y"],
            "text": ["one text here", "another text"],
            "blob": [b"\xff\x00", b"ok"],
            "score": [float("nan"), 1.5],
        }
    )
    pq.write_table(table, tmp_path / "c.parquet")
    assert run("load", tmp_path / "c.parquet", "--db", tmp_path / "c.db").exit_code == 0
    assert run("scan", "--db", tmp_path / "c.db").exit_code == 0
    assert run("export", "--db", tmp_path / "c.db", "--threshold", "0.9", "--out", tmp_path / "c.jsonl").exit_code == 0
    rows = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]  # valid JSON: no NaN
    import base64

    assert rows[0]["score"] is None and base64.b64decode(rows[0]["blob"]) == b"\xff\x00"


def test_parquet_export_of_numbers_arrow_cannot_type(tmp_path):
    import pyarrow.parquet as pq

    corpus = tmp_path / "n.jsonl"
    corpus.write_text(
        "\n".join(
            [
                '{"id": "a", "text": "first document text", "n": ' + "9" * 5000 + "}",
                '{"id": "b", "text": "second document text", "n": 5}',
                '{"id": "c", "text": "third document text", "n": 18446744073709551615}',
            ]
        )
        + "\n"
    )
    db = tmp_path / "n.db"
    assert run("load", corpus, "--db", db).exit_code == 0 and run("scan", "--db", db).exit_code == 0
    assert (
        run(
            "export", "--db", db, "--threshold", "0.9", "--out", tmp_path / "n.parquet", "--format", "parquet"
        ).exit_code
        == 0
    )
    assert pq.read_table(tmp_path / "n.parquet").column("n").to_pylist() == ["9" * 5000, "5", "18446744073709551615"]


def test_empty_scan_parameters_are_damaged(project_files):
    import sqlite3

    _tmp, _corpus, db = project_files
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '{}' WHERE key = 'scan_params'")
    result = run("tune", "--db", db)
    assert result.exit_code == 1 and "scan parameters cannot be read" in result.output


def test_a_jsonl_record_naming_its_text_or_id_twice_is_refused(tmp_path):
    corpus = tmp_path / "d.jsonl"
    corpus.write_text('{"id": "1", "text": "first", "text": "second"}\n')
    result = run("load", corpus, "--db", tmp_path / "d.db")
    assert result.exit_code == 1 and 'd.jsonl:1: field "text" appears 2 times' in result.output
    fine = tmp_path / "f.jsonl"  # the name inside a value or a nested object is fine
    fine.write_text('{"id": "1", "text": "the word \\"text\\" here", "meta": {"text": "x"}}\n')
    assert run("load", fine, "--db", tmp_path / "f.db").exit_code == 0
