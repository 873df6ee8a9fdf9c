"""Every compiled kernel equals its plain (numpy / Python) reference, on random and adversarial
inputs: empty and one-shingle texts, texts shorter than k, astral and surrogate code points,
identical rows, a row with itself, oversized buckets and a 10 MB document."""

from __future__ import annotations

import random

import numpy as np
import pytest

from dedup_tui.engine.graph.pairs import connected_min_labels
from dedup_tui.engine.scanning import lsh, sketch
from dedup_tui.engine.scanning.kernels import bands as kernels_bands
from dedup_tui.engine.scanning.kernels import components, intersections, shingles, signatures, text
from dedup_tui.engine.scanning.memory_model import split_layout, split_layout_of
from dedup_tui.engine.scanning.minhash import MinHasher
from dedup_tui.engine.scanning.similarity import intersection_sizes
from dedup_tui.engine.text import shingle
from dedup_tui.engine.text.normalize import normalize
from dedup_tui.engine.text.sets import jaccard, shingle_set

ALPHABET = "ab cd\u00e9\u00df\u4e2d\U0001f600\ud800\x00\n"


def _texts(seed: int, count: int = 400, longest: int = 80) -> list[str]:
    rng = random.Random(seed)
    fixed = ["", "\x00", " ", "a", "abcd", "abcde", "abcdef", "\U0001f600" * 7, "\ud800\udc00x", "aaaaaaaaaa"]
    rand = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, longest))) for _ in range(count)]
    return [normalize(t) for t in fixed + rand]


def _family(seed: int, members: int = 60) -> list[str]:
    """Near-identical long texts (one template, varied slots): the bitset path's case."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(300)]
    base = [rng.choice(words) for _ in range(400)]
    out = []
    for _ in range(members):
        doc = list(base)
        for _ in range(rng.randint(0, 30)):
            doc[rng.randrange(len(doc))] = rng.choice(words)
        out.append(" ".join(doc))
    return out


@pytest.mark.parametrize("k", [1, 3, 5, 9])
@pytest.mark.parametrize("num_perm", [1, 7, 128])
def test_signatures_equal_minhasher_over_shingle_hashes(k, num_perm):
    texts = _texts(k * 31 + num_perm)
    hasher = MinHasher(num_perm, seed=k)
    expected = hasher.signatures(*shingle.shingle_hashes(texts, k))
    buf = text.TextBuffer.from_texts(texts)
    got = np.empty((len(texts), num_perm), np.uint32)
    signatures.signatures(buf.data, buf.offsets, np.arange(len(texts)), k, hasher.multipliers, hasher.increments, got)
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("k", [1, 2, 5, 12])
def test_shingle_rows_equal_shingle_sets(k):
    texts = _texts(k, longest=200)
    buf = text.TextBuffer.from_texts(texts)
    values, offsets = shingles.shingle_rows(buf, np.arange(len(texts)), k)
    want_values, want_offsets = shingle.shingle_sets(texts, k)
    assert np.array_equal(offsets, want_offsets)
    assert np.array_equal(values, want_values)
    # and in any order of documents, repeats included
    docs = np.array([5, 3, 3, 0, len(texts) - 1])
    values, offsets = shingles.shingle_rows(buf, docs, k)
    sub_values, sub_offsets = shingle.shingle_sets([texts[d] for d in docs], k)
    assert np.array_equal(values, sub_values) and np.array_equal(offsets, sub_offsets)


def test_sort_rows_equals_numpy_sort_of_each_row_or_says_it_did_not(monkeypatch):
    # rows of hashed fingerprints (row << 48 | fingerprint): empty, single, short, repeated
    # keys, and one of 1.1M (more keys than buckets); each sorted as numpy sorts it
    rng = np.random.default_rng(12)
    sizes = [0, 1, 2, 7, 300, 0, 5000, 1_100_000, 3]
    rows = [rng.integers(0, 1 << 48, n, dtype=np.uint64) for n in sizes]
    rows[4][:100] = rows[4][100:200]  # repeats
    keys = np.concatenate([np.uint64(r << 48) | row for r, row in enumerate(rows)])
    row_starts = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    got = keys.copy()
    assert shingles._sort_rows(got, row_starts, 48)
    assert np.array_equal(got, np.concatenate([np.sort(k) for k in np.split(keys, row_starts[1:-1])]))
    # fingerprints not spread (all in a few buckets, descending): it says so
    narrow = np.arange(5000, 0, -1, dtype=np.uint64)
    assert not shingles._sort_rows(narrow, np.array([0, 5000]), 48)
    # and shingle_rows then sorts them as before
    monkeypatch.setattr(shingles, "_sort_rows", lambda keys, row_starts, bits: False)
    texts = _texts(2, longest=200)
    values, offsets = shingles.shingle_rows(text.TextBuffer.from_texts(texts), np.arange(len(texts)), 5)
    want_values, want_offsets = shingle.shingle_sets(texts, 5)
    assert np.array_equal(values, want_values) and np.array_equal(offsets, want_offsets)


def test_a_ten_megabyte_document():
    rng = np.random.default_rng(3)
    code_points = np.array([ord(c) for c in "abcdefgh \u00e9\u4e2d"], np.uint32)[rng.integers(0, 11, 10_000_000)]
    big = normalize(code_points.tobytes().decode("utf-32-le"))  # (joining 10M one-character strings took 3 s)
    texts = [big, big[: len(big) // 2] + "tail", "short"]
    buf = text.TextBuffer.from_texts(texts)
    values, offsets = shingles.shingle_rows(buf, np.arange(3), 5)
    want_values, want_offsets = shingle.shingle_sets(texts, 5)
    assert np.array_equal(values, want_values) and np.array_equal(offsets, want_offsets)
    hasher = MinHasher(16, seed=2)
    got = np.empty((3, 16), np.uint32)
    signatures.signatures(buf.data, buf.offsets, np.arange(3), 5, hasher.multipliers, hasher.increments, got)
    assert np.array_equal(got, hasher.signatures(*shingle.shingle_hashes(texts, 5)))
    inter = intersections.intersections(values, offsets, np.array([0, 0]), np.array([1, 0]))
    assert np.array_equal(inter, intersection_sizes(values, offsets, np.array([0, 0]), np.array([1, 0])))


def _pairs(rng: random.Random, n: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.array([rng.randrange(n) for _ in range(count)], dtype=np.int64)
    b = np.array([rng.randrange(n) for _ in range(count)], dtype=np.int64)
    return a, b


@pytest.mark.parametrize("method", ["merge", "bitset", "bitset-many-rows", None])
def test_intersections_equal_the_sort_merge_reference(method, monkeypatch):
    if method == "bitset-many-rows":  # more rows than fit beside a fingerprint in one key
        monkeypatch.setattr(intersections, "_ROW_MASK", 3)
        method = "bitset"
    rng = random.Random(7)
    texts = _texts(11) + _family(5) + _family(6, members=3) + ["same text"] * 3
    values, offsets = shingle.shingle_sets(texts, 5)
    a, b = _pairs(rng, len(texts), 5000)
    family = np.arange(len(texts) - 66, len(texts) - 3)
    fa = np.repeat(family, len(family))
    fb = np.tile(family, len(family))  # every pair of the family, each row with itself too
    a, b = np.concatenate([a, fa, [len(texts) - 1]]), np.concatenate([b, fb, [len(texts) - 2]])
    got = intersections.intersections(values, offsets, a, b, method=method)
    assert np.array_equal(got, intersection_sizes(values, offsets, a, b))
    assert got[-1] == offsets[-1] - offsets[-2]  # identical rows


@pytest.mark.parametrize("pool, method", [(600, "merge"), (40, "bitset")])
def test_a_sample_of_rows_rules_bitsets_out_as_all_rows_would(pool, method, monkeypatch):
    """The fingerprints some rows share are a part of those all rows share: when a sample's
    are too many for bitsets, the merge is chosen without counting every row's, as the full
    count would choose it; otherwise the full count decides, as before."""
    rng = np.random.default_rng(5)
    values = np.concatenate([np.sort(rng.choice(pool, 10, replace=False)) for _ in range(200)]).astype(np.uint64)
    offsets = np.arange(0, 10 * 201, 10, dtype=np.int64)
    a, b = rng.integers(0, 200, 2000), rng.integers(0, 200, 2000)
    monkeypatch.setattr(intersections, "_ROW_MASK", 3)  # the path for more rows than fit beside a fingerprint
    monkeypatch.setattr(intersections, "BITSET_MAX_BYTES", 8 * 200)  # bitsets of one word a row at most
    monkeypatch.setattr(intersections, "_VOCABULARY_SAMPLE_ROWS", 50)
    counted = []
    count_shared = intersections._shared_vocabulary
    monkeypatch.setattr(
        intersections, "_shared_vocabulary", lambda v, o, rows: counted.append(len(rows)) or count_shared(v, o, rows)
    )
    sampled = intersections.Intersector(values, offsets, a, b)
    assert np.array_equal(intersections.intersections(values, offsets, a, b), intersection_sizes(values, offsets, a, b))
    monkeypatch.setattr(intersections, "_VOCABULARY_SAMPLE_ROWS", 10**9)
    counted_with_sample = list(counted)
    assert intersections.Intersector(values, offsets, a, b).method == sampled.method == method
    assert counted_with_sample == ([50, 50] if method == "merge" else [50, 200, 50, 200])


def test_dense_family_takes_the_bitset_path_and_exact_jaccard_matches_sets():
    texts = _family(9, members=80)
    values, offsets = shingle.shingle_sets(texts, 5)
    a, b = np.triu_indices(len(texts), 1)
    assert intersections.choose_method(values, offsets, a, b) == "bitset"
    inter = intersections.intersections(values, offsets, a, b)
    sizes = np.diff(offsets)
    for x, y, i in list(zip(a, b, inter))[::97]:
        want = jaccard(shingle_set(texts[x], 5), shingle_set(texts[y], 5))
        assert i / (sizes[x] + sizes[y] - i) == want


@pytest.mark.parametrize("max_bucket", [0, 40])
def test_band_survivors_report_each_prefiltered_collision_once(max_bucket):
    rng = np.random.default_rng(1)
    n, num_perm, rows, bands = 600, 24, 3, 8
    # Few distinct values per position, so documents share bands often; a block of near-equal
    # signatures (a third of their positions redrawn) makes a bucket bigger than max_bucket in
    # most bands, which is then split by sub-bands.
    sig = rng.integers(0, 4, size=(n, num_perm)).astype(np.uint32)
    sig[100:160] = np.where(rng.random((60, num_perm)) < 0.3, sig[100:160], sig[100])
    packed = lsh.pack_nibbles(sig)
    min_agree = 10
    band_state = np.zeros(bands, np.int8)
    tags = np.zeros((n, bands), np.uint16)
    sub_positions = lsh.sub_bands(num_perm, rows, bands)
    got = []
    want: set[int] = set()
    split_bands = 0
    for band in range(bands):
        keys = lsh.band_keys(sig, band, rows)
        tags[:, band] = kernels_bands.band_tags(keys)
        ref, _, oversized = lsh.band_candidates(keys, packed, num_perm, min_agree, max_bucket, sig, sub_positions[band])
        want.update(ref.tolist())
        order = np.argsort(keys, kind="stable")
        skeys = keys[order]
        run_start = np.flatnonzero(np.r_[True, skeys[1:] != skeys[:-1]])
        run_len = np.diff(np.append(run_start, n))
        split = run_len > max_bucket if max_bucket else np.zeros(len(run_len), bool)
        assert sorted(oversized.tolist()) == sorted(run_len[split].tolist())
        for s, m in zip(run_start[split], run_len[split]):
            tags[order[s : s + m], band] |= kernels_bands.SPLIT_TAG
        band_state[band] = 2 if split.any() else 1
        split_bands += bool(split.any())
        whole = (run_len >= 2) & ~split
        resume = np.array([0, 0, 1], np.int64)
        tally = np.array([0, -1], np.int64)
        while resume[0] < whole.sum():
            out = np.empty(50, np.int64)  # small: the kernel must resume across calls, mid-bucket
            written = kernels_bands.band_survivors(
                order, run_start[whole], run_len[whole], packed, num_perm, min_agree, sig, tags, band, rows,
                band_state, n, out, resume, sub_positions, True, tally,
            )  # fmt: skip
            got.extend(out[:written].tolist())
        for s, m in zip(run_start[split], run_len[split]):
            resume, split_tally = np.array([0, 0, 1], np.int64), np.zeros(2, np.int64)
            while resume[0] < sub_positions.shape[1]:
                out = np.empty(50, np.int64)
                written = kernels_bands.split_bucket_survivors(
                    order[s : s + m], packed, num_perm, min_agree, sig, tags, band, rows, band_state, n,
                    sub_positions, split_layout_of(m, packed, sub_positions, band, 1 << 40), out,
                    resume, split_tally,
                )  # fmt: skip
                got.extend(out[:written].tolist())
            # every pair of every sub-bucket counted once, across the resumes
            want_generated = sum(
                int((lens * (lens - 1) // 2).sum())
                for _, _, lens in (lsh.sub_buckets(sig, order[s : s + m], p) for p in sub_positions[band])
            )
            assert split_tally[1] == want_generated
    if not max_bucket:
        assert len(got) == len(set(got))  # first reporting band only
    # (After a band that split a bucket, a pair of its other buckets that shares none of its
    # sub-bands may be reported again by a later band: the scan removes the repeats.)
    assert set(got) == want
    assert len(got) - len(set(got)) < len(want) // 10
    assert len(want) > 100
    assert split_bands >= (bands // 2 if max_bucket else 0)


def _split_run(members, packed, num_perm, min_agree, sig, tags, band, rows, band_state, sub_positions, budget, size):
    """Every survivor of one split bucket under `budget`, through an output buffer of `size`
    (the kernel resumes wherever it fills), and the pairs of its sub-buckets."""
    got, resume, tally = [], np.array([0, 0, 1], np.int64), np.zeros(2, np.int64)
    while resume[0] < sub_positions.shape[1]:
        out = np.empty(size, np.int64)
        written = kernels_bands.split_bucket_survivors(
            members, packed, num_perm, min_agree, sig, tags, band, rows, band_state, len(sig), sub_positions,
            split_layout_of(len(members), packed, sub_positions, band, budget), out, resume, tally,
        )  # fmt: skip
        got.extend(out[:written].tolist())
    return got, int(tally[1])


def test_a_split_bucket_gives_the_same_pairs_in_the_same_order_under_any_budget():
    """Under a budget too small for all of a split's copies, the sub-bands' columns are copied
    a slice at a time, then the packed rows and groups are read in place (memory_model.split_layout):
    every layout a budget can give, resumed after every survivor or every few (so at every
    slice's boundary), reports the same pairs in the same order as an unlimited budget."""
    rng = np.random.default_rng(7)
    n, num_perm, rows, bands = 500, 24, 3, 6
    sig = rng.integers(0, 4, size=(n, num_perm)).astype(np.uint32)
    sig[:90] = np.where(rng.random((90, num_perm)) < 0.35, sig[:90], sig[0])
    sig[200:260] = np.where(rng.random((60, num_perm)) < 0.3, sig[200:260], sig[200])
    packed, min_agree = lsh.pack_nibbles(sig), 9
    sub_positions = lsh.sub_bands(num_perm, rows, bands)
    subs, words = sub_positions.shape[1], packed.shape[1]
    tags, band_state = np.zeros((n, bands), np.uint16), np.zeros(bands, np.int8)
    layouts_seen, compared_runs = set(), 0
    for band in range(bands):
        keys = lsh.band_keys(sig, band, rows)
        tags[:, band] = kernels_bands.band_tags(keys)
        order = np.argsort(keys, kind="stable")
        members = max(np.split(order, np.flatnonzero(np.diff(keys[order])) + 1), key=len)
        tags[members, band] |= kernels_bands.SPLIT_TAG
        band_state[band] = 2
        m = len(members)
        args = (members, packed, num_perm, min_agree, sig, tags, band, rows, band_state, sub_positions)
        want, want_generated = _split_run(*args, 1 << 40, 50)
        assert want_generated > 0 and len(want) > 10
        layouts = {}  # every layout, by the smallest budget a member giving it
        for room in range(1, 400):
            layouts.setdefault(split_layout(m, subs, rows, words, band, room * m)[:3], room * m)
        for layout, budget in layouts.items():
            for size in (1, 3):
                got, generated = _split_run(*args, budget, size)
                assert got == want, (band, layout, size)
                assert generated == want_generated
            compared_runs += 1
        layouts_seen |= set(layouts)
    assert (1, False, False) in layouts_seen  # a slice of one sub-band, all read in place
    assert any(gather and 1 < cut < subs for cut, gather, _ in layouts_seen)
    assert (subs, True, True) in layouts_seen and compared_runs > 3 * bands


def _families_of_signatures(rng, n, num_perm, families, members, redrawn):
    """Random signatures, then `families` blocks of `members` near copies (a share `redrawn`
    of their positions drawn anew): big buckets in most bands."""
    sig = rng.integers(0, 1 << 20, size=(n, num_perm)).astype(np.uint32)
    for f in range(families):
        block = slice(f * members, (f + 1) * members)
        sig[block] = np.where(rng.random((members, num_perm)) < redrawn, sig[block], sig[f * members])
    return sig


def _run_band(order, starts, lens, packed, num_perm, min_agree, sig, tags, band, rows, state, n, regroup, between=None):
    """Every survivor of one band's runs (a small buffer: the kernel resumes mid-run; `between()`
    runs once, the first time it stopped half way through a big run) and the pairs whose
    nibbles it compared."""
    got, tally, resume = [], np.array([0, -1], np.int64), np.array([0, 0, 1], np.int64)
    while resume[0] < len(starts):
        out = np.empty(7, np.int64)
        written = kernels_bands.band_survivors(
            order, starts, lens, packed, num_perm, min_agree, sig, tags, band, rows, state, n, out, resume,
            kernels_bands.NO_SUB_BANDS, regroup, tally,
        )  # fmt: skip
        got.extend(out[:written].tolist())
        if (
            between is not None
            and resume[0] < len(starts)
            and 2 * resume[1] >= lens[resume[0]] >= kernels_bands.LOCAL_MIN
        ):
            between()
            between = None
    assert between is None  # (it ran, when given)
    return got, int(tally[0])


def test_a_big_bucket_compares_only_the_pairs_no_earlier_band_shares():
    """Pairs of a bucket of LOCAL_MIN or more that share an earlier band are passed over (their
    nibbles never compared): the pairs reported are the reference's, each in its first band,
    and the pairs compared are exactly those lsh.share_earlier_band leaves (all of a smaller
    bucket's, all of the first band's); without regroup every pair is compared, as before. A
    band that becomes whole while a later band's run is half done (bands side by side on
    threads) loses no pair."""
    rng = np.random.default_rng(3)
    n, num_perm, rows, bands = 400, 24, 3, 8
    sig = _families_of_signatures(rng, n, num_perm, families=3, members=90, redrawn=0.25)
    packed = lsh.pack_nibbles(sig)
    min_agree = 12
    keys = [lsh.band_keys(sig, band, rows) for band in range(bands)]
    tags = np.stack([kernels_bands.band_tags(k) for k in keys], axis=1)
    want: set[int] = set()
    want_compared = generated = 0
    runs = []
    for band in range(bands):
        ref, _, _ = lsh.band_candidates(keys[band], packed, num_perm, min_agree)
        want.update(ref.tolist())
        order = np.argsort(keys[band], kind="stable")
        skeys = keys[band][order]
        starts = np.flatnonzero(np.r_[True, skeys[1:] != skeys[:-1]])
        lens = np.diff(np.append(starts, n))
        starts, lens = starts[lens >= 2], lens[lens >= 2]
        runs.append((order, starts, lens))
        for s, m in zip(starts.tolist(), lens.tolist()):
            i, j = np.triu_indices(m, 1)
            generated += len(i)
            if band and m >= kernels_bands.LOCAL_MIN:
                want_compared += int((~lsh.share_earlier_band(sig, rows, band, order[s + i], order[s + j])).sum())
            else:
                want_compared += len(i)
    for regroup in (True, False):
        state = np.zeros(bands, np.int8)
        got, compared = [], 0
        for band in range(bands):
            state[band] = 1
            part, c = _run_band(*runs[band], packed, num_perm, min_agree, sig, tags, band, rows, state, n, regroup)
            got += part
            compared += c
        assert len(got) == len(set(got)) and set(got) == want
        assert compared == (want_compared if regroup else generated)
    assert want_compared < 0.6 * generated and len(want) > 5000
    # Two bands side by side: band 2k + 1 starts while band 2k is not yet whole.
    state = np.zeros(bands, np.int8)
    side_by_side: list[int] = []
    for band in range(0, bands, 2):
        state[band + 1] = 1

        def earlier_band(band=band):
            state[band] = 1
            part, _ = _run_band(*runs[band], packed, num_perm, min_agree, sig, tags, band, rows, state, n, True)
            side_by_side.extend(part)

        part, _ = _run_band(
            *runs[band + 1], packed, num_perm, min_agree, sig, tags, band + 1, rows, state, n, True, earlier_band
        )
        side_by_side.extend(part)
    assert set(side_by_side) == want


def test_components_and_order_by_label_equal_references():
    rng = np.random.default_rng(4)
    n = 5000
    a = rng.integers(0, n, 3000)
    b = rng.integers(0, n, 3000)
    labels = components.component_labels(n, a, b)
    assert np.array_equal(labels, connected_min_labels(n, a, b))
    order = components.order_by_label(labels, a)
    assert np.array_equal(order, np.argsort(labels[a], kind="stable"))
    assert np.array_equal(components.component_labels(3, a[:0], b[:0]), np.arange(3))


def test_sorted_unique_equals_numpy_unique():
    rng = np.random.default_rng(6)
    # candidate keys of 9,880 texts (3 passes), of 2^31 texts (6), few values (passes that
    # move nothing), a key at the limit's last value, and the smallest cases
    for size, limit in [(20000, 9880**2), (20000, 2**62), (5000, 3), (3, 2**40), (1, 5), (0, 5)]:
        keys = rng.integers(0, limit, size)
        keys[: size // 4] = keys[size // 2 : size // 2 + size // 4]  # repeats
        if size:
            keys[-1] = limit - 1
        assert np.array_equal(components.sorted_unique(keys.copy(), limit), np.unique(keys))


def test_tile_order_equals_a_stable_argsort_of_the_tiles():
    rng = np.random.default_rng(9)
    for rows, shift in [(7600, 4), (7600, 9), (70000, 6), (5, 4)]:
        la, lb = rng.integers(0, rows, (2, 30000))
        tiles = ((rows - 1) >> shift) + 1
        want = np.argsort((la >> shift) * tiles + (lb >> shift), kind="stable")
        assert np.array_equal(intersections.tile_order(la, lb, shift, tiles), want)
    assert len(intersections.tile_order(la[:0], lb[:0], 4, 1)) == 0


def test_spanning_forest_equals_boruvka_reference():
    from dedup_tui.engine.graph.pairs import maximum_spanning_forest

    rng = np.random.default_rng(8)
    n = 3000
    a = rng.integers(0, n, 20000)
    b = rng.integers(0, n, 20000)
    w = np.round(rng.random(20000), 2)  # many ties: the order by index must decide them
    assert np.array_equal(components.spanning_forest(n, a, b, w), maximum_spanning_forest(n, a, b, w))
    assert len(components.spanning_forest(n, a[:0], b[:0], w[:0])) == 0
    # a dense family (every edge given twice, some edges a node with itself) beside a long path
    # given both ways, with weights falling along it or one weight everywhere (only the
    # indices decide), and nodes on no edge
    family = rng.integers(0, 60, (2, 1500))
    path = np.arange(100, 2000)
    a = np.r_[family[0], family[1], path, path[::-1]]
    b = np.r_[family[1], family[0], path + 1, path[::-1] - 1]
    for w in (np.r_[np.round(rng.random(3000), 1), np.linspace(1, 0, 3800)], np.full(6800, 0.5)):
        assert np.array_equal(components.spanning_forest(n, a, b, w), maximum_spanning_forest(n, a, b, w))


_CALL_A_KERNEL = (
    "import numpy as np\n"
    "from dedup_tui.engine.compile import jit\n"
    "from dedup_tui.engine.scanning.kernels import intersections, shingles, text\n"
    "buf = text.TextBuffer.from_texts(['near duplicate text', 'near duplicate texts'])\n"
    "values, offsets = shingles.shingle_rows(buf, np.arange(2), 5)\n"
    "print(jit.CACHE_DIR, int(intersections.intersections(values, offsets, np.array([0]), np.array([1]))[0]))\n"
)


def _run_python(code: str, env_changes: dict) -> str:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(env_changes)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_loading_the_kernels_imports_no_scipy_yet_scipy_still_imports():
    """numba asks scipy for a BLAS when its first kernel loads (0.2-0.3 s); jit lets that one
    import fail, and scipy imports as usual afterwards."""
    pytest.importorskip("scipy.linalg.cython_blas")
    code = (
        "import sys\n"
        "from dedup_tui.engine.compile import jit\n"
        "import numba.np.arraymath as arraymath\n"
        "print('scipy.linalg' in sys.modules, arraymath._HAVE_BLAS)\n"
        "import scipy.linalg.cython_blas\n"
        "print(type(sys.modules['scipy.linalg.cython_blas']).__name__)\n"
    )
    assert _run_python(code, {}).split() == ["False", "False", "module"]


def test_kernels_are_cached_under_the_users_cache_folder(tmp_path):
    out = _run_python(_CALL_A_KERNEL, {"XDG_CACHE_HOME": str(tmp_path / "cache")})
    folder = tmp_path / "cache" / "dedup-tui" / "numba"
    assert out == f"{folder} 15"
    assert any(p.suffix == ".nbi" for p in folder.rglob("*"))  # numba's cache index was written


def test_no_writable_cache_folder_only_costs_time(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code = f"import tempfile\ntempfile.tempdir = {str(blocker / 'tmp')!r}\n" + _CALL_A_KERNEL
    out = _run_python(code, {"XDG_CACHE_HOME": str(blocker / "cache")})
    assert out == "None 15"  # no cache folder, compiled in memory, same answer


def test_short_texts_never_share_a_shingle_hash():
    """Every text shorter than k is one shingle, itself: distinct texts must hash apart. With the
    length XORed in, "" and "\\x00" collided and got Jaccard 1.0 (exact: 0)."""
    import itertools

    alphabet = ["\x00", "\x01", " ", "a", "\u00e9", "\U0001f600"]
    texts = [""] + ["".join(p) for n in (1, 2, 3) for p in itertools.product(alphabet, repeat=n)]
    hashes, offsets = shingle.shingle_hashes(texts, 4)
    assert np.array_equal(np.diff(offsets), np.ones(len(texts)))
    assert len(set(hashes.tolist())) == len(texts)
    buf = text.TextBuffer.from_texts(texts)
    values, _ = shingles.shingle_rows(buf, np.arange(len(texts)), 4)
    assert np.array_equal(values, hashes >> np.uint64(16))
    assert len(set(values.tolist())) == len(texts)


def test_normalized_buffer_equals_normalize():
    """The compiled pass against str.lower/split/join: every ASCII byte (the information
    separators \x1c-\x1f are whitespace to Python), every Unicode whitespace, letters whose lower
    case changes UTF-8 size (Kelvin sign, Ⱥ) or is two code points (İ) or depends on context (Σ),
    astral cased letters, surrogates, a sample of every code point, and a 10 MB text."""
    rng = random.Random(11)
    ascii_all = [chr(c) for c in range(128)]
    texts = [
        "",
        " ",
        "\x1c\x1d\x1e\x1f",
        "\t A\x0bB\x0c\rC \n",
        "\x00",
        "ABC",
        "  lead",
        "trail  ",
        "İstanbul \u00a0 X",
        "\u2028Y\u0085Z",
        "\ud800 Q",
    ]
    texts += ["".join(rng.choice(ascii_all) for _ in range(rng.randint(0, 60))) for _ in range(3000)]
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    tricky = spaces + list("aBΣσİıK\u212aȺⱥẞß\U00010400\U0001e900Ǆǅ\ud800\udfff\x00é") + ["\U0001f600"]
    texts += ["".join(rng.choice(tricky) for _ in range(rng.randint(0, 30))) for _ in range(3000)]
    every = [chr(c) for c in range(0x110000)]
    rng.shuffle(every)
    texts += ["".join(every[i : i + 500]) for i in range(0, len(every), 500)]
    texts.append(("Word\x1f " * 2_000_000)[:10_000_000])
    rng.shuffle(texts)
    buf = text.normalized_buffer(texts)
    got = [bytes(buf.data[s:e]).decode("utf-8", "surrogatepass") for s, e in zip(buf.offsets, buf.offsets[1:])]
    assert got == [normalize(t) for t in texts]


def test_unicode_tables_are_python_lower_and_isspace_of_every_code_point():
    """The tables built from one lower() of all code points equal a lower() per code point;
    only the code points a byte loop cannot follow go to Python (-1)."""
    lower, space = text._unicode_tables()
    utf8 = [len(chr(c).encode("utf-8", "surrogatepass")) for c in range(0x110000)]
    expected = []
    for c in range(0x110000):
        low = chr(c).lower()
        ok = len(low) == 1 and c != 0x3A3 and len(low.encode("utf-8", "surrogatepass")) <= utf8[c]
        expected.append(ord(low) if ok else -1)
    assert lower.tolist() == expected
    assert int((lower == -1).sum()) < 10  # the byte loop follows nearly every code point
    assert space.tolist() == [chr(c).isspace() for c in range(0x10000)]


def test_unicode_tables_are_kept_between_processes_and_rebuilt_when_damaged(tmp_path, monkeypatch):
    monkeypatch.setattr(text, "CASE_TABLES_FOLDER", str(tmp_path))
    built = text._build_unicode_tables()
    for damage in (None, b"not an npz", b"", "a flipped bit"):
        monkeypatch.setattr(text, "_case_tables", None)
        if damage == "a flipped bit":  # (inside the kept arrays: the zip's CRC catches it)
            kept = next(tmp_path.glob("*.npz"))
            flipped = bytearray(kept.read_bytes())
            flipped[len(flipped) // 3] ^= 0x10
            kept.write_bytes(bytes(flipped))
        elif damage is not None:
            next(tmp_path.glob("*.npz")).write_bytes(damage)
        lower, space = text._unicode_tables()  # (first: built and kept; then read back; then damaged)
        assert np.array_equal(lower, built[0]) and np.array_equal(space, built[1])
        (kept,) = tmp_path.glob("*.npz")
        assert kept.stat().st_size < 100_000  # only the code points that change
    monkeypatch.setattr(text, "_case_tables", None)
    monkeypatch.setattr(text, "_build_unicode_tables", lambda: pytest.fail("built again"))
    assert np.array_equal(text._unicode_tables()[0], built[0])


def test_exact_keys_compiled_equals_plain():
    from dedup_tui.engine.text.exact import COMPILED_MIN_CHARS, exact_keys
    from dedup_tui.engine.text.normalize import exact_key

    rng = random.Random(5)
    texts = ["".join(rng.choice("Ab \t\x1fé\u00a0") for _ in range(rng.randint(0, 200))) for _ in range(4000)]
    assert sum(map(len, texts)) >= COMPILED_MIN_CHARS  # the compiled path is the one tested
    assert exact_keys(texts) == [exact_key(t) for t in texts]


def test_normalized_buffer_of_an_ascii_only_batch():
    """An all-ASCII batch runs on the 128-entry tables: every ASCII character, as normalize()."""
    rng = random.Random(3)
    texts = ["".join(rng.choice([chr(c) for c in range(128)]) for _ in range(rng.randint(0, 60))) for _ in range(3000)]
    texts += ["", "\x1c\x1d\x1e\x1f", " A\tB\x0bC "]
    buf = text.normalized_buffer(texts)
    got = [bytes(buf.data[s:e]).decode("ascii") for s, e in zip(buf.offsets, buf.offsets[1:])]
    assert got == [normalize(t) for t in texts]


# -- sketches ----------------------------------------------------------------------------------


def _sketch_texts(seed: int) -> list[str]:
    return _texts(seed, count=150, longest=1500) + _family(seed, members=40)


@pytest.mark.parametrize("k", [1, 5])
def test_signatures_with_sketches_equal_sketch_of_each_shingle_set(k):
    texts = _sketch_texts(k)
    hasher = MinHasher(32, seed=3)
    buf = text.TextBuffer.from_texts(texts)
    sizes = np.diff(buf.offsets)
    sketch_of = np.where(sizes >= 300, np.arange(len(texts)), -1)
    sketch_of[sketch_of >= 0] = np.arange((sketch_of >= 0).sum())
    sketches = np.full(((sketch_of >= 0).sum(), sketch.SKETCH_BINS), 77, np.uint8)
    sig = np.empty((len(texts), 32), np.uint32)
    signatures.signatures(
        buf.data, buf.offsets, np.arange(len(texts)), k, hasher.multipliers, hasher.increments, sig, sketch_of, sketches
    )
    assert np.array_equal(sig, hasher.signatures(*shingle.shingle_hashes(texts, k)))
    values, offsets = shingle.shingle_sets(texts, k)
    assert len(sketches) > 20
    for row, target in enumerate(sketch_of.tolist()):
        if target >= 0:
            assert np.array_equal(sketches[target], sketch.sketch_of_set(values[offsets[row] : offsets[row + 1]]))
    # from the sorted rows (the cluster scan's verification) the same sketches
    again = np.full_like(sketches, 9)
    signatures.sketch_rows(values, offsets, sketch_of, again)
    assert np.array_equal(again, sketches)


def test_sketch_of_set_marks_empty_bins_and_tags_each_bins_smallest():
    fps = np.array([5 << 10 | 3, 9 << 10 | 3, 2 << 10 | 7, 2 << 10 | 7], np.uint64)  # repeats allowed
    got = sketch.sketch_of_set(fps[::-1])
    assert got[3] == 5 % 255 + 1 and got[7] == 2 % 255 + 1
    assert (np.delete(got, [3, 7]) == sketch.EMPTY).all()
    assert (sketch.sketch_of_set(np.empty(0, np.uint64)) == sketch.EMPTY).all()


def test_sketch_keep_equals_reference_and_never_drops_a_pair_without_two_sketches():
    texts = _sketch_texts(11)
    values, offsets = shingle.shingle_sets(texts, 5)
    n = len(texts)
    sizes = np.diff(offsets)
    sketch_of = np.full(n, -1, np.int64)
    long_rows = np.flatnonzero(sizes >= 200)
    sketch_of[long_rows] = np.arange(len(long_rows))
    sketches = np.zeros((len(long_rows), sketch.SKETCH_BINS), np.uint8)
    signatures.sketch_rows(values, offsets, sketch_of, sketches)
    rng = np.random.default_rng(2)
    lo = rng.integers(0, n, 4000)
    hi = rng.integers(0, n, 4000)
    fam = np.arange(n - 40, n)
    lo = np.r_[lo, np.repeat(fam, 40)]
    hi = np.r_[hi, np.tile(fam, 40)]
    sets = [shingle_set(t, 5) for t in texts]
    for floor in (0.3, 0.5, 0.9):
        needed = sketch.matches_needed(floor, 3e-3)
        keep = np.empty(len(lo), np.bool_)
        kept = signatures.sketch_keep(lo, hi, sketch_of, sketches, needed, keep)
        want = sketch.keep_pairs(sketch_of, sketches, lo, hi, needed)
        assert np.array_equal(keep, want) and kept == want.sum()
        assert keep[(sketch_of[lo] < 0) | (sketch_of[hi] < 0)].all()
        assert not keep.all()  # it does drop pairs: random texts are far apart
        exact = np.array([jaccard(sets[x], sets[y]) for x, y in zip(lo, hi)])
        assert keep[exact >= floor + 0.05].all()


def test_matches_needed_is_the_binomial_tail():
    import itertools
    import math

    for floor, tail in ((0.5, 1e-3), (0.8, 3e-3)):
        needed = sketch.matches_needed(floor, tail)
        p = floor + (1 - floor) / sketch.TAG_VALUES
        for u in (0, 1, 7, 60, 500, 1024):
            cdf = list(itertools.accumulate(math.comb(u, m) * p**m * (1 - p) ** (u - m) for m in range(u + 1)))
            want = next((c for c in range(u + 1) if cdf[c] >= tail * (1 - 1e-9)), u)
            assert needed[u] == want


@pytest.mark.parametrize("rare_min_keys", [0, 1 << 20])
@pytest.mark.parametrize("rare_below", [None, 2, 3, 8, 1 << 16])
@pytest.mark.parametrize("slice_bytes", [1 << 30, 4096])
def test_family_intersections_equal_merged_rows(monkeypatch, slice_bytes, rare_below, rare_min_keys):
    # a template family (the bitset path) plus unrelated texts, and a vocabulary cut into
    # many slices when slice_bytes is small; the fingerprints held by fewer than rare_below
    # texts counted pair by pair (2: none; 1 << 16: all; None: whatever costs least), with the
    # family's counts per threshold kept (rare_min_keys 0) or not (a small family)
    monkeypatch.setattr(intersections, "FAMILY_SLICE_BYTES", slice_bytes)
    monkeypatch.setattr(intersections, "RARE_MIN_KEYS", rare_min_keys)
    texts = _family(5, members=70) + _texts(6, count=60, longest=300)
    buf = text.TextBuffer.from_texts(texts)
    docs = np.r_[np.arange(0, len(texts), 2), np.arange(1, len(texts), 2)]  # any order of texts
    family = intersections.Family(buf, docs, 5)
    values, offsets = shingles.shingle_rows(buf, docs, 5)
    assert np.array_equal(family.sizes, np.diff(offsets))
    rng = np.random.default_rng(3)
    ra = rng.integers(0, len(docs), 3000)
    rb = rng.integers(0, len(docs), 3000)
    ra[:5] = rb[:5]  # a row with itself
    ra[5:8], rb[5:8] = ra[8:11], rb[8:11]  # a pair given twice
    ra[11], rb[11] = rb[8], ra[8]  # and once more the other way round
    progress = []
    got = family.intersections(ra, rb, progress.append, below=rare_below)
    assert np.array_equal(got, intersection_sizes(values, offsets, ra, rb))
    assert progress and progress[-1] == len(ra)
    assert family.words > 1


def test_family_placed_from_parts_on_threads_equals_one_part(monkeypatch):
    # the keys fingerprinted in many parts (texts of a few hundred bytes each) and placed by
    # top byte on threads, side by side: the same keys, groups and sizes as from one part
    from concurrent.futures import ThreadPoolExecutor

    buf = text.TextBuffer.from_texts(_family(9, members=80) + _texts(10, count=80, longest=400))
    docs = np.arange(len(buf.offsets) - 1)[::-1].copy()
    whole = intersections.Family(buf, docs, 5)
    monkeypatch.setattr(intersections, "_FAMILY_CHUNK_BYTES", 300)
    with ThreadPoolExecutor(2) as pool:
        parted = intersections.Family(buf, docs, 5, parallel_map=lambda fn, jobs: list(pool.map(fn, *zip(*jobs))))
    assert len(whole.keys) > 1000
    assert np.array_equal(parted.keys, whole.keys)
    assert np.array_equal(parted.bounds, whole.bounds)
    assert np.array_equal(parted.sizes, whole.sizes)


def test_text_sketches_equal_signature_pass_sketches():
    texts = _sketch_texts(4)
    buf = text.TextBuffer.from_texts(texts)
    docs = np.arange(len(texts))[::-1].copy()
    sketch_of = np.where(np.diff(buf.offsets)[docs] >= 300, np.arange(len(docs)), -1)
    got = np.zeros((len(docs), sketch.SKETCH_BINS), np.uint8)
    signatures.text_sketches(buf, docs, 5, sketch_of, got)
    values, offsets = shingle.shingle_sets([texts[d] for d in docs], 5)
    for row in np.flatnonzero(sketch_of >= 0):
        assert np.array_equal(got[row], sketch.sketch_of_set(values[offsets[row] : offsets[row + 1]]))


def test_text_builder_equals_concat_of_its_chunks():
    rng = random.Random(7)
    words = ["ab", "Ünï", "çødé", "x" * 40, "日本語"]
    sizes = [3, 0, 1, 60, 5, 17]  # an empty chunk, and one larger than a block
    parts = [
        text.normalized_buffer([" ".join(rng.choices(words, k=rng.randint(0, 30))) for _ in range(n)]) for n in sizes
    ]
    builder = text.TextBuilder(sum(sizes), block_bytes=256)
    for part in parts:
        view = builder.append(part)
        assert bytes(view.data) == bytes(part.data)
        assert view.offsets.tolist() == part.offsets.tolist()
    assert len(builder.data._blocks) > 2  # (several blocks, so finish() joins them)
    built, joined = builder.finish(), text.TextBuffer.concat(parts)
    assert bytes(built.data) == bytes(joined.data)
    assert built.offsets.tolist() == joined.offsets.tolist()


def test_blocks_of_rows_equal_the_concatenation_of_the_parts():
    rng = np.random.default_rng(5)
    parts = [rng.integers(0, 256, (m, 16), dtype=np.uint8) for m in (3, 0, 9, 40, 1)]  # 40: over a block
    blocks = text.Blocks((16,), block_bytes=10 * 16)
    for part in parts:
        blocks.take(len(part))[:] = part
    assert [len(b) for b in blocks._blocks] == [10, 10, 40, 10]
    assert np.array_equal(blocks.finish(), np.concatenate(parts))


def test_band_keys_by_blocks_equal_the_whole_band_at_once(monkeypatch):
    rng = np.random.default_rng(11)
    sig = rng.integers(0, 2**32, (1000, 12), dtype=np.uint64).astype(np.uint32)
    cols = sig[:, 3:6].astype(np.uint64)
    whole = np.zeros(len(sig), np.uint64)
    with np.errstate(over="ignore"):
        for j in range(3):
            whole += (cols[:, j] + np.uint64(1)) * lsh._ROW_MULTIPLIERS[j]
    monkeypatch.setattr(lsh, "KEY_ROWS", 300)  # (blocks of 300: the last one partial)
    assert np.array_equal(lsh.band_keys(sig, 1, 3), shingle.mix64(whole))


@pytest.mark.parametrize("keys", [[], [4], [4, 4], [1, 2, 3], [1, 1, 2, 3, 3, 3, 4, 5, 5], [7] * 6])
def test_shared_runs_are_the_runs_of_two_or_more_equal_keys(keys):
    sorted_keys = np.array(keys, np.uint64)
    starts, lens = lsh.shared_runs(sorted_keys)
    run_start = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]) if keys else np.empty(0, np.int64)
    run_len = np.diff(np.append(run_start, len(keys)))
    assert starts.tolist() == run_start[run_len >= 2].tolist()
    assert lens.tolist() == run_len[run_len >= 2].tolist()


def test_sort_by_fingerprint_equals_numpy_sort_or_says_it_did_not():
    # one top byte's keys (fingerprint << 16 | row): many fingerprints, some held by hundreds
    # of rows, every row's keys in row order as a family places them; the radix sort leaves
    # them wholly sorted. With the rows of a fingerprint out of order it says so (the caller
    # sorts them then).
    rng = np.random.default_rng(4)
    fingerprints = (np.uint64(0x5A) << np.uint64(40)) | rng.integers(0, 1 << 40, 3000, dtype=np.uint64)
    common = fingerprints[:20]
    rows = [np.unique(np.r_[rng.choice(fingerprints, 40), common]) for _ in range(400)]
    keys = np.concatenate([(fp << np.uint64(16)) | np.uint64(row) for row, fp in enumerate(rows)])
    got = keys.copy()
    assert intersections._sort_by_fingerprint(got)
    assert np.array_equal(got, np.sort(keys))
    shuffled = keys[::-1].copy()  # each fingerprint's rows in decreasing order
    assert not intersections._sort_by_fingerprint(shuffled)
    assert np.array_equal(np.sort(shuffled), np.sort(keys))
    empty = np.empty(0, np.uint64)
    assert intersections._sort_by_fingerprint(empty)
