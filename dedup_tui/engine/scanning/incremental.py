"""Incremental scans: documents loaded after a scan by LSH are compared with one another and
with the scanned ones, and nothing else, with the same result as a full rescan.

A full scan by LSH keeps, per representative document (store.scans, tables scan_keys and
scan_band_keys): every band's key, sorted, with its low `index_bits` replaced by the row (as
the scan sorts them to find its buckets); the 4-bit nibbles of its MinHash signature (the
agreement prefilter); and the first 8 bytes of its exact hash. An incremental scan then:

- finds the new documents' exact copies among the old representatives (by hash prefix,
  confirmed on the full hash) and among themselves: an old document stays the first copy;
- signs the new representatives, and per band looks up each new key among the stored sorted
  keys (binary search: no old key is read into a hash table or re-sorted), comparing the same
  high 64 - index_bits bits the full rescan would compare (its index_bits, from the total
  number of representatives), so a bucket holds exactly the documents it would hold in a full
  rescan. A bucket over max_bucket is skipped as the rescan skips it; one that was usable
  before and grew past it would lose the rescan old pairs too, so the scan falls back to a
  full one (FullScanNeeded);
- enumerates only the pairs with a new document (new x new, new x old) of each usable bucket,
  applies the same nibble prefilter, and reports a pair in its first usable shared band only
  (incremental_kernels.added_band_survivors, compiled: this module imports no numba; a dense family of thousands of near copies is enumerated once per
  band, not verified once per band);
- verifies the survivors exactly (scanning.verify, component by component, with the sketch
  test there instead of in the bands: the same pair-wise test on the same texts).

Old pairs stay as they are, and the pairs' maximum spanning forest is updated from the old
forest and the new pairs (store.scans.merge_pairs: the same forest). A full rescan could differ
only where it joins two old documents whose band keys differ in the one more low bit a larger
corpus gives to the index (one chance in 2^(64 - index_bits), about 2^-44 at a million
documents, per pair and band; and the pair must also pass the prefilter and reach the floor,
and have been missed by all 39 bands before).

What it keeps costs 8 bytes per band + num_perm / 2 + 16 bytes per representative document
(392 at floor 0.5, 39 bands x 3 rows; README, "Adding new data").
"""

from __future__ import annotations

import numpy as np

KEYS_VERSION = 1
NO_BUCKET = -1  # an old row's bucket in a band where it shares none with a new row


class FullScanNeeded(Exception):
    """The stored scan cannot be extended to equal a full rescan; the message says why."""


def index_bits(n_rows: int) -> int:
    """Low bits of a band key the scan replaces by the row (pipeline._BandCandidates)."""
    return max(1, (n_rows - 1).bit_length())


def reuse_problem(state: str, params: dict | None, keys_meta: dict | None, settings, banding,
                  documents_now: int) -> str | None:
    """Why the stored scan cannot be extended by an incremental one (None: it can)."""
    if state != "stale":
        return "no documents were loaded since the last scan" if state == "complete" else "not scanned yet"
    if not params:
        return "the last scan's settings are not recorded"
    if params.get("method") != "lsh":
        return "the last scan compared every pair (a small corpus)"
    if settings.method == "exhaustive":
        return "--method exhaustive compares every pair"
    for name, flag in (("k", "--k"), ("floor", "--floor"), ("num_perm", "--num-perm"), ("seed", "--seed"),
                       ("max_bucket", "--max-bucket")):
        old, new = params.get(name), getattr(settings, name)
        if old is None or (float(old) != float(new)):
            return f"{flag} {new} differs from the last scan's {old}"
    if (params.get("bands"), params.get("rows")) != (banding.bands, banding.rows):
        return "the last scan's LSH banding differs"
    if not keys_meta or keys_meta.get("version") != KEYS_VERSION:
        return "the last scan kept no band keys (made by an older dedup-tui)"
    for name in ("k", "num_perm", "seed", "bands", "rows"):
        expected = getattr(settings, name) if hasattr(settings, name) else getattr(banding, name)
        if keys_meta.get(name) != expected:
            return "the stored band keys are of other settings"
    covered = keys_meta.get("documents")
    if not isinstance(covered, int) or not 0 < covered < documents_now:
        return "the stored band keys do not match the scanned documents"
    return None


# -- exact copies ---------------------------------------------------------------------------

def new_exact_of(old_ords: np.ndarray, old_prefixes: np.ndarray, new_ords: np.ndarray, new_hashes: list[str],
                 prefix_of, full_hash_of) -> np.ndarray:
    """exact_of of the new documents (the first ord with the same normalised text, -1 when the
    document is itself a first copy): an old representative (same hash prefix, then the same
    full hash, looked up by full_hash_of(ords) -> {ord: hash}) wins over an earlier new copy."""
    out = np.full(len(new_ords), -1, np.int64)
    if not len(new_ords):
        return out
    prefixes = prefix_of(new_hashes)
    order = np.argsort(old_prefixes, kind="stable")
    sorted_prefixes = old_prefixes[order]
    lo = np.searchsorted(sorted_prefixes, prefixes, "left")
    hi = np.searchsorted(sorted_prefixes, prefixes, "right")
    hit = np.flatnonzero(hi > lo)
    if len(hit):
        cands = {i: old_ords[order[lo[i]:hi[i]]] for i in hit.tolist()}
        full = full_hash_of(np.unique(np.concatenate(list(cands.values()))))
        for i, ords in cands.items():
            for o in sorted(ords.tolist()):
                if full.get(o) == new_hashes[i]:
                    out[i] = o
                    break
    first: dict[str, int] = {}
    for i in np.flatnonzero(out < 0).tolist():
        f = first.setdefault(new_hashes[i], int(new_ords[i]))
        if f != new_ords[i]:
            out[i] = f
    return out


# -- candidates -------------------------------------------------------------------------------

class BandMatch:
    """One band: the new representatives' buckets (runs of `order` with equal high key bits)
    and the old rows in each (from every stored chunk)."""

    def __init__(self, new_high: np.ndarray, chunks: list[tuple[np.ndarray, int, int]], bits: int, max_bucket: int):
        """new_high: the new rows' keys >> bits (bits: the full rescan's index bits); chunks:
        (sorted stored keys, first old row of the chunk, the chunk's own index bits)."""
        m = len(new_high)
        self.order = np.argsort(new_high, kind="stable")
        high = new_high[self.order]
        start = np.flatnonzero(np.r_[True, high[1:] != high[:-1]]) if m else np.empty(0, np.int64)
        self.start = start
        self.new_count = np.diff(np.r_[start, m])
        self.high = high[start]
        lo_key = self.high << np.uint64(bits)
        hi_key = lo_key | np.uint64((1 << bits) - 1)
        old_count = np.zeros(len(start), np.int64)
        bucket_parts, row_parts = [], []
        for keys, base, chunk_bits in chunks:
            lo = np.searchsorted(keys, lo_key, "left")
            hi = np.searchsorted(keys, hi_key, "right")
            count = hi - lo
            old_count += count
            total = int(count.sum())
            if total:
                at = np.repeat(lo - np.cumsum(count) + count, count) + np.arange(total)
                row_parts.append((keys[at] & np.uint64((1 << chunk_bits) - 1)).astype(np.int64) + base)
                bucket_parts.append(np.repeat(np.arange(len(start)), count))
        self.old_count = old_count
        total = self.new_count + old_count
        self.usable = total >= 2
        if max_bucket > 0:
            self.usable &= total <= max_bucket
            self.oversized = total[total > max_bucket]
            grown = (total > max_bucket) & (old_count <= max_bucket) & (old_count >= 2)
            if grown.any():
                raise FullScanNeeded(f"an LSH bucket of {int(old_count[grown].max()):,} scanned documents grew past "
                                     f"--max-bucket {max_bucket:,} with the new ones (a full rescan skips it)")
        else:
            self.oversized = total[:0]
        if row_parts:
            bucket = np.concatenate(bucket_parts)
            rows = np.concatenate(row_parts)
            keep = self.usable[bucket]
            bucket, rows = bucket[keep], rows[keep]
            by = np.argsort(bucket, kind="stable")
            self.old_bucket, self.old_rows = bucket[by], rows[by]
        else:
            self.old_bucket, self.old_rows = np.empty(0, np.int64), np.empty(0, np.int64)

    def runs(self, old_local: np.ndarray):
        """(members, run_start, run_len, run_new) of the usable buckets: each run its new rows
        (0..m-1) first, then its old rows given by old_local (rows of self.old_rows)."""
        use = np.flatnonzero(self.usable)
        n_new = self.new_count[use]
        n_old = np.bincount(self.old_bucket, minlength=len(self.usable))[use] if len(use) else n_new
        run_len = n_new + n_old
        run_start = np.cumsum(run_len) - run_len
        members = np.empty(int(run_len.sum()), np.int64)
        total_new = int(n_new.sum())
        if total_new:
            src = np.repeat(self.start[use] - np.cumsum(n_new) + n_new, n_new) + np.arange(total_new)
            dst = np.repeat(run_start - np.cumsum(n_new) + n_new, n_new) + np.arange(total_new)
            members[dst] = self.order[src]
        if len(old_local):
            # old rows are grouped by bucket in usable order: their places follow each run's new rows
            pos_in_use = np.searchsorted(use, self.old_bucket)
            first = np.searchsorted(self.old_bucket, self.old_bucket, "left")
            members[run_start[pos_in_use] + n_new[pos_in_use] + (np.arange(len(old_local)) - first)] = old_local
        return members, run_start, run_len, n_new
