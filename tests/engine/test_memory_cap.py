import json

import pytest

from dedup_tui.engine.scanning.memory import MIN_CAP, SizeError, default_cap, format_size, parse_size
from dedup_tui.engine.store import derived


@pytest.mark.parametrize(
    "text,expected",
    [("3G", 3 << 30), ("500MB", 500 << 20), ("2.5GiB", int(2.5 * (1 << 30))), ("1048576", 1 << 20), (" 4 k ", 4096)],
)
def test_sizes_as_people_write_them(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "G", "3X", "-1G", "three"])
def test_a_size_that_is_not_one_is_refused(text):
    with pytest.raises(SizeError, match="not a size"):
        parse_size(text)


def test_sizes_read_back_and_the_default_is_usable():
    assert format_size(3 << 30) == "3.0 GB"
    assert format_size(730 << 20) == "730 MB"
    assert default_cap() >= MIN_CAP


# -- a scan under a cap: candidates spilled and verified in passes -------------------------------

SPILL_GLOB = ".dedup-tui-spill-*"


def stored_scan(project) -> dict:
    """Everything a scan stores of its pairs and exact groups, as stored."""
    conn = project.conn
    meta = dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'pair_%' OR key LIKE 'exact_%'"))
    return {
        "pairs": conn.execute("SELECT a, b, jaccard FROM pairs ORDER BY a, b").fetchall(),
        "pair_arrays": conn.execute("SELECT chunk, a, b, jaccard FROM pair_arrays ORDER BY chunk").fetchall(),
        "forest": conn.execute("SELECT edges FROM pair_forest").fetchall(),
        "exact": conn.execute("SELECT exact_of FROM exact_array").fetchall(),
        "exact_column": conn.execute("SELECT ord, exact_of FROM documents ORDER BY ord").fetchall(),
        "meta": meta,
    }


@pytest.fixture
def tiny_passes(monkeypatch):
    """Passes of a few dozen candidates, split and written a few at a time; records the
    passes' first rows, the candidates and the spill folder's mode while it exists."""
    from dedup_tui.engine.scanning import passes
    from dedup_tui.engine.store import derived

    monkeypatch.setattr(passes, "MIN_PASS_CANDIDATES", 40)
    monkeypatch.setattr(passes, "SPILL_BLOCK", 64)
    monkeypatch.setattr("dedup_tui.engine.scanning.candidates.MIN_PASS_CANDIDATES", 40)
    monkeypatch.setattr(derived, "PAIR_ARRAY_CHUNK", 50)
    seen = {"starts": [], "keys": [], "modes": set()}
    real_add, real_passes, real_append = (
        passes.CandidatePasses.add,
        passes.CandidatePasses.passes,
        passes.SpillFolder.append,
    )

    def add(self, keys):
        seen["keys"].append(keys.copy())
        real_add(self, keys)

    def each_pass(self):
        for part in real_passes(self):
            seen["starts"] = list(self.pass_starts)
            yield part

    def append(self, name, array):
        real_append(self, name, array)
        seen["modes"].add(self.path.stat().st_mode & 0o777)

    monkeypatch.setattr(passes.CandidatePasses, "add", add)
    monkeypatch.setattr(passes.CandidatePasses, "passes", each_pass)
    monkeypatch.setattr(passes.SpillFolder, "append", append)
    return seen


def planted(make_project, name):
    from tests.engine.test_scan import planted_corpus

    return make_project(planted_corpus(160, seed=5), name=name)


def test_a_scan_in_passes_stores_what_a_scan_in_memory_does(make_project, tmp_path, tiny_passes):
    import numpy as np

    from dedup_tui.engine.scanning import local
    from dedup_tui.engine.scanning.settings import ScanSettings

    settings = ScanSettings(floor=0.4, method="lsh")
    in_memory = planted(make_project, "in_memory")
    whole = local.scan(in_memory, settings, memory=None)
    assert whole.passes == 1 and whole.spill_bytes == 0
    tiny_passes["keys"].clear()

    capped = planted(make_project, "capped")
    result = local.scan(capped, settings, memory=1)
    assert result.passes > 3 and result.spill_bytes > 0
    recorded = capped.conn.execute("SELECT counts FROM runs ORDER BY id DESC LIMIT 1").fetchone()[0]
    assert json.loads(recorded)["spill_bytes"] == result.spill_bytes  # (what the benchmark reads)
    assert tiny_passes["modes"] == {0o700}
    assert not list(tmp_path.glob(SPILL_GLOB)), "the spill folder outlived the scan"
    assert (result.pairs, result.verified, result.prefiltered) == (whole.pairs, whole.verified, whole.prefiltered)
    assert stored_scan(capped) == stored_scan(in_memory)
    assert len(stored_scan(capped)["pair_arrays"]) > 2  # (written a chunk at a time)

    # Passes were cut between two rows that both have candidates, and found pairs (rows are
    # indices of the distinct texts, ords those of the documents).
    reps = np.flatnonzero(derived.unpack_exact_array("zstd", stored_scan(capped)["exact"][0][0]) < 0)
    n_reps = len(reps)
    keys = np.concatenate(tiny_passes["keys"])
    rows_with_candidates = set((keys // n_reps).tolist())
    first_of_pairs = {a for a, _, _ in stored_scan(capped)["pairs"]}
    starts = tiny_passes["starts"][1:]
    assert len(starts) == result.passes - 1
    cut_inside = [s for s in starts if {s - 1, s} <= rows_with_candidates]
    assert len(cut_inside) > 3
    assert any({int(reps[s - 1]), int(reps[s])} <= first_of_pairs for s in cut_inside)


def test_a_cancelled_scan_in_passes_leaves_the_last_scan_and_no_spill(make_project, tmp_path, tiny_passes, monkeypatch):
    from dedup_tui.engine.errors import Cancelled
    from dedup_tui.engine.progress import Control
    from dedup_tui.engine.scanning import local, passes
    from dedup_tui.engine.scanning.settings import ScanSettings

    project = planted(make_project, "cancelled")
    local.scan(project, ScanSettings(floor=0.6, method="lsh"))
    before = stored_scan(project)
    control = Control()
    real_add = passes.SpilledPairs.add

    def add_then_cancel(self, *pairs):
        real_add(self, *pairs)
        control.cancel.set()

    monkeypatch.setattr(passes.SpilledPairs, "add", add_then_cancel)
    with pytest.raises(Cancelled):
        local.scan(project, ScanSettings(floor=0.4, method="lsh"), control, memory=1)
    assert tiny_passes["modes"] == {0o700}  # (it had spilled)
    assert not list(tmp_path.glob(SPILL_GLOB))
    assert stored_scan(project) == before


def test_the_cap_is_not_a_setting_an_incremental_scan_compares(make_project, tiny_passes):
    from dedup_tui.engine.ingest import load_corpus
    from dedup_tui.engine.scanning import local
    from dedup_tui.engine.scanning.settings import ScanSettings
    from tests.conftest import write_jsonl
    from tests.engine.test_scan import planted_corpus

    more = [(f"new{i}", text) for i, (_, text) in enumerate(planted_corpus(30, seed=9))]
    results, stored = {}, {}
    for name, memory in (("capped", 1), ("uncapped", None)):  # (each scan after a load under the other cap)
        project = planted(make_project, name)
        local.scan(project, ScanSettings(floor=0.4, method="lsh"), memory=1 if memory is None else None)
        load_corpus(project, [write_jsonl(project.path.parent / f"more-{name}.jsonl", more)])
        results[name] = local.scan(project, ScanSettings(floor=0.4, method="lsh"), memory=memory)
        assert results[name].incremental, results[name].full_reason
        stored[name] = stored_scan(project)
    capped, uncapped = results["capped"], results["uncapped"]
    # the incremental scan's candidates went through passes under the cap, as a full scan's do
    assert capped.passes > 3 and capped.spill_bytes > 0 and uncapped.passes == 1 and uncapped.spill_bytes == 0
    assert capped.memory_cap == 1
    assert (capped.pairs, capped.verified, capped.prefiltered) == (
        uncapped.pairs,
        uncapped.verified,
        uncapped.prefiltered,
    )
    assert stored["capped"] == stored["uncapped"]  # (and this is a full rescan's: test_incremental.py)


def test_memory_is_a_size_on_the_command_line(tmp_path):
    from tests.conftest import cli, ok, small_corpus, write_jsonl

    corpus = write_jsonl(tmp_path / "c.jsonl", small_corpus())
    bad = cli("scan", tmp_path / "p.db", corpus, "--memory", "lots")
    assert bad.exit_code == 2 and "'lots' is not a size" in bad.output
    small = cli("scan", tmp_path / "p.db", corpus, "--memory", "1M")
    assert small.exit_code == 2 and "below the 64.0 MB" in small.output
    assert not (tmp_path / "p.db").exists()
    done = ok("scan", tmp_path / "p.db", corpus, "--memory", "2G")
    assert done.output.splitlines()[0] == "memory cap 2.0 GB (--memory)"
    default = ok("scan", tmp_path / "p.db")
    assert default.output.splitlines()[0].startswith("memory cap ") and "available" in default.output
    assert "warning" not in default.output
    # (this process alone holds more than 64 MB: the scan says it could not keep within the cap)
    below = ok("scan", tmp_path / "p.db", "--memory", "64M", "--method", "lsh")
    assert "more than the 64.0 MB cap: a cap below that is exceeded" in below.output


def test_nibbles_packed_a_block_of_rows_at_a_time_are_the_whole_packing(monkeypatch):
    import numpy as np

    from dedup_tui.engine.scanning import lsh

    signatures = np.random.default_rng(3).integers(0, 2**32, (37, 100), dtype=np.uint64).astype(np.uint32)
    nib = np.zeros((37, 112), np.uint8)
    nib[:, :100] = signatures & 0xF
    whole = np.ascontiguousarray(nib[:, 0::2] | (nib[:, 1::2] << np.uint8(4))).view(np.uint64)
    monkeypatch.setattr(lsh, "PACK_ROWS", 8)
    assert np.array_equal(lsh.pack_nibbles(signatures), whole)


def test_a_spill_that_cannot_be_written_is_one_error_and_changes_nothing(
    make_project, tmp_path, tiny_passes, monkeypatch
):
    from dedup_tui.engine.errors import ProjectError
    from dedup_tui.engine.scanning import local, passes
    from dedup_tui.engine.scanning.settings import ScanSettings

    project = planted(make_project, "no_room")
    local.scan(project, ScanSettings(floor=0.6, method="lsh"))
    before = stored_scan(project)
    real_file = passes.SpillFolder.file
    monkeypatch.setattr(passes.SpillFolder, "file", lambda self, name: real_file(self, "gone") / name)  # (not there)
    with pytest.raises(ProjectError, match=r"gone/[\w-]+: the scan could not write what did not fit in memory"):
        local.scan(project, ScanSettings(floor=0.4, method="lsh"), memory=1)
    assert not list(tmp_path.glob(SPILL_GLOB))
    assert stored_scan(project) == before


def test_the_default_cap_per_worker_is_half_a_cpus_memory_on_the_smallest_node():
    from dedup_tui.engine.ray.job import describe_worker_cap, worker_cap

    nodes = [
        {"Alive": True, "Resources": {"memory": 16 << 30, "CPU": 4.0}},
        {"Alive": True, "Resources": {"memory": 6 << 30, "CPU": 6.0}},  # 1 GB a CPU
        {"Alive": False, "Resources": {"memory": 1 << 30, "CPU": 8.0}},  # (gone)
    ]

    assert worker_cap(nodes) == (512 << 20, 1 << 30)
    assert describe_worker_cap(nodes, 0) == (
        "memory cap 512 MB per worker: 50% of the 1.0 GB a CPU has on the smallest node (--memory to change)"
    )


# -- spill folders of killed scans ------------------------------------------------------------


def test_a_killed_scans_spill_folder_is_removed_by_the_next_open_or_scan(make_project, tmp_path):
    import os
    import signal
    import socket
    import subprocess
    import sys

    import numpy as np

    from dedup_tui.engine import opening
    from dedup_tui.engine.scanning import local, passes

    project = make_project([("a", "one two three four"), ("b", "five six seven eight")], name="p")
    # a scan spilling beside the project, killed
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, signal, sys, numpy as np; from pathlib import Path;"
            "from dedup_tui.engine.scanning.passes import SpillFolder;"
            "SpillFolder(Path(sys.argv[1])).append('candidates', np.arange(1000));"
            "os.kill(os.getpid(), signal.SIGKILL)",
            str(tmp_path),
        ],
        env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert killed.returncode == -signal.SIGKILL
    (dead,) = tmp_path.glob(SPILL_GLOB)
    assert dead.name.startswith(f".dedup-tui-spill-{socket.gethostname()}.") and (dead / "candidates").exists()
    # kept: this live process's folder, and a folder of the dead process's name it did not fill
    live = passes.SpillFolder(tmp_path)
    live.append("pass-0", np.arange(10))
    foreign = tmp_path / (dead.name[:-3] + "zzz")
    foreign.mkdir(mode=0o700)
    (foreign / "notes.txt").write_text("mine")

    spec = opening.prepare(project.path)
    assert spec.notice == (f"removed 1 spill folder(s) that killed scans left beside the project (7.8 KB): {dead.name}")
    assert not dead.exists() and live.path is not None and (live.path / "pass-0").exists()
    assert (foreign / "notes.txt").exists()
    assert opening.prepare(project.path).notice is None

    # the next scan does it too, and says so
    killed_again = tmp_path / dead.name
    killed_again.mkdir(mode=0o700)
    (killed_again / "a").write_bytes(b"x" * 10)
    local.scan(project)
    assert project.notices[-1].startswith("removed 1 spill folder(s)") and not killed_again.exists()
    assert live.path.exists() and foreign.exists()
    live.close()


def test_the_band_shuffle_has_partitions_enough_for_the_cap():
    from types import SimpleNamespace

    from dedup_tui.engine.ray.job import _ScanJob
    from dedup_tui.engine.ray.settings import ClusterScanSettings

    def partitions(cap: int, n_reps: int, chosen: int = 0) -> int:
        job = SimpleNamespace(
            result=SimpleNamespace(memory_cap=cap),
            settings=ClusterScanSettings(partitions=chosen),
            partitions=chosen or 4,
            n_reps=n_reps,
            banding=SimpleNamespace(bands=39),
        )
        return _ScanJob.band_partitions(job)  # type: ignore[arg-type]

    # 10M distinct texts x 39 bands x 24 B in (1 GB - 256 MB) / 2 a task
    assert partitions(1 << 30, 10_000_000) == 24
    assert partitions(1 << 30, 745_000) == 4  # (the cluster's own count is enough)
    assert partitions(1 << 30, 10_000_000, chosen=3) == 3  # --partitions keeps its word
    assert partitions(0, 10_000_000) == 4
