"""What a corpus may hold and how it is read: the BOM rule (one for every format), a named id
field must exist, same-named files in two folders get distinct ids, huge integers and deep
nesting, Parquet with invalid UTF-8, duplicate fields in a JSONL record, a text folder has no
fields; a corpus that cannot be read or loaded is an error that leaves nothing behind, the same
file is not loaded twice, and two versions of a corpus get two projects.

History: the tests come from the promises issue's attack list; each reproduces an attack, now asserting the promise."""

from __future__ import annotations

import json
import os

import pytest

from dedup_tui.engine.errors import ProjectError
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.store import Project

from ..conftest import NEAR_CORPUS, write_jsonl
from .conftest import run


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


def test_a_jsonl_record_naming_its_text_or_id_twice_is_refused(tmp_path):
    corpus = tmp_path / "d.jsonl"
    corpus.write_text('{"id": "1", "text": "first", "text": "second"}\n')
    result = run("load", corpus, "--db", tmp_path / "d.db")
    assert result.exit_code == 1 and 'd.jsonl:1: field "text" appears 2 times' in result.output
    fine = tmp_path / "f.jsonl"  # the name inside a value or a nested object is fine
    fine.write_text('{"id": "1", "text": "the word \\"text\\" here", "meta": {"text": "x"}}\n')
    assert run("load", fine, "--db", tmp_path / "f.db").exit_code == 0
