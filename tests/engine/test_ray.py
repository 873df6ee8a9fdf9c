"""The cluster commands on Ray in local mode: the same pairs, clusters and curated records as
the local scan and export, with the corpus forced into many pieces and partitions."""

from __future__ import annotations

import json
import os
import random
import threading
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason='the cluster tests need Ray: pip install -e ".[test,ray]"')
import pyarrow.parquet as pq
from click.testing import CliRunner

from dedup_tui.cli import main
from dedup_tui.engine.curate import curated as curate_curated
from dedup_tui.engine.curate import decisions, keep_rules
from dedup_tui.engine.errors import Cancelled, CorpusError, DedupError, ProjectError
from dedup_tui.engine.graph.clustering import cluster
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.progress import Control
from dedup_tui.engine.ray.export import cluster_export
from dedup_tui.engine.ray.job import cluster_scan
from dedup_tui.engine.ray.partial import partial_view
from dedup_tui.engine.ray.pieces import index_file
from dedup_tui.engine.ray.scandir import import_scan
from dedup_tui.engine.ray.settings import ClusterScanSettings
from dedup_tui.engine.scanning.local import scan
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store import Project
from dedup_tui.engine.store.scans import load_graph

from ..conftest import small_corpus, write_jsonl
from ..reliability.conftest import cli, one_line_error
from .test_atomic_projects import killed_at, leftovers

# Small pieces and an odd number of partitions, so every shuffle really splits the corpus.
FORCED = {"piece_bytes": 40_000, "partitions": 3}
# A --max-bucket the templated family's LSH buckets are over: those buckets are compared whole.
SMALL_BUCKET = 6


@pytest.fixture(scope="module", autouse=True)
def local_ray(tmp_path_factory):
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
        object_store_memory=200 << 20,
        _temp_dir=str(tmp_path_factory.mktemp("ray")),
    )
    yield
    ray.shutdown()


WORDS = [f"w{i}" for i in range(400)]


def _texts(rng: random.Random, n_families: int = 120, n_unique: int = 900) -> list[str]:
    """Families of near copies at many similarities, a dense templated family, exact copies
    under other case and spacing, and unrelated documents."""
    texts = []
    for _ in range(n_families):
        base = [rng.choice(WORDS) for _ in range(rng.randint(8, 60))]
        texts.append(" ".join(base))
        for _ in range(rng.randint(1, 6)):
            copy = list(base)
            for _ in range(rng.randint(0, max(1, len(copy) // 3))):
                copy[rng.randrange(len(copy))] = rng.choice(WORDS)
            texts.append(" ".join(copy))
    template = "Package {} version {} released. Install with pip install {}. Licensed under the MIT licence."
    for i in range(150):
        texts.append(template.format(f"pkg{i % 40}", f"1.{i % 7}.{i % 3}", f"pkg{i % 40}"))
    for _ in range(n_unique):
        texts.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40))))
    for t in rng.sample(texts, 60):
        texts.append("  " + t.upper() + "\n")
    texts.append("abc")  # shorter than k: one shingle
    rng.shuffle(texts)
    return texts


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[Path]:
    """Three shards: string ids, integer ids, no ids (line numbers)."""
    folder = tmp_path_factory.mktemp("corpus")
    texts = _texts(random.Random(7))
    third = len(texts) // 3
    files = [folder / "part-0.jsonl", folder / "part-1.jsonl", folder / "part-2.jsonl"]
    with open(files[0], "w") as fh:
        for i, t in enumerate(texts[:third]):
            fh.write(json.dumps({"id": f"s{i}", "text": t, "score": i % 5}) + "\n")
    with open(files[1], "w") as fh:
        for i, t in enumerate(texts[third : 2 * third]):
            fh.write(json.dumps({"id": 100000 + i, "text": t, "score": i % 5}) + "\n")
    with open(files[2], "w") as fh:
        for t in texts[2 * third :]:
            fh.write(json.dumps({"text": t, "score": 3}) + "\n")
    return files


def _local(tmp_path: Path, files, name="local.db", **load) -> Project:
    project = Project(tmp_path / name, create=True)
    load_corpus(project, files, **load)
    scan(project, ScanSettings(method="lsh"))
    return project


def _local_pairs(project: Project) -> set:
    return set(project.conn.execute("SELECT a_id, b_id, jaccard FROM near_pairs"))


def _scan_pairs(scan_dir: Path) -> set:
    t = pq.read_table(scan_dir / "pairs.parquet").to_pydict()
    return set(zip(t["a"], t["b"], t["jaccard"]))


def _scan_groups(scan_dir: Path) -> set:
    t = pq.read_table(scan_dir / "exact_groups.parquet").to_pydict()
    return set(zip(t["id"], t["duplicate_of"]))


@pytest.fixture(scope="module")
def cluster_scanned(corpus, tmp_path_factory):
    """`corpus` cluster-scanned in many pieces (its folder and result), and the same files
    loaded and scanned locally (the open project), to compare with; both with a --max-bucket
    the templated family's buckets are over."""
    out = tmp_path_factory.mktemp("scan") / "scan"
    result = cluster_scan(corpus, out, ClusterScanSettings(max_bucket=SMALL_BUCKET, **FORCED))
    local = Project(tmp_path_factory.mktemp("local") / "local.db", create=True)
    load_corpus(local, corpus)
    local_result = scan(local, ScanSettings(method="lsh", max_bucket=SMALL_BUCKET))
    result.local_counts = local_result  # type: ignore[attr-defined]
    yield out, result, local
    local.close()


def test_cluster_scan_finds_the_local_scans_pairs_and_groups(cluster_scanned):
    out, result, local = cluster_scanned
    assert result.pieces > 6  # the corpus really was split
    pairs = _local_pairs(local)
    assert len(pairs) > 500
    assert _scan_pairs(out) == pairs  # same ids, same exact Jaccard
    groups = set(local.conn.execute("SELECT id, duplicate_of FROM exact_duplicates"))
    assert len(groups) >= 50
    assert _scan_groups(out) == groups
    local_run = local.conn.execute("SELECT counts FROM runs WHERE command = 'scan'").fetchone()[0]
    counts = json.loads(local_run)
    assert (result.candidates, result.prefiltered, result.verified) == (
        counts["candidates"],
        counts["prefiltered"],
        counts["verified"],
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert [i["documents"] for i in manifest["inputs"]] == [
        s["documents"]
        for s in [dict(zip(("documents",), r)) for r in local.conn.execute("SELECT documents FROM sources ORDER BY id")]
    ]
    assert manifest["inputs"][1]["integer_ids"] and not manifest["inputs"][0]["integer_ids"]


def test_imported_project_clusters_as_the_local_one(cluster_scanned, tmp_path):
    out, result, local = cluster_scanned
    project = import_scan(out, tmp_path / "review.db")
    view = partial_view(project)
    assert view.documents == result.participants < view.corpus_documents == local.document_count()
    ids = project.ids_for(range(project.document_count()))
    local_ord = decisions.ords_for_ids(local, ids)
    mine, theirs = load_graph(project), load_graph(local)
    for threshold in (0.5, 0.62, 0.8, 0.95, 1.0):
        for policy in ("components", "greedy"):
            a = cluster(mine, threshold, policy)
            b = cluster(theirs, threshold, policy)
            # the same keeper for every imported document, by id; every other local document kept
            keeper_ids = [None if k < 0 else ids[k] for k in a.keeper.tolist()]
            expected = [
                None if b.keeper[local_ord[i]] < 0 else local.ids_for([int(b.keeper[local_ord[i]])])[0] for i in ids
            ]
            assert keeper_ids == expected, (threshold, policy)
            assert a.removed_count == b.removed_count
            assert np.array_equal(a.reason, b.reason[[local_ord[i] for i in ids]])
    # integer ids come back as numbers, as from a local load
    assert {type(x) for x in project.json_ids_for(range(project.document_count()))} == {str, int}
    project.close()


def _decide(project: Project) -> None:
    """The same reviewer decisions, by id, in either project."""
    graph = load_graph(project)
    c = cluster(graph, 0.7, "components")
    removed = np.flatnonzero(c.reason == 2)[:6]  # near duplicates
    ids = project.ids_for(removed.tolist())
    keepers = project.ids_for(c.keeper[removed].tolist())
    decisions.record(project, "keep", ids[0], threshold=0.7, policy="components")
    decisions.record(project, "not_duplicate", ids[1], keepers[1], threshold=0.7, policy="components")
    decisions.record(project, "remove", keepers[2], threshold=0.7, policy="components")


def test_cluster_export_writes_the_local_exports_records(cluster_scanned, corpus, tmp_path):
    out, _, _ = cluster_scanned
    review = import_scan(out, tmp_path / "review.db")
    local = _local(tmp_path, corpus)
    _decide(local)
    # the same decisions, recorded against the imported project by the same ids
    for d in decisions.active(local):
        decisions.record(review, d.kind, d.doc_id, d.other_id, threshold=0.7, policy="components")
    review.close()
    local_out = tmp_path / "local.jsonl"
    curate_curated.export_curated(local, 0.7, "components", local_out, removed_out=tmp_path / "local.removed.jsonl")
    curated = tmp_path / "curated"
    r = cluster_export(tmp_path / "review.db", 0.7, "components", corpus, curated)
    shards = [curated / f.name for f in corpus]
    assert b"".join(s.read_bytes() for s in shards) == local_out.read_bytes()
    kept_local = sum(1 for _ in open(local_out))
    assert r.kept == kept_local and r.removed == local.document_count() - kept_local
    removed = {json.dumps(json.loads(x), sort_keys=True) for x in open(curated / "removed.jsonl")}
    assert removed == {json.dumps(json.loads(x), sort_keys=True) for x in open(tmp_path / "local.removed.jsonl")}
    manifest = json.loads((curated / "manifest.json").read_text())
    assert manifest["counts"]["kept"] == kept_local and manifest["threshold"] == 0.7
    assert not list(curated.glob(".*.part"))
    local.close()


def test_the_local_export_refuses_a_partial_project(cluster_scanned, tmp_path):
    out, _, _ = cluster_scanned
    project = import_scan(out, tmp_path / "review.db")
    with pytest.raises(ProjectError, match="cluster-export"):
        curate_curated.export_curated(project, 0.8, "components", tmp_path / "x.jsonl")
    assert not (tmp_path / "x.jsonl").exists()
    project.close()


def test_cluster_export_refuses_a_changed_shard_and_writes_nothing(cluster_scanned, corpus, tmp_path):
    out, _, _ = cluster_scanned
    import_scan(out, tmp_path / "review.db").close()
    changed = [tmp_path / f.name for f in corpus]
    for src, dst in zip(corpus, changed):
        dst.write_bytes(src.read_bytes())
    with open(changed[1], "a") as fh:
        fh.write(json.dumps({"id": 999999, "text": "a late addition"}) + "\n")
    curated = tmp_path / "curated"
    with pytest.raises(CorpusError, match="changed since it was scanned"):
        cluster_export(tmp_path / "review.db", 0.8, "components", changed, curated)
    assert not any(curated.iterdir())


def test_parquet_shards_scan_and_export_as_locally(tmp_path):
    import pyarrow as pa

    texts = _texts(random.Random(11), n_families=60, n_unique=300)
    files = []
    for s in range(2):
        part = texts[s::2]
        table = pa.table(
            {
                "doc": [f"d{s}-{i}" for i in range(len(part))],
                "body": part,
                "year": [2000 + i % 20 for i in range(len(part))],
            }
        )
        files.append(tmp_path / f"shard-{s}.parquet")
        pq.write_table(table, files[-1], row_group_size=100)
    out = tmp_path / "scan"
    cluster_scan(files, out, ClusterScanSettings(id_field="doc", text_field="body", piece_bytes=1, partitions=2))
    local = _local(tmp_path, files, id_field="doc", text_field="body")
    assert _scan_pairs(out) == _local_pairs(local) and len(_local_pairs(local)) > 100
    import_scan(out, tmp_path / "review.db").close()
    curated = tmp_path / "curated"
    cluster_export(tmp_path / "review.db", 0.75, "components", files, curated)
    curate_curated.export_curated(local, 0.75, "components", tmp_path / "local.parquet", fmt="parquet")
    mine = pa.concat_tables([pq.read_table(curated / f.name) for f in files])
    theirs = pq.read_table(tmp_path / "local.parquet")
    assert mine.schema.names == ["doc", "body", "year"]
    assert mine.to_pylist() == theirs.to_pylist()
    local.close()


def test_bad_records_stop_the_scan_at_their_file_and_line(tmp_path):
    good = tmp_path / "a.jsonl"
    good.write_text("".join(json.dumps({"id": f"a{i}", "text": f"text number {i}"}) + "\n" for i in range(300)))
    bad = tmp_path / "b.jsonl"
    lines = [json.dumps({"id": f"b{i}", "text": f"other text {i}"}) for i in range(300)]
    lines[211] = '{"id": "b211", "text": '  # malformed
    lines[250] = json.dumps({"id": "a7", "text": "an id already used in a.jsonl"})
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(CorpusError) as err:
        cluster_scan([good, bad], tmp_path / "out", ClusterScanSettings(piece_bytes=2000, partitions=2))
    assert (err.value.path, err.value.line) == (str(bad), 212) and "malformed JSON" in err.value.message
    assert not (tmp_path / "out").exists()
    # with skip-bad: the same documents and skipped lines as a local load with skip-bad
    result = cluster_scan(
        [good, bad], tmp_path / "out", ClusterScanSettings(piece_bytes=2000, partitions=2, skip_bad=True)
    )
    local = Project(tmp_path / "l.db", create=True)
    load_corpus(local, [good, bad], skip_bad=True)
    assert result.documents == local.document_count() == 598
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    skipped = [json.loads(r[0]) for r in local.conn.execute("SELECT skipped_lines FROM sources ORDER BY id")]
    assert [i["skipped_lines"] for i in manifest["inputs"]] == skipped == [[], [212, 251]]
    local.close()


def test_a_cancel_stops_the_job_and_writes_nothing(corpus, tmp_path):
    cancel = threading.Event()
    stages = []

    def progress(stage, done, total):
        stages.append(stage)
        if stage == "exact":
            cancel.set()

    with pytest.raises(Cancelled):
        cluster_scan(corpus, tmp_path / "out", ClusterScanSettings(**FORCED), control=Control(progress, cancel))
    assert "read" in stages and "candidates" not in stages
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))


def test_cli_scan_import_export(corpus, tmp_path):
    runner = CliRunner()
    out = tmp_path / "scan"
    r = runner.invoke(
        main,
        [
            "cluster-scan",
            *map(str, corpus),
            "--out",
            str(out),
            "--piece-mb",
            "1",
            "--partitions",
            "2",
            "--memory",
            "1G",
        ],
    )
    assert r.exit_code == 0, r.output
    assert r.output.startswith("memory cap 1.0 GB per worker (--memory)\n")
    assert "near pairs >= 0.5" in r.output
    assert json.loads((out / "manifest.json").read_text())["counts"]["memory_cap"] == 1 << 30
    r = runner.invoke(main, ["import", str(out), "--db", str(tmp_path / "p.db")])
    assert r.exit_code == 0 and "partial view" in r.output, r.output
    r = runner.invoke(
        main, ["export", "--db", str(tmp_path / "p.db"), "--threshold", "0.8", "--out", str(tmp_path / "x.jsonl")]
    )
    assert r.exit_code == 1 and "cluster-export" in r.output
    r = runner.invoke(
        main,
        [
            "cluster-export",
            *map(str, corpus),
            "--db",
            str(tmp_path / "p.db"),
            "--threshold",
            "0.8",
            "--out",
            str(tmp_path / "curated"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (tmp_path / "curated").iterdir()) == sorted(
        [f.name for f in corpus] + ["removed.jsonl", "decisions.jsonl", "manifest.json"]
    )
    r = runner.invoke(main, ["import", str(out), "--db", str(tmp_path / "p.db")])
    assert r.exit_code == 1 and "already exists" in r.output


@pytest.mark.parametrize("piece_bytes", [1, 7, 100, 10_000])
def test_pieces_cover_the_file_and_know_their_line_numbers(tmp_path, piece_bytes):
    rng = random.Random(piece_bytes)
    lines = [("x" * rng.randint(0, 30)) for _ in range(200)]
    path = tmp_path / "c.jsonl"
    data = "\n".join(lines) + ("\n" if piece_bytes % 2 else "")  # with and without a final newline
    path.write_text(data)
    info = index_file(str(path), "jsonl", piece_bytes)
    raw = path.read_bytes()
    assert info["size_bytes"] == len(raw)
    starts = [p[0] for p in info["pieces"]]
    ends = [p[1] for p in info["pieces"]]
    assert starts[0] == 0 and ends[-1] == len(raw) and starts[1:] == ends[:-1]
    for start, _end, first_line in info["pieces"]:
        assert first_line == raw[:start].count(b"\n") + 1
        assert start == 0 or raw[start - 1 : start] == b"\n"


async def test_the_app_says_it_shows_a_partial_view(cluster_scanned, tmp_path):
    from textual.widgets import Static

    from dedup_tui.ui.app import create_app

    from ..ui.conftest import settle

    out, result, local = cluster_scanned
    db = tmp_path / "review.db"
    import_scan(out, db).close()
    app = create_app(db, author="tester")
    notes = []
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        notes.extend(m for m in app.told)
        summary = str(app.main.query_one("#summary", Static).render())
        assert f"{result.participants:,} of {local.document_count():,} documents" in summary
        assert any("partial view" in n and "cluster-export" in n for n in notes)
        await pilot.press("e")  # no export dialog: the command for the cluster instead
        await pilot.pause()
        assert app.screen is app.main
        assert any("dedup-tui cluster-export" in m and "--threshold 0.80" in m for m in app.told)
        await pilot.press("R")  # no local rescan of a partial project
        await pilot.pause()
        assert app.screen is app.main and not app.main.scanning
    with Project(db) as project, pytest.raises(ProjectError, match="cluster-scan"):
        scan(project)


def test_gzip_and_zstd_shards_and_a_local_project_export_as_locally(corpus, tmp_path):
    import gzip

    import zstandard

    files = [corpus[0], tmp_path / "part-1.jsonl.gz", tmp_path / "part-2.jsonl.zst"]
    with gzip.open(files[1], "wb") as fh:
        fh.write(corpus[1].read_bytes())
    files[2].write_bytes(zstandard.ZstdCompressor().compress(corpus[2].read_bytes()))
    out = tmp_path / "scan"
    cluster_scan(files, out, ClusterScanSettings(**FORCED))
    local = _local(tmp_path, files)
    assert _scan_pairs(out) == _local_pairs(local) and len(_local_pairs(local)) > 100
    # cluster-export of a local project: the local export, split by shard
    curate_curated.export_curated(local, 0.6, "greedy", tmp_path / "local.jsonl")
    curated = tmp_path / "curated"
    cluster_export(tmp_path / "local.db", 0.6, "greedy", files, curated)
    with zstandard.open(curated / files[2].name, "rb") as fh:
        third = fh.read()
    written = (curated / files[0].name).read_bytes() + gzip.decompress((curated / files[1].name).read_bytes()) + third
    assert written == (tmp_path / "local.jsonl").read_bytes()
    local.close()


def test_files_given_relative_are_named_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("shard.jsonl").write_text(
        "".join(json.dumps({"id": i, "text": f"note {i}"}) + "\n" for i in range(50)) + '{"id": 50, "text": 7}\n'
    )
    with pytest.raises(CorpusError) as err:
        cluster_scan(["shard.jsonl"], "out", ClusterScanSettings(piece_bytes=500, partitions=2))
    assert (err.value.path, err.value.line) == ("shard.jsonl", 51)
    result = cluster_scan(["shard.jsonl"], "out", ClusterScanSettings(piece_bytes=500, partitions=2, skip_bad=True))
    assert result.documents == 50 and Path("out/manifest.json").is_file()


def test_a_new_import_carries_the_review_over(cluster_scanned, corpus, tmp_path):
    out, _, _ = cluster_scanned
    first = import_scan(out, tmp_path / "first.db")
    _decide(first)
    decisions.undo(first)  # the undo history comes along too
    keep_rules.set_keep_rule(first, "max:score")
    before = [(d.kind, d.doc_id, d.other_id, d.undone) for d in decisions.all_decisions(first)]
    first.close()
    # a rescan at a higher floor: fewer documents, the same ids
    out2 = tmp_path / "scan2"
    cluster_scan(corpus, out2, ClusterScanSettings(floor=0.7, **FORCED))
    r = CliRunner().invoke(
        main, ["import", str(out2), "--db", str(tmp_path / "second.db"), "--review-from", str(tmp_path / "first.db")]
    )
    assert r.exit_code == 0 and "carried over 3 decisions" in r.output, r.output
    with Project(tmp_path / "second.db") as second:
        assert [(d.kind, d.doc_id, d.other_id, d.undone) for d in decisions.all_decisions(second)] == before
        assert keep_rules.keep_rule(second) == "max:score"
        assert decisions.can_redo(second)


def test_oversized_buckets_are_compared_not_skipped(cluster_scanned, corpus, tmp_path):
    """The module's scans have a small --max-bucket: the templated family's buckets are over
    it, the same as in the local scan, compared pair by pair (the candidates of no limit), and
    the pairs are those of a local scan without the limit."""
    out, result, limited = cluster_scanned
    unlimited = Project(tmp_path / "l.db", create=True)
    load_corpus(unlimited, corpus)
    counts = scan(unlimited, ScanSettings(method="lsh", max_bucket=0))
    local = result.local_counts
    assert (result.oversized_buckets, result.largest_bucket) == (local.oversized_buckets, local.largest_bucket)
    assert result.oversized_buckets > 0
    assert result.candidates == counts.candidates
    assert _scan_pairs(out) == _local_pairs(limited) == _local_pairs(unlimited)
    unlimited.close()


def _stage_inputs(files: list[Path]):
    """The band and verify stages' inputs for `files`, made in this process as the job's tasks
    make them (no ids repeated): pieces of 40 kB, one shuffle partition, three groups."""
    from dedup_tui.engine.ray import stages
    from dedup_tui.engine.ray.pieces import PieceSpec, read_piece
    from dedup_tui.engine.scanning import lsh
    from dedup_tui.engine.scanning.settings import PREFILTER_TAIL

    s = ClusterScanSettings()
    specs = [
        PieceSpec(i, str(f), "jsonl", start, end, first, f"{f.name}:")
        for i, f in enumerate(files)
        for start, end, first in index_file(str(f), "jsonl", 40_000)["pieces"]
    ]
    read = [read_piece(p, s) for p in specs]
    counts = np.array([r[0]["n"] for r in read], np.int64)
    base = np.r_[0, np.cumsum(counts)]
    dropped = np.empty(0, np.int64)
    copies = stages.exact_copies(
        *[stages.digests_by_partition(r[1], int(base[p]), dropped, 1) for p, r in enumerate(read)]
    )
    dup_ords = np.sort(copies[0])
    n_reps = int(base[-1]) - len(dup_ords)
    rep_bounds = base - np.searchsorted(dup_ords, base)
    banding = lsh.choose_banding(s.floor, s.num_perm)
    index_bits = max(1, (n_reps - 1).bit_length())
    entries = [
        next(stages.band_entries(r[2], int(base[p]), dropped, dup_ords, index_bits, banding.bands, banding.rows, 1))
        for p, r in enumerate(read)
    ]
    groups = np.array_split(np.arange(len(specs)), 3)
    group_bounds = np.array([rep_bounds[g[0]] for g in groups] + [rep_bounds[-1]], np.int64)
    min_agree = lsh.min_matches_to_verify(s.num_perm, s.floor, PREFILTER_TAIL, bits=4)
    band_args = (n_reps, s.num_perm, min_agree, s.max_bucket, group_bounds)
    info = {"rep_bounds": rep_bounds, "base": base, "count": counts, "dropped": dropped, "dup_ords": dup_ords}
    texts = [r[3] for r in read]
    return band_args, entries, groups, info, texts


def test_the_band_and_verify_tasks_in_passes_give_what_they_give_at_once(corpus, monkeypatch):
    """Under a cap that holds almost nothing (passes of 1,000 candidates), the band task's
    candidates and the verify tasks' pairs are those of no cap, though spilled and taken in
    many passes. (The stages' functions run in this process, as their tasks would.)"""
    from dedup_tui.engine.ray import stages
    from dedup_tui.engine.scanning import passes

    band_args, entries, groups, info, texts = _stage_inputs(corpus)
    n_reps = band_args[0]
    text_refs = [ray.put(t) for t in texts]

    def run(cap: int):
        *candidates, stats = stages.band_pairs(*band_args, cap, *entries)
        verified = [
            stages.verify_group(
                n_reps, 5, 0.5, info, g.tolist(), 1, cap, text_refs, *[texts[p] for p in g], candidates[q]
            )
            for q, g in enumerate(groups)
        ]
        return candidates, stats, verified

    whole, whole_stats, whole_verified = run(0)
    monkeypatch.setattr(passes, "MIN_PASS_CANDIDATES", 1000)
    monkeypatch.setattr(passes, "SPILL_BLOCK", 64)
    capped, capped_stats, capped_verified = run(1)
    assert sum(map(len, whole)) > 1000 and whole_stats[5] == 1
    assert capped_stats[5] > 10 and capped_stats[6] > 0  # passes, spilled bytes
    assert all(np.array_equal(x, y) for x, y in zip(whole, capped))
    assert np.array_equal(whole_stats[4], capped_stats[4])  # candidates per group
    assert max(c[6] for c in capped_verified) > 5
    for w, c in zip(whole_verified, capped_verified):
        assert w[6] == 1 and (c[6] > 1) == (c[7] > 0)  # passes only when spilled
        assert w[3:5] == c[3:5]  # compared, distinct candidates
        order_w, order_c = np.lexsort((w[1], w[0])), np.lexsort((c[1], c[0]))
        assert all(np.array_equal(w[i][order_w], c[i][order_c]) for i in range(3))
    assert sum(len(w[0]) for w in whole_verified) > 500


def test_outputs_never_replace_the_corpus_or_a_foreign_folder(corpus, cluster_scanned, tmp_path):
    from dedup_tui.engine.errors import DedupError

    folder = corpus[0].parent
    before = {f: f.read_bytes() for f in corpus}
    with pytest.raises(DedupError, match="holds the corpus file"):
        cluster_scan(corpus, folder, ClusterScanSettings(**FORCED), force=True)
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(DedupError, match="not a cluster scan folder"):
        cluster_scan(corpus, other, ClusterScanSettings(**FORCED), force=True)
    assert (other / "keep.txt").read_text() == "mine"
    # an earlier scan may be replaced
    again = tmp_path / "scan"
    cluster_scan(corpus, again, ClusterScanSettings(**FORCED))
    cluster_scan(corpus, again, ClusterScanSettings(**FORCED), force=True)
    out, _, _ = cluster_scanned
    import_scan(out, tmp_path / "review.db").close()
    with pytest.raises(DedupError, match="a corpus file"):
        cluster_export(tmp_path / "review.db", 0.8, "components", corpus, folder, force=True)
    assert {f: f.read_bytes() for f in corpus} == before and not list(folder.glob(".*.part"))


def test_a_damaged_scan_folder_is_a_one_line_error(cluster_scanned, tmp_path):
    import shutil

    from dedup_tui.engine.errors import DedupError

    out, _, _ = cluster_scanned
    broken = tmp_path / "scan"
    shutil.copytree(out, broken)
    manifest = json.loads((broken / "manifest.json").read_text())
    del manifest["params"]["floor"]
    (broken / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DedupError, match="damaged"):
        import_scan(broken, tmp_path / "a.db")
    shutil.copyfile(out / "manifest.json", broken / "manifest.json")
    (broken / "pairs.parquet").write_bytes(b"not parquet")
    r = CliRunner().invoke(main, ["import", str(broken), "--db", str(tmp_path / "b.db")])
    assert r.exit_code == 1 and "pairs.parquet: cannot be read" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "a.db").exists() and not (tmp_path / "b.db").exists()


# -- issue 25: scan folders, leftovers, errors and addresses -----------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> list[Path]:
    """A small corpus (a few pairs and exact copies): a scan of it takes a second or two."""
    folder = tmp_path_factory.mktemp("tiny")
    rng = random.Random(3)
    texts = _texts(rng, n_families=8, n_unique=20)
    path = folder / "tiny.jsonl"
    path.write_text("".join(json.dumps({"id": f"t{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    return [path]


def _one_line_error(r) -> str:
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert r.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert "Traceback" not in r.output
    return lines[0]


def _stages():
    """A Control that records the stages reported (none: the command refused before any work)."""
    seen: list[str] = []
    return seen, Control(lambda stage, done, total: seen.append(stage))


def test_force_replaces_only_what_a_scan_wrote(tiny, tmp_path):
    """Issue 25, item 2: a review project (or anything else) kept inside SCAN_DIR is never
    removed by cluster-scan --force: refused before any work, naming it; and import refuses
    to make a project inside a scan folder."""
    from dedup_tui.engine.errors import DedupError

    scan_dir = tmp_path / "scan"
    cluster_scan(tiny, scan_dir, ClusterScanSettings(partitions=2))
    r = CliRunner().invoke(main, ["import", str(scan_dir), "--db", str(scan_dir / "review.db")])
    assert "review.db: inside the scan folder" in _one_line_error(r)
    assert not (scan_dir / "review.db").exists()
    # a project put there anyway (moved in, or made by an older dedup-tui), and a stray part
    import_scan(scan_dir, tmp_path / "review.db").close()
    (tmp_path / "review.db").rename(scan_dir / "review.db")
    project_bytes = (scan_dir / "review.db").read_bytes()
    manifest = (scan_dir / "manifest.json").read_bytes()
    seen, control = _stages()
    with pytest.raises(DedupError, match=r"review.db: not written by a cluster scan"):
        cluster_scan(tiny, scan_dir, ClusterScanSettings(partitions=2), control=control, force=True)
    assert seen == []
    r = CliRunner().invoke(main, ["cluster-scan", str(tiny[0]), "--out", str(scan_dir), "--force"])
    assert "review.db: not written by a cluster scan" in _one_line_error(r)
    assert (scan_dir / "review.db").read_bytes() == project_bytes
    assert (scan_dir / "manifest.json").read_bytes() == manifest
    (scan_dir / "review.db").rename(tmp_path / "review.db")
    (scan_dir / "documents" / "notes.txt").write_text("mine")
    with pytest.raises(DedupError, match=r"notes.txt: not written by a cluster scan"):
        cluster_scan(tiny, scan_dir, ClusterScanSettings(partitions=2), force=True)
    assert (scan_dir / "documents" / "notes.txt").read_text() == "mine"
    # holding only what a scan wrote, the earlier scan is replaced, and nothing is left beside it
    (scan_dir / "documents" / "notes.txt").unlink()
    cluster_scan(tiny, scan_dir, ClusterScanSettings(partitions=2), force=True)
    assert (scan_dir / "manifest.json").read_bytes() != manifest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["review.db", "scan"]


def test_a_symlinked_scan_dir_is_refused_before_the_work(tiny, tmp_path):
    """Issue 25: --out LINK --force ran the whole job, then failed removing the link. A
    symbolic link is refused at once, naming it and where it points; nothing changes."""
    from dedup_tui.engine.errors import DedupError

    scan_dir = tmp_path / "scan-1"
    cluster_scan(tiny, scan_dir, ClusterScanSettings(partitions=2))
    manifest = (scan_dir / "manifest.json").read_bytes()
    link = tmp_path / "latest"
    link.symlink_to(scan_dir.name)
    seen, control = _stages()
    with pytest.raises(DedupError, match="latest: is a symbolic link"):
        cluster_scan(tiny, link, ClusterScanSettings(partitions=2), control=control, force=True)
    assert seen == []
    r = CliRunner().invoke(main, ["cluster-scan", str(tiny[0]), "--out", str(link), "--force"])
    assert "latest: is a symbolic link (to scan-1)" in _one_line_error(r)
    assert link.is_symlink() and (link / "manifest.json").read_bytes() == manifest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "scan-1"]


def _dead_pid() -> int:
    """The id of a process that has ended (and been waited for)."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_leftovers_of_killed_runs_are_removed(tiny, tmp_path):
    """Issue 25: a killed cluster-scan left .SCAN.PID.part folders and a killed cluster-export
    .part shards that no run removed. The next run removes those of dead processes of this
    machine (only what a scan or an export writes), and leaves a live run's and another
    machine's."""
    import socket

    host, dead, live = socket.gethostname(), _dead_pid(), os.getppid()

    def folder(name, *files):
        (tmp_path / name / "documents").mkdir(parents=True)
        for f in files:
            (tmp_path / name / f).write_bytes(b"")
        return name

    # killed runs' folders: removed
    folder(f".scan.{host}.{dead}.part", "documents/part-00000.parquet", "manifest.json")
    folder(f".scan.{dead}.part", "pairs.parquet")  # named as before this fix
    folder(f".scan.{host}.{dead}.old", "pairs.parquet", "exact_groups.parquet")
    kept = [
        folder(f".scan.{host}.{live}.part", "pairs.parquet"),  # a run still going
        folder(f".scan.elsewhere.{dead}.part", "pairs.parquet"),  # another machine's
        folder(f".scan.{host}.{_dead_pid()}.old", "notes.txt"),
    ]  # not only a scan's files
    cluster_scan(tiny, tmp_path / "scan", ClusterScanSettings(partitions=2))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept + ["scan"])
    # cluster-export's parts, in its OUT_DIR
    import_scan(tmp_path / "scan", tmp_path / "review.db").close()
    curated = tmp_path / "curated"
    curated.mkdir()
    name = tiny[0].name
    for stale in (f".{name}.{host}.{dead}.part", f".{name}.{dead}.part", f".{name}.{host}.{live}.part"):
        (curated / stale).write_text("half a shard")
    cluster_export(tmp_path / "review.db", 0.8, "components", tiny, curated)
    assert sorted(p.name for p in curated.iterdir()) == sorted(
        [f".{name}.{host}.{live}.part", name, "removed.jsonl", "decisions.jsonl", "manifest.json"]
    )


def test_a_shard_task_stops_when_its_driver_is_gone(tiny, tmp_path):
    """Issue 25: an orphaned worker of a killed cluster-export kept writing its .part shard.
    A shard task checks that its driver runs (on this machine) and that its part is still
    its own, and else stops, removing the part."""
    from dedup_tui.engine.errors import DedupError
    from dedup_tui.engine.ray.export import _Watch, export_shard
    from dedup_tui.engine.ray.job import this_process

    part = tmp_path / ".tiny.jsonl.part"
    gone = (*this_process()[:2], _dead_pid())
    with pytest.raises(DedupError, match=r"stopped writing, the job's driver \(process \d+\) is gone"):
        export_shard(str(tiny[0]), "jsonl", "", None, "text", [], frozenset(), str(part), gone)
    assert not part.exists()
    with open(part, "wb") as fh:  # a later run removed the part: the task stops
        watch = _Watch(this_process(), str(part))
        watch.check(fh)
        part.unlink()
        watch.next = 0
        with pytest.raises(DedupError, match="removed by a later run"):
            watch.check(fh)
    r = export_shard(str(tiny[0]), "jsonl", "", None, "text", [], frozenset(), str(part), this_process())
    assert r["kept"] == len(tiny[0].read_text().splitlines()) and part.read_bytes() == tiny[0].read_bytes()


def test_a_task_error_shows_its_root_cause(tiny, tmp_path):
    """Issue 25, item 11: with the disk full, a task's error was a traceback cut at 300
    characters and "No space left on device" never showed. The error is one line: the
    root cause, with the file."""
    import errno

    from dedup_tui.engine.errors import DedupError
    from dedup_tui.engine.ray.pieces import PieceSpec, collect_documents
    from dedup_tui.engine.ray.stages import Stage

    def deep(n):
        if n:
            return deep(n - 1)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/data/scan/documents/part-00001.parquet")

    @ray.remote
    def full():
        deep(40)  # a long traceback: the cause is at its end

    @ray.remote
    def arrow_full():  # pyarrow's form of it
        raise OSError(28, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    stage = Stage(ray, Control(), [])
    with pytest.raises(DedupError) as err:
        stage.run("documents", [full.remote()])
    assert str(err.value) == "a cluster task failed: /data/scan/documents/part-00001.parquet: No space left on device"
    with pytest.raises(DedupError, match=r"a cluster task failed: No space left on device$"):
        stage.run("documents", [arrow_full.remote()])
    # an error out of ray.wait (through ray://, e.g. a cluster running another version) too

    class Skewed:
        def wait(self, *args, **kwargs):
            raise TypeError("too many positional arguments")

    with pytest.raises(DedupError, match=r"^a cluster task failed: TypeError: too many positional arguments$"):
        Stage(Skewed(), Control(), []).run("export", [object()])
    # the tasks that write name the file they could not write
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    piece = PieceSpec(0, str(tiny[0]), "jsonl", 0, -1, 1, "")
    with pytest.raises(DedupError, match=r"blocker/part-00000.parquet: cannot be written \(.*Not a directory"):
        collect_documents(
            piece,
            ClusterScanSettings(),
            0,
            np.empty(0, np.int64),
            0,
            np.array([0, 1]),
            0,
            str(blocker / "part-00000.parquet"),
        )


def test_cluster_export_says_the_disk_is_full(cluster_scanned, corpus, tmp_path):
    """Issue 25, item 11, end to end: a shard that cannot be written (here: its part is
    /dev/full, as on a full disk) is a one-line error naming the part and "No space left on
    device"; no shard is named as done and nothing is left behind."""
    import socket
    import stat

    if not os.path.exists("/dev/full") or not stat.S_ISCHR(os.stat("/dev/full").st_mode):
        pytest.skip("needs /dev/full")
    out, _, _ = cluster_scanned
    import_scan(out, tmp_path / "review.db").close()
    curated = tmp_path / "curated"
    curated.mkdir()
    part = curated / f".{corpus[1].name}.{socket.gethostname()}.{os.getpid()}.part"
    part.symlink_to("/dev/full")  # the part this run's task writes (a symbolic link: only the link is removed)
    r = CliRunner().invoke(
        main,
        [
            "cluster-export",
            *map(str, corpus),
            "--db",
            str(tmp_path / "review.db"),
            "--threshold",
            "0.8",
            "--out",
            str(curated),
        ],
    )
    line = _one_line_error(r)
    assert f"{part}: cannot be written (No space left on device)" in line, line
    assert list(curated.iterdir()) == [] and stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_the_manifest_says_how_the_cluster_changed(tiny, tmp_path, monkeypatch):
    """Issue 25, item 11: after a node died mid-scan the manifest said 2 nodes and 3 CPUs.
    It says the live nodes and CPUs at the start and at the end, and how many were lost."""
    real = ray.nodes
    calls = []

    def nodes():  # a second node (1 CPU) alive when the scan starts, dead after
        calls.append(1)
        extra = {"NodeID": "f" * 56, "Alive": len(calls) == 1, "Resources": {"CPU": 1.0}}
        return real() + [extra]

    monkeypatch.setattr(ray, "nodes", nodes)
    cluster_scan(tiny, tmp_path / "scan", ClusterScanSettings(partitions=2))
    cluster = json.loads((tmp_path / "scan" / "manifest.json").read_text())["cluster"]
    assert cluster["at_start"] == {"nodes": 2, "cpus": 3} and cluster["at_end"] == {"nodes": 1, "cpus": 2}
    assert (cluster["nodes_lost"], cluster["nodes_joined"]) == (1, 0)


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli_process(*args, timeout=20, env=None):
    """The CLI in its own process (this one already has a Ray): (return code, stderr, seconds)."""
    import subprocess
    import sys
    import time

    extra = env or {}
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    env.pop("RAY_ADDRESS", None)
    env.update(extra)
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "dedup_tui", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    return r.returncode, r.stderr, time.monotonic() - t0


def test_an_unreachable_address_is_a_one_line_error_within_seconds(tiny, tmp_path):
    """Issue 25, item 12: --address 127.0.0.1:6379 with no cluster there ran for 590 s. A
    closed port (and a port where something that is not Ray listens) is one line naming the
    address, in seconds, for cluster-scan and cluster-export (the timeout guards a hang)."""
    import socket

    port = _closed_port()
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        code, err, _ = _cli_process("cluster-scan", tiny[0], "--out", tmp_path / "scan", "--address", address)
        assert code == 1 and err.strip().splitlines() == [
            (
                f"error: cannot reach a Ray cluster at {address}: connection refused "
                f"(nothing listens on port {port} of 127.0.0.1: is the cluster started, and is this its address?)"
            )
        ], err
    assert not (tmp_path / "scan").exists() and not list(tmp_path.iterdir())
    cluster_scan(tiny, tmp_path / "scan", ClusterScanSettings(partitions=2))
    import_scan(tmp_path / "scan", tmp_path / "review.db").close()
    with socket.socket() as listener:  # accepts connections, answers nothing
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        code, err, _ = _cli_process(
            "cluster-export",
            tiny[0],
            "--db",
            tmp_path / "review.db",
            "--threshold",
            "0.8",
            "--out",
            tmp_path / "curated",
            "--address",
            address,
        )
    assert (
        code == 1
        and len(err.strip().splitlines()) == 1
        and err.startswith(
            f"error: cannot reach a Ray cluster at {address}: something listens there but it is not a Ray cluster"
        )
    ), err
    assert not (tmp_path / "curated").exists()


def test_a_reachable_cluster_that_starts_no_session_names_authentication(monkeypatch):
    """Issue 25, item 11: with Ray's token authentication, a ray:// address failed after 31 s
    with "connection timeout" and no word of authentication. The error names it and the
    variables to set."""
    from dedup_tui.engine.ray.address import auth_hint, probe_address

    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    assert "set RAY_AUTH_MODE=token and its token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH" in auth_hint()
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert "RAY_AUTH_MODE=token is set here; check that the token" in auth_hint()
    # a real Ray answers the probe (an HTTP/2 greeting) at once
    assert probe_address(ray.get_runtime_context().gcs_address) is True
    # the wiring: a port that answers, then Ray's client timeout (what token auth gives)
    from dedup_tui.engine.errors import DedupError
    from dedup_tui.engine.ray.address import connect

    def timeout(**kwargs):
        raise ConnectionError("ray client connection timeout")

    address = "ray://" + ray.get_runtime_context().gcs_address
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", timeout)
    with pytest.raises(DedupError) as err:
        connect(address)
    assert str(err.value).startswith(
        f"cannot reach a Ray cluster at {address}: ray client connection timeout; "
        f"authentication may be the cause: RAY_AUTH_MODE=token is set here"
    )


def test_a_connection_that_hangs_is_given_up():
    """Issue 25, item 12: Ray's connection loops run in C++, where a Ctrl-C waited 30 s and a
    port answering as gRPC without being a Ray cluster hung for minutes. ray.init runs in a
    thread of its own, waited for a bounded time; its errors come through as they are."""
    import time

    from dedup_tui.engine.ray.address import init_within

    never = threading.Event()

    class Hangs:
        def init(self, **kwargs):
            never.wait()

    class Refuses:
        def init(self, **kwargs):
            raise ConnectionError("Failed to connect to Ray cluster at 192.0.2.2:6379")

    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"no Ray session started within 0.2 s"):
        init_within(Hangs(), 0.2, address="h:1")
    assert time.monotonic() - t0 < 10
    never.set()
    with pytest.raises(ConnectionError, match="Failed to connect"):
        init_within(Refuses(), 5, address="h:1")


_SCAN_CHILD = """
import sys, threading
import ray
from dedup_tui.engine.progress import Control
from dedup_tui.engine.ray.job import cluster_scan
from dedup_tui.engine.ray.settings import ClusterScanSettings

ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
         object_store_memory=80 << 20, _temp_dir=sys.argv[3])

def progress(stage, done, total):
    if stage == "read":
        print("READING", flush=True)
        threading.Event().wait()  # held here, mid-job, until killed

cluster_scan([sys.argv[1]], sys.argv[2], ClusterScanSettings(partitions=2), control=Control(progress))
"""


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups")
def test_a_killed_cluster_scan_leaves_nothing_the_next_run_keeps(tiny, tmp_path):
    """Issue 25: a cluster-scan killed mid-job (its process group: the driver and the Ray it
    started) left its .SCAN.HOST.PID.part folder for good. The next run removes it."""
    import shutil
    import signal
    import subprocess
    import sys
    import tempfile

    ray_dir = tempfile.mkdtemp(prefix="rk")  # short: Ray's socket paths have a length limit
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen(
        [sys.executable, "-c", _SCAN_CHILD, str(tiny[0]), str(tmp_path / "scan"), ray_dir],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert proc.stdout.readline().startswith("READING")
        left = [p.name for p in tmp_path.iterdir()]
        assert len(left) == 1 and left[0].startswith(".scan.") and left[0].endswith(f".{proc.pid}.part")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        proc.stdout.close()
        shutil.rmtree(ray_dir, ignore_errors=True)
    cluster_scan(tiny, tmp_path / "scan", ClusterScanSettings(partitions=2))
    assert [p.name for p in tmp_path.iterdir()] == ["scan"]


def test_addresses_without_a_port_or_through_auto_are_probed_too(tiny, tmp_path, monkeypatch):
    """The re-attack: `ray://127.0.0.1` (no port) took 30 s, and `--address auto` with
    RAY_ADDRESS at a closed port 61 s: both are probed (Ray client's port 10001; RAY_ADDRESS)."""
    from dedup_tui.engine.ray.address import host_port

    assert host_port("ray://10.0.0.7") == ("10.0.0.7", 10001)
    with pytest.raises(DedupError, match="names no host"):
        host_port("ray://")
    port = _closed_port()
    code, err, _ = _cli_process(
        "cluster-scan",
        tiny[0],
        "--out",
        tmp_path / "scan",
        "--address",
        "auto",
        env={"RAY_ADDRESS": f"127.0.0.1:{port}"},
    )
    assert code == 1 and f"cannot reach a Ray cluster at 127.0.0.1:{port}: connection refused" in err, err


def test_cluster_export_never_writes_into_a_scan_folder(cluster_scanned, corpus, tmp_path):
    out, _result, _local = cluster_scanned
    before = sorted(p.name for p in out.iterdir())
    review = import_scan(out, tmp_path / "review.db")
    review.close()
    with pytest.raises(DedupError, match="is a cluster scan folder"):
        cluster_export(tmp_path / "review.db", 0.8, "components", corpus, out, force=True)
    assert sorted(p.name for p in out.iterdir()) == before


def test_a_reference_in_a_cluster_scan_is_kept_and_exported_as_locally(corpus, tmp_path):
    """cluster-scan --reference: the same pairs as the local scan of the same files, the role in
    the imported project, and cluster-export writes what the local export writes (never a
    reference document), with the same removed log (both sides' files named)."""
    data, refs = corpus[:2], corpus[2:]
    out = tmp_path / "scan"
    runner = CliRunner()
    r = runner.invoke(
        main,
        [
            "cluster-scan",
            *map(str, data),
            "--reference",
            *map(str, refs),
            "--out",
            str(out),
            "--piece-mb",
            "1",
            "--partitions",
            "2",
        ],
    )
    assert r.exit_code == 0, r.output
    local = _local(tmp_path, data, references=refs)
    assert _scan_pairs(out) == _local_pairs(local) and _scan_groups(out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert [i.get("role") for i in manifest["inputs"]] == [None, None, "reference"]
    review = import_scan(out, tmp_path / "review.db")
    assert review.reference_sources() == [3] and local.reference_sources() == [3]
    review.close()
    local_out, local_removed = tmp_path / "local.jsonl", tmp_path / "local.removed.jsonl"
    curate_curated.export_curated(local, 0.8, "greedy", local_out, removed_out=local_removed)
    curated = tmp_path / "curated"
    result = cluster_export(tmp_path / "review.db", 0.8, "greedy", corpus, curated)
    assert not (curated / corpus[2].name).exists()  # the reference: nothing of it is written
    assert b"".join((curated / f.name).read_bytes() for f in data) == local_out.read_bytes()
    removed = {json.dumps(json.loads(x), sort_keys=True) for x in open(curated / "removed.jsonl")}
    assert removed == {json.dumps(json.loads(x), sort_keys=True) for x in open(local_removed)}
    assert any(json.loads(x).get("duplicate_of_source") == str(refs[0].resolve()) for x in open(local_removed))
    kept = sum(1 for _ in open(local_out))
    assert result.kept == kept and result.removed == len(removed)
    local.close()


# -- an import of a cluster scan appears whole or not at all (issue 25, item 4: with the load,
# in test_atomic_projects; here to use this module's Ray cluster, not start one more) ------------


@pytest.fixture(scope="module")
def scan_dir(tmp_path_factory) -> tuple[Path, Path, int]:
    folder = tmp_path_factory.mktemp("cluster")
    corpus = write_jsonl(folder / "c.jsonl", small_corpus(40))
    cluster_scan([corpus], folder / "scan", ClusterScanSettings(piece_bytes=20_000, partitions=2))  # (local_ray's)
    with Project(folder / "local.db", create=True) as local:
        load_corpus(local, [corpus])
        scan(local, ScanSettings(method="lsh"))
        pairs = local.conn.execute("SELECT count(*) FROM pairs").fetchone()[0]
    return folder / "scan", corpus, pairs


@pytest.mark.parametrize("stage,at", [("load", 1), ("write", 0)])
def test_a_killed_import_leaves_no_project(tmp_path, scan_dir, stage, at):
    """The attack: killed between the documents and the pairs, the project said 'not scanned
    yet', a local scan was accepted and export wrote 7,142 of 70,021 documents."""
    scan, _corpus, pairs = scan_dir
    db = tmp_path / "review.db"
    killed_at(stage, at, "import", db, scan)
    assert not db.exists()
    r = cli("import", scan, "--db", db)
    assert "partial view" in r.stdout
    assert leftovers(tmp_path, "review.db") == ["review.db"]
    with Project(db) as project:
        assert project.get_meta("partial_view") and project.get_meta("scan_state") == "complete"
        assert project.conn.execute("SELECT count(*) FROM pairs").fetchone()[0] == pairs


def test_a_refused_review_from_leaves_no_project_and_says_why(tmp_path, scan_dir):
    scan, _corpus, _pairs = scan_dir
    other = write_jsonl(
        tmp_path / "other.jsonl", [{"id": f"x{i}", "text": f"another corpus entirely {i}"} for i in range(5)]
    )
    earlier = tmp_path / "earlier.db"
    cli("load", other, "--db", earlier)
    with Project(earlier) as project:
        project.conn.execute(
            "INSERT INTO decisions(kind, doc_id, author, created_at, undone) "
            "VALUES ('keep', 'x1', 'tester', '2026-01-01', 0)"
        )
    db = tmp_path / "review.db"
    r = cli("import", scan, "--db", db, "--review-from", earlier, check=False)
    line = one_line_error(r)
    assert "none of its 1 decisions names a document of this scan" in line and "other.jsonl" in line
    assert not db.exists()
    # A retry with the right project is not told "already exists".
    assert "partial view" in cli("import", scan, "--db", db).stdout


def test_review_from_says_how_many_decisions_matched(tmp_path, scan_dir):
    scan, corpus, _pairs = scan_dir
    first = tmp_path / "first.db"
    cli("import", scan, "--db", first)
    with Project(first) as project:
        some_id = project.conn.execute("SELECT doc_id FROM documents LIMIT 1").fetchone()[0]
        project.conn.executemany(
            "INSERT INTO decisions(kind, doc_id, author, created_at, undone) "
            "VALUES ('keep', ?, 'tester', '2026-01-01', 0)",
            [(some_id,), ("not-here",)],
        )
    r = cli("import", scan, "--db", tmp_path / "second.db", "--review-from", first)
    assert "carried over 2 decisions" in r.stdout and "1 name documents of this scan" in r.stdout
    with Project(tmp_path / "second.db") as project:
        carried = json.loads(project.get_meta("carried_review"))
    assert (carried["decisions"], carried["matched"], carried["unmatched"], carried["other_files"]) == (2, 1, 1, [])
    assert os.path.basename(corpus) not in r.stderr
