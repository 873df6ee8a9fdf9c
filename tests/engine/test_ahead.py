"""Signing documents while they load (engine/ahead.py): the scan that follows starts from the
load's signatures, and its result is a scan's without them, array for array; documents or
settings it did not sign are signed by the scan as before."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from dedup_tui.engine import ingest
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.progress import Control
from dedup_tui.engine.scanning import ahead as ahead_module
from dedup_tui.engine.scanning import candidates, lsh
from dedup_tui.engine.scanning import local as local
from dedup_tui.engine.scanning.ahead import SignedAhead
from dedup_tui.engine.scanning.settings import ScanSettings, Threads
from dedup_tui.engine.store import Project
from dedup_tui.engine.store.scans import exact_groups_with_hashes, read_band_keys, read_scan_key_chunks
from dedup_tui.engine.text.synth import noisy_copy

from ..conftest import ok, write_jsonl
from .test_incremental import LSH, families, stored, with_copies


def corpus(seed: int) -> list[dict]:
    """Short families, exact copies, long texts (they get sketches) and non-ASCII text."""
    rng = np.random.RandomState(seed)
    docs = families(12, (2, 6), 40, seed, big=30)
    long_base = " ".join(f"lang{rng.randint(0, 5000)}" for _ in range(160))
    docs += [
        {"id": f"{seed}-long-{i}", "text": noisy_copy(rng, long_base, int(len(long_base) * rng.uniform(0, 0.1)))}
        for i in range(25)
    ]
    docs += [{"id": f"{seed}-uni-{i}", "text": f"ΟΔΥΣΣΕΥΣ Ünïcödé  naïve café {i % 3} " * 20} for i in range(6)]
    return with_copies(docs, docs[:40], seed + 1)


@pytest.fixture(scope="module", autouse=True)
def _kernels_loaded():
    """Signing ahead runs only where it compiles nothing (SignedAhead.for_settings): in a first
    run the warm-up compiles the kernels instead. Here they are loaded first, as a process
    that scanned before has them, whether or not this machine's cache is warm."""
    from dedup_tui.engine.scanning.kernels import text  # noqa: F401


@pytest.fixture
def small_pieces(monkeypatch):
    """Batches and jobs of a few documents, so a corpus of hundreds crosses many of both; each
    batch written on the load's thread while the next is read."""
    monkeypatch.setattr(ingest, "BATCH", 23)
    monkeypatch.setattr(ingest, "THREADED_TEXT_CHARS", 1)
    monkeypatch.setattr(ahead_module, "JOB_BYTES", 3000)


def taken(monkeypatch) -> list:
    """What SignedAhead.take hands over, call by call."""
    calls = []
    real = SignedAhead.take

    def spy(self, *args, **kwargs):
        calls.append(real(self, *args, **kwargs))
        return calls[-1]

    monkeypatch.setattr(SignedAhead, "take", spy)
    return calls


def copy_of(project: Project, path) -> Project:
    project.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(project.path, path)
    return Project(path)


def scan_both_ways(tmp_path, project: Project, settings, ahead):
    """(what the project stores after a scan given `ahead`, what a copy of it stores after a
    scan without) and the first scan's result."""
    with copy_of(project, tmp_path / "alone.db") as alone:
        local.scan(alone, settings)
        expected = stored(alone)
    result = local.scan(project, settings, ahead=ahead)
    return stored(project), expected, result


def test_the_scan_takes_the_loads_signatures_and_finds_what_it_would_find_alone(tmp_path, small_pieces, monkeypatch):
    docs = corpus(3)
    ahead = SignedAhead.for_settings(LSH)
    assert ahead is not None
    calls = taken(monkeypatch)
    with Project(tmp_path / "ahead.db", create=True) as project:
        load_corpus(project, [write_jsonl(tmp_path / "c.jsonl", docs)], ahead=ahead)
        with copy_of(project, tmp_path / "alone.db") as alone:
            local.scan(alone, LSH)
            expected = stored(alone), kept_keys(alone)
        result = local.scan(project, LSH, ahead=ahead)
        assert len(calls) == 1 and calls[0] is not None  # the scan started from the load's signatures
        assert result.exact_duplicates > 0 and result.pairs > 0
        got = stored(project), kept_keys(project)
    assert got[0] == expected[0]
    assert len(got[1]) == len(expected[1])
    for mine, theirs in zip(got[1], expected[1]):
        for x, y in zip(mine, theirs):
            assert np.array_equal(np.asarray(x), np.asarray(y))


def kept_keys(project: Project) -> list:
    """The kept scan keys: every chunk's ords and hash prefixes, then every band's short keys."""
    chunks = read_scan_key_chunks(project)
    bands = [read_band_keys(project, band) for band in range(lsh.choose_banding(LSH.floor, LSH.num_perm).bands)]
    return [c[1:] for c in chunks] + [tuple(b[c] for c in sorted(b)) for b in bands]


def test_what_it_hands_over_is_what_the_scan_computes(tmp_path, small_pieces):
    """Signatures, normalised texts and sketches of the representatives (exact copies left
    out), equal to pipeline._Signed's own."""
    ahead = SignedAhead.for_settings(LSH)
    with Project(tmp_path / "p.db", create=True) as project:
        load_corpus(project, [write_jsonl(tmp_path / "c.jsonl", corpus(5))], ahead=ahead)
        exact_of, lengths, rep_hashes = exact_groups_with_hashes(project)
        reps = np.flatnonzero(exact_of < 0)
        assert len(reps) < len(exact_of)
        threads = Threads(2)
        try:
            own = candidates.Signed(project, reps, lengths, LSH, Control(), threads)
        finally:
            threads.close()
        given = ahead.take(reps, rep_hashes, Control())
    assert given is not None
    assert np.array_equal(given.signatures, own.signatures)
    assert np.array_equal(given.text.data, own.text.data) and np.array_equal(given.text.offsets, own.text.offsets)
    assert len(own.sketches) > 0 and np.array_equal(given.sketches, own.sketches)
    assert ahead.take(reps, rep_hashes, Control()) is None  # handed over once


def test_documents_it_did_not_sign_are_not_taken(tmp_path):
    ahead = SignedAhead.for_settings(LSH)
    with Project(tmp_path / "p.db", create=True) as project:
        load_corpus(project, [write_jsonl(tmp_path / "c.jsonl", corpus(7))], ahead=ahead)
        exact_of, _, rep_hashes = exact_groups_with_hashes(project)
        reps = np.flatnonzero(exact_of < 0)
    other = rep_hashes.copy()
    other[len(other) // 2] ^= np.uint64(1)  # one document's text is not what was signed
    assert ahead.take(reps, other, Control()) is None
    assert not ahead.usable


def test_other_settings_are_signed_by_the_scan(tmp_path, monkeypatch):
    ahead = SignedAhead.for_settings(LSH)
    calls = taken(monkeypatch)
    other = ScanSettings(floor=0.5, method="lsh", seed=7)
    with Project(tmp_path / "p.db", create=True) as project:
        load_corpus(project, [write_jsonl(tmp_path / "c.jsonl", corpus(9))], ahead=ahead)
        got, expected, _ = scan_both_ways(tmp_path, project, other, ahead)
        assert calls == []
        assert got == expected
    ahead.discard()


def test_an_incremental_scan_takes_the_new_documents_signatures(tmp_path, small_pieces, monkeypatch):
    first, more = corpus(11), corpus(12)
    calls = taken(monkeypatch)
    with Project(tmp_path / "p.db", create=True) as project:
        load_corpus(project, [write_jsonl(tmp_path / "a.jsonl", first)])
        local.scan(project, LSH)
        ahead = SignedAhead.for_settings(LSH)
        load_corpus(project, [write_jsonl(tmp_path / "b.jsonl", with_copies(more, first, 40))], ahead=ahead)
        got, expected, result = scan_both_ways(tmp_path, project, LSH, ahead)
        assert result.incremental
        assert len(calls) == 1 and calls[0] is not None
        assert got == expected


def test_a_failed_load_stops_signing(tmp_path):
    ahead = SignedAhead.for_settings(LSH)
    docs = corpus(15)
    path = write_jsonl(tmp_path / "c.jsonl", docs)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("{not json\n")
    with Project(tmp_path / "p.db", create=True) as project:
        with pytest.raises(ingest.CorpusError):
            load_corpus(project, [path], ahead=ahead)
        assert project.document_count() == 0
    assert not ahead.usable
    assert ahead.take(np.arange(3), np.zeros(3, np.uint64), Control()) is None


def test_scan_corpus_signs_while_loading(tmp_path, monkeypatch):
    """`dedup-tui scan PROJECT CORPUS` hands the load's signatures to its scan; the project is
    the one `load` then `scan` make."""
    calls = taken(monkeypatch)
    path = write_jsonl(tmp_path / "c.jsonl", corpus(17))
    ok("scan", tmp_path / "one.db", path, "--method", "lsh")
    assert len(calls) == 1 and calls[0] is not None
    ok("load", tmp_path / "two.db", path)
    ok("scan", tmp_path / "two.db", "--method", "lsh")
    assert len(calls) == 1
    with Project(tmp_path / "one.db") as one, Project(tmp_path / "two.db") as two:
        assert stored(one) == stored(two)


def test_a_small_corpus_is_not_signed_ahead(tmp_path):
    """Under `auto` a corpus below MIN_CORPUS_BYTES is not signed ahead (it may be compared
    exhaustively, without compiled code); a large one, or `lsh`, is."""
    small = write_jsonl(tmp_path / "small.jsonl", corpus(19))
    assert small.stat().st_size < ahead_module.MIN_CORPUS_BYTES
    auto = ScanSettings()
    assert SignedAhead.for_corpus(auto, [small]) is None
    assert SignedAhead.for_corpus(ScanSettings(method="exhaustive"), [small]) is None
    for settings, paths in ((LSH, [small]), (auto, [small, tmp_path / "big.jsonl"])):
        (tmp_path / "big.jsonl").write_bytes(b" " * ahead_module.MIN_CORPUS_BYTES)
        signer = SignedAhead.for_corpus(settings, paths)
        assert signer is not None
        signer.discard()


def test_a_failed_signing_job_leaves_the_signing_to_the_scan(tmp_path, small_pieces, monkeypatch):
    """A job that failed (say, out of memory) hands nothing over: the scan signs the documents
    itself and finds the same pairs."""
    real_sign = SignedAhead._sign
    jobs = []

    def failing_third(self, *args):
        jobs.append(1)
        if len(jobs) == 3:
            raise MemoryError("no room")
        return real_sign(self, *args)

    monkeypatch.setattr(SignedAhead, "_sign", failing_third)
    calls = taken(monkeypatch)
    ahead = SignedAhead.for_settings(LSH)
    with Project(tmp_path / "p.db", create=True) as project:
        load_corpus(project, [write_jsonl(tmp_path / "c.jsonl", corpus(21))], ahead=ahead)
        got, expected, _ = scan_both_ways(tmp_path, project, LSH, ahead)
        assert len(jobs) > 3 and calls == [None]
        assert got == expected


def test_a_corpus_whose_signatures_would_not_fit_the_cap_is_not_signed_ahead(tmp_path, monkeypatch):
    """Signing ahead holds signatures and texts outside the scan's cap: only a corpus of at
    most cap / AHEAD_BYTES_PER_CORPUS_BYTE bytes is signed ahead."""
    monkeypatch.setattr(SignedAhead, "for_settings", classmethod(lambda cls, settings, workers=0: "signer"))
    big = tmp_path / "big.jsonl"
    big.write_bytes(b" " * ahead_module.MIN_CORPUS_BYTES)
    fits = ahead_module.MIN_CORPUS_BYTES * ahead_module.AHEAD_BYTES_PER_CORPUS_BYTE
    assert SignedAhead.for_corpus(LSH, [big], memory=fits) == "signer"
    assert SignedAhead.for_corpus(LSH, [big], memory=fits - 1) is None
