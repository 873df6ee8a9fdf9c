"""The command line: help, usage errors (exit 2), user errors (exit 1, one line), pairs output,
and a property test that valid JSONL records round-trip byte-exact through load and export."""

from __future__ import annotations

import json
import random
import sqlite3
import tempfile
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dedup_tui.cli import main
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store import Project

from ..conftest import NEAR_CORPUS, ScannedCorpus, cli, ok, write_jsonl

# NEAR_CORPUS with an exact copy of doc_A and a late near copy of doc_B, in this order.
DOCS = NEAR_CORPUS + [
    ("dup_A", "The quick brown fox jumps over the lazy dog"),
    ("late_B", "A quick brown fox leaped over the sleeping dog!"),
]
DOC_ORDER = [doc_id for doc_id, _text in DOCS]


@pytest.fixture
def scanned_corpus() -> ScannedCorpus:
    """`scanned` (tests/conftest.py) is DOCS, scanned exhaustively down to 0.3."""
    return ScannedCorpus(DOCS, ScanSettings(method="exhaustive", floor=0.3))


def test_every_command_has_help():
    commands = main.commands
    assert {"load", "scan", "pairs", "export", "synth", "open"} <= set(commands)
    for name, command in commands.items():
        result = cli(name, "--help")
        assert result.exit_code == 0, (name, result.output)
        assert result.output.startswith("Usage:") and f" {name} " in result.output.splitlines()[0]
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert any(opt in result.output for opt in param.opts), (name, param.opts)
    assert cli("--help").exit_code == 0


@pytest.mark.parametrize(
    "args",
    [
        ["load", "c.jsonl", "--db", "x.db", "--bogus"],  # unknown option
        ["scan", "--db", "x.db", "--floor", "2"],
        ["scan", "--db", "x.db", "--floor", "0"],
        ["scan", "--db", "x.db", "--k", "0"],
        ["scan", "--db", "x.db", "--method", "magic"],
        ["scan", "--db", "x.db", "--num-perm", "abc"],
        ["pairs", "--db", "x.db", "--out", "p.jsonl", "--min", "1.5"],
        ["export", "--db", "x.db", "--threshold", "0.5", "--out", "k.jsonl", "--policy", "random"],
        ["synth", "--out", "s.jsonl", "--noise", "2"],
        ["synth", "--out", "s.jsonl", "--n-unique", "0"],
        ["synth"],
        ["scan", "--db", "x.db", "--unknown-option"],
    ],
)
def test_bad_arguments_exit_2(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    result = cli(*args)
    assert result.exit_code == 2, result.output
    assert "Usage:" in result.output and "Error" in result.output
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tune"], "give the project: dedup-tui tune PROJECT (or --db PROJECT)"),
        (["pairs", "--out", "p.jsonl"], "give the project: dedup-tui pairs PROJECT --out FILE (or --db PROJECT)"),
        (
            ["export", "--threshold", "0.5", "--out", "k.jsonl"],
            "give the project: dedup-tui export PROJECT --out FILE (or --db PROJECT)",
        ),
        (["scan"], "give the project: dedup-tui scan PROJECT [CORPUS]... (or --db PROJECT)"),
        (
            ["scan", "c.jsonl"],
            "give the project: dedup-tui scan PROJECT [CORPUS]... (or --db PROJECT); c.jsonl was "
            "read as a corpus file: a project's name ends in .db, .sqlite or .sqlite3",
        ),
        (
            ["load", "c.jsonl"],
            "give the project: dedup-tui load PROJECT CORPUS... (or --db PROJECT); c.jsonl was "
            "read as a corpus file: a project's name ends in .db, .sqlite or .sqlite3",
        ),
        (["load", "--db", "x.db"], "give the CORPUS files to load: dedup-tui load PROJECT CORPUS..."),
        (["load", "x.db"], "give the CORPUS files to load: dedup-tui load PROJECT CORPUS..."),
        (
            ["load", "c.jsonl", "x.db"],
            "x.db: is a project, not a corpus file; give the project first: dedup-tui load PROJECT CORPUS...",
        ),
        (["import", "scan"], "give the project: dedup-tui import SCAN_DIR PROJECT (or --db PROJECT)"),
        (
            ["import", "x.db", "scan"],
            "x.db: is a project, not a scan folder; give the scan folder first: dedup-tui import SCAN_DIR PROJECT",
        ),
        (
            ["cluster-export", "shards", "--out", "curated"],
            "give the project: dedup-tui cluster-export PROJECT CORPUS... --out DIR (or --db PROJECT); "
            "shards was read as a corpus file: a project's name ends in .db, .sqlite or .sqlite3",
        ),
        (
            ["cluster-export", "x.db", "--out", "curated"],
            "give the CORPUS the project was scanned from: dedup-tui cluster-export PROJECT CORPUS... --out DIR",
        ),
        (
            ["tune", "x.db", "--db", "y.db"],
            "the project is given twice (x.db and --db y.db): give it once, as PROJECT or with --db",
        ),
        (
            ["scan", "x.db", "--db", "x.db"],
            "the project is given twice (x.db and --db x.db): give it once, as PROJECT or with --db",
        ),
        (
            ["export", "x.db", "--db", "y.db", "--out", "k.jsonl"],
            "the project is given twice (x.db and --db y.db): give it once, as PROJECT or with --db",
        ),
        (["load", "c.jsonl", "--db", "-"], "-: a project is a file (.db), not standard input or output"),
        (["c.jsonl", "--db", "-"], "-: a project is a file (.db), not standard input or output"),
        (
            ["cluster-scan", "c.jsonl", "--out", "-"],
            "--out -: cluster-scan writes a folder (several files), not a stream; give the folder's path",
        ),
        (
            ["cluster-export", "x.db", "c.jsonl", "--out", "-"],
            "--out -: cluster-export writes a folder (several files), not a stream; give the folder's path",
        ),
    ],
)
def test_the_project_is_given_once_as_argument_or_db(tmp_path, monkeypatch, args, message):
    """No project, two, or a project where a corpus file goes: a one-line usage error that shows
    the command's form; nothing is created."""
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "c.jsonl", NEAR_CORPUS)
    result = cli(*args)
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [f"error: {message}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl"]


def test_every_command_that_reads_a_project_takes_it_as_an_argument(scanned, tmp_path):
    """`dedup-tui tune P.db` does what `dedup-tui tune --db P.db` does, for every command."""
    db = scanned
    for command in (["tune"], ["pairs", "--out", "{out}"], ["export", "--threshold", "0.5", "--out", "{out}"]):
        as_argument, as_option = tmp_path / f"{command[0]}-arg.jsonl", tmp_path / f"{command[0]}-opt.jsonl"
        by_argument = ok(command[0], db, *[a.replace("{out}", str(as_argument)) for a in command[1:]])
        by_option = ok(command[0], "--db", db, *[a.replace("{out}", str(as_option)) for a in command[1:]])
        if command[0] == "tune":
            assert by_argument.output == by_option.output and "stored pairs" in by_argument.output
        else:
            assert as_argument.read_bytes() == as_option.read_bytes() != b""
    corpus = write_jsonl(tmp_path / "more.jsonl", [("m1", "an entirely new document about sailing boats")])
    r = ok("load", tmp_path / "new.db", corpus)
    assert r.output.startswith(f"loaded 1 documents from 1 source(s) into {tmp_path / 'new.db'}")
    r = ok("scan", tmp_path / "new.db")
    assert r.output.splitlines()[1].startswith("1 documents: 0 exact duplicates")  # (after the memory cap)
    r = ok("scan", tmp_path / "both.db", corpus, "--method", "exhaustive")
    assert r.output.splitlines()[1].startswith("loaded 1 documents") and "1 documents: 0 exact" in r.output
    # an existing SQLite file is a project whatever its name
    renamed = tmp_path / "project-without-suffix"
    renamed.write_bytes(Path(db).read_bytes())
    assert ok("tune", renamed).output == ok("tune", db).output


@pytest.mark.parametrize(
    "command", [["scan"], ["pairs", "--out", "p.jsonl"], ["export", "--threshold", "0.5", "--out", "k.jsonl"]]
)
def test_missing_project_is_one_line_error(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    result = cli(command[0], "--db", "nope.db", *command[1:])
    assert result.exit_code == 1
    assert result.output.splitlines() == ["error: nope.db: no such project file"]
    assert not (tmp_path / "nope.db").exists()


def test_export_below_floor_fails_and_says_so(scanned, tmp_path):
    db = scanned
    out = tmp_path / "kept.jsonl"
    result = cli("export", "--db", db, "--threshold", "0.2", "--out", out)
    assert result.exit_code == 1
    (line,) = result.output.splitlines()
    assert line.startswith("error: ") and "below the scan's floor 0.3" in line
    assert not out.exists()
    ok("export", "--db", db, "--threshold", "0.3", "--out", out)
    assert out.exists()


def test_unscanned_project(tmp_path):
    db = tmp_path / "p.db"
    ok("load", write_jsonl(tmp_path / "c.jsonl", NEAR_CORPUS), "--db", db)
    for args in (
        ["pairs", "--out", tmp_path / "p.jsonl"],
        ["export", "--threshold", "0.5", "--out", tmp_path / "k.jsonl"],
    ):
        result = cli(args[0], "--db", db, *args[1:])
        assert result.exit_code == 1
        (line,) = result.output.splitlines()
        assert "not scanned yet" in line


def test_pairs_are_a_before_b_in_corpus_order(scanned, tmp_path):
    db = scanned
    out = tmp_path / "pairs.jsonl"
    result = ok("pairs", "--db", db, "--out", out)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert f"wrote {len(rows)} pairs" in result.output
    assert rows, "the corpus has near-duplicates above 0.3"
    position = {doc_id: i for i, doc_id in enumerate(DOC_ORDER)}
    for row in rows:
        assert set(row) == {"a", "b", "jaccard"}
        assert position[row["a"]] < position[row["b"]]
        assert 0.3 <= row["jaccard"] <= 1.0
    keys = [(position[r["a"]], position[r["b"]]) for r in rows]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT count(*) FROM pairs").fetchone()[0]
    assert stored == len(rows)
    # exact duplicates are not near pairs: dup_A is an exact copy of doc_A
    assert not any("dup_A" in (r["a"], r["b"]) for r in rows)
    high = tmp_path / "high.jsonl"
    ok("pairs", "--db", db, "--min", "0.5", "--out", high)
    high_rows = [json.loads(line) for line in high.read_text(encoding="utf-8").splitlines()]
    assert high_rows == [r for r in rows if r["jaccard"] >= 0.5]


def test_pairs_min_below_floor_is_an_error(scanned, tmp_path):
    db = scanned
    out = tmp_path / "pairs.jsonl"
    result = cli("pairs", "--db", db, "--min", "0.1", "--out", out)
    assert result.exit_code == 1
    (line,) = result.output.splitlines()
    assert "below the scan's floor 0.3" in line
    assert not out.exists()


def test_synth_writes_groups(tmp_path):
    out = tmp_path / "s.jsonl"
    ok("synth", "--n-unique", "4", "--copies", "2", "--seed", "1", "--out", out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 8 and all({"id", "text", "group"} <= set(r) for r in rows)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = cli("synth", "--n-unique", "2", "--out", blocker / "s.jsonl")
    assert result.exit_code == 1
    (line,) = result.output.splitlines()
    assert line.startswith("error: ") and "a-file" in line


def test_scan_on_a_file_that_is_not_a_project(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 50)
    result = cli("scan", "--db", junk)
    assert result.exit_code == 1
    (line,) = result.output.splitlines()
    assert line.startswith(f"error: {junk}: not a dedup-tui project")


# -- round trip --------------------------------------------------------------------------

MARK = "\u00a7"  # a unique per-document marker keeps every pair of texts apart (Jaccard < 1)
texts = st.text(alphabet=st.characters(exclude_characters=MARK, exclude_categories=("Cs",)), max_size=60)
extra_keys = st.text(min_size=1, max_size=8).filter(lambda k: k not in ("id", "text"))
extra_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=10),
    st.lists(st.integers(), max_size=3),
    st.floats(allow_nan=False, allow_infinity=False),
)


@st.composite
def corpora(draw):
    n = draw(st.integers(1, 8))
    records = []
    for i in range(n):
        record = {}
        fields = draw(st.dictionaries(extra_keys, extra_values, max_size=3))
        with_id = draw(st.booleans())
        items = [("text", f"{MARK}{i}{MARK}{draw(texts)}")] + list(fields.items())
        if with_id:
            items.append(("id", draw(st.one_of(st.text(max_size=12), st.integers(-(10**6), 10**6)))))
        order = draw(st.permutations(items))
        for k, v in order:
            record[k] = v
        records.append(record)
    # ids must be unique (as strings) when present; without an id field everywhere, none may have one
    if any("id" in r for r in records):
        for i, r in enumerate(records):
            r["id"] = f"{r.get('id', '')}#{i}" if not isinstance(r.get("id"), int) else r["id"] * 100 + i
        ids = [str(r["id"]) for r in records]
        if len(set(ids)) != len(ids):
            for i, r in enumerate(records):
                r["id"] = f"doc{i}"
    ascii_only = draw(st.booleans())
    lines = [json.dumps(r, ensure_ascii=ascii_only) for r in records]
    return lines


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora())
def test_valid_jsonl_round_trips_byte_exact(lines):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src = tmp / "c.jsonl"
        data = ("\n".join(lines) + "\n").encode("utf-8")
        src.write_bytes(data)
        db = tmp / "p.db"
        ok("load", src, "--db", db)
        ok("scan", "--db", db)
        out = tmp / "kept.jsonl"
        ok("export", "--db", db, "--threshold", "1.0", "--out", out)
        assert out.read_bytes() == data
        with sqlite3.connect(db) as conn:
            stored = [row[0] for row in conn.execute("SELECT text FROM documents ORDER BY ord")]
        assert stored == [json.loads(line)["text"] for line in lines]


def test_export_defaults_to_the_last_review(scanned, tmp_path):
    """Without --threshold / --policy, export uses what the app last reviewed with, and says so;
    a project never reviewed needs --threshold (a usage error without it)."""
    r = cli("export", "--db", scanned, "--out", tmp_path / "a.jsonl")
    assert r.exit_code == 2 and "give --threshold" in r.output
    project = Project(scanned)
    project.set_meta(ui_state=json.dumps({"threshold": 0.6, "policy": "greedy"}))
    project.close()
    r = ok("export", "--db", scanned, "--out", tmp_path / "b.jsonl", "--manifest", tmp_path / "b.manifest.json")
    assert "using threshold 0.60 and policy greedy, as the project was last reviewed" in r.output
    manifest = json.loads((tmp_path / "b.manifest.json").read_text())
    assert (manifest["threshold"], manifest["policy"]) == (0.6, "greedy")


def test_scan_given_a_corpus_loads_it_first_in_the_same_run(tmp_path, scanned):
    db_two_steps = scanned
    corpus = write_jsonl(tmp_path / "c2.jsonl", DOCS)
    db = tmp_path / "one.db"
    r = ok("scan", "--db", db, "--floor", "0.3", "--method", "exhaustive", corpus)
    assert r.output.splitlines()[1].startswith(f"loaded {len(DOCS)} documents")
    pairs = "SELECT a, b, jaccard FROM pairs ORDER BY a, b"
    with sqlite3.connect(db) as one, sqlite3.connect(db_two_steps) as two:
        assert one.execute(pairs).fetchall() == two.execute(pairs).fetchall() != []
        assert one.execute("SELECT doc_id FROM documents ORDER BY ord").fetchall() == [(i,) for i in DOC_ORDER]

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "text": "fine"}\n{"id": "y", "text": \n', encoding="utf-8")
    r = cli("scan", "--db", tmp_path / "new.db", bad)
    assert r.exit_code == 1 and f"{bad}:2:" in r.output and not (tmp_path / "new.db").exists()
    r = cli("scan", "--db", db, "--text-field", "body")
    assert r.exit_code == 2 and "CORPUS" in r.output


def test_cluster_commands_without_the_ray_extra_say_how_to_install_it(tmp_path, monkeypatch):
    import sys

    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "some text"}\n')
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError, as without the extra
    r = CliRunner().invoke(main, ["cluster-scan", str(corpus), "--out", str(tmp_path / "scan")])
    assert r.exit_code == 1
    assert 'pip install "dedup-tui[ray]"' in r.output and "Traceback" not in r.output
    assert not (tmp_path / "scan").exists()


# -- `-` is standard output for every output that is a stream ---------------------------


def _reviewed(db: Path) -> None:
    """A decision in each status the log writes, and a label."""
    from dedup_tui.engine.curate import decisions, tune

    with Project(db) as project:
        decisions.record(project, "keep", "doc_A")
        decisions.record(project, "remove", "doc_D")
        decisions.undo(project)  # doc_D's removal: undone ...
        decisions.record(project, "remove", "late_B")  # ... and then discarded by a newer decision
        decisions.record(project, "remove", "doc_C")
        decisions.undo(project)  # doc_C's removal: undone (redo brings it back)
        tune.set_label(project, "doc_A", "doc_B", "duplicate")


STREAMS = {
    "pairs --out": (["pairs", "{db}", "--out", "-"], lambda out: {"a", "b", "jaccard"} <= set(json.loads(out[0]))),
    "export --out": (
        ["export", "{db}", "--threshold", "0.5", "--out", "-"],
        lambda out: json.loads(out[0])["id"] == "doc_A",
    ),
    "export --out (csv)": (
        ["export", "{db}", "--threshold", "0.5", "--format", "csv", "--out", "-"],
        lambda out: out[0] == "id,text",
    ),
    "export --removed": (
        ["export", "{db}", "--threshold", "0.5", "--out", "{tmp}/k.jsonl", "--removed", "-"],
        lambda out: {"id", "duplicate_of", "reason"} <= set(json.loads(out[0])),
    ),
    "export --decisions-log": (
        ["export", "{db}", "--threshold", "0.5", "--out", "{tmp}/k.jsonl", "--decisions-log", "-"],
        lambda out: json.loads(out[0])["kind"] == "keep",
    ),
    "export --manifest": (
        ["export", "{db}", "--threshold", "0.5", "--out", "{tmp}/k.jsonl", "--manifest", "-"],
        lambda out: json.loads("\n".join(out))["threshold"] == 0.5,
    ),
    "tune --labels-out": (
        ["tune", "{db}", "--labels-out", "-"],
        lambda out: json.loads(out[0])["label"] == "duplicate",
    ),
    "synth --out": (
        ["synth", "--n-unique", "2", "--out", "-"],
        lambda out: len(out) == 6 and "group" in json.loads(out[0]),
    ),
}


@pytest.mark.parametrize("name", list(STREAMS))
def test_dash_is_standard_output_for_every_stream_output(scanned, tmp_path, monkeypatch, capfd, name):
    """The records go to standard output (the real one, descriptor 1), the summary to standard
    error, and no file named `-` appears."""
    db = scanned
    _reviewed(db)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args, check = STREAMS[name]
    capfd.readouterr()
    result = CliRunner().invoke(main, [a.format(db=db, tmp=work) for a in args])
    assert result.exit_code == 0, result.output
    written = capfd.readouterr().out.splitlines()
    assert written and check(written), written[:3]
    assert not (work / "-").exists() and not (tmp_path / "-").exists()
    assert "wrote" in result.stderr or "kept" in result.stderr  # the closing line is not mixed into the stream


def test_the_decisions_log_and_export_help_name_the_same_statuses(scanned, tmp_path):
    """export --help names each status the decisions log writes (decisions.STATUS_NAMES), and
    the log writes only those."""
    from dedup_tui.engine.curate.curated import STATUS_NAMES

    db = scanned
    _reviewed(db)
    log = tmp_path / "decisions.jsonl"
    ok("export", db, "--threshold", "0.5", "--out", tmp_path / "k.jsonl", "--decisions-log", log)
    written = {json.loads(line)["doc_id"]: json.loads(line)["status"] for line in log.read_text().splitlines()}
    assert written == {"doc_A": "active", "doc_D": "discarded", "late_B": "active", "doc_C": "undone"}
    help_text = " ".join(ok("export", "--help").output.split())
    option = help_text[help_text.index("--decisions-log FILE") : help_text.index("--manifest FILE")]
    for status in STATUS_NAMES.values():
        assert f"{status} (" in option, (status, option)
    from ..docs_text import section

    export_docs = " ".join(section("Export").split())  # docs/cli.md
    assert all(f"`{status}`" in export_docs for status in STATUS_NAMES.values())


# -- the first run ---------------------------------------------------------------------------


def test_the_first_run_says_where_it_wrote_the_sample_and_its_project(tmp_path, monkeypatch):
    """Bare `dedup-tui` copies the sample into the user data directory: the first run says where
    (on stderr, before the app opens); later runs, which reopen that project, do not."""
    from dedup_tui.engine.opening import sample_notice
    from dedup_tui.ui import run

    opened = []

    class App:
        def __init__(self, spec):
            self.spec = spec

        def run(self):
            opened.append(self.spec)

    monkeypatch.setattr(run, "DedupApp", App)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    where = tmp_path / "data" / "dedup-tui" / "sample"
    first = ok()
    assert first.stdout == ""
    assert first.stderr.splitlines() == [
        f"dedup-tui: first run: copied the sample to {where}/ (notes.jsonl; your review goes in notes.db)"
    ]
    assert opened[0].db == where / "notes.db" and opened[0].db.exists()
    # what the app's first opening leaves: the sample loaded into its project
    from dedup_tui.engine.ingest import load_corpus

    with Project(opened[0].db) as project:
        load_corpus(project, opened[0].corpus)
    again = ok()
    assert again.stderr == "" and len(opened) == 2 and opened[1].notice is None and opened[1].db == opened[0].db
    # under the home folder, the folder is shown as ~/...
    monkeypatch.setenv("HOME", str(tmp_path))
    assert sample_notice(where / "notes.jsonl", where / "notes.db") == (
        "dedup-tui: first run: copied the sample to ~/data/dedup-tui/sample/ "
        "(notes.jsonl; your review goes in notes.db)"
    )


def test_the_readmes_commands_parse_as_written():
    """Every `dedup-tui` line of the headless commands (docs/cli.md), and the README's quick
    start, is a command line the CLI accepts (parsed, not run), in the spelling shown."""
    import shlex

    from ..docs_text import README, section

    block = section("Headless commands").split("```")[1]
    lines = [shlex.split(line.split("  #")[0]) for line in block.splitlines() if line.startswith("dedup-tui ")]
    assert len(lines) >= 10
    for words in lines:
        name, args = words[1], words[2:]
        command = main.commands[name]
        with command.make_context(name, args) as ctx:
            if any(param.name == "db" for param in command.params):  # it reads a project: given as PROJECT
                assert "--db" not in args and ctx.params["db"] is None, words
                project = ctx.params.get("project_path") or ctx.params["corpus"][0]
                assert project.endswith(".db"), words
    quick_start = section("Quick start", README).split("```")[1]
    app_line, test_line = [line for line in quick_start.splitlines()[1:] if line.strip()]
    assert "pip install -e . && dedup-tui " in app_line and "[test]" not in app_line
    assert 'pip install -e ".[test]" && python -m pytest' in test_line


def test_a_corpus_given_as_the_project_gets_a_hint(tmp_path):
    corpus = write_jsonl(tmp_path / "notes.jsonl", [{"id": "a", "text": "some text"}])
    data = corpus.read_bytes()
    result = cli("export", corpus, "--out", tmp_path / "out.jsonl")
    assert result.exit_code == 1
    (line,) = result.output.splitlines()
    assert line.startswith(f"error: {corpus}: not a dedup-tui project") and "give the project file (.db)" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.jsonl"] and corpus.read_bytes() == data


def test_a_scan_that_creates_its_project_closes_it_when_it_ends(tmp_path):
    """No connection is left for the garbage collector to close (a process that ends without
    the interpreter's teardown would leave the project's -wal beside it)."""
    import gc

    corpus = write_jsonl(tmp_path / "c.jsonl", NEAR_CORPUS)
    db = tmp_path / "new.db"
    gc.disable()
    try:
        ok("scan", db, corpus, "--floor", "0.3")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl", "new.db"]
    finally:
        gc.enable()


@pytest.mark.parametrize("command", ["load", "scan"])
def test_the_console_script_ends_a_load_or_scan_with_its_project_whole(tmp_path, command):
    """run() (the installed `dedup-tui`) ends a successful load or scan without the interpreter's
    teardown: the project must be complete and alone in its folder by then; a failure still
    exits with its code and message."""
    import subprocess
    import sys

    corpus = write_jsonl(tmp_path / "c.jsonl", NEAR_CORPUS)
    db = tmp_path / "p.db"
    script = "import sys; from dedup_tui.cli import run; sys.argv[0] = 'dedup-tui'; run()"
    args = [command, db, corpus] + (["--floor", "0.3"] if command == "scan" else [])
    done = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl", "p.db"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM documents").fetchone()[0] == len(NEAR_CORPUS)
        if command == "scan":
            assert conn.execute("SELECT count(*) FROM pairs").fetchone()[0] > 0
            assert conn.execute("SELECT status FROM runs WHERE command = 'scan'").fetchall() == [("complete",)]

    failed = subprocess.run(
        [sys.executable, "-c", script, command, str(tmp_path / "q.db"), str(tmp_path / "none.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert failed.returncode == 1 and "none.jsonl" in failed.stderr and "Traceback" not in failed.stderr


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads through /proc")
def test_the_command_starts_no_blas_threads_unless_the_user_asks_and_loads_no_rich(tmp_path):
    """numpy's OpenBLAS would start a spinning thread per core that no command uses (set before
    numpy loads), and rich is loaded only to draw progress on a terminal."""
    import os
    import subprocess
    import sys

    code = (
        "import os, sys, dedup_tui.cli, numpy; print(len(os.listdir('/proc/self/task')),"
        " os.environ['OPENBLAS_NUM_THREADS'], 'rich' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    alone = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert alone.stdout.split() == ["1", "1", "False"]
    asked = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**env, "OPENBLAS_NUM_THREADS": "2"},
    )
    assert asked.stdout.split()[1] == "2"


def test_scan_says_buckets_over_max_bucket_were_resolved_not_skipped(tmp_path):
    rng = random.Random(4)
    family = [
        {"id": f"t{i}", "text": "typescript definitions for the package " + "".join(rng.sample("abcdefghijk", 6))}
        for i in range(40)
    ]
    corpus = write_jsonl(tmp_path / "family.jsonl", family)
    r = ok("scan", "--db", tmp_path / "p.db", "--method", "lsh", "--max-bucket", "5", corpus)
    assert "LSH buckets larger than --max-bucket 5 (largest " in r.output, r.output
    assert "none skipped" in r.output and "warning" not in r.output
