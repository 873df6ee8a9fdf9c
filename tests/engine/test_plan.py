"""dedup-tui plan: estimates from a hash sample of the corpus come near the truth, and a disk
too small is refused before anything is loaded (by plan, and by scan's plan)."""

from __future__ import annotations

import json
import random
import shutil
from collections import namedtuple
from pathlib import Path

import pytest

from dedup_tui.engine import plan as planning
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.readers import text_blocks
from dedup_tui.engine.scanning import local, memory_model
from dedup_tui.engine.scanning.memory_model import split_layout
from dedup_tui.engine.store import Project
from dedup_tui.engine.text.batch import text_hashes

from ..conftest import cli, ok, write_jsonl
from .test_incremental import LSH, families

Usage = namedtuple("Usage", "total used free")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """~2,800 documents: families of noisy near copies (pairs within each family), exact copies,
    singletons."""
    docs = families(300, (4, 10), 700, seed=23)
    docs += [{"id": f"copy-{i}", "text": docs[i]["text"].upper()} for i in range(0, 300, 3)]
    return write_jsonl(tmp_path_factory.mktemp("plan") / "c.jsonl", docs)


@pytest.fixture(scope="module")
def plan(corpus) -> planning.Plan:
    return planning.make_plan([corpus], LSH, sample_docs=1500)


def test_the_estimates_come_near_the_truth(corpus, plan, tmp_path):
    assert plan.fraction == 0.5 and plan.sample_documents < plan.documents  # a sample, not the corpus
    truth_db = tmp_path / "t.db"
    with Project(truth_db, create=True) as project:
        load_corpus(project, [corpus])
        r = local.scan(project, LSH)
        documents, distinct, pairs = r.documents, r.representatives, r.pairs
        project.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = truth_db.stat().st_size
    assert plan.documents == documents and plan.distinct == distinct  # counted, not estimated
    assert pairs > 1000 and abs(plan.pairs - pairs) <= 0.25 * pairs, (plan.pairs, pairs)
    assert abs(plan.project_bytes - size) <= 0.25 * size, (plan.project_bytes, size)
    assert plan.project_peak >= plan.project_bytes and plan.spill_bytes > 0 and plan.seconds > 0


def test_a_disk_too_small_is_refused_saying_what_it_needs_and_has(plan, tmp_path):
    roomy = planning.check_disk(plan, tmp_path / "p.db", lambda _: Usage(1 << 40, 0, 1 << 40))
    assert roomy is None
    free = plan.project_peak // 3
    with pytest.raises(planning.DiskTooSmall) as refused:
        planning.check_disk(plan, tmp_path / "p.db", lambda _: Usage(1 << 40, 0, free))
    message = str(refused.value)
    assert "not enough disk" in message and "\n" not in message
    assert planning.format_size(free) in message and planning.format_size(plan.project_peak) in message


def test_cli_plan_prints_the_estimates_and_refuses_a_small_disk(corpus, tmp_path, monkeypatch):
    out = ok("plan", corpus, "--floor", "0.5", "--method", "lsh").output
    assert "plan: 2," in out and "distinct texts" in out and "near pairs" in out and "peak memory" in out
    assert not corpus.with_suffix(".db").exists()  # no project written
    monkeypatch.setattr(shutil, "disk_usage", lambda _: Usage(1 << 30, 1 << 30, 4096))
    r = cli("plan", corpus, "--method", "lsh")
    assert r.exit_code == 1 and "not enough disk" in r.output and "4.0 KB free" in r.output


def test_scan_refuses_a_small_disk_before_loading_anything(corpus, tmp_path, monkeypatch):
    db = tmp_path / "p.db"
    first = write_jsonl(tmp_path / "first.jsonl", [{"id": "x", "text": "a first document to load"}])
    ok("scan", db, first)
    before = db.read_bytes()
    monkeypatch.setattr(shutil, "disk_usage", lambda _: Usage(1 << 30, 1 << 30, 4096))
    r = cli("scan", db, corpus, "--method", "lsh")
    assert r.exit_code == 1 and "not enough disk" in r.output and "nothing was loaded or scanned" in r.output
    assert "loaded" not in r.output.replace("nothing was loaded", "")
    with Project(db) as project:
        assert project.document_count() == 1
    assert db.read_bytes() == before
    r = cli("scan", tmp_path / "new.db", corpus, "--method", "lsh")
    assert r.exit_code == 1 and not (tmp_path / "new.db").exists()
    assert ok("scan", tmp_path / "new.db", corpus, "--no-plan").exit_code == 0  # (skipped: no check)


def test_the_fast_reading_of_json_lines_gives_the_loaders_texts(tmp_path, monkeypatch):
    """Texts found by one regular expression a block equal the loaders' reading of every line:
    escapes, non-ASCII, the text field not last, blank lines, and lines the expression would
    misread (a text that is not a string, a "text" key inside another value), across blocks."""
    lines = []
    for i in range(3000):
        text = [f"plain words {i}", f'a "quoted" word\nand a newline {i}', f"Ünïcode ☃ {i}"][i % 3]
        record = {"text": text, "id": str(i)} if i % 2 else {"id": str(i), "text": text}
        lines.append(json.dumps(record, ensure_ascii=i % 5 == 0))
    lines[100] = ""
    lines[700] = json.dumps({"id": "n", "text": 12})
    lines[1500] = json.dumps({"id": "x", "meta": {"text": "inner"}, "text": "outer"})
    lines[2000] = "   "
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(text_blocks, "BLOCK_BYTES", 4096)  # many blocks, lines cut between them
    fast = [t for block in planning.jsonl_text_blocks(path) for t in block]
    _, texts = next(planning.corpus_texts([path]))
    assert fast == list(texts)


def test_texts_are_normalised_as_the_scan_normalises_them():
    """numpy's normalisation of ASCII texts is text.normalize's: equal texts once normalised hash
    equal, whichever way they went (ASCII by numpy, others by Python), and differing ones do not."""
    from dedup_tui.engine.text.normalize import normalize

    rng = random.Random(5)
    alphabet = "aB \t\n\x0b\x1c\x1fZz.é"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10))) for _ in range(5000)]
    texts += ["", " ", "\t", "  a  b  ", "A B", "é", "É "]
    hashes = text_hashes(texts).tolist()
    by_text: dict[str, set] = {}
    for text, h in zip(texts, hashes):
        by_text.setdefault(normalize(text), set()).add(h)
    assert all(len(h) == 1 for h in by_text.values())
    assert len(set(hashes)) == len(by_text)


MODEL = dict(
    documents=2_000_000,
    distinct=1_900_000,
    text_bytes=150e6,
    sketched=50_000,
    candidates=120e6,
    pairs=15e6,
    num_perm=128,
    bands=39,
    corpus_bytes=200 << 20,
    workers=2,
)


def test_the_memory_model_keeps_the_cap_with_more_passes_as_it_falls():
    """Candidates and pairs take what the cap leaves: verification and the write stay under it,
    in more passes as it falls, and a cap that holds the band phase holds the peak. Under a cap
    below the band phase the texts wait on disk, and when that is not enough the signatures do
    too: the band phase then fits the cap, as the scan's does (candidates._what_spills)."""
    roomy = planning.memory_model(cap=64 << 30, **MODEL)
    band = roomy.band_phase
    assert roomy.peak <= band + (4 << 30) and not roomy.texts_wait
    passes, waits = [], []
    for cap in (band + (4 << 30), band, band * 5 // 6, band * 2 // 3):
        model = planning.memory_model(cap=cap, **MODEL)
        assert model.phases["verify"] <= cap and model.phases["write"] <= cap, (model.phases, cap)
        if cap >= band:
            assert model.peak == max(model.phases.values()) <= cap or model.peak_phase == "load"
        else:
            assert model.texts_wait and model.band_phase < band
            assert model.band_phase <= cap if model.signatures_wait else cap < model.band_phase
        passes.append(model.passes)
        waits.append(model.signatures_wait)
    assert passes == sorted(passes) and passes[-1] > passes[0]
    assert waits == [False, False, False, True]  # (only the lowest cap is below what the texts free)


def test_the_memory_model_counts_each_band_threads_split_of_the_largest_bucket_within_its_budget():
    """The band phase holds, in each band thread, the split of the largest bucket over
    --max-bucket (kernels.bands.split_bucket_survivors): in proportion to its members while all
    its copies fit the budget, then the budget, and at least a slice of one sub-band a member.
    The plan reads the largest bucket off
    its sample's, scaled by the share sampled."""
    cap, workers = 8 << 30, MODEL["workers"]
    budget = memory_model.split_budget(cap)
    none = planning.memory_model(cap=cap, **MODEL)

    def split_term(members):
        return planning.memory_model(cap=cap, **MODEL, largest_bucket=members).band_phase - none.band_phase

    assert 0 < split_term(20_000) < workers * budget and split_term(40_000) == 2 * split_term(20_000)
    # mixed10m's largest bucket is split with everything copied, within the budget
    assert split_layout(64_332, 41, 3, 8, 38, budget)[:3] == (41, True, True) and split_term(64_332) < workers * budget
    assert split_term(1_000_000) == workers * budget
    least = 1_000_000 * (memory_model.SPLIT_SORT_BYTES + 3 * memory_model.SPLIT_COLUMN_BYTES + 2)
    small_cap = 1 << 30
    assert memory_model.split_budget(small_cap) < least
    small = {m: planning.memory_model(cap=small_cap, **MODEL, largest_bucket=m).band_phase for m in (0, 1_000_000)}
    assert small[1_000_000] - small[0] == workers * least

    Run = namedtuple("Run", "max_bucket result")
    Result = namedtuple("Result", "largest_bucket")
    assert planning.largest_bucket(Run(1024, Result(2_000)), 1 / 32, 10**7) == 64_000
    assert planning.largest_bucket(Run(1024, Result(0)), 1 / 32, 10**7) == 32 * 1024  # (none seen: up to)
    assert planning.largest_bucket(Run(1024, Result(0)), 1.0, 10**7) == 0  # (the whole corpus: none)
    assert planning.largest_bucket(Run(0, Result(5_000)), 1 / 32, 10**7) == 0  # (--max-bucket 0: no split)


def test_the_memory_model_grows_with_what_the_bands_hold_a_text():
    """Every named cost a text counts: doubling the permutations (the signature) or the bands
    (their tags) raises the band phase; a load that signs ahead is a phase of its own only when
    the corpus fits the cap (memory_model.AHEAD_BYTES_PER_CORPUS_BYTE)."""
    base = planning.memory_model(cap=64 << 30, **MODEL)
    assert planning.memory_model(cap=64 << 30, **{**MODEL, "num_perm": 256}).band_phase > base.band_phase
    assert planning.memory_model(cap=64 << 30, **{**MODEL, "bands": 78}).band_phase > base.band_phase
    assert base.signed_ahead and "load" in base.phases
    unsigned = planning.memory_model(cap=MODEL["corpus_bytes"] * 2, **MODEL)
    assert not unsigned.signed_ahead and "load" not in unsigned.phases
