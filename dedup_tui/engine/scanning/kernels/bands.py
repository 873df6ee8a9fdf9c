"""The LSH band pass: pairs colliding in a band, prefiltered by their 4-bit signature agreement,
each reported in its first band only (compiled; plain version: scanning.lsh). A bucket larger
than max_bucket is split by sub-bands (lsh.sub_bands): its pairs are those that also share a
sub-band, reported in their first sub-band only. In a later band's bucket, the pairs that share
an earlier band are passed over without comparing their signatures (_earlier_groups)."""

from __future__ import annotations

import numpy as np

from ...compile.jit import helper, kernel, popcount64

_NIBBLE_LOW = np.uint64(0x1111111111111111)
# The bit of a band's tags (band_tags) that marks a bucket the band split by sub-bands.
SPLIT_TAG = 1
# A run of at least this many members has its packed rows copied side by side first: its
# m * (m - 1) / 2 agreement tests then read neighbouring memory, not rows scattered over the
# whole corpus (on 841k summaries, ~40 ns a candidate in buckets of thousands, mostly cache
# misses).
GATHER_RUN = 32


# -- LSH bands ---------------------------------------------------------------------------------


@helper
def _equal_columns(a, x, y, lo, hi):
    """Whether rows x and y of `a` are equal in columns lo to hi - 1."""
    for col in range(lo, hi):
        if a[x, col] != a[y, col]:
            return False
    return True


@helper
def _any_equal_column(a, x, y, count):
    """Whether rows x and y of `a` are equal in any of its first `count` columns (no early exit:
    a vectorised pass over a few bytes side by side)."""
    equal = False
    for col in range(count):
        equal |= a[x, col] == a[y, col]
    return equal


@helper
def _copy_rows(src, rows, start, count, out):
    """out[q] = src[rows[start + q]] for q < count: rows side by side, read in order."""
    for q in range(count):
        row = rows[start + q]
        for w in range(src.shape[1]):
            out[q, w] = src[row, w]


@helper
def nibble_agreement(packed, x, y, perms):
    """In how many of the perms 4-bit signature positions rows x and y of `packed` agree."""
    words = packed.shape[1]
    differ = 0
    for w in range(words):
        v = packed[x, w] ^ packed[y, w]
        v |= v >> np.uint64(1)
        v |= v >> np.uint64(2)
        differ += popcount64(v & _NIBBLE_LOW)
    return perms - differ  # padding nibbles are zero on both sides: never differ


@helper
def share_sub_band(sig, x, y, sub_positions, band, before):
    """Whether x and y agree on every position of one of the first `before` sub-bands of `band`."""
    for t in range(before):
        same = True
        for q in range(sub_positions.shape[2]):
            col = sub_positions[band, t, q]
            if sig[x, col] != sig[y, col]:
                same = False
                break
        if same:
            return True
    return False


@helper
def _whole(state, tag):
    """Whether a finished band reports every pair of the bucket with this tag: the band split
    none of its buckets (state 1), or split some (state 2) but not this one (SPLIT_TAG clear)."""
    return state == 1 or (state == 2 and (tag & SPLIT_TAG) == 0)


@helper
def _collide_earlier(sig, tags, x, y, band, rows, band_state):
    """Whether a band before `band` whose buckets were all whole (state 1) reports x and y:
    they share its key. `tags` (n, bands) holds 16 bits of each band's key: only a band where
    they are equal (a real collision, or one chance in 65,536) is compared in full, after one
    vectorised pass over the tags."""
    return _share_earlier(sig, tags[x], tags[y], x, y, band, rows, band_state)


@helper
def _share_earlier(sig, tx, ty, x, y, band, rows, band_state):
    """_collide_earlier with the tags of x and y given (tx, ty: rows of `tags`, or copies)."""
    any_equal = False
    for c in range(band):
        any_equal |= tx[c] == ty[c]
    if not any_equal:
        return False
    for c in range(band):
        if tx[c] != ty[c] or not _whole(band_state[c], tx[c]):
            continue
        if _equal_columns(sig, x, y, c * rows, (c + 1) * rows):
            return True
    return False


@helper
def _collide_earlier_split(sig, tags, x, y, band, rows, band_state, sub_positions):
    """Whether a band before `band` that split some buckets (state 2) reports x and y from a
    split bucket: they share its key and one of its sub-bands. (Its unsplit buckets' pairs that share none are
    then reported again by this band, and the merge of the bands' survivors removes the
    repeats: the signatures, not flags that another thread may still be writing, decide, so
    no pair is ever lost.)"""
    for c in range(band):
        if band_state[c] != 2 or tags[x, c] != tags[y, c] or (tags[x, c] & SPLIT_TAG) == 0:
            continue
        if _equal_columns(sig, x, y, c * rows, (c + 1) * rows) and share_sub_band(
            sig, x, y, sub_positions, c, sub_positions.shape[1]
        ):
            return True
    return False


# A run of a later band (of LOCAL_MIN to LOCAL_RUN members) first numbers, for every earlier
# whole band, the groups of its members equal on that band's signature columns (_earlier_groups):
# a pair sharing a group shares that band, which reported it (or a band before it did). Its
# members are then put in the order of the groups of the band whose groups hold the most pairs,
# so those pairs are passed over in blocks, never looked at; every other pair compares its
# group numbers, a few bytes side by side, before its nibbles. (On the 9,885 manual pages,
# 15.3M of the 38.9M candidates are compared; the band pass takes half the CPU time.) ~0.5 KB
# a member at 128 permutations while the run is worked on: 8 MB for the largest.
LOCAL_RUN = 1 << 14
# (and of at least this many: from 16 rather than GATHER_RUN, the 64k families, whose near
# copies fill many small buckets, compare 10.0M of their 22.3M candidates instead of 11.5M,
# in the same CPU time; smaller runs cost more to group than their pairs do)
LOCAL_MIN = 16


@helper
def _earlier_groups(sig, tags, order, s, m, band, rows, band_state, groups, gather):
    """groups[q, c] for the members q of the run order[s : s + m] and each band c before `band`:
    the first member (in run order) equal to q on band c's signature columns, when band c
    reports every pair of q's bucket there (_whole); q itself otherwise (never shared). Returns
    the band whose groups hold the most pairs (-1: none holds any). gather: the members'
    columns are copied side by side first (4 B a band a row a member), else read in place."""
    width = band * rows
    if gather:
        cols = np.empty((m, max(width, 1)), sig.dtype)
        for q in range(m):
            x = order[s + q]
            for col in range(width):
                cols[q, col] = sig[x, col]
    else:
        cols = sig
    size = 1
    while size < 2 * m:
        size *= 2
    mask = np.uint64(size - 1)
    table = np.empty(size, np.int64)
    members_of = np.empty(m, np.int64)
    best, best_pairs = -1, 0
    for c in range(band):
        if band_state[c] != 1 and band_state[c] != 2:
            for q in range(m):
                groups[q, c] = q
            continue
        table[:] = -1
        pairs = 0
        for q in range(m):
            if not _whole(band_state[c], tags[order[s + q], c]):
                groups[q, c] = q
                continue
            x = q if gather else order[s + q]
            h = np.uint64(0)
            for col in range(c * rows, (c + 1) * rows):
                h = (h ^ np.uint64(cols[x, col])) * np.uint64(0x9E3779B97F4A7C15)
            slot = (h >> np.uint64(32)) & mask
            while True:
                first = table[slot]
                if first < 0:
                    table[slot] = q
                    groups[q, c] = q
                    members_of[q] = 1
                    break
                if _equal_columns(cols, first if gather else order[s + first], x, c * rows, (c + 1) * rows):
                    groups[q, c] = first
                    pairs += members_of[first]
                    members_of[first] += 1
                    break
                slot = (slot + np.uint64(1)) & mask
        if pairs > best_pairs:
            best, best_pairs = c, pairs
    return best


@helper
def _order_by_group(order, s, m, groups, by, members, local_groups, group_end):
    """members: the run order[s : s + m] with the groups of band `by` side by side (in the
    order of their first members, each in run order); local_groups: `groups`' rows in that
    order; group_end[p]: where the group of members[p] ends."""
    count = np.zeros(m, np.int64)
    for q in range(m):
        count[groups[q, by]] += 1
    start = np.empty(m, np.int64)
    placed = np.zeros(m, np.int64)
    next_start = 0
    for q in range(m):  # (a group's number is its first member's place in the run)
        start[q] = next_start
        next_start += count[q]
    for q in range(m):
        g = groups[q, by]
        p = start[g] + placed[g]
        placed[g] += 1
        members[p] = order[s + q]
        group_end[p] = start[g] + count[g]
        for c in range(groups.shape[1]):
            local_groups[p, c] = groups[q, c]


@kernel
def band_survivors(
    order,
    run_start,
    run_len,
    packed,
    perms,
    min_agree,
    sig,
    tags,
    band,
    rows,
    band_state,
    n,
    out,
    resume,
    sub_positions,
    regroup,
    tally,
):
    """Pairs of one band's buckets (runs of `order`, documents sorted by band key) whose 4-bit
    signatures agree in >= min_agree positions and that share no earlier band already
    reporting them, as lo * n + hi, into out. (`tags`: see _collide_earlier.)

    The runs are the band's buckets that it does not split (split_bucket_survivors takes the
    others); sub_positions ((bands, sub-bands, rows) signature positions) tells which pairs an
    earlier band reports from a bucket it split.

    regroup: a run of LOCAL_MIN to LOCAL_RUN members of a later band is put in the groups of
    its members that share an earlier band (_earlier_groups), whose pairs are not compared
    (it reads a signature row of every member: off when they are read from a file). tally[0]
    counts the pairs whose nibbles were compared; tally[1] is the band the run in progress is
    ordered by (-1: none).

    resume = [run, i, j]: where to start, updated in place to where to go on when out is full
    (run == len(run_start): done). Returns the number written.
    """
    written = 0
    capacity = out.shape[0]
    words = packed.shape[1]
    r0, i0, j0 = resume[0], resume[1], resume[2]
    compared = 0
    # Earlier bands that split a bucket, checked in a loop of their own: with that check in
    # _collide_earlier the kernel took 1.10 s instead of 0.78 s on the manual pages (one
    # thread), which have none. A band that splits after this point counts as not reporting:
    # its pairs are reported again, and the merge removes the repeats.
    split_before = False
    for c in range(band):
        split_before |= band_state[c] == 2
    for r in range(r0, run_start.shape[0]):
        s = run_start[r]
        m = run_len[r]
        local = regroup and band > 0 and LOCAL_MIN <= m <= LOCAL_RUN
        gathered = local or m >= GATHER_RUN
        grouped_by = -1
        if local:
            groups = np.empty((m, band), np.uint16)
            best = _earlier_groups(sig, tags, order, s, m, band, rows, band_state, groups, True)
            # (resuming the run: the order it was left in; a band once whole stays whole)
            grouped_by = tally[1] if r == r0 and (i0 > 0 or j0 > 1) else best
            members = np.empty(m, np.int64)
            local_groups = np.empty((m, band), np.uint16)
            group_end = np.empty(m, np.int64)
            if grouped_by >= 0:
                _order_by_group(order, s, m, groups, grouped_by, members, local_groups, group_end)
            else:
                for q in range(m):
                    members[q] = order[s + q]
                    group_end[q] = q + 1
                    for c in range(band):
                        local_groups[q, c] = groups[q, c]
        else:
            members = order[s : s + m]
            local_groups = np.empty((0, 0), np.uint16)
            group_end = members  # (unused)
        if gathered:
            rows_of = np.empty((m, words), np.uint64)
            _copy_rows(packed, members, 0, m, rows_of)
        else:
            rows_of = packed
        for i in range(i0 if r == r0 else 0, m - 1):
            x = members[i]
            xi = i if gathered else x
            if r == r0 and i == i0:  # (resuming)
                first = j0
            elif local:
                first = group_end[i]  # (the rest of its group shares the band it is ordered by)
            else:
                first = i + 1
            for j in range(max(first, i + 1), m):
                y = members[j]
                if local and _any_equal_column(local_groups, i, j, band):
                    continue
                compared += 1
                if nibble_agreement(rows_of, xi, j if gathered else y, perms) < min_agree:
                    continue
                if band and not local and _collide_earlier(sig, tags, x, y, band, rows, band_state):
                    continue
                if split_before and _collide_earlier_split(sig, tags, x, y, band, rows, band_state, sub_positions):
                    continue
                if written == capacity:
                    resume[0], resume[1], resume[2] = r, i, j
                    tally[0] += compared - 1  # (compared again on resuming)
                    tally[1] = grouped_by
                    return written
                out[written] = x * n + y if x < y else y * n + x
                written += 1
    resume[0], resume[1], resume[2] = run_start.shape[0], 0, 0
    tally[0] += compared
    tally[1] = -1
    return written


@helper
def _sub_key(cols, q, lo, hi):
    """The key of row q of `cols` on its columns lo to hi - 1 (a sub-band's)."""
    h = np.uint64(0x243F6A8885A308D3)
    for col in range(lo, hi):
        h = (h ^ np.uint64(cols[q, col])) * np.uint64(0x9E3779B97F4A7C15)
    h ^= h >> np.uint64(29)
    return h


@kernel
def split_bucket_survivors(
    members, packed, perms, min_agree, sig, tags, band, rows, band_state, n, sub_positions, layout, out, resume, tally
):
    """The pairs of one split bucket of `band` (members) that share one of the band's sub-bands
    (sub_positions[band]: (sub-bands, rows) signature positions), each in its first shared sub-band,
    whose 4-bit signatures agree in >= min_agree positions and that no earlier band reports
    (as band_survivors), as lo * n + hi, into out.

    The members' sub-band columns (and 16 bits of each sub-band key), packed rows and earlier
    bands' groups are made side by side, then each sub-band's sub-buckets are found by sorting
    the members by its key: every test reads neighbouring memory, where a pass per sub-band
    over the scattered rows was mostly cache misses. All of it takes up to 810 B a member at
    128 permutations, in the last band: 52 MB for the 64,332 members of mixed10m's largest
    bucket. Within a budget, when all of it does not fit, the columns are copied a slice of
    sub-bands at a time and, when that is not enough either, the packed rows and groups are
    read in place: the same pairs, in the same order, whatever the budget (at least 34 B a
    member: a slice of one sub-band). layout (memory_model.split_layout_of): [sub-bands a slice, whether the
    packed rows and groups are copied, whether the groups are made from copied columns, the
    most members of a sub-bucket whose rows are copied side by side].

    resume = [sub-band, i, j]: where to start (positions in that sub-band's sorted order),
    updated in place when out is full (sub-band == len(positions): done). tally[0] counts the
    pairs whose nibbles were compared, tally[1] the pairs of the sub-buckets. Returns the
    number written."""
    m = members.shape[0]
    positions = sub_positions[band]
    subs, width = positions.shape[0], positions.shape[1]
    words = packed.shape[1]
    written = 0
    capacity = out.shape[0]
    slice_subs, gather, gather_groups, run_cap = max(layout[0], 1), layout[1] != 0, layout[2] != 0, layout[3]
    split_before = False
    for c in range(band):
        split_before |= band_state[c] == 2
    if gather:
        rows_of = np.empty((m, words), np.uint64)
        _copy_rows(packed, members, 0, m, rows_of)
        # (the earlier bands' groups: as in band_survivors, a pair sharing one is passed over)
        groups = np.empty((m, band), np.int32)
        _earlier_groups(sig, tags, members, 0, m, band, rows, band_state, groups, gather_groups)
    else:  # (read in place: a pair sharing an earlier band is found once its nibbles agree)
        rows_of = packed
        groups = np.empty((0, band), np.int32)
    keys = np.empty(m, np.uint64)
    by = np.empty(0, np.int64)
    run_rows = np.empty((0, words), np.uint64)
    cols = np.empty((0, width), sig.dtype)
    sub_tags = np.empty((0, 1), np.uint16)
    t0, i0, j0 = resume[0], resume[1], resume[2]
    compared = 0
    for first in range(t0 - t0 % slice_subs, subs, slice_subs):
        count = min(slice_subs, subs - first)
        cols = np.empty((0, width), sig.dtype)  # (the slice before is freed first)
        sub_tags = np.empty((0, 1), np.uint16)
        cols = np.empty((m, count * width), sig.dtype)
        sub_tags = np.empty((m, count), np.uint16)
        for q in range(m):
            x = members[q]
            for u in range(count):
                for p in range(width):
                    cols[q, u * width + p] = sig[x, positions[first + u, p]]
        for t in range(first, first + count):
            u = t - first
            lo, hi = u * width, (u + 1) * width
            for q in range(m):
                keys[q] = _sub_key(cols, q, lo, hi)
                sub_tags[q, u] = np.uint16(keys[q] >> np.uint64(48))
            if t < t0:  # (resuming later in the slice: only its tags are needed)
                continue
            by = np.empty(0, np.int64)  # (freed before the next sort's)
            by = np.argsort(keys, kind="mergesort")
            a = 0
            while a < m:
                b = a + 1
                while b < m and keys[by[b]] == keys[by[a]]:
                    b += 1
                # (the sub-bucket's rows side by side, as band_survivors does)
                copied = GATHER_RUN <= b - a <= run_cap
                if copied:
                    if run_rows.shape[0] < b - a:
                        size = min(max(b - a, 2 * run_rows.shape[0]), run_cap)
                        run_rows = np.empty((0, words), np.uint64)
                        run_rows = np.empty((size, words), np.uint64)
                    for q in range(b - a):
                        row = by[a + q] if gather else members[by[a + q]]
                        for w in range(words):
                            run_rows[q, w] = rows_of[row, w]
                for i in range(a, b - 1):
                    if t == t0 and i < i0:
                        continue
                    qi = by[i]
                    x = members[qi]
                    for j in range(j0 if (t == t0 and i == i0) else i + 1, b):
                        qj = by[j]
                        if gather and _any_equal_column(groups, qi, qj, band):
                            continue
                        compared += 1
                        if copied:
                            agree = nibble_agreement(run_rows, i - a, j - a, perms)
                        elif gather:
                            agree = nibble_agreement(rows_of, qi, qj, perms)
                        else:
                            agree = nibble_agreement(rows_of, x, members[qj], perms)
                        if agree < min_agree:
                            continue
                        if not _equal_columns(cols, qi, qj, lo, hi):  # (equal hashes of unequal columns)
                            continue
                        if _any_equal_column(sub_tags, qi, qj, u):
                            shared_before = False
                            for e in range(u):
                                if sub_tags[qi, e] == sub_tags[qj, e] and _equal_columns(
                                    cols, qi, qj, e * width, (e + 1) * width
                                ):
                                    shared_before = True
                                    break
                            if shared_before:
                                continue
                        y = members[qj]
                        if first and share_sub_band(sig, x, y, sub_positions, band, first):  # (earlier slices')
                            continue
                        if not gather and band and _collide_earlier(sig, tags, x, y, band, rows, band_state):
                            continue
                        if split_before and _collide_earlier_split(
                            sig, tags, x, y, band, rows, band_state, sub_positions
                        ):
                            continue
                        if written == capacity:
                            resume[0], resume[1], resume[2] = t, i, j
                            tally[0] += compared - 1  # (compared again on resuming)
                            return written
                        out[written] = x * n + y if x < y else y * n + x
                        written += 1
                if t > t0 or b > i0:  # (a run finished in an earlier call is counted there)
                    tally[1] += (b - a) * (b - a - 1) // 2
                a = b
    resume[0], resume[1], resume[2] = subs, 0, 0
    tally[0] += compared
    return written


def band_tags(keys: np.ndarray) -> np.ndarray:
    """The 15 bits of a band's keys that band_survivors' tags hold (the lowest bit is
    SPLIT_TAG, set once the band splits the key's bucket)."""
    return (keys >> np.uint64(48)).astype(np.uint16) & np.uint16(0xFFFF ^ SPLIT_TAG)


NO_SUB_BANDS = np.zeros((1, 0, 1), np.int64)  # (for callers that never split a bucket)
