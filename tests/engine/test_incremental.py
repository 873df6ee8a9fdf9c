"""Incremental scans: documents loaded into a scanned project are compared with one another and
with the scanned ones only, and the result equals a full rescan's (pairs, scores, exact groups,
spanning forest); decisions and labels carry over; other settings mean a full scan, said why."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import replace

import numpy as np
import pytest

from dedup_tui.engine.curate import decisions, keep_rules, tune
from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.scanning import incremental, incremental_split, lsh
from dedup_tui.engine.scanning import local as local
from dedup_tui.engine.scanning.kernels import incremental as kernels_incremental
from dedup_tui.engine.scanning.settings import ScanSettings
from dedup_tui.engine.store import Project
from dedup_tui.engine.store.scans import read_exact_array, read_forest, read_pair_arrays
from dedup_tui.engine.text.synth import noisy_copy

from ..conftest import cli, ok, write_jsonl

LSH = ScanSettings(floor=0.5, method="lsh")


def families(n_families: int, sizes: tuple[int, int], singles: int, seed: int, big: int = 0) -> list[dict]:
    """Families of noisy copies of a base text (noise spread so pairs fall on both sides of
    the floor), one `big` family of near copies (a dense one: every member near every other),
    singletons; shuffled, so a split of the list splits families between old and new."""
    rng = np.random.RandomState(seed)
    docs = []

    def base() -> str:
        return " ".join(f"w{rng.randint(0, 3000)}" for _ in range(rng.randint(25, 70)))

    for f in range(n_families):
        text = base()
        for _ in range(rng.randint(*sizes)):
            docs.append((f"f{f}", noisy_copy(rng, text, int(len(text) * rng.uniform(0.0, 0.15)))))
    text = base()
    docs += [("big", noisy_copy(rng, text, int(len(text) * rng.uniform(0.0, 0.04)))) for _ in range(big)]
    docs += [(f"s{i}", base()) for i in range(singles)]
    order = rng.permutation(len(docs))
    return [{"id": f"{seed}-{i}", "text": docs[k][1], "group": docs[k][0]} for i, k in enumerate(order)]


def with_copies(new: list[dict], old: list[dict], seed: int) -> list[dict]:
    """new, plus exact copies (after normalisation) of old documents and of new ones."""
    rng = np.random.RandomState(seed)
    out = list(new)
    for i in rng.choice(len(old), 15, replace=False):
        out.append({"id": f"{seed}-copy-old-{i}", "text": "  " + old[i]["text"].upper() + " "})
    for i in rng.choice(len(new), 10, replace=False):
        out.append({"id": f"{seed}-copy-new-{i}", "text": new[i]["text"]})
        out.append({"id": f"{seed}-copy-new2-{i}", "text": new[i]["text"] + "\n"})
    rng.shuffle(out)
    return out


def stored(project: Project):
    a, b, j = read_pair_arrays(project)
    table = {(x, y): s for x, y, s in project.conn.execute("SELECT a, b, jaccard FROM pairs")}
    return {
        "pairs": dict(zip(zip(a.tolist(), b.tolist()), j.tolist())),
        "table": table,
        "exact": read_exact_array(project, project.next_ord()).tolist(),
        "exact_column": dict(project.conn.execute("SELECT ord, exact_of FROM documents WHERE exact_of IS NOT NULL")),
        "forest": read_forest(project, len(a)).tolist(),
    }


def load(project: Project, tmp_path, name: str, docs: list[dict]) -> None:
    load_corpus(project, [write_jsonl(tmp_path / f"{name}.jsonl", docs)])


def full_rescan_of(tmp_path, project: Project, settings=LSH) -> dict:
    """The stored result of a full scan of a copy of the project (same documents, same ords)."""
    copy = tmp_path / "full-rescan.db"
    for suffix in ("", "-wal", "-shm"):
        copy.with_name(copy.name + suffix).unlink(missing_ok=True)
    project.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(project.path, copy)
    with Project(copy) as other:
        r = local.scan(other, settings, full=True)
        assert not r.incremental
        return stored(other)


def assert_same(got: dict, want: dict) -> None:
    assert set(got["pairs"]) == set(want["pairs"]), (
        f"only incremental: {sorted(set(got['pairs']) - set(want['pairs']))[:5]}, "
        f"only full: {sorted(set(want['pairs']) - set(got['pairs']))[:5]}"
    )
    assert got["pairs"] == want["pairs"], "scores differ"
    assert got["table"] == want["table"] == want["pairs"]
    assert got["exact"] == want["exact"] and got["exact_column"] == want["exact_column"]
    assert got["forest"] == want["forest"]


def test_incremental_scans_equal_a_full_rescan(tmp_path):
    """Three loads (two incremental scans: keys of three chunks), families across them, exact
    copies of old and of new documents, a dense family of 160 near copies (every new member near
    dozens of old ones), and a corpus crossing 1,024 representatives (the key bits the index
    takes grow by one)."""
    docs = families(150, (2, 7), 330, seed=5, big=160)
    first, second, third = docs[:900], docs[900:1060], docs[1060:]
    second = with_copies(second, first, seed=1)
    third = with_copies(third, first + second, seed=2)
    with Project(tmp_path / "p.db", create=True) as project:
        load(project, tmp_path, "first", first)
        r = local.scan(project, LSH)
        assert not r.incremental and r.full_reason == "" and r.representatives < 1024
        before = stored(project)
        for name, part in (("second", second), ("third", third)):
            load(project, tmp_path, name, part)
            r = local.scan(project, LSH)
            assert r.incremental, r.full_reason
            assert r.new_documents == len(part)
            got = stored(project)
            want = full_rescan_of(tmp_path, project)
            assert_same(got, want)
            # the old pairs are still there, and the new ones touch a new document
            assert set(before["pairs"]) <= set(got["pairs"])
            new_pairs = set(got["pairs"]) - set(before["pairs"])
            assert new_pairs and all(b >= len(before["exact"]) for _, b in new_pairs)
            before = got
        assert r.representatives > 1024
        assert sum(e >= 0 for e in got["exact"]) >= 40
        big = [o for o, d in enumerate(first + second + third) if d.get("group") == "big"]
        assert len({p for p in got["pairs"] if p[0] in big and p[1] in big}) > 5000  # the dense family
        # an old document stays the first copy of its new copies
        n1 = len(first)
        copies_of_old = [o for o, e in enumerate(got["exact"]) if 0 <= e < n1 <= o]
        assert len(copies_of_old) >= 15


def buckets_over_max_bucket(seed: int) -> list[dict]:
    """Short texts for a --max-bucket of 10: 60 of one template (a dense bucket over it in
    every band) and 500 of a short phrase and a few random words, some with a noisy copy (a few
    buckets over it of mostly dissimilar texts: split by sub-bands); shuffled."""
    rng = np.random.RandomState(seed)
    docs = [
        "typescript definitions for the package " + "".join(chr(97 + c) for c in rng.randint(0, 26, 6))
        for _ in range(60)
    ]
    for _ in range(500):
        docs.append("parse json " + " ".join(f"w{w}" for w in rng.randint(0, 100_000, rng.randint(4, 8))))
        if rng.rand() < 0.15:
            docs.append(noisy_copy(rng, docs[-1], 2))
    return [{"id": f"{seed}-{i}", "text": docs[k]} for i, k in enumerate(rng.permutation(len(docs)))]


@pytest.mark.parametrize("force_split", [False, True])
def test_new_documents_in_buckets_over_max_bucket_get_a_full_rescans_pairs(tmp_path, monkeypatch, force_split):
    """Buckets over --max-bucket with new documents: the dense ones give every pair, the others
    are split by sub-bands as the full scan splits them (lsh.worth_splitting on the whole
    bucket, its members' signatures in the same order), without falling back to a full scan.
    Forced, every one is split, by one sub-band of 6 positions: the full scan then misses most
    pairs of the template, and so must this."""
    if force_split:
        monkeypatch.setattr(lsh, "SPLIT_IF_SHARED_BELOW", float("inf"))
        sub_bands = lsh.sub_bands
        monkeypatch.setattr(lsh, "sub_bands", lambda *banding: sub_bands(*banding)[:, :2].reshape(-1, 1, 6))
    decided: dict[str, dict] = {}  # scan: {(band, the members' signatures): split}
    worth_splitting = lsh.worth_splitting

    def recorded(signatures, members, band, positions):
        members_signatures = hashlib.sha256(signatures[members].tobytes()).hexdigest()[:16]
        decided[scan][band, len(members), members_signatures] = split = worth_splitting(
            signatures, members, band, positions
        )
        return split

    monkeypatch.setattr(lsh, "worth_splitting", recorded)
    docs = buckets_over_max_bucket(seed=3)
    settings = ScanSettings(floor=0.5, method="lsh", max_bucket=10)
    with Project(tmp_path / "p.db", create=True) as project:
        for scan, part in (("old", docs[:-120]), ("incremental", docs[-120:])):
            decided[scan] = {}
            load(project, tmp_path, scan, part)
            r = local.scan(project, settings)
        assert r.incremental, r.full_reason
        assert r.largest_bucket > 10 and r.split_buckets > 0
        assert r.split_buckets == r.oversized_buckets if force_split else r.split_buckets < r.oversized_buckets
        scan = "full"
        decided[scan] = {}
        assert_same(stored(project), full_rescan_of(tmp_path, project, settings))
    # each bucket decided as the full rescan decides it, and its old rows as the scan before did
    now = {key: split for key, split in decided["incremental"].items() if key in decided["full"]}
    assert now.items() <= decided["full"].items() and len(now) == r.oversized_buckets
    assert decided["incremental"].items() - now.items() <= decided["old"].items()


@pytest.mark.parametrize("change, wide_sub_band", [("now whole", True), ("now split", True), ("now split", False)])
def test_buckets_the_new_documents_change_from_split_to_whole_or_back(tmp_path, monkeypatch, change, wide_sub_band):
    """lsh.worth_splitting made to split every bucket over --max-bucket of the first scan and
    none after (or the reverse), deciding a bucket it saw before as before. Split before and
    whole now: the old pairs the split left out are compared, as a full rescan does. Whole
    before and split now: an old pair that the bucket found and no other band reports would be
    lost in a full rescan (with one sub-band of 6 positions), so the scan is a full one; with
    the real sub-bands they all share one, and the scan stays incremental. (Split before, the
    scan runs under a cap of 1 byte: its candidates, old pairs with them, in passes.)"""
    from dedup_tui.engine.scanning import passes

    if wide_sub_band:
        sub_bands = lsh.sub_bands
        monkeypatch.setattr(lsh, "sub_bands", lambda *banding: sub_bands(*banding)[:, :2].reshape(-1, 1, 6))
    split_before, seen = change == "now whole", {}

    def decided_once(signatures, members, band, _positions):
        key = (band, hashlib.sha256(signatures[members].tobytes()).hexdigest())
        return seen.setdefault(key, split_before) if first else seen.get(key, not split_before)

    monkeypatch.setattr(lsh, "worth_splitting", decided_once)
    docs = buckets_over_max_bucket(seed=3)
    settings = ScanSettings(floor=0.5, method="lsh", max_bucket=10)
    with Project(tmp_path / "p.db", create=True) as project:
        first = True
        load(project, tmp_path, "old", docs[:-120])
        local.scan(project, settings)
        first = False
        load(project, tmp_path, "new", docs[-120:])
        if change == "now whole":
            monkeypatch.setattr(passes, "MIN_PASS_CANDIDATES", 40)
        r = local.scan(project, settings, memory=1 if change == "now whole" else None)
        if change == "now whole":
            assert r.incremental, r.full_reason
            assert r.passes > 3
            assert r.timings["buckets_now_whole"] > 10 and r.timings["buckets_now_split"] == 0
        else:
            assert r.incremental == (not wide_sub_band), r.full_reason
            assert ("split by sub-bands where it was compared whole" in r.full_reason) == wide_sub_band
        assert_same(stored(project), full_rescan_of(tmp_path, project, settings))


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"floor": 0.6}, "--floor 0.6 differs from the last scan's 0.5"),
        ({"k": 4}, "--k 4 differs from the last scan's 5"),
        ({"seed": 2}, "--seed 2 differs from the last scan's 1"),
        ({"method": "exhaustive"}, "--method exhaustive compares every pair"),
    ],
)
def test_other_settings_mean_a_full_scan(tmp_path, change, reason):
    docs = families(20, (2, 5), 30, seed=3)
    with Project(tmp_path / "p.db", create=True) as project:
        load(project, tmp_path, "first", docs[:60])
        local.scan(project, LSH)
        load(project, tmp_path, "second", docs[60:])
        settings = ScanSettings(**({"floor": 0.5, "method": "lsh"} | change))
        r = local.scan(project, settings)
        assert not r.incremental and r.full_reason == reason
        assert project.scan_state == "complete"
        assert project.scan_params()["floor"] == settings.floor
        # the full scan is the full scan: no pair is missing against another full scan
        assert_same(stored(project), full_rescan_of(tmp_path, project, settings))


def test_full_flag_and_an_exhaustive_last_scan(tmp_path):
    docs = families(20, (2, 5), 30, seed=4)
    with Project(tmp_path / "p.db", create=True) as project:
        load(project, tmp_path, "first", docs[:60])
        local.scan(project, ScanSettings(floor=0.5))  # auto: a small corpus is compared exhaustively
        load(project, tmp_path, "second", docs[60:80])
        r = local.scan(project, LSH)
        assert not r.incremental and r.full_reason == "the last scan compared every pair (a small corpus)"
        load(project, tmp_path, "third", docs[80:])
        r = local.scan(project, LSH, full=True)
        assert not r.incremental and r.full_reason == "--full"
        # nothing new: a scan is a full one, as before
        r = local.scan(project, LSH)
        assert not r.incremental and r.full_reason == ""
        # --method auto on a corpus this small: a full rescan would compare every pair
        load(project, tmp_path, "fourth", [{"id": "late", "text": docs[0]["text"] + " and more"}])
        r = local.scan(project, ScanSettings(floor=0.5))
        assert not r.incremental and r.method == "exhaustive"
        assert r.full_reason == "a corpus this small is compared exhaustively (--method auto)"


def test_decisions_labels_and_notes_carry_over(tmp_path):
    docs = families(30, (3, 6), 40, seed=6)
    old, new = docs[:120], docs[120:]
    with Project(tmp_path / "p.db", create=True) as project:
        load(project, tmp_path, "old", old)
        local.scan(project, LSH)
        a, b, j = read_pair_arrays(project)
        ids = project.ids_for([int(a[0]), int(b[0]), int(a[1]), int(b[1])])
        decisions.record(project, "remove", ids[0])
        decisions.record(project, "not_duplicate", ids[2], ids[3])
        decisions.record(project, "note", ids[1], value="looked at it")
        tune.set_label(project, ids[0], ids[1], "duplicate", similarity=float(j[0]))
        before = [(d.kind, d.doc_id, d.other_id, d.value) for d in decisions.active(project)]
        labels_before = [(x.a_id, x.b_id, x.label) for x in tune.labels(project)]
        overrides_before = decisions.Overrides.load(project)

        load(project, tmp_path, "new", new)
        r = local.scan(project, LSH)
        assert r.incremental
        assert [(d.kind, d.doc_id, d.other_id, d.value) for d in decisions.active(project)] == before
        assert [(x.a_id, x.b_id, x.label) for x in tune.labels(project)] == labels_before
        assert decisions.notes_for(project, ids[1]) == ["looked at it"]
        overrides = decisions.Overrides.load(project)
        assert overrides.split_pairs == overrides_before.split_pairs and overrides.split_pairs
        # ... and they apply to the new scan's clusters: the removed document stays removed
        from dedup_tui.engine.store.scans import load_graph

        graph = load_graph(project)
        clustering = keep_rules.cluster_with_decisions(project, graph, 0.5)
        removed = project.ords_for_ids([ids[0]])[ids[0]]
        assert clustering.keeper[removed] >= 0


def test_a_cancelled_incremental_scan_leaves_the_project_as_it_was(tmp_path):
    from dedup_tui.engine.errors import Cancelled
    from dedup_tui.engine.progress import Control

    docs = families(20, (2, 5), 30, seed=9)
    with Project(tmp_path / "p.db", create=True) as project:
        load(project, tmp_path, "first", docs[:60])
        local.scan(project, LSH)
        pairs = stored(project)
        n = project.next_ord()
        load(project, tmp_path, "second", docs[60:])
        control = Control()

        def progress(stage, done, total):
            if stage == "verify":
                control.cancel.set()

        control.progress = progress
        with pytest.raises(Cancelled):
            local.scan(project, LSH, control)
        assert project.scan_state == "stale"
        a, b, j = read_pair_arrays(project)
        assert dict(zip(zip(a.tolist(), b.tolist()), j.tolist())) == pairs["pairs"]
        assert read_exact_array(project, n).tolist() == pairs["exact"]
        assert local.scan(project, LSH).incremental  # and the next scan is incremental


def test_cli_scans_new_documents_incrementally(tmp_path):
    docs = families(20, (2, 5), 30, seed=10)
    first = write_jsonl(tmp_path / "first.jsonl", docs[:60])
    second = write_jsonl(tmp_path / "second.jsonl", docs[60:80])
    third = write_jsonl(tmp_path / "third.jsonl", docs[80:])
    db = tmp_path / "p.db"
    out = ok("scan", db, first, "--method", "lsh").output
    assert "incremental" not in out
    out = ok("scan", db, second, "--method", "lsh").output
    assert (
        f"incremental scan: {len(docs[60:80])} new documents compared with one another and with the 60 scanned "
        f"before" in out
    )
    ok("load", db, third)
    out = ok("scan", db, "--method", "lsh", "--floor", "0.6").output
    assert "full scan: --floor 0.6 differs from the last scan's 0.5" in out
    ok("load", db, write_jsonl(tmp_path / "fourth.jsonl", [{"id": "x", "text": "one more document"}]))
    out = ok("scan", db, "--method", "lsh", "--floor", "0.6", "--full").output
    assert "incremental" not in out and "full scan:" not in out
    assert cli("scan", db, "--full", "--method", "lsh", "--floor", "0.6").exit_code == 0


def test_added_band_survivors_matches_its_reference():
    """With whole and split runs, and earlier bands whose buckets were lone, whole or split."""
    rng = np.random.RandomState(0)
    perms = 40
    words = -(-perms // 16)
    split_runs = 0
    for trial in range(40):
        m, n_old, bands = rng.randint(1, 12), rng.randint(0, 20), rng.randint(1, 5)
        n = m + n_old
        sig = rng.randint(0, 3, size=(n, perms)).astype(np.uint32)  # few values: many agreements
        packed = lsh.pack_nibbles(sig)
        assert packed.shape == (n, words)
        bucket = rng.randint(0, 3, size=(bands, n)).astype(np.int32)
        bucket[rng.rand(bands, n) < 0.2] = incremental.NO_BUCKET
        state = rng.randint(0, 3, size=(bands, m)).astype(np.int8)  # LONE, WHOLE, SPLIT
        # sub-bands of 1 to 3 positions; the signatures of the rows kept in another order
        sub_positions = rng.randint(0, perms, size=(bands, rng.randint(0, 4), rng.randint(1, 4)))
        kept = rng.permutation(n)
        signature_row = np.argsort(kept)
        # runs: each a few new rows first, then a few old ones
        runs, members = [], []
        for _ in range(rng.randint(1, 5)):
            nn = rng.randint(1, m + 1)
            new_rows = rng.choice(m, nn, replace=False)
            old_rows = m + rng.choice(n_old, rng.randint(0, n_old + 1), replace=False) if n_old else []
            runs.append((len(members), nn + len(old_rows), nn, rng.rand() < 0.5))
            members += list(new_rows) + list(old_rows)
        members = np.array(members, np.int64)
        run_start, run_len, run_new = (np.array(x, np.int64) for x in list(zip(*runs))[:3])
        run_split = np.array([r[3] for r in runs], np.bool_)
        split_runs += int(run_split.sum())
        band = rng.randint(0, bands)
        min_agree = rng.randint(0, perms // 2)
        given = (members, run_start, run_len, run_new, run_split, packed, perms, min_agree, bucket, state)
        given += (sig[kept], signature_row, sub_positions, band, n)
        want = kernels_incremental.added_band_survivors_plain(*given)
        got = []
        resume = np.array([0, 0, 1], np.int64)
        while resume[0] < len(run_start):  # a small buffer: resumed many times
            out = np.empty(3, np.int64)
            written = kernels_incremental.added_band_survivors(*given, out, resume)
            got += out[:written].tolist()
        assert got == want, trial
    assert split_runs > 20


def test_old_pairs_a_split_left_out_are_the_same_in_blocks_of_any_size(monkeypatch):
    """A bucket now whole compares its old rows' pairs a block of rows at a time, fewer rows in a
    big bucket (OLD_PAIR_BLOCK_BYTES): the pairs, in order, are the plain double loop's."""
    rng = np.random.default_rng(4)
    perms, min_agree = 40, 14
    sig = rng.integers(0, 3, size=(150, perms)).astype(np.uint32)
    positions = lsh.sub_bands(perms, 3, 4)[1]
    want = [
        (i, j)
        for i in range(len(sig))
        for j in range(i + 1, len(sig))
        if (sig[i] % 16 == sig[j] % 16).sum() >= min_agree
        and not any((sig[i, cols] == sig[j, cols]).all() for cols in positions)
    ]
    assert len(want) > 100
    row_bytes = lsh.pack_nibbles(sig[:1]).nbytes * len(sig)
    for rows in (64, 5, 1):  # (the default's 64 rows, then blocks of 5 and of 1)
        monkeypatch.setattr(incremental_split, "OLD_PAIR_BLOCK_BYTES", rows * row_bytes)
        i, j = incremental_split.old_pairs_split_apart(sig, positions, perms, min_agree)
        assert list(zip(i.tolist(), j.tolist())) == want, rows


def test_new_exact_copies_prefer_an_old_first_copy():
    old_ords = np.array([0, 2, 5], np.int64)
    hashes = {0: "a" * 64, 2: "b" * 64, 5: "c" * 64, 1: "a" * 64}
    from dedup_tui.engine.store.scans import hash_prefixes

    new_ords = np.array([6, 7, 8, 9], np.int64)
    new_hashes = ["d" * 64, "b" * 64, "d" * 64, "a" * 63 + "f"]  # "a...f": same prefix as ord 0, other text
    got = incremental.new_exact_of(
        old_ords,
        hash_prefixes([hashes[o] for o in old_ords]),
        new_ords,
        new_hashes,
        hash_prefixes,
        lambda ords: {int(o): hashes[int(o)] for o in ords},
    )
    assert got.tolist() == [-1, 2, 6, -1]


def test_a_schema_4_project_scanned_before_is_scanned_in_full_once(tmp_path):
    """A project of the schema before the kept keys (4) is migrated with empty key tables; its
    next scan with new documents is a full one, which keeps the keys for the one after."""
    import sqlite3

    docs = families(20, (2, 5), 30, seed=12)
    path = tmp_path / "p.db"
    with Project(path, create=True) as project:
        load(project, tmp_path, "first", docs[:60])
        local.scan(project, LSH)
    with sqlite3.connect(path) as conn:  # as schema 4 left it
        conn.execute("DROP TABLE scan_keys")
        conn.execute("DROP TABLE scan_band_keys")
        conn.execute("DELETE FROM meta WHERE key = 'scan_keys'")
        conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    conn.close()
    with Project(path) as project:
        assert project.get_meta("migrated_from") == "4"
        assert project.conn.execute("SELECT count(*) FROM scan_keys").fetchone() == (0,)
        load(project, tmp_path, "second", docs[60:80])
        r = local.scan(project, LSH)
        assert not r.incremental and r.full_reason == "the last scan kept no band keys (made by an older dedup-tui)"
        load(project, tmp_path, "third", docs[80:])
        assert local.scan(project, LSH).incremental
        assert_same(stored(project), full_rescan_of(tmp_path, project))


def test_the_review_lists_the_clusters_with_documents_loaded_since_the_scan_before(tmp_path):
    """The "new" filter: after more documents were loaded and scanned, the clusters holding one
    of them, and only those; it is offered only once a scan came before the last one."""
    import json
    import random

    from dedup_tui.engine.ingest import load_corpus
    from dedup_tui.engine.scanning.local import scan
    from dedup_tui.engine.scanning.settings import ScanSettings
    from dedup_tui.review.model import Review

    rng = random.Random(7)
    family = [" ".join("".join(rng.choice("abcdefghij") for _ in range(6)) for _ in range(30)) for _ in range(6)]
    old = [{"id": f"o{i}", "text": family[i]} for i in range(6)]
    old += [{"id": f"o{i}-copy", "text": family[i] + "!"} for i in range(6)]
    new = [{"id": f"n{i}", "text": family[i] + "?"} for i in (1, 4)]
    new += [
        {"id": "n-alone-a", "text": "a completely different text about ships and harbours " * 3},
        {"id": "n-alone-b", "text": "a completely different text about ships and harbours! " * 3},
    ]
    first, second = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    first.write_text("".join(json.dumps(r) + "\n" for r in old))
    second.write_text("".join(json.dumps(r) + "\n" for r in new))
    db = tmp_path / "p.db"
    with Project(db, create=True) as project:
        load_corpus(project, [first])
        scan(project, ScanSettings(floor=0.5))
        assert project.new_from_ord() is None
    review = Review.open(db)
    try:
        assert "new" not in [review.cycle_filter() for _ in range(6)]  # no scan before the first one
    finally:
        review.close()
    with Project(db) as project:
        load_corpus(project, [second])
        scan(project, ScanSettings(floor=0.5))
        assert project.new_from_ord() == len(old)
    review = Review.open(db)
    try:
        review.set_filter("new")
        index = review.index
        listed = {tuple(sorted(index.members(int(label)))) for label in index.labels}
        everything = review.index.with_listing(replace(review.view.listing, filter="all"))
        expected = {
            tuple(sorted(everything.members(int(label))))
            for label in everything.labels
            if max(everything.members(int(label))) >= len(old)
        }
        assert listed == expected and len(expected) == 3  # families 1 and 4, and the two new documents
        assert len(everything.labels) > len(expected)
        assert "new" in [review.cycle_filter() for _ in range(6)]
    finally:
        review.close()


def test_a_full_scans_kept_band_keys_wait_in_a_file_and_come_back_whole(monkeypatch):
    """The keys kept for incremental scans leave memory while the scan verifies (written from
    the candidates' threads), and stay in memory when no temporary file can take them."""
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from dedup_tui.engine.scanning.candidates import KeptKeys as _Kept

    rng = np.random.default_rng(3)
    bands = {b: rng.integers(0, 2**64 - 1, 1000, dtype=np.uint64) for b in range(5)}
    short = {b: (keys >> np.uint64(40)).astype(np.uint32) for b, keys in bands.items()}  # their high 24 bits
    kept = _Kept()
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda b: kept.keep_band_keys(b, bands[b]), [3, 1, 4, 0, 2]))
    assert all(np.array_equal(kept.band_keys(b), short[b]) for b in range(5))
    assert kept._in_memory == {}
    kept.close()

    def no_room(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", no_room)
    full = _Kept()
    full.keep_band_keys(0, bands[0])
    assert np.array_equal(full.band_keys(0), short[0]) and 0 in full._in_memory


def test_old_documents_whose_short_keys_collide_are_sorted_out_by_their_whole_keys(tmp_path, monkeypatch):
    """The kept short keys only narrow down which old documents may share a bucket with a new
    one: with 8-bit short keys nearly every old document matches some new one in every band, and
    the buckets, the prefilter and the pairs are still exactly the full rescan's."""
    from dedup_tui.engine.scanning import candidates

    def eight_bits(keys):
        return (np.asarray(keys, np.uint64) >> np.uint64(56)).astype(np.uint32)

    monkeypatch.setattr(candidates, "short_band_keys", eight_bits)
    monkeypatch.setattr(incremental, "short_band_keys", eight_bits)
    monkeypatch.setattr(incremental_split, "short_band_keys", eight_bits)
    docs = families(30, (2, 6), 120, seed=21)
    with Project(tmp_path / "p.db", create=True) as project:
        load(project, tmp_path, "first", docs[:-60])
        local.scan(project, LSH)
        load(project, tmp_path, "second", docs[-60:])
        r = local.scan(project, LSH)
        assert r.incremental, r.full_reason
        assert r.timings["resigned_old"] > 3 * r.timings["involved_old"] > 0  # (mostly collisions)
        assert_same(stored(project), full_rescan_of(tmp_path, project))


def test_rows_with_keys_finds_exactly_the_rows_whose_short_key_is_wanted():
    rng = np.random.default_rng(3)
    top = (1 << incremental.SHORT_KEY_BITS) - 1
    keys = np.concatenate([rng.integers(0, 1 << 24, 50_000), [0, top, 8, 9, 15, 16]]).astype(np.uint32)
    wanted = np.unique(np.concatenate([rng.choice(keys, 300), [0, top, 9, 16], rng.integers(0, 1 << 24, 300)]))
    got = incremental.rows_with_keys(keys, wanted.astype(np.uint32))
    assert np.array_equal(got, np.flatnonzero(np.isin(keys, wanted)))
    assert not len(incremental.rows_with_keys(keys, np.array([7, 10, 17], np.uint32)))


def test_old_texts_read_as_utf8_are_the_texts_and_normalise_the_same(tmp_path):
    """The re-signing reads old texts as their UTF-8 (store.scans.read_text_bytes), densely (a
    range scan) or sparsely (look-ups), and normalises them from it (kernels.text.normalized_utf8,
    with texts the compiled pass cannot follow, like "İ", decoded for Python's own)."""
    from dedup_tui.engine.scanning.kernels import text as kernels_text
    from dedup_tui.engine.store.scans import read_text_bytes, read_texts

    words = ["plain words", "İstanbul ŞEHİR", "naïve café", "emoji 🙂 text", "x", "  Mixed\tCASE  "]
    docs = [{"id": f"d{i}", "text": f"{words[i % len(words)]} {i}"} for i in range(300)]
    with Project(tmp_path / "p.db", create=True) as project:
        load(project, tmp_path, "docs", docs)
        for ords in (np.arange(5, 290), np.array([1, 2, 4, 7, 8, 9, 10]), np.array([0, 150, 299]), np.array([3])):
            texts = read_texts(project, ords)
            data, offsets = read_text_bytes(project, ords)
            raw = kernels_text.TextBuffer(data, offsets)
            assert [data[offsets[i] : offsets[i + 1]].tobytes().decode() for i in range(len(ords))] == texts
            got, want = kernels_text.normalized_utf8(raw), kernels_text.normalized_buffer(texts)
            assert np.array_equal(got.offsets, want.offsets) and np.array_equal(got.data, want.data)
            if 1 in ords:  # "İ" lowers to two code points: only Python's normalize follows it
                row = int(np.searchsorted(ords, 1))
                assert got.data[got.offsets[row] : got.offsets[row + 1]].tobytes().decode() == "i̇stanbul şehi̇r 1"
