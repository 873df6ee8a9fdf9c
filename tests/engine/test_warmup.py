"""The first-run warm-up (engine/warmup.py): a separate process fills an empty numba cache with
what a real scan uses; a scan that needs kernels waits for it as a stage; small corpora start
nothing. Each test that compiles runs in fresh processes on an empty cache folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dedup_tui.engine.compile import kernel_cache, kernel_list, warmup, warmup_job
from dedup_tui.engine.progress import STAGE_NAMES, Control

from ..conftest import write_jsonl
from .test_scan import planted_corpus

ROOT = Path(__file__).resolve().parents[2]


def _env(cache: Path) -> dict:
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = str(cache)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


# Bounds for a hang, not for speed: three processes compiling every kernel on an empty cache took
# 227 and 241 s (the limit was 240) on the 2-core machine shared with a 10M-document scan; the
# whole module takes ~30 s on a quiet one (tests/conftest.py SLOWEST_MODULES).
HANG = 600


def _python(code: str, cache: Path, timeout: float = HANG) -> dict:
    """Run `code` in a fresh interpreter; it prints one JSON line last, returned."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        check=False,
        env=_env(cache),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# Counts every numba compilation in the process (of a kernel, or of anything a kernel calls),
# and lists the kernels compiled for a call from Python (not from another kernel) in `top`.
_COUNT_COMPILES = """
    from numba.core import event
    compiled, top, depth = [], [], [0]
    class Count(event.Listener):
        def on_start(self, ev):
            compiled.append(ev.data["dispatcher"].py_func.__qualname__)
            if not depth[0]:
                top.append(compiled[-1])
            depth[0] += 1
        def on_end(self, ev):
            depth[0] -= 1
    event.register("numba:compile", Count())
"""

_SCAN = """
    import json, sys
    from dedup_tui.engine.compile import warmup
    from dedup_tui.engine.scanning import local
    from dedup_tui.engine.scanning.settings import ScanSettings
    from dedup_tui.engine.ingest import load_corpus
    from dedup_tui.engine.progress import Control
    from dedup_tui.engine.store import Project
    project = Project({db!r}, create=True)
    load_corpus(project, [{corpus!r}])
    stages = []
    control = Control(lambda s, d, t: stages.append(s))
    settings = ScanSettings(method="lsh")
"""


@pytest.fixture
def corpus(tmp_path):
    """Planted near copies plus one template family with over 50,000 pairs (its bitsets and
    the compiled spanning forest) and long texts (the load's compiled normalisation)."""
    docs = planted_corpus(n_bases=120)
    family = " ".join(f"t{i % 97}x{i}" for i in range(60))
    docs += [(f"f{i}", family + f" v{i}") for i in range(330)]
    docs += [(f"long{i}", f"lorem ipsum dolor sit amet {i} " * 400) for i in range(30)]
    return write_jsonl(tmp_path / "corpus.jsonl", docs)


def test_a_scan_follows_the_warmup_another_compiles_beside_both_and_later_scans_compile_nothing(tmp_path, corpus):
    """Two scans start at once on an empty cache: one that needs kernels (it starts the warm-up
    and waits for it as a stage) and one that compiles everything itself, into the same cache, at
    the same time. Both find the same pairs, and the cache they wrote is whole."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    beside = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                _SCAN.format(db=str(tmp_path / "beside.db"), corpus=str(corpus))
                + """
    local.scan(project, settings, control)  # ungated: compiles what it calls as it goes
    print(json.dumps(project.conn.execute("SELECT a, b, jaccard FROM pairs ORDER BY a, b").fetchall()))
    """
            ),
        ],
        env=_env(cache),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out = _python(
            _COUNT_COMPILES
            + _SCAN.format(db=str(tmp_path / "a.db"), corpus=str(corpus))
            + """
    assert not warmup.is_warm()
    at_load = len(compiled)  # a load on an empty cache normalises in Python: it leaves compiling to the warm-up
    gated = warmup.prepare(project, settings, control)
    before_scan = len(compiled) - at_load
    local.scan(project, settings, gated)
    code = warmup._started.process.wait()  # the warm-up ended by itself, without an error
    warm = warmup.is_warm()  # (after its incremental scan, which the scan did not wait for)
    pairs = project.conn.execute("SELECT a, b, jaccard FROM pairs ORDER BY a, b").fetchall()
    print(json.dumps({"stages": stages, "warm": warm, "code": code, "top": top, "at_load": at_load,
                      "before_scan": before_scan, "pairs": pairs}))
    """,
            cache,
        )
    finally:
        beside_out, beside_err = beside.communicate(timeout=HANG)
    assert beside.returncode == 0, beside_err[-3000:]
    beside_pairs = json.loads(beside_out.strip().splitlines()[-1])
    assert out["warm"] and out["code"] == 0
    # The exact copies need no kernels: found at once; the signatures wait for the warm-up's.
    assert out["stages"][:3] == ["exact", "signatures", warmup.STAGE]
    assert out["at_load"] == 0, "the load compiled nothing"
    assert out["before_scan"] == 0, "the process compiled nothing before its scan waited"
    # While it waited the scan compiled listed kernels the warm-up had not taken (each once,
    # shared through the claims), and nothing else.
    listed = [name for _event, _module, name, _types in kernel_list.KERNELS]
    assert set(out["top"]) <= set(listed) and len(out["top"]) == len(set(out["top"])), out["top"]
    assert len(out["pairs"]) >= 50_000  # (the spanning forest's compiled path was taken)
    assert out["pairs"] == beside_pairs
    assert kernel_cache.stamp_path(str(cache)).exists()
    # A second warm-up finds the cache warm and does nothing.
    again = subprocess.run(
        [sys.executable, "-m", "dedup_tui.engine.compile.warmup_job"],
        check=False,
        env=_env(cache),
        capture_output=True,
        timeout=60,
        cwd=ROOT,
    )
    assert again.returncode == 0 and again.stdout == b"" and again.stderr == b""
    # A later scan (the warm-up's compiled normalisation, not the Python one the first scans used)
    # compiles nothing, nor does the exhaustive scan that gives the truth.
    later = _python(
        _COUNT_COMPILES
        + _SCAN.format(db=str(tmp_path / "b.db"), corpus=str(corpus))
        + """
    local.scan(project, settings, warmup.prepare(project, settings, control))
    pairs = project.conn.execute("SELECT a, b, jaccard FROM pairs ORDER BY a, b").fetchall()
    local.scan(project, ScanSettings(method="exhaustive"), control)
    truth = project.conn.execute("SELECT a, b, jaccard FROM pairs ORDER BY a, b").fetchall()
    # nor does a big template family's counting of rare fingerprints (this corpus's is small:
    # forced, as a family of manual pages takes it)
    import numpy as np
    from dedup_tui.engine.scanning.kernels import intersections, text
    intersections.RARE_MIN_KEYS = 0
    texts = [f"page {i} " + " ".join(f"word{(i * j) % 53}" for j in range(80)) for i in range(40)]
    family = intersections.Family(text.normalized_buffer(texts), np.arange(40), 5)
    ra, rb = np.triu_indices(40, 1)
    family.intersections(ra.astype(np.int64), rb.astype(np.int64), below=8)
    print(json.dumps({"pairs": pairs, "truth": truth, "compiled": compiled}))
    """,
        cache,
    )
    assert later["compiled"] == [], "the warm-up compiled all a scan uses, and the cache three processes wrote is whole"
    assert later["pairs"] == out["pairs"]
    assert set(map(tuple, later["pairs"])) <= set(map(tuple, later["truth"]))
    assert len(later["pairs"]) >= 0.99 * len(later["truth"])


def test_the_sample_scan_imports_no_kernels_and_starts_no_warmup(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    sample = ROOT / "sample_corpora" / "notes.jsonl"
    out = _python(
        f"""
    import json, sys
    from dedup_tui.cli import main
    from dedup_tui.engine.compile import kernel_cache, kernel_list, warmup, warmup_job
    try:
        main(["scan", "--db", {str(tmp_path / "s.db")!r}, {str(sample)!r}])
    except SystemExit as exc:
        assert not exc.code, exc.code
    kernels = any(m.startswith("dedup_tui.engine.scanning.kernels.") for m in sys.modules)
    print(json.dumps({{"numba": "numba" in sys.modules, "kernels": kernels,
                      "started": warmup._started is not None}}))
    """,
        cache,
    )
    assert out == {"numba": False, "kernels": False, "started": False}
    assert list(cache.iterdir()) == []


def test_spawning_the_warmup_imports_no_engine_first(tmp_path):
    """start_early spawns the warm-up before the command imports the engine (numpy, the store,
    the pipeline): handing it its sources key must not import them either."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    out = _python(
        f"""
    import json, subprocess, sys
    from dedup_tui.engine.compile import warmup
    handed = {{}}
    class NoProcess:
        def __init__(self, args, env, **options):
            handed.update(env)
        def wait(self):
            return 0
    subprocess.Popen = NoProcess
    warmup._spawn({str(cache)!r}, "0123456789abcdef")
    print(json.dumps({{"key": handed.get("DEDUP_TUI_WARMUP_KEY"),
                      "imported": sorted(m for m in ("numpy", "dedup_tui.engine.scanning.local",
                                                     "dedup_tui.engine.compile.warmup_job") if m in sys.modules)}}))
    """,
        cache,
    )
    assert out == {"key": "0123456789abcdef", "imported": []}


def test_start_for_corpus_only_for_a_large_corpus_or_lsh(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(warmup, "start", lambda: started.append(1))
    small = write_jsonl(tmp_path / "small.jsonl", [("a", "x" * 100)])
    warmup.start_for_corpus([small])
    warmup.start_for_corpus([small], "exhaustive")
    assert started == []
    warmup.start_for_corpus([small], "lsh")
    big = tmp_path / "big.jsonl"
    big.write_text("x" * warmup.CORPUS_BYTES)
    warmup.start_for_corpus([big])
    assert started == [1, 1]
    warmup.start_for_corpus([big], "exhaustive")
    assert started == [1, 1]


def test_no_writable_cache_means_no_warmup_and_no_wait(tmp_path, monkeypatch, make_project):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(blocker / "cache"))  # under a file: cannot be made
    assert warmup.cache_dir() is None
    assert warmup.start() is None and not warmup.is_warm()
    project = make_project([("a", "one two three"), ("b", "one two four")])
    from dedup_tui.engine.scanning.settings import ScanSettings

    stages = []
    warmup.prepare(project, ScanSettings(method="lsh"), Control(lambda s, d, t: stages.append(s)))
    assert stages == []


def test_the_stamp_follows_the_engine_sources(tmp_path, monkeypatch):
    engine = tmp_path / "engine"
    engine.mkdir()
    (engine / "kernels.py").write_text("a = 1\n")
    monkeypatch.setattr(kernel_cache, "ENGINE", engine)
    first = kernel_cache.stamp_path(str(tmp_path))
    first.touch()
    assert kernel_cache.is_warm(str(tmp_path))
    (engine / "kernels.py").write_text("a = 22\n")  # another size (and time): changed kernels
    assert not kernel_cache.is_warm(str(tmp_path))
    kernel_cache.stamp_path(str(tmp_path)).touch()
    (engine / "store").mkdir()
    (engine / "store" / "schema.py").write_text("b = 1\n")  # a module of a subpackage counts too
    assert not kernel_cache.is_warm(str(tmp_path))


def test_the_stage_has_a_name():
    assert STAGE_NAMES[warmup.STAGE] == "Preparing the compiled kernels (first run only)"


def test_the_scan_prediction_follows_the_method(make_project):
    from dedup_tui.engine.scanning.settings import ScanSettings

    project = make_project([("a", "one two three"), ("b", "one two four"), ("c", "five six")])
    assert warmup.scan_needs_kernels(project, ScanSettings(method="lsh"))
    assert not warmup.scan_needs_kernels(project, ScanSettings(method="exhaustive"))
    assert not warmup.scan_needs_kernels(project, ScanSettings())  # tiny: exhaustive


def test_a_failed_warmup_is_not_started_again_for_the_same_code(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))

    def broken(cache, *_):
        raise RuntimeError("a kernel that does not compile")

    monkeypatch.setattr(warmup_job, "_warm", broken)
    with pytest.raises(RuntimeError):
        warmup_job.main([])
    assert not warmup.is_warm()
    assert warmup.start() is None  # the scan compiles (and reports the error) itself


class CompilingWarmup(warmup.Warmup):
    """A warm-up that, at each wait, compiles (adds to the ready file) the next of `later`,
    and ends after them."""

    def __init__(self, cache: str, later: list[int]):
        super().__init__(cache, None)
        self.later, self.ended = iter(later), False

    def running(self):
        return not self.ended

    def wait(self, seconds):
        index = next(self.later, None)
        if index is None:
            self.ended = True
        else:
            with open(kernel_cache.ready_path(self.cache), "a") as fh:
                fh.write(f"{index}\n")


def gated_scan(tmp_path, monkeypatch, ready: list[int], later: list[int]):
    """(a scan's Control gated by a CompilingWarmup that has compiled the kernels `ready` and
    compiles `later` one per wait, what the scan reported through it)."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    kernel_cache.ready_path(str(tmp_path)).write_text("".join(f"{index}\n" for index in ready))
    seen = []
    gated = warmup._Gated(
        Control(lambda s, d, t: seen.append((s, d, t))), CompilingWarmup(str(tmp_path), later), tick=0
    )
    return gated, seen


def _listed(event: str) -> list[int]:
    return [i for i, (listed, *_) in enumerate(kernel_list.KERNELS) if listed == event]


def test_the_scan_waits_at_each_report_for_the_kernels_it_calls_next(tmp_path, monkeypatch):
    at_start, at_end = _listed("signatures:start"), _listed("signatures:end")
    assert at_start and at_end  # (the list as recorded: tested against the warm-up's own scan below)
    gated, seen = gated_scan(tmp_path, monkeypatch, at_start[1:], [at_start[0], *at_end, 999])
    gated.report("exact", 0, 0)  # no kernels follow the exact copies: no wait
    assert seen == [("exact", 0, 0)]
    gated.report("signatures", 0, 8)  # starts: waits for the one kernel of its start not compiled yet
    assert kernel_cache.ready_kernels(str(tmp_path)) == set(at_start)
    assert seen[1] == ("signatures", 0, 8) and seen[2][0] == warmup.STAGE and seen[-1] == ("signatures", 0, 8)
    seen.clear()
    gated.report("signatures", 0, 8)  # the same report again, and mid-stage: no wait
    gated.report("signatures", 4, 8)
    assert seen == [("signatures", 0, 8), ("signatures", 4, 8)]
    gated.report("signatures", 8, 8)  # its end: waits for what follows it
    assert kernel_cache.ready_kernels(str(tmp_path)) == set(at_start) | set(at_end)
    assert seen[-1] == ("signatures", 8, 8)
    gated.report("candidates", 7, 7)  # what follows that is never compiled: waits until the warm-up ended
    assert gated._handle.ended and seen[-1] == ("candidates", 7, 7)


def test_a_report_no_kernel_follows_never_waits(tmp_path, monkeypatch):
    gated, seen = gated_scan(tmp_path, monkeypatch, [], [0])
    gated.report("write", 9, 9)  # (the last, inside the scan's transaction)
    gated.report("verify", 0, 0)  # (no total)
    gated.report("shingles", 0, 5)  # (not a report the warm-up's scan makes)
    assert seen == [("write", 9, 9), ("verify", 0, 0), ("shingles", 0, 5)]
    assert not gated._handle.ended and kernel_cache.ready_kernels(str(tmp_path)) == set()


def test_report_events_are_the_first_start_and_end_of_each_stage():
    events = kernel_cache.ReportEvents()
    seen = [
        events.see(*report)
        for report in [
            ("exact", 0, 0),
            ("signatures", 0, 9),
            ("signatures", 0, 9),
            ("signatures", 3, 9),
            ("signatures", 9, 9),
            ("candidates", 2, 4),
            ("candidates", 4, 4),
            ("signatures", 9, 9),
        ]
    ]
    assert seen == [None, "signatures:start", None, None, "signatures:end", None, "candidates:end", None]


def test_the_kernel_list_is_what_the_warmups_scan_compiles():
    """kernel_list.py, recorded again on an empty cache: regenerate it with
    `python -m dedup_tui.engine.compile.warmup_job --record` when this fails."""
    recorded = warmup_job.record()
    assert recorded == Path(kernel_list.__file__).read_text(encoding="utf-8")


def test_claims_give_each_kernel_to_one_process(tmp_path, monkeypatch):
    compiled = []
    monkeypatch.setattr(warmup_job, "compile_listed", compiled.append)
    mine, theirs = warmup_job.Claims(str(tmp_path)), warmup_job.Claims(str(tmp_path))
    mine.reset()
    assert theirs.claim(1) and not mine.claim(1)  # taken
    assert mine.owner_alive(1)  # (this process's id: alive)
    assert mine.take_one([1, 2, 3]) and compiled == [2]  # the first nobody took
    assert mine.take_one([1, 2, 3]) and compiled == [2, 3]
    assert not mine.take_one([1, 2, 3])  # none left
    assert kernel_cache.ready_kernels(str(tmp_path)) == {2, 3}  # (1: its taker has not finished it)
    (mine.dir / "4").write_text("999999999")  # a process that is gone
    assert not mine.owner_alive(4) and not mine.owner_alive(5)
    mine.finish([2, 3, 4, 5], patience=60)  # what nobody (alive) works on: compiled here
    assert compiled == [2, 3, 4, 5] and kernel_cache.ready_kernels(str(tmp_path)) == {2, 3, 4, 5}
    mine.finish([1], patience=0)  # a live process that never finishes its claim (stopped): compiled after the patience
    assert compiled[-1] == 1 and 1 in kernel_cache.ready_kernels(str(tmp_path))
    mine.remove()
    assert not mine.claim(6) and kernel_cache.ready_kernels(str(tmp_path)) == set()  # the warm-up is over


def test_start_early_reads_the_dedup_tui_command_line_only(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(warmup, "start_for_corpus", lambda corpus, method="auto": calls.append((corpus, method)))
    prog = str(ROOT / "dedup_tui" / "__main__.py")
    warmup.start_early([prog, "scan", "--db", "p.db", "--k", "5", "a.jsonl", "b.csv"])
    warmup.start_early(["/usr/bin/dedup-tui", "load", "--method=lsh", "--db=p.db", "c.jsonl"])
    warmup.start_early(["/usr/bin/dedup-tui", "scan", "--method", "exhaustive", "--db", "p.db", "d.jsonl"])
    assert calls == [(["a.jsonl", "b.csv"], "auto"), (["c.jsonl"], "lsh"), (["d.jsonl"], "exhaustive")]
    calls.clear()
    warmup.start_early(["/usr/bin/dedup-tui", "scan", "--db", "p.db"])  # no corpus: the scan decides
    warmup.start_early(["/usr/bin/dedup-tui", "export", "--db", "p.db", "x.jsonl"])
    warmup.start_early(["/x/pytest/__main__.py", "scan", "a.jsonl"])  # another program
    assert calls == []
