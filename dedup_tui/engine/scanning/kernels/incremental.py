"""The incremental scan's compiled kernel (incremental.py says what it is for), and its plain
version, which tests/engine/test_incremental.py checks it against."""

from __future__ import annotations

from ...compile.jit import helper, kernel
from .bands import nibble_agreement, share_sub_band

# A new row's bucket in a band (state[band, row]): in none with another row, whole (every pair
# of it is reported), or split by the band's sub-bands (only the pairs sharing one of them).
LONE, WHOLE, SPLIT = 0, 1, 2


@helper
def _reported_earlier(bucket, state, sig, sig_row, sub_positions, x, y, band):
    for c in range(band):
        if state[c, x] == LONE or bucket[c, x] != bucket[c, y]:
            continue
        if state[c, x] == WHOLE:
            return True
        if share_sub_band(sig, sig_row[x], sig_row[y], sub_positions, c, sub_positions.shape[1]):
            return True
    return False


@kernel
def added_band_survivors(
    members,
    run_start,
    run_len,
    run_new,
    run_split,
    packed,
    perms,
    min_agree,
    bucket,
    state,
    sig,
    sig_row,
    sub_positions,
    band,
    n,
    out,
    resume,
):
    """Pairs of one band's usable buckets with a new member (run_new[r] new rows first in each
    run, x < m), agreeing in >= min_agree nibbles, sharing one of the band's sub-bands when
    the run is split (run_split[r]), and reported by no earlier band, as x * n + y into out.

    bucket: (bands, rows) each row's bucket, NO_BUCKET where it is in none with a new row;
    state: (bands, m) LONE, WHOLE or SPLIT, the new row's bucket there; sig: the signatures
    of the rows in split buckets, row sig_row[x] for row x (-1: none kept); sub_positions:
    lsh.sub_bands. resume = [run, i, j] as in kernels.band_survivors. Returns the number
    written."""
    written = 0
    capacity = out.shape[0]
    subs = sub_positions.shape[1]
    r0, i0, j0 = resume[0], resume[1], resume[2]
    for r in range(r0, run_start.shape[0]):
        s = run_start[r]
        m = run_len[r]
        split = run_split[r]
        for i in range(i0 if r == r0 else 0, run_new[r]):
            x = members[s + i]
            for j in range(j0 if (r == r0 and i == i0) else i + 1, m):
                y = members[s + j]
                if nibble_agreement(packed, x, y, perms) < min_agree:
                    continue
                if split and not share_sub_band(sig, sig_row[x], sig_row[y], sub_positions, band, subs):
                    continue
                if band and _reported_earlier(bucket, state, sig, sig_row, sub_positions, x, y, band):
                    continue
                if written == capacity:
                    resume[0], resume[1], resume[2] = r, i, j
                    return written
                out[written] = x * n + y
                written += 1
    resume[0], resume[1], resume[2] = run_start.shape[0], 0, 0
    return written


def added_band_survivors_plain(
    members,
    run_start,
    run_len,
    run_new,
    run_split,
    packed,
    perms,
    min_agree,
    bucket,
    state,
    sig,
    sig_row,
    sub_positions,
    band,
    n,
) -> list[int]:
    """Plain Python twin of added_band_survivors (all at once), for the tests."""

    def share_sub_band(x, y, c):
        return any((sig[sig_row[x], cols] == sig[sig_row[y], cols]).all() for cols in sub_positions[c])

    out = []
    for s, m, nn, split in zip(run_start.tolist(), run_len.tolist(), run_new.tolist(), run_split.tolist()):
        for i in range(nn):
            x = int(members[s + i])
            for j in range(i + 1, m):
                y = int(members[s + j])
                nibbles_x = [(int(packed[x, p // 16]) >> (4 * (p % 16))) & 15 for p in range(perms)]
                nibbles_y = [(int(packed[y, p // 16]) >> (4 * (p % 16))) & 15 for p in range(perms)]
                if sum(a == b for a, b in zip(nibbles_x, nibbles_y)) < min_agree:
                    continue
                if split and not share_sub_band(x, y, band):
                    continue
                if any(
                    bucket[c, x] == bucket[c, y]
                    and (state[c, x] == WHOLE or (state[c, x] == SPLIT and share_sub_band(x, y, c)))
                    for c in range(band)
                ):
                    continue
                out.append(x * n + y)
    return out
