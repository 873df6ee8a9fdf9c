"""The LSH band pass: pairs colliding in a band, prefiltered by their 4-bit signature agreement,
each reported in its first band only (compiled; plain version: scanning.lsh). A bucket larger
than max_bucket is split by sub-bands (lsh.sub_bands): its pairs are those that also share a
sub-band, reported in their first sub-band only."""

from __future__ import annotations

import numpy as np

from ...compile.jit import helper, kernel, popcount64

_NIBBLE_LOW = np.uint64(0x1111111111111111)
# A run of at least this many members has its packed rows copied side by side first: its
# m * (m - 1) / 2 agreement tests then read neighbouring memory, not rows scattered over the
# whole corpus (on 841k summaries, ~40 ns a candidate in buckets of thousands, mostly cache
# misses).
GATHER_RUN = 32


# -- LSH bands ---------------------------------------------------------------------------------


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
def _share_sub_band(sig, x, y, sub_positions, band, before):
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
def _collide_earlier(sig, tags, x, y, band, rows, band_state):
    """Whether a band before `band` whose buckets were all whole (state 1) reports x and y:
    they share its key. `tags` (n, bands) holds 16 bits of each band's key: only a band where
    they are equal (a real collision, or one chance in 65,536) is compared in full, after one
    vectorised pass over the tags."""
    tx = tags[x]
    ty = tags[y]
    any_equal = False
    for c in range(band):
        any_equal |= tx[c] == ty[c]
    if not any_equal:
        return False
    for c in range(band):
        if tx[c] != ty[c] or band_state[c] != 1:
            continue
        same = True
        for col in range(c * rows, (c + 1) * rows):
            if sig[x, col] != sig[y, col]:
                same = False
                break
        if same:
            return True
    return False


@helper
def _collide_earlier_split(sig, tags, x, y, band, rows, band_state, sub_positions):
    """Whether a band before `band` that split some buckets (state 2) reports x and y: they
    share its key and one of its sub-bands. (Its unsplit buckets' pairs that share none are
    then reported again by this band, and the merge of the bands' survivors removes the
    repeats: the signatures, not flags that another thread may still be writing, decide, so
    no pair is ever lost.)"""
    for c in range(band):
        if band_state[c] != 2 or tags[x, c] != tags[y, c]:
            continue
        same = True
        for col in range(c * rows, (c + 1) * rows):
            if sig[x, col] != sig[y, col]:
                same = False
                break
        if same and _share_sub_band(sig, x, y, sub_positions, c, sub_positions.shape[1]):
            return True
    return False


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
    sub_band,
):
    """Pairs of one band's buckets (runs of `order`, documents sorted by band key) whose 4-bit
    signatures agree in >= min_agree positions and that share no earlier band already
    reporting them, as lo * n + hi, into out. (`tags`: see _collide_earlier.)

    sub_band >= 0: the runs are the sub-buckets of split buckets by that sub-band
    (sub_positions: (bands, sub-bands, rows) signature positions); a pair sharing an earlier
    sub-band of this band is not reported again. sub_band -1: the band's own buckets.

    resume = [run, i, j]: where to start, updated in place to where to go on when out is full
    (run == len(run_start): done). Returns the number written.
    """
    written = 0
    capacity = out.shape[0]
    words = packed.shape[1]
    r0, i0, j0 = resume[0], resume[1], resume[2]
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
        gathered = m >= GATHER_RUN
        if gathered:
            rows_of = np.empty((m, words), np.uint64)
            for q in range(m):
                row = order[s + q]
                for w in range(words):
                    rows_of[q, w] = packed[row, w]
        else:
            rows_of = packed
        for i in range(i0 if r == r0 else 0, m - 1):
            x = order[s + i]
            xi = i if gathered else x
            for j in range(j0 if (r == r0 and i == i0) else i + 1, m):
                y = order[s + j]
                if nibble_agreement(rows_of, xi, j if gathered else y, perms) < min_agree:
                    continue
                if sub_band > 0 and _share_sub_band(sig, x, y, sub_positions, band, sub_band):
                    continue
                if band and _collide_earlier(sig, tags, x, y, band, rows, band_state):
                    continue
                if split_before and _collide_earlier_split(sig, tags, x, y, band, rows, band_state, sub_positions):
                    continue
                if written == capacity:
                    resume[0], resume[1], resume[2] = r, i, j
                    return written
                out[written] = x * n + y if x < y else y * n + x
                written += 1
    resume[0], resume[1], resume[2] = run_start.shape[0], 0, 0
    return written


def band_tags(keys: np.ndarray) -> np.ndarray:
    """The 16 bits of a band's keys that band_survivors' tags hold."""
    return (keys >> np.uint64(48)).astype(np.uint16)


NO_SUB_BANDS = np.zeros((1, 0, 1), np.int64)  # (for callers that never split a bucket)
