"""The incremental scan's compiled kernel (incremental.py says what it is for), and its plain
version, which tests/engine/test_incremental.py checks it against."""

from __future__ import annotations

from ...compile.jit import helper, kernel
from .bands import nibble_agreement


@helper
def _reported_earlier(bucket, usable, x, y, band):
    for c in range(band):
        if usable[c, x] and bucket[c, x] == bucket[c, y]:
            return True
    return False


@kernel
def added_band_survivors(
    members, run_start, run_len, run_new, packed, perms, min_agree, bucket, usable, band, n, out, resume
):
    """Pairs of one band's usable buckets with a new member (run_new[r] new rows first in each
    run, x < m), agreeing in >= min_agree nibbles and reported by no earlier band (bucket:
    (bands, rows) each row's bucket, NO_BUCKET where it is in none with a new row; usable:
    (bands, m) whether the new row's bucket there is usable), as x * n + y into out; resume = [run, i, j] as in
    kernels.band_survivors. Returns the number written."""
    written = 0
    capacity = out.shape[0]
    r0, i0, j0 = resume[0], resume[1], resume[2]
    for r in range(r0, run_start.shape[0]):
        s = run_start[r]
        m = run_len[r]
        for i in range(i0 if r == r0 else 0, run_new[r]):
            x = members[s + i]
            for j in range(j0 if (r == r0 and i == i0) else i + 1, m):
                y = members[s + j]
                if nibble_agreement(packed, x, y, perms) < min_agree:
                    continue
                if band and _reported_earlier(bucket, usable, x, y, band):
                    continue
                if written == capacity:
                    resume[0], resume[1], resume[2] = r, i, j
                    return written
                out[written] = x * n + y
                written += 1
    resume[0], resume[1], resume[2] = run_start.shape[0], 0, 0
    return written


def added_band_survivors_plain(
    members, run_start, run_len, run_new, packed, perms, min_agree, bucket, usable, band, n
) -> list[int]:
    """Plain Python twin of added_band_survivors (all at once), for the tests."""
    out = []
    for s, m, nn in zip(run_start.tolist(), run_len.tolist(), run_new.tolist()):
        for i in range(nn):
            x = int(members[s + i])
            for j in range(i + 1, m):
                y = int(members[s + j])
                nibbles_x = [(int(packed[x, p // 16]) >> (4 * (p % 16))) & 15 for p in range(perms)]
                nibbles_y = [(int(packed[y, p // 16]) >> (4 * (p % 16))) & 15 for p in range(perms)]
                if sum(a == b for a, b in zip(nibbles_x, nibbles_y)) < min_agree:
                    continue
                if any(usable[c, x] and bucket[c, x] == bucket[c, y] for c in range(band)):
                    continue
                out.append(x * n + y)
    return out
