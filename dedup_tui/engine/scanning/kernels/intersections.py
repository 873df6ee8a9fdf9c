"""The exact intersection sizes of pairs of shingle rows (verification): by merging sorted rows
(`Intersector`), or as bitsets over a template family's shared fingerprints (`Family`)
(compiled; plain version: scanning.similarity.intersection_sizes)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...compile.jit import helper, kernel, popcount64
from .shingles import packed_fingerprints
from .signatures import FINGERPRINT_BITS
from .text import TextBuffer

# -- exact intersections -----------------------------------------------------------------------


@kernel
def merge_intersections(values, offsets, ra, rb, out):
    """|A ∩ B| of sorted repeat-free rows ra[p], rb[p] by a branch-free merge."""
    for p in range(ra.shape[0]):
        i, i_end = offsets[ra[p]], offsets[ra[p] + 1]
        j, j_end = offsets[rb[p]], offsets[rb[p] + 1]
        common = 0
        while i < i_end and j < j_end:
            x = values[i]
            y = values[j]
            common += x == y
            i += x <= y
            j += y <= x
        out[p] = common


@kernel
def _bitset_rows(values, offsets, rows, vocab, bits, first):
    """bits[r - first] = rows[r] as a bitset over vocab (a bit per vocabulary entry it holds),
    for r in [first, first + len(bits))."""
    nv = vocab.shape[0]
    for out_row in range(bits.shape[0]):
        row = rows[first + out_row]
        i, i_end = offsets[row], offsets[row + 1]
        if i == i_end:
            continue
        # both sorted: binary search the first, then walk (vocab is far longer than one row)
        lo, hi = 0, nv
        while lo < hi:
            mid = (lo + hi) >> 1
            if vocab[mid] < values[i]:
                lo = mid + 1
            else:
                hi = mid
        v = lo
        while i < i_end and v < nv:
            x = values[i]
            y = vocab[v]
            if x == y:
                bits[out_row, v >> 6] |= np.uint64(1) << np.uint64(v & 63)
                i += 1
                v += 1
            elif x < y:
                i += 1
            else:
                # skip ahead in vocab by binary search for x
                lo, hi = v + 1, nv
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if vocab[mid] < x:
                        lo = mid + 1
                    else:
                        hi = mid
                v = lo


@kernel
def _shared_fingerprints(keys):
    """keys: sorted (fingerprint << 16 | row); how many fingerprints have two rows or more."""
    shared = 0
    run = 0
    for i in range(keys.shape[0]):
        if i and (keys[i] >> np.uint64(16)) == (keys[i - 1] >> np.uint64(16)):
            run += 1
            if run == 2:
                shared += 1
        else:
            run = 1
    return shared


@helper
def _run_end(keys, i):
    """keys: sorted (fingerprint << 16 | row); the end of the run of keys[i]'s fingerprint.
    (Its callers start with i = np.int64(0): a literal 0 would compile it a second time.)"""
    fp = keys[i] >> np.uint64(16)
    j = i + 1
    while j < keys.shape[0] and (keys[j] >> np.uint64(16)) == fp:
        j += 1
    return j


@kernel
def _fill_shared_bits(keys, bits, min_rows):
    """Bit v of each row of the v-th fingerprint (in order) that has min_rows rows or more
    (min_rows >= 2)."""
    v = -1
    i = np.int64(0)
    while i < keys.shape[0]:
        j = _run_end(keys, i)
        if j - i >= min_rows:
            v += 1
            word = v >> 6
            bit = np.uint64(1) << np.uint64(v & 63)
            for t in range(i, j):
                bits[np.int64(keys[t] & np.uint64(0xFFFF)), word] |= bit
        i = j


_ROW_MASK = 0xFFFF
# A batch's bitsets may take this much memory; above it, the merge is used.
BITSET_MAX_BYTES = 512 << 20
_BITSET_ROWS_PER_JOB = 512
# Rows whose shared fingerprints are counted first, to rule bitsets out cheaply.
_VOCABULARY_SAMPLE_ROWS = 1 << 14
# Pairs are compared in tiles of rows whose bitsets together fit this share of the shared
# cache: 3.6x faster than in (a, b) order over a template family's 7.6k pages.
_TILE_BYTES = 6 << 20


def _serial_map(fn, jobs):
    return [fn(*job) for job in jobs]


def _tile_order(la: np.ndarray, lb: np.ndarray, rows: int, words: int) -> np.ndarray:
    """An order of the pairs (la[p], lb[p]) of bitset rows (`words` each) tile by tile: both
    rows of the pairs of one tile fit _TILE_BYTES. Tiles of a power of two rows, so a row's tile
    is a shift: tile_order, compiled (a stable argsort of the pairs' tiles took 0.06-0.09 s of
    one thread for the manual pages' family of 2.4M pairs)."""
    shift = max(4, (_TILE_BYTES // (8 * words)).bit_length() - 1)  # (16 rows at least)
    return tile_order(
        np.ascontiguousarray(la, np.int64), np.ascontiguousarray(lb, np.int64), shift, ((rows - 1) >> shift) + 1
    )


@kernel
def tile_order(la, lb, shift, tiles):
    """The stable order of the pairs p by (la[p] >> shift, lb[p] >> shift), both below
    `tiles`: a counting sort by the second, then by the first."""
    by_second = _by_tile(lb, np.arange(la.shape[0]), shift, tiles)
    return _by_tile(la, by_second, shift, tiles)


@helper
def _by_tile(values, order, shift, tiles):
    """`order` stably sorted by values[p] >> shift (below `tiles`): one counting sort."""
    counts = np.zeros(tiles + 1, np.int64)
    for p in order:
        counts[(values[p] >> shift) + 1] += 1
    for t in range(tiles):
        counts[t + 1] += counts[t]
    out = np.empty(order.shape[0], np.int64)
    for p in order:
        t = values[p] >> shift
        out[counts[t]] = p
        counts[t] += 1
    return out


def _rows_values(values, offsets, rows):
    """(the values of the CSR rows `rows`, one after another; each row's size)."""
    sizes = offsets[rows + 1] - offsets[rows]
    total = int(sizes.sum())
    return values[np.repeat(offsets[rows] - np.cumsum(sizes) + sizes, sizes) + np.arange(total)], sizes


def _shared_vocabulary(values, offsets, rows):
    """The fingerprints that two or more of the rows hold, sorted."""
    gathered = _rows_values(values, offsets, rows)[0]
    gathered.sort()
    repeated = gathered[1:][gathered[1:] == gathered[:-1]]
    del gathered
    return repeated[np.r_[True, repeated[1:] != repeated[:-1]]] if len(repeated) else repeated


def _sorted_row_tagged(values, offsets, used, parallel_map):
    """Every fingerprint of the used rows as (fingerprint << 16 | local row), sorted: grouped
    by their top byte first, so each group's sort stays in cache."""
    gathered, sizes = _rows_values(values, offsets, used)
    gathered <<= np.uint64(16)
    gathered |= np.repeat(np.arange(len(used), dtype=np.uint64), sizes)
    grouped = np.empty_like(gathered)
    bounds = np.r_[0, np.cumsum(_top_byte_counts(gathered))]
    _scatter_by_top_byte(gathered, grouped, bounds[:-1].copy())
    del gathered
    bounds = bounds.tolist()
    parallel_map(lambda lo, hi: grouped[lo:hi].sort(), list(zip(bounds[:-1], bounds[1:])))
    return grouped


class Intersector:
    """|A ∩ B| for pairs (ra[p], rb[p]) of sorted, repeat-free CSR rows, prepared once and
    then computed in slices (so threads can share the pairs of one template family).

    Many pairs over few documents (a template family: hundreds of pages that are all near each
    other) are intersected as bitsets over the fingerprints that occur in at least two of the
    used rows (the only ones an intersection can count): an AND and a popcount per 64
    fingerprints instead of a merge step per fingerprint, the pairs taken in tiles of rows
    that fit in the cache (`order`). Otherwise, a merge. `method` forces one (tests);
    `parallel_map(fn, jobs)` may run the preparation on threads.

    Slices are of the pairs in `order` (None: as given): __call__(lo, hi) gives the
    intersections of pairs order[lo:hi].
    """

    def __init__(self, values, offsets, ra, rb, method: str | None = None, parallel_map=_serial_map):
        self.values, self.offsets = values, offsets
        self.ra = np.ascontiguousarray(ra, dtype=np.int64)
        self.rb = np.ascontiguousarray(rb, dtype=np.int64)
        self.sizes = np.diff(offsets)
        self.method = "merge"
        self.order = None  # pairs in the given order (else: their order of computation)
        if not len(self.ra):
            return
        self.merge_work = int(self.sizes[self.ra].sum() + self.sizes[self.rb].sum())
        in_pair = np.zeros(len(self.sizes), dtype=bool)
        in_pair[self.ra] = True
        in_pair[self.rb] = True
        used = np.flatnonzero(in_pair)
        used_values = int(self.sizes[used].sum())
        # The vocabulary sorts every used fingerprint once: worth it only when the pairs
        # revisit their rows many times.
        if method == "merge" or (method is None and self.merge_work < 8 * used_values):
            return
        if len(used) <= _ROW_MASK:
            # Fingerprints are 48 bits: the row fits in the low 16, so one sort groups each
            # fingerprint with the rows that hold it, and the bitsets fill in one pass.
            tagged = _sorted_row_tagged(values, offsets, used, parallel_map)
            vocab_size = _shared_fingerprints(tagged)
        else:
            # The fingerprints that some of the rows share are a part of those all of them
            # share: when a sample's are already too many for bitsets, the merge is chosen
            # without sorting every fingerprint (1 s and ~350 MB for the 266k summaries of
            # one component among 841k package summaries).
            most_words = min(BITSET_MAX_BYTES // (8 * len(used)), -(-4 * self.merge_work // len(self.ra)) - 1)
            if (
                method is None
                and len(used) > _VOCABULARY_SAMPLE_ROWS
                and len(_shared_vocabulary(values, offsets, used[:_VOCABULARY_SAMPLE_ROWS])) > 64 * most_words
            ):
                return
            vocab = _shared_vocabulary(values, offsets, used)
            vocab_size = len(vocab)
        words = max(1, (vocab_size + 63) // 64)
        # Per pair: `words` AND + popcount, against a merge's branch-free step per fingerprint.
        too_big = len(used) * words * 8 > BITSET_MAX_BYTES
        if method != "bitset" and (words * len(self.ra) >= 4 * self.merge_work or too_big):
            return
        self.method = "bitset"
        self.words = words
        self.bits = np.zeros((len(used), words), np.uint64)
        if len(used) <= _ROW_MASK:
            _fill_shared_bits(tagged, self.bits, 2)
            del tagged
        else:
            starts = range(0, len(used), _BITSET_ROWS_PER_JOB)
            parallel_map(
                lambda lo: _bitset_rows(values, offsets, used, vocab, self.bits[lo : lo + _BITSET_ROWS_PER_JOB], lo),
                [(lo,) for lo in starts],
            )
        self.values = None  # the bitsets replace them
        local = np.cumsum(in_pair) - 1
        la, lb = local[self.ra], local[self.rb]
        self.order = _tile_order(la, lb, len(used), words)
        self.la, self.lb = la[self.order], lb[self.order]
        self.ra, self.rb = self.ra[self.order], self.rb[self.order]

    def pair_cost(self) -> np.ndarray:
        """Relative cost of each pair, in `order` (to cut the pairs into jobs of equal work)."""
        if self.method == "bitset":
            return np.full(len(self.ra), self.words // 4 + 1, dtype=np.int64)
        return self.sizes[self.ra] + self.sizes[self.rb]

    def __call__(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        hi = len(self.ra) if hi is None else hi
        out = np.zeros(hi - lo, np.int64)
        if hi <= lo:
            return out
        if self.method == "merge":
            merge_intersections(self.values, self.offsets, self.ra[lo:hi], self.rb[lo:hi], out)
            return out
        _accumulate_bitset_intersections(self.bits, self.la[lo:hi], self.lb[lo:hi], out)
        # a row with itself: its unrepeated fingerprints are not in the vocabulary
        self_pair = np.flatnonzero(self.ra[lo:hi] == self.rb[lo:hi])
        out[self_pair] = self.sizes[self.ra[lo:hi][self_pair]]
        return out


# -- template families ----------------------------------------------------------------------


@kernel
def _top_byte_counts(keys):
    counts = np.empty(256, np.int64)
    counts[:] = 0
    for i in range(keys.shape[0]):
        counts[np.int64(keys[i] >> np.uint64(56))] += 1
    return counts


@kernel
def _scatter_by_top_byte(keys, out, next_slot):
    """Each key to out[next_slot[its top byte]++] (a counting sort's second pass)."""
    for i in range(keys.shape[0]):
        b = np.int64(keys[i] >> np.uint64(56))
        out[next_slot[b]] = keys[i]
        next_slot[b] += 1


@kernel
def _sort_by_fingerprint(keys):
    """keys (fingerprint << 16 | row, all of one top byte) stably sorted in place by their
    fingerprint's other 40 bits (an LSD radix sort, four passes of 10 bits); True when that
    sorted them wholly (the rows of each fingerprint came in increasing order, as a family's
    keys do), else the caller sorts them. On the manual pages' family (9.7M keys in 256 groups)
    0.14 s against numpy's 0.3-1.3 s (its quicksort is slow on so many repeats)."""
    n = keys.shape[0]
    other = np.empty(n, np.uint64)
    ends = np.empty(1 << 10, np.int64)
    src, dst = keys, other
    for p in range(4):
        shift = np.uint64(16 + 10 * p)
        ends[:] = 0
        for i in range(n):
            ends[np.int64((src[i] >> shift) & np.uint64(0x3FF))] += 1
        start = 0
        for d in range(1 << 10):
            count = ends[d]
            ends[d] = start
            start += count
        for i in range(n):
            d = np.int64((src[i] >> shift) & np.uint64(0x3FF))
            dst[ends[d]] = src[i]
            ends[d] += 1
        src, dst = dst, src
    for i in range(1, n):  # (an even number of passes: the result is in keys)
        if keys[i - 1] > keys[i]:
            return False
    return True


@kernel
def _accumulate_bitset_intersections(bits, la, lb, out):
    words = bits.shape[1]
    for p in range(la.shape[0]):
        x = bits[la[p]]
        y = bits[lb[p]]
        common = np.uint64(0)
        for w in range(words):
            common += popcount64(x[w] & y[w])
        out[p] += common


@kernel
def _count_rare_shared(keys, below, pair_start, partner, pair_of, out):
    """out[pair_of[q]] += the fingerprints held by 2..below-1 texts that rows x and partner[q]
    both hold, for each row x and each q in pair_start[x]:pair_start[x + 1] (its pairs with a
    row after it or itself; keys: sorted fingerprint << 16 | row; a row with itself: none).
    Row by row: the texts that share such a fingerprint with row x are counted into one
    counter per text (which stays in the cache), then read by each of x's pairs."""
    n_keys = keys.shape[0]
    rows = pair_start.shape[0] - 1
    # For each row x (CSR: starts), a (first, end) per rare fingerprint it holds: keys[first:end]
    # are the rows after x that hold it too.
    starts = np.empty(rows + 1, np.int64)
    starts[:] = 0
    i = np.int64(0)
    while i < n_keys:
        j = _run_end(keys, i)
        if 2 <= j - i < below:
            for t in range(i, j - 1):
                starts[np.int64(keys[t] & np.uint64(0xFFFF)) + 1] += 1
        i = j
    slot = np.empty(rows, np.int64)
    for r in range(rows):
        starts[r + 1] += starts[r]
        slot[r] = starts[r]
    first = np.empty(starts[rows], np.int64)
    end = np.empty(starts[rows], np.int64)
    i = np.int64(0)
    while i < n_keys:
        j = _run_end(keys, i)
        if 2 <= j - i < below:
            for t in range(i, j - 1):
                x = np.int64(keys[t] & np.uint64(0xFFFF))
                first[slot[x]] = t + 1
                end[slot[x]] = j
                slot[x] += 1
        i = j
    counter = slot  # (reused: one counter per row)
    for r in range(rows):
        counter[r] = 0
    for x in range(rows):
        if starts[x] == starts[x + 1] or pair_start[x] == pair_start[x + 1]:
            continue
        for m in range(starts[x], starts[x + 1]):
            for t in range(first[m], end[m]):
                counter[np.int64(keys[t] & np.uint64(0xFFFF))] += 1
        for q in range(pair_start[x], pair_start[x + 1]):
            out[pair_of[q]] += counter[partner[q]]
        for m in range(starts[x], starts[x + 1]):
            for t in range(first[m], end[m]):
                counter[np.int64(keys[t] & np.uint64(0xFFFF))] = 0


# A fingerprint held by fewer than this many of a family's texts can be counted pair by pair
# (_count_rare_shared) instead of as a bit of every text: candidates (powers of two; 2 is
# "every shared fingerprint a bit"). One pair counted that way costs about as much as
# RARE_PAIR_COST 64-bit words of bitsets; Family.intersections picks the cheapest.
RARE_BELOW = tuple(1 << e for e in range(1, 17))
RARE_PAIR_COST = 16
RARE_MIN_KEYS = 1 << 20  # a family with fewer fingerprints (of all its texts) keeps every shared one as bits


# A slice of the family's bitsets takes at most this much memory; a bigger vocabulary is
# compared in several slices, each adding its part of every intersection.
FAMILY_SLICE_BYTES = 32 << 20
FAMILY_MAX_ROWS = _ROW_MASK + 1
_FAMILY_CHUNK_BYTES = 1 << 21


class Family:
    """The shingle sets of a template family (up to 65,536 texts that the candidate pairs tie
    together), held as what their intersections need: every distinct fingerprint of every
    text, as (fingerprint << 16 | row), sorted within 256 groups by the fingerprint's top byte,
    and each text's set size.

    `intersections(ra, rb)` = kernels.intersections over shingle_rows(text, docs, k), as
    bitsets over the fingerprints that two or more texts hold, in slices of at most
    FAMILY_SLICE_BYTES, the pairs taken in cache-sized tiles of rows. Nothing per fingerprint
    and text is held twice, and no sorted row lists are built.
    """

    def __init__(self, text: TextBuffer, docs: np.ndarray, k: int, parallel_map=_serial_map):
        if len(docs) > FAMILY_MAX_ROWS:
            raise ValueError(f"a family has at most {FAMILY_MAX_ROWS} texts")
        self.parallel_map = parallel_map
        docs = np.ascontiguousarray(docs, np.int64)
        cum = np.cumsum(np.diff(text.offsets)[docs])
        cuts = np.unique(
            np.r_[
                0,
                np.searchsorted(cum, np.arange(_FAMILY_CHUNK_BYTES, cum[-1] if len(cum) else 0, _FAMILY_CHUNK_BYTES)),
                len(docs),
            ]
        )
        chunks = list(zip(cuts[:-1].tolist(), cuts[1:].tolist()))

        def tagged(lo, hi):
            row_starts = np.empty(hi - lo + 1, np.int64)
            keys = packed_fingerprints(text.data, text.offsets, docs[lo:hi], k, FINGERPRINT_BITS, row_starts, lo)
            return keys, np.diff(row_starts), _top_byte_counts(keys)

        parts = parallel_map(tagged, chunks)
        self.sizes = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
        counts = np.sum([p[2] for p in parts], axis=0) if parts else np.zeros(256, np.int64)
        self.bounds = np.r_[0, np.cumsum(counts)]
        self.keys = np.empty(int(self.bounds[-1]), np.uint64)
        # Each part's keys of a top byte go after those of the parts before it: the parts are
        # placed side by side, where one after another would put them (0.2 s of one thread for
        # the manual pages' family of 7.6k pages).
        first_slots = self.bounds[:-1] + np.cumsum([np.zeros(256, np.int64)] + [p[2] for p in parts[:-1]], axis=0)

        def place(i):
            _scatter_by_top_byte(parts[i][0], self.keys, first_slots[i].copy())
            parts[i] = None  # free each part once placed

        parallel_map(place, [(i,) for i in range(len(parts))])
        groups = [
            (g, lo, hi)
            for g, (lo, hi) in enumerate(zip(self.bounds[:-1].tolist(), self.bounds[1:].tolist()))
            if hi > lo
        ]

        thresholds = np.array(RARE_BELOW, np.int64)
        # (counting what each threshold would leave costs ~20 ms a family: only a big one can gain)
        self.rare_known = int(self.bounds[-1]) >= RARE_MIN_KEYS

        def sort_group(g, lo, hi):
            keys = self.keys[lo:hi]
            if not _sort_by_fingerprint(keys):
                keys.sort()
            if not self.rare_known:  # (only the first column, t = 2, is known: see _held_by)
                shared = _shared_fingerprints(keys)
                return g, np.full(len(thresholds), shared), np.zeros(len(thresholds), np.int64)
            held = np.sort(_holders(keys))
            at = np.searchsorted(held, thresholds)  # fingerprints held by fewer than each threshold
            pairs = np.r_[0, np.cumsum(held * (held - 1) // 2)]
            return g, len(held) - at, pairs[at]

        # Per group of the top byte and per threshold t of RARE_BELOW: the fingerprints held by
        # t texts or more (their bits), and the pairs of texts sharing one held by fewer.
        self.held_by = np.zeros((256, len(thresholds)), np.int64)
        self.rare_pairs = np.zeros((256, len(thresholds)), np.int64)
        for g, held_by, rare_pairs in parallel_map(sort_group, groups):
            self.held_by[g], self.rare_pairs[g] = held_by, rare_pairs
        self.shared = self.held_by[:, 0]  # fingerprints held by two texts or more, per group
        self.rows = len(docs)

    @property
    def words(self) -> int:
        """64-bit words per text over the whole shared vocabulary."""
        return max(1, (int(self.shared.sum()) + 63) // 64)

    def rare_below(self, pairs: int) -> int:
        """The threshold of RARE_BELOW that costs least for this many pairs: bits for the
        fingerprints held by at least that many texts, pair by pair for the others."""
        if not self.rare_known:
            return 2
        words = (self.held_by.sum(axis=0) + 63) // 64
        cost = pairs * words + RARE_PAIR_COST * self.rare_pairs.sum(axis=0)
        return RARE_BELOW[int(np.argmin(cost))]

    def intersections(self, ra: np.ndarray, rb: np.ndarray, progress=None, below: int | None = None) -> np.ndarray:
        """|A ∩ B| for each pair of rows (ra[p], rb[p]); progress(pairs done) after each piece.

        The fingerprints that many texts hold (a template's) are counted as bitsets; those
        that fewer than `below` texts hold, pair of texts by pair of texts (`below` None: the
        cheapest threshold, rare_below; 2: none)."""
        ra = np.ascontiguousarray(ra, np.int64)
        rb = np.ascontiguousarray(rb, np.int64)
        out = np.zeros(len(ra), np.int64)
        if not len(ra):
            return out
        below = self.rare_below(len(ra)) if below is None else below
        held_by = self._held_by(below)
        # groups of the top byte into slices whose bitsets fit FAMILY_SLICE_BYTES
        per_word = 64 * max(1, FAMILY_SLICE_BYTES // (8 * max(self.rows, 1)))
        slices, first, held = [], 0, 0
        for g in range(256):
            if held and held + held_by[g] > per_word:
                slices.append((first, g, held))
                first, held = g, 0
            held += int(held_by[g])
        slices.append((first, 256, held))
        widest = max(1, max((h + 63) // 64 for _, _, h in slices))
        slices = [(g0, g1, held) for g0, g1, held in slices if held]

        def bits_of(g0, g1, held):
            bits = np.zeros((self.rows, (held + 63) // 64), np.uint64)
            _fill_shared_bits(self.keys[self.bounds[g0] : self.bounds[g1]], bits, below)
            return bits

        inter = np.zeros(len(ra), np.int64)
        pieces = max(1, min(len(ra) // 50_000, 4 * 64))
        cuts = np.linspace(0, len(ra), pieces + 1).astype(np.int64).tolist()
        # The next slice's bitsets are filled (one thread) while the threads compare the pairs
        # over this one's, and the first's while the pairs are taken in tile order; the rare
        # fingerprints are counted on a thread of their own meanwhile. (The tile order comes
        # first: a kernel first called beside another is recorded in kernel_list.py in whichever
        # order they happen to start.)
        order = _tile_order(ra, rb, self.rows, widest)
        with (
            ThreadPoolExecutor(1, thread_name_prefix="dedup-family-rare") as rare_side,
            ThreadPoolExecutor(1, thread_name_prefix="dedup-family-bits") as side,
        ):
            counted = rare_side.submit(self._rare_counts, ra, rb, below) if below > 2 else None
            filled = side.submit(bits_of, *slices[0]) if slices else None
            la, lb = ra[order], rb[order]
            for s in range(len(slices)):
                bits = filled.result()
                filled = side.submit(bits_of, *slices[s + 1]) if s + 1 < len(slices) else None

                def piece(lo, hi, bits=bits):
                    _accumulate_bitset_intersections(bits, la[lo:hi], lb[lo:hi], inter[lo:hi])
                    return hi - lo

                done = 0
                for n in self.parallel_map(piece, list(zip(cuts[:-1], cuts[1:]))):
                    done += n
                    if progress is not None:
                        progress((s * len(ra) + done) / len(slices))
                del bits
            if counted is not None:
                out += counted.result()  # (in the pairs' given order)
                if not slices and progress is not None:
                    progress(len(ra))
        # a row with itself: its unshared fingerprints are in no bitset (and none is counted as rare)
        self_pair = np.flatnonzero(la == lb)
        inter[self_pair] = self.sizes[la[self_pair]]
        out[order] += inter
        return out

    def _held_by(self, below: int) -> np.ndarray:
        """Per group: the fingerprints held by `below` texts or more (counted here for a
        threshold __init__ did not count: forced by tests, or any but 2 in a small family)."""
        if below == 2 or (self.rare_known and below in RARE_BELOW):
            return self.held_by[:, RARE_BELOW.index(below)]
        return np.array(
            [
                int((_holders(self.keys[lo:hi]) >= below).sum())
                for lo, hi in zip(self.bounds[:-1].tolist(), self.bounds[1:].tolist())
            ],
            np.int64,
        )

    def _rare_counts(self, ra: np.ndarray, rb: np.ndarray, below: int) -> np.ndarray:
        """Per pair, how many fingerprints held by 2..below-1 texts the two rows share (a row
        with itself: none)."""
        lo, hi = (ra, rb) if (ra <= rb).all() else (np.minimum(ra, rb), np.maximum(ra, rb))
        if (lo[1:] >= lo[:-1]).all():  # (a family's pairs come in this order)
            pair_of = np.arange(len(lo))
        else:
            pair_of = np.argsort(lo, kind="stable")
            lo, hi = lo[pair_of], hi[pair_of]
        pair_start = np.searchsorted(lo, np.arange(self.rows + 1))
        counts = np.zeros(len(ra), np.int64)
        _count_rare_shared(self.keys, below, pair_start, np.ascontiguousarray(hi), pair_of, counts)
        return counts


def _holders(keys: np.ndarray) -> np.ndarray:
    """Per fingerprint of keys (sorted fingerprint << 16 | row), how many texts hold it."""
    fp = keys >> np.uint64(16)
    starts = np.flatnonzero(np.r_[True, fp[1:] != fp[:-1]])
    return np.diff(np.r_[starts, len(keys)])


def choose_method(values, offsets, ra, rb) -> str:
    """'bitset' or 'merge': what intersections() would use for these pairs."""
    return Intersector(values, offsets, ra, rb).method


def intersections(
    values: np.ndarray, offsets: np.ndarray, ra: np.ndarray, rb: np.ndarray, method: str | None = None
) -> np.ndarray:
    """|A ∩ B| for each pair of rows (ra[p], rb[p]) of sorted, repeat-free CSR rows (see
    Intersector)."""
    inter = Intersector(values, offsets, ra, rb, method)
    if inter.order is None:
        return inter()
    out = np.empty(len(inter.order), np.int64)
    out[inter.order] = inter()
    return out
