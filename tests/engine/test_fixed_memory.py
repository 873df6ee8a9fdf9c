"""What the scan holds whatever its candidates: the memory glibc holds free given back between
stages; the texts spilled while the candidates are found when they do not fit."""

import ctypes
import hashlib
import os
import platform

import numpy as np
import pytest

from dedup_tui.engine.scanning import candidates, lsh, memory, passes
from dedup_tui.engine.scanning.kernels import text as kernels_text


def _resident() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_freed_small_buffers_stop_counting_in_the_resident_size():
    # 160 MB of 4 KB buffers (malloc's, not Python's small-object pool), every 64th kept: the
    # holes between the kept ones cannot be trimmed from the heap's top, so glibc keeps them.
    buffers = [ctypes.create_string_buffer(4096) for _ in range(40_000)]
    for b in buffers:
        ctypes.memset(b, 1, 4096)
    kept = buffers[::64]
    del buffers
    before = _resident()
    memory.release_free_memory()
    assert before - _resident() > 80 << 20
    del kept  # (alive until here)


def test_texts_spilled_while_the_candidates_are_found_store_what_a_scan_in_memory_does(make_project, monkeypatch):
    from dedup_tui.engine.scanning import local
    from dedup_tui.engine.scanning.settings import ScanSettings, chunks
    from tests.engine.test_memory_cap import planted, stored_scan

    settings = ScanSettings(floor=0.4, method="lsh")
    in_memory = planted(make_project, "in_memory")
    whole = local.scan(in_memory, settings, memory=None)

    spilled: list[tuple[str, int]] = []
    real_append = passes.SpillFolder.append

    def append(self, name, array):
        spilled.append((name, array.nbytes))
        real_append(self, name, array)

    monkeypatch.setattr(passes.SpillFolder, "append", append)
    monkeypatch.setattr(kernels_text.Blocks, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(candidates, "chunks", lambda ords, lengths: chunks(ords, lengths, max_docs=10))
    monkeypatch.setattr(candidates, "_what_spills", lambda *args: (True, False, 0))
    capped = planted(make_project, "capped")
    result = local.scan(capped, settings, memory=1 << 40)
    text_blocks = [size for name, size in spilled if name == candidates.TEXT_SPILL]
    assert len(text_blocks) > 3 and result.spill_bytes >= sum(text_blocks)
    assert result.passes == 1  # (only the texts went to disk)
    assert (result.pairs, result.verified, result.prefiltered) == (whole.pairs, whole.verified, whole.prefiltered)
    assert stored_scan(capped) == stored_scan(in_memory)


def test_a_text_builder_that_spills_gives_its_blocks_in_order_and_keeps_the_offsets():
    parts = [kernels_text.normalized_buffer([f"text {i} " * (i % 7) for i in range(j, j + 9)]) for j in range(12)]
    out: list[bytes] = []
    builder = kernels_text.TextBuilder(
        sum(len(p) for p in parts), block_bytes=200, spill=lambda b: out.append(bytes(b))
    )
    for i, part in enumerate(parts):
        builder.append(part)
        if i == 5:
            assert out, "a full block waited for finish()"
    spilled = builder.finish()
    assert isinstance(spilled, kernels_text.SpilledText)
    joined = kernels_text.TextBuffer.concat(parts)
    loaded = spilled.load(np.frombuffer(b"".join(out), np.uint8))
    assert bytes(loaded.data) == bytes(joined.data) and loaded.offsets.tolist() == joined.offsets.tolist()
    with pytest.raises(OSError, match="spilled texts"):
        spilled.load(np.frombuffer(b"".join(out[:-1]), np.uint8))


def _digit_by_digit(hashes: list[str]) -> np.ndarray:
    raw = np.frombuffer("".join(h[:16] for h in hashes).encode("ascii"), np.uint8).reshape(-1, 16)
    digits = np.where(raw >= ord("a"), raw - (ord("a") - 10), raw - ord("0")).astype(np.uint64)
    out = np.zeros(len(hashes), np.uint64)
    for i in range(16):
        out = (out << np.uint64(4)) | digits[:, i]
    return out


@pytest.mark.parametrize(
    "hashes",
    [
        [hashlib.sha256(str(i).encode()).hexdigest() for i in range(500)],
        ["0123456789abcdef" + "0" * 48, "f" * 64],
        ["0123456789ABCDEF" + "0" * 48, "zz" * 32],  # (not lowercase hex: read as it always was)
    ],
)
def test_hash_prefixes_are_the_first_16_hex_digits_as_read_digit_by_digit(hashes):
    from dedup_tui.engine.store.scans import hash_prefixes

    assert hash_prefixes(hashes).tolist() == _digit_by_digit(hashes).tolist()


def test_signatures_spilled_while_the_bands_run_store_what_a_scan_in_memory_does(make_project, monkeypatch):
    from dedup_tui.engine.scanning import local
    from dedup_tui.engine.scanning.settings import ScanSettings, chunks
    from tests.engine.test_memory_cap import stored_scan
    from tests.engine.test_scan import planted_corpus

    def planted(make_project, name):  # (with texts long enough for sketches: 512 B and more)
        short = planted_corpus(120, seed=5)
        long = [(f"long{i}", " ".join(text for _, text in short[i : i + 4])) for i in range(0, 80, 2)]
        return make_project(short + long, name=name)

    # Buckets of more than 12 split by sub-bands: the bands then read the spilled signatures
    # of the split buckets' members and of every pair an earlier split band may report.
    settings = ScanSettings(floor=0.4, method="lsh", max_bucket=12)
    monkeypatch.setattr(lsh, "SPLIT_IF_SHARED_BELOW", float("inf"))
    in_memory = planted(make_project, "in_memory")
    whole = local.scan(in_memory, settings, memory=None)
    assert whole.split_buckets > 0

    spilled: dict[str, int] = {}
    real_append = passes.SpillFolder.append

    def append(self, name, array):
        spilled[name] = spilled.get(name, 0) + array.nbytes
        real_append(self, name, array)

    releases = []
    real_release = passes.MappedSpill.release

    def release(self):
        releases.append(passes.mapped_file_bytes())
        real_release(self)

    monkeypatch.setattr(passes.SpillFolder, "append", append)
    monkeypatch.setattr(passes.MappedSpill, "release", release)
    monkeypatch.setattr(candidates, "chunks", lambda ords, lengths: chunks(ords, lengths, max_docs=10))
    monkeypatch.setattr(candidates, "_what_spills", lambda *args: (False, True, 0))
    monkeypatch.setattr(candidates, "mapped_budget", lambda *args: 0)  # (every page touched dropped)
    capped = planted(make_project, "capped")
    result = local.scan(capped, settings, memory=1 << 40)
    bands = result.bands
    assert spilled["signatures"] == whole.representatives * settings.num_perm * 4
    assert "sketches" not in spilled and candidates.TEXT_SPILL not in spilled  # (verification tests them)
    assert all(spilled[f"keys-{band}"] == whole.representatives * 8 for band in range(bands))
    assert len(releases) > bands and result.passes == 1  # (only the signatures went to disk)
    # (the same pairs compared exactly: the sketch test ran in verification instead)
    assert (result.pairs, result.verified, result.candidates, result.split_buckets) == (
        whole.pairs,
        whole.verified,
        whole.candidates,
        whole.split_buckets,
    )
    assert stored_scan(capped) == stored_scan(in_memory)
