from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from dedup_tui.engine.store import Project

from .open_projects import Tracker

FIXTURES = Path(__file__).parent / "fixtures"

EXACT_CORPUS = [
    ("doc_001", "The quick brown fox jumps over the lazy dog."),
    ("doc_002", "The quick brown fox jumps over the lazy dog."),
    ("doc_003", "  The quick brown fox jumps over the lazy dog.  "),
    ("doc_004", "Machine learning requires large amounts of training data."),
    ("doc_005", "Neural networks learn representations from raw input."),
]

NEAR_CORPUS = [
    ("doc_A", "The quick brown fox jumps over the lazy dog"),
    ("doc_B", "A quick brown fox leaped over the sleeping dog"),
    ("doc_C", "Machine learning requires large amounts of training data"),
    ("doc_D", "Machine learning requires large amounts of labeled data"),
    ("doc_E", "Neural networks learn representations from raw input features"),
]


def write_jsonl(path: Path, docs) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for d in docs:
            if isinstance(d, tuple):
                d = {"id": d[0], "text": d[1]}
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
    return path


def cli(*args):
    """The CLI in-process: a deliberate exit (click's or ours) is acceptable, never an escaped
    exception or a traceback in the output."""
    from click.testing import CliRunner

    from dedup_tui.cli import main

    result = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result


def ok(*args):
    result = cli(*args)
    assert result.exit_code == 0, result.output
    return result


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def small_corpus(n_groups: int = 12) -> list[dict]:
    """Groups of near-duplicate notes (a base and two edited copies) plus one exact copy."""
    words = (
        "river library council garden report schedule volunteer students meeting import path release "
        "quiet survey winter opening hours notes front desk bread recipe choir water"
    ).split()
    docs = []
    for g in range(n_groups):
        base = [words[(g * 7 + i * 3) % len(words)] + str(g) for i in range(40)]
        docs.append({"id": f"g{g}-a", "text": " ".join(base)})
        for c in range(2):
            copy = list(base)
            copy[5 + c * 7] = "changed"
            docs.append({"id": f"g{g}-{'bc'[c]}", "text": " ".join(copy)})
    docs.append({"id": "exact-copy", "text": docs[0]["text"]})
    return docs


class ScannedCorpus(NamedTuple):
    """What the `scanned` project is made of: its documents ((id, text) tuples or records) and the
    settings of its scan (None: the defaults)."""

    docs: list[Any]
    settings: Any = None


@pytest.fixture
def scanned_corpus() -> ScannedCorpus:
    """small_corpus() with the default scan settings. A module whose tests need other data
    overrides this fixture (tests/cli/test_cli.py, tests/review/test_review_session.py,
    tests/ui/test_view_snapshot.py)."""
    return ScannedCorpus(small_corpus())


@pytest.fixture
def scanned(tmp_path, scanned_corpus: ScannedCorpus) -> Path:
    """The project file tmp_path/corpus.db, `scanned_corpus` loaded and scanned as `dedup-tui
    load` and `scan` make it, and closed (so it can be copied). Built through the engine the CLI
    calls: two CLI processes cost 0.85 s a test."""
    from dedup_tui.engine.ingest import load_corpus
    from dedup_tui.engine.scanning.local import scan
    from dedup_tui.engine.store import build_project

    corpus = write_jsonl(tmp_path / "corpus.jsonl", scanned_corpus.docs)
    db = tmp_path / "corpus.db"
    project, _ = build_project(db, lambda new: load_corpus(new, [corpus]))
    with project:
        scan(project, scanned_corpus.settings)
    return db


OPEN_PROJECTS = Tracker()


def pytest_configure(config):
    """With workers (the suite's `-n 2`), the kernel warm-up starts with the run, as a first
    `dedup-tui` command starts it: on a cold cache (CI) it compiles every kernel while the UI
    modules, which need none, run first. Else the first gated scan started it about a minute
    in and waited for it (~10 s), and the tests before compiled their kernels in their own
    process too. With -n 0 (a file at a time) nothing starts: each scan compiles what it uses."""
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        return
    from dedup_tui.engine.compile import warmup

    warmup.start()


@pytest.fixture(scope="session", autouse=True)
def _track_projects():
    with pytest.MonkeyPatch.context() as monkeypatch:
        OPEN_PROJECTS.install(monkeypatch)
        yield


@pytest.fixture(scope="module", autouse=True)
def _module_closes_its_projects(_track_projects):
    scope = OPEN_PROJECTS.begin()
    yield
    left = OPEN_PROJECTS.end(scope)
    if left:
        pytest.fail(f"the module's fixtures left {len(left)} project(s) open: " + "; ".join(left), pytrace=False)


# The slowest modules (seconds of one worker, measured with --durations=0), run first: each
# worker takes the next module when it is nearly done, so the two end together only when the
# long modules are not left for last (xdist's own order is by number of tests).
SLOWEST_MODULES = {
    "tests/ui/test_app.py": 46,
    "tests/ui/test_fit.py": 34,
    "tests/cli/test_serve.py": 31,
    "tests/engine/test_warmup.py": 30,
    "tests/engine/test_ray.py": 28,  # (with the cluster-scan import tests, 3 s)
    "tests/engine/test_warmup_bounds.py": 25,
    "tests/ui/test_snapshots.py": 21,
    "tests/ui/test_pair_view.py": 19,
    "tests/reliability/test_interruptions.py": 18,
    "tests/engine/test_kernels.py": 14,
    "tests/ui/test_decided_at_once.py": 14,
    "tests/ui/test_undo_redo.py": 14,
    "tests/ui/test_review_trust.py": 13,
    "tests/ui/test_typing_ahead.py": 13,
    "tests/ui/test_tune_screen.py": 12,
}


def pytest_collection_modifyitems(config, items):
    def seconds(item) -> float:
        return SLOWEST_MODULES.get(item.nodeid.split("::", 1)[0], 0)

    items.sort(key=seconds, reverse=True)  # (stable: each module's tests keep their order)


_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.failed:
        item.stash[_FAILED] = True


@pytest.fixture(autouse=True)
def _test_closes_its_projects(_module_closes_its_projects, request):
    """Every project a test opens is closed by it: the ones it left open are closed here and the
    test errors, naming them (unless it failed already: a failed assertion skips its close)."""
    scope = OPEN_PROJECTS.begin()
    yield
    left = OPEN_PROJECTS.end(scope)
    if left and not request.node.stash.get(_FAILED, False):
        pytest.fail(f"test left {len(left)} project(s) open: " + "; ".join(left), pytrace=False)


def pytest_terminal_summary(terminalreporter):
    for title, projects in (
        ("connections left open by a Project(...) that raised", OPEN_PROJECTS.engine_leaks),
        ("projects the app still held when its test ended", OPEN_PROJECTS.kept_by_app),
    ):
        if projects:
            terminalreporter.write_sep("-", f"{title} (closed by tests/conftest.py)")
            for project in projects:
                terminalreporter.write_line(project)


@pytest.fixture
def make_project(tmp_path):
    """Create a project from (id, text) tuples or dicts; returns the open Project, closed at teardown."""
    from dedup_tui.engine.ingest import load_corpus

    made: list[Project] = []

    def make(docs, name="corpus") -> Project:
        corpus = write_jsonl(tmp_path / f"{name}.jsonl", docs)
        project = Project(tmp_path / f"{name}.db", create=True)
        made.append(project)
        load_corpus(project, [corpus])
        return project

    yield make
    for project in made:
        project.close()
