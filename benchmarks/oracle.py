"""Exact character-shingle Jaccard for the benchmarks, independent of the engine under test.

The definition is the engine's plain one (``dedup_tui.engine.sets``): normalise (lowercase,
strip, collapse whitespace runs), take the set of character 5-shingles (a text shorter than 5
characters is one shingle), Jaccard = |A & B| / |A | B|. Here every shingle is packed into an
exact 64-bit code (each character gets a dense id of at most 12 bits; corpora with more than
4,095 distinct characters fall back to numbering the shingle strings with a dict), so the sets
are sorted int64 arrays and the arithmetic is exact, not a hash estimate.

``sample_truth`` compares a set of "sample" texts with every text of the corpus through an
inverted index of the sample's shingles: the work is the summed size of all the pairs'
intersections, not the number of pairs times the set sizes. With every text as the sample it
is the exhaustive answer (affordable for a few thousand 4 KB texts); with a random sample it
is the exact answer for every pair touching the sample, which is what bench_scan's recall and
precision are estimated from.
"""

from __future__ import annotations

import re

import numpy as np
from numba import njit

K = 5
_WS = re.compile(r"\s+")
_MAX_BITS = 12  # K * 12 = 60 bits: codes stay positive int64


def normalize(text: str) -> str:
    """Same definition as the engine: lowercase, strip, collapse whitespace runs."""
    return _WS.sub(" ", text.lower().strip())


def shingle_set(norm: str, k: int = K) -> set[str]:
    """The plain definition on an already normalised text."""
    if len(norm) < k:
        return {norm}
    return {norm[i : i + k] for i in range(len(norm) - k + 1)}


def plain_jaccard(a: str, b: str, k: int = K) -> float:
    sa, sb = shingle_set(a, k), shingle_set(b, k)
    inter = len(sa & sb)
    return inter / (len(sa) + len(sb) - inter) if (sa or sb) else 1.0


@njit(cache=True)
def _pack_codes(ids, starts, k, bits, out, out_off):
    """Sorted unique packed k-shingle codes of each text (ids: 1-based char ids, texts
    concatenated, text d is ids[starts[d]:starts[d+1]])."""
    mask = (np.int64(1) << (k * bits)) - 1
    pos = 0
    for d in range(len(starts) - 1):
        s, e = starts[d], starts[d + 1]
        out_off[d] = pos
        if e - s < k:  # one shingle: the whole text; leading zero ids keep it apart from k-grams
            c = np.int64(0)
            for i in range(s, e):
                c = (c << bits) | ids[i]
            out[pos] = c
            pos += 1
            continue
        c = np.int64(0)
        for i in range(s, s + k - 1):
            c = (c << bits) | ids[i]
        begin = pos
        for i in range(s + k - 1, e):
            c = ((c << bits) | ids[i]) & mask
            out[pos] = c
            pos += 1
        seg = np.sort(out[begin:pos])
        w = begin
        for j in range(len(seg)):
            if j == 0 or seg[j] != seg[j - 1]:
                out[w] = seg[j]
                w += 1
        pos = w
    out_off[len(starts) - 1] = pos
    return pos


class Codes:
    """Sorted unique shingle codes of a list of normalised texts, CSR (values, offsets)."""

    def __init__(self, values: np.ndarray, offsets: np.ndarray, method: str):
        self.values, self.offsets, self.method = values, offsets, method

    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    def row(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i] : self.offsets[i + 1]]


def shingle_codes(norms: list[str], k: int = K, chunk_chars: int = 8_000_000) -> Codes:
    """Exact shingle sets of normalised texts as sorted int64 codes."""
    alphabet = set()
    for t in norms:
        alphabet.update(t)
    bits = max(1, len(alphabet).bit_length())
    if bits > _MAX_BITS:
        return _dict_codes(norms, k)
    chars = sorted(alphabet)
    table = np.zeros(max((ord(c) for c in chars), default=0) + 1, np.int64)
    table[[ord(c) for c in chars]] = np.arange(1, len(chars) + 1)
    parts, offs, total = [], [np.zeros(1, np.int64)], 0
    i = 0
    while i < len(norms):
        j, size = i, 0
        while j < len(norms) and (j == i or size + len(norms[j]) <= chunk_chars):
            size += len(norms[j])
            j += 1
        batch = norms[i:j]
        lens = np.fromiter((len(t) for t in batch), np.int64, len(batch))
        starts = np.zeros(len(batch) + 1, np.int64)
        np.cumsum(lens, out=starts[1:])
        cps = np.frombuffer("".join(batch).encode("utf-32-le"), np.uint32)
        ids = table[cps]
        out = np.empty(int(np.maximum(lens - k + 1, 1).sum()), np.int64)
        out_off = np.empty(len(batch) + 1, np.int64)
        used = _pack_codes(ids, starts, k, bits, out, out_off)
        parts.append(out[:used].copy())
        offs.append(out_off[1:] + total)
        total += used
        i = j
    return Codes(np.concatenate(parts) if parts else np.zeros(0, np.int64), np.concatenate(offs),
                 f"packed {bits}-bit character ids")


def _dict_codes(norms: list[str], k: int) -> Codes:
    ids: dict[str, int] = {}
    parts, offs, total = [], [0], 0
    for t in norms:
        row = np.fromiter((ids.setdefault(s, len(ids)) for s in shingle_set(t, k)), np.int64)
        row.sort()
        parts.append(row)
        total += len(row)
        offs.append(total)
    return Codes(np.concatenate(parts) if parts else np.zeros(0, np.int64), np.array(offs, np.int64),
                 "numbered shingle strings")


@njit(cache=True)
def _pair_jaccard(values, offsets, a, b, out):
    for p in range(len(a)):
        i, j = a[p], b[p]
        x, xe = offsets[i], offsets[i + 1]
        y, ye = offsets[j], offsets[j + 1]
        na, nb = xe - x, ye - y
        inter = 0
        while x < xe and y < ye:
            if values[x] < values[y]:
                x += 1
            elif values[x] > values[y]:
                y += 1
            else:
                inter += 1
                x += 1
                y += 1
        out[p] = inter / (na + nb - inter) if na + nb > 0 else 1.0


def pair_jaccard(codes: Codes, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact Jaccard of the pairs (a[i], b[i]) (row indices into codes)."""
    out = np.empty(len(a), np.float64)
    _pair_jaccard(codes.values, codes.offsets, np.asarray(a, np.int64), np.asarray(b, np.int64), out)
    return out


def sample_truth(codes: Codes, rows: np.ndarray, sample: np.ndarray, min_j: float,
                 chunk_codes: int = 20_000_000) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Every pair (s, r) with s in `sample`, r in `rows` (row indices into codes; sample must
    be a subset of rows), s != r, and exact Jaccard >= min_j, each pair once.
    Returns (a, b, jaccard, work) with a = the sample member (for pairs of two sample
    members, the earlier row is a)."""
    rows = np.asarray(rows, np.int64)
    sample = np.asarray(sample, np.int64)
    z = np.zeros(0, np.int64)
    if len(sample) == 0 or len(rows) == 0:
        return z, z, np.zeros(0, np.float64), 0
    s_vals = [codes.row(int(s)) for s in sample]
    s_size = np.array([len(v) for v in s_vals], np.int64)
    allv = np.concatenate(s_vals)
    owner = np.repeat(np.arange(len(sample), dtype=np.int64), s_size)
    ucodes, inv = np.unique(allv, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    post = owner[order]
    post_off = np.zeros(len(ucodes) + 1, np.int64)
    np.cumsum(np.bincount(inv, minlength=len(ucodes)), out=post_off[1:])
    in_sample = np.zeros(len(codes.offsets) - 1, np.bool_)
    in_sample[sample] = True
    # The corpus side in slices of rows (bounded memory): a compact CSR of the slice's codes,
    # each code's index in the sample's code list (-1: no sample text has it).
    out_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    total_work = 0
    cap = max(1_000_000, 4 * len(sample))
    lo = 0
    while lo < len(rows):
        hi, n_codes = lo, 0
        while hi < len(rows) and (hi == lo or n_codes < chunk_codes):
            r = rows[hi]
            n_codes += int(codes.offsets[r + 1] - codes.offsets[r])
            hi += 1
        chunk = rows[lo:hi]
        sizes = codes.offsets[chunk + 1] - codes.offsets[chunk]
        offs = np.zeros(len(chunk) + 1, np.int64)
        np.cumsum(sizes, out=offs[1:])
        idx = np.repeat(codes.offsets[chunk] - offs[:-1], sizes) + np.arange(offs[-1], dtype=np.int64)
        vals = codes.values[idx]
        pos = np.searchsorted(ucodes, vals)
        pos_c = np.minimum(pos, len(ucodes) - 1)
        uidx = np.where((pos < len(ucodes)) & (ucodes[pos_c] == vals), pos, -1)
        local_in_sample = in_sample[chunk]
        start = 0
        while start < len(chunk):
            out_a = np.empty(cap, np.int64)
            out_b = np.empty(cap, np.int64)
            out_j = np.empty(cap, np.float64)
            n_out, start, work = _sample_pass(offs, chunk, start, uidx, post_off, post, sample, s_size,
                                              local_in_sample, min_j, out_a, out_b, out_j)
            total_work += work
            out_parts.append((out_a[:n_out].copy(), out_b[:n_out].copy(), out_j[:n_out].copy()))
        lo = hi
    a = np.concatenate([p[0] for p in out_parts])
    b = np.concatenate([p[1] for p in out_parts])
    j = np.concatenate([p[2] for p in out_parts])
    return a, b, j, total_work


@njit(cache=True)
def _sample_pass(offsets, global_rows, start, uidx, post_off, post, sample_rows, sample_size,
                 in_sample, min_j, out_a, out_b, out_j):
    """For the slice's texts from `start` on (text r: codes uidx[offsets[r]:offsets[r+1]],
    global row global_rows[r]), count the intersection with every sample text through the inverted
    index (uidx: each code's index into the sample's code list or -1; post: the sample texts
    holding each code), and emit the pairs with Jaccard >= min_j. A pair of two sample texts
    is emitted once, when the later one is the corpus side. Stops early when the output
    buffers could overflow; returns (pairs emitted, next start, intersection work)."""
    n_s = len(sample_rows)
    inter = np.zeros(n_s, np.int64)
    touched = np.empty(n_s, np.int64)
    n_out = 0
    work = 0
    cap = len(out_a)
    r = start
    while r < len(global_rows):
        if n_out + n_s > cap:
            break
        row = r
        grow = global_rows[r]
        nt = 0
        for x in range(offsets[row], offsets[row + 1]):
            u = uidx[x]
            if u < 0:
                continue
            for p in range(post_off[u], post_off[u + 1]):
                s = post[p]
                if inter[s] == 0:
                    touched[nt] = s
                    nt += 1
                inter[s] += 1
            work += post_off[u + 1] - post_off[u]
        size = offsets[row + 1] - offsets[row]
        for t in range(nt):
            s = touched[t]
            srow = sample_rows[s]
            i = inter[s]
            inter[s] = 0
            if srow == grow or (in_sample[r] and grow < srow):
                continue
            j = i / (sample_size[s] + size - i)
            if j >= min_j:
                out_a[n_out] = srow
                out_b[n_out] = grow
                out_j[n_out] = j
                n_out += 1
        r += 1
    return n_out, r, work


def touch_probability(sample_size: int, population: int) -> float:
    """Probability that a given pair of distinct texts has at least one member in a uniform
    random sample (without replacement) of sample_size texts out of population."""
    if population < 2 or sample_size >= population - 1:
        return 1.0
    d, s = population, sample_size
    return 1.0 - (d - s) * (d - s - 1) / (d * (d - 1))
