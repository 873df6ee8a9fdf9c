"""Exact character-shingle Jaccard for the benchmarks, independent of the engine under test.

The definition is the engine's plain one (``dedup_tui.engine.text.sets``): normalise (lowercase,
strip, collapse whitespace runs), take the set of character 5-shingles (a text shorter than 5
characters is one shingle), Jaccard = |A & B| / |A | B|. Here every shingle gets an exact
64-bit code (five 12-bit character ids packed; shingles with one of the rarest characters of
a corpus with more than 4,094 distinct ones are numbered through a dict), so the sets are
sorted int64 arrays and the arithmetic is exact, not a hash estimate.

``sample_truth`` compares a set of "sample" texts with every text of the corpus through an
inverted index of the sample's shingles: the work is the summed size of all the pairs'
intersections, not the number of pairs times the set sizes. With every text as the sample it
is the exhaustive answer (affordable for a few thousand 4 KB texts); with a random sample it
is the exact answer for every pair touching the sample, which is what bench_scan's recall and
precision are estimated from.
"""

from __future__ import annotations

import re
from collections import Counter

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
def _pack_codes(ids, starts, k, bits, esc, out, out_off, flags):
    """Sorted unique packed k-shingle codes of each text (ids: 1-based char ids, texts
    concatenated, text d is ids[starts[d]:starts[d+1]]). Shingles holding the escape id (a
    rare character) are left out and their text flagged."""
    mask = (np.int64(1) << (k * bits)) - 1
    pos = 0
    for d in range(len(starts) - 1):
        s, e = starts[d], starts[d + 1]
        out_off[d] = pos
        flags[d] = False
        if e - s < k:  # one shingle: the whole text; leading zero ids keep it apart from k-grams
            c = np.int64(0)
            for i in range(s, e):
                if ids[i] == esc:
                    flags[d] = True
                c = (c << bits) | ids[i]
            if not flags[d]:
                out[pos] = c
                pos += 1
            continue
        c = np.int64(0)
        last_esc = s - k
        for i in range(s, s + k - 1):
            if ids[i] == esc:
                last_esc = i
            c = (c << bits) | ids[i]
        begin = pos
        for i in range(s + k - 1, e):
            if ids[i] == esc:
                last_esc = i
            c = ((c << bits) | ids[i]) & mask
            if last_esc > i - k:
                flags[d] = True
            else:
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
    """Sorted unique shingle codes of a list of texts, CSR (values, offsets)."""

    def __init__(self, values: np.ndarray, offsets: np.ndarray):
        self.values, self.offsets = values, offsets

    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    def row(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i] : self.offsets[i + 1]]


_RARE_BASE = 1 << 60  # codes of shingles holding a rare character: above every packed code


class Encoder:
    """Exact shingle codes for one corpus. The (up to) 4,094 most frequent characters get ids
    of at most 12 bits and a shingle of them is its 60-bit packed code; a shingle holding
    any other character is numbered in a dict (code 2^60 + its number). Codes of different
    calls on the same encoder are comparable."""

    def __init__(self, norms: list[str], k: int = K):
        self.k = k
        counts: Counter = Counter()
        for t in norms:
            counts.update(t)
        limit = (1 << _MAX_BITS) - 1
        if len(counts) <= limit:
            chars = sorted(counts)
            self.bits, self.esc = max(1, len(chars).bit_length()), -1
            self.rare_chars: frozenset = frozenset()
        else:
            chars = sorted(c for c, _ in counts.most_common(limit - 1))
            self.bits, self.esc = _MAX_BITS, limit
            self.rare_chars = frozenset(counts) - frozenset(chars)
        self.table = np.full(max(ord(c) for c in counts) + 1 if counts else 1, self.esc, np.int64)
        if chars:
            self.table[[ord(c) for c in chars]] = np.arange(1, len(chars) + 1)
        self.rare: dict[str, int] = {}
        self.method = f"packed {self.bits}-bit character ids" + (
            f", {len(self.rare_chars):,} rare characters numbered" if self.rare_chars else ""
        )

    def _rare_codes(self, text: str) -> list[int]:
        k, rare, rc = self.k, self.rare, self.rare_chars
        if len(text) < k:
            return [_RARE_BASE + rare.setdefault(text, len(rare))]
        out = {
            _RARE_BASE + rare.setdefault(w, len(rare))
            for w in (text[i : i + k] for i in range(len(text) - k + 1))
            if not rc.isdisjoint(w)
        }
        return sorted(out)

    def codes(self, norms: list[str], chunk_chars: int = 8_000_000) -> Codes:
        """Sorted unique shingle codes of each normalised text."""
        k = self.k
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
            ids = self.table[cps]
            out = np.empty(int(np.maximum(lens - k + 1, 1).sum()), np.int64)
            out_off = np.empty(len(batch) + 1, np.int64)
            flags = np.empty(len(batch), np.bool_)
            used = _pack_codes(ids, starts, k, self.bits, self.esc, out, out_off, flags)
            if flags.any():  # append the rare shingles' codes (all above the packed ones)
                rows, new_off, acc = [], np.zeros(len(batch) + 1, np.int64), 0
                for d in range(len(batch)):
                    row = out[out_off[d] : out_off[d + 1]]
                    if flags[d]:
                        row = np.concatenate([row, np.array(self._rare_codes(batch[d]), np.int64)])
                    rows.append(row)
                    acc += len(row)
                    new_off[d + 1] = acc
                vals, out_off = np.concatenate(rows), new_off
            else:
                vals = out[:used].copy()
            parts.append(vals)
            offs.append(out_off[1:] + total)
            total += len(vals)
            i = j
        return Codes(np.concatenate(parts) if parts else np.zeros(0, np.int64), np.concatenate(offs))


def shingle_codes(norms: list[str], k: int = K) -> tuple[Encoder, Codes]:
    """An encoder for the corpus and the codes of every text."""
    enc = Encoder(norms, k)
    return enc, enc.codes(norms)


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


def sample_truth(
    enc: Encoder, norms: list[str], rows: np.ndarray, sample: np.ndarray, min_j: float, chunk_docs: int = 20_000
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Every pair (s, r) with s in `sample`, r in `rows` (indices into norms; sample must be
    a subset of rows), s != r, and exact Jaccard >= min_j, each pair once. The corpus side is
    encoded a slice at a time (memory stays bounded). Returns (a, b, jaccard, work): a is
    the sample member (for pairs of two sample members, the earlier index), work the summed
    intersection sizes (the cost)."""
    rows = np.asarray(rows, np.int64)
    sample = np.asarray(sample, np.int64)
    z = np.zeros(0, np.int64)
    if len(sample) == 0 or len(rows) == 0:
        return z, z, np.zeros(0, np.float64), 0
    sc = enc.codes([norms[i] for i in sample.tolist()])
    s_size = sc.sizes()
    owner = np.repeat(np.arange(len(sample), dtype=np.int64), s_size)
    ucodes, inv = np.unique(sc.values, return_inverse=True)
    post = owner[np.argsort(inv, kind="stable")]
    post_off = np.zeros(len(ucodes) + 1, np.int64)
    np.cumsum(np.bincount(inv, minlength=len(ucodes)), out=post_off[1:])
    del sc, owner, inv
    in_sample = np.zeros(len(norms), np.bool_)
    in_sample[sample] = True
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    total_work = 0
    cap = max(1_000_000, 4 * len(sample))
    for lo in range(0, len(rows), chunk_docs):
        chunk = rows[lo : lo + chunk_docs]
        cc = enc.codes([norms[i] for i in chunk.tolist()])
        # each code's index in the sample's code list, -1 when no sample text has it
        pos = np.searchsorted(ucodes, cc.values)
        pos_c = np.minimum(pos, len(ucodes) - 1)
        uidx = np.where((pos < len(ucodes)) & (ucodes[pos_c] == cc.values), pos, -1)
        chunk_in_sample = in_sample[chunk]
        start = 0
        while start < len(chunk):
            out_a = np.empty(cap, np.int64)
            out_b = np.empty(cap, np.int64)
            out_j = np.empty(cap, np.float64)
            n_out, start, work = _sample_pass(
                cc.offsets,
                chunk,
                start,
                uidx,
                post_off,
                post,
                sample,
                s_size,
                chunk_in_sample,
                min_j,
                out_a,
                out_b,
                out_j,
            )
            total_work += work
            parts.append((out_a[:n_out].copy(), out_b[:n_out].copy(), out_j[:n_out].copy()))
    a = np.concatenate([p[0] for p in parts])
    b = np.concatenate([p[1] for p in parts])
    j = np.concatenate([p[2] for p in parts])
    return a, b, j, total_work


@njit(cache=True)
def _sample_pass(
    offsets, global_rows, start, uidx, post_off, post, sample_rows, sample_size, in_sample, min_j, out_a, out_b, out_j
):
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
