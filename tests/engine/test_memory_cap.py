import json

import pytest

from dedup_tui.engine.scanning.memory import MIN_CAP, SizeError, default_cap, format_size, parse_size


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
    reps = np.flatnonzero(np.frombuffer(stored_scan(capped)["exact"][0][0], "<i8") < 0)
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

    project = planted(make_project, "grows")
    local.scan(project, ScanSettings(floor=0.4, method="lsh"), memory=1)
    more = [(f"new{i}", text) for i, (_, text) in enumerate(planted_corpus(30, seed=9))]
    load_corpus(project, [write_jsonl(project.path.parent / "more.jsonl", more)])
    result = local.scan(project, ScanSettings(floor=0.4, method="lsh"), memory=None)
    assert result.incremental, result.full_reason
    added = stored_scan(project)
    local.scan(project, ScanSettings(floor=0.4, method="lsh"), full=True)
    assert stored_scan(project)["pairs"] == added["pairs"]


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
