"""The scan's memory model, for the plan: its peak resident memory (`scan CORPUS`, load
included) phase by phase, under a cap, from named costs per document, per distinct text, per
candidate and per pair; each mirrors a decision the scan makes itself (candidates.py, passes.py,
ahead.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .memory import what_waits_on_disk

# The memory model: the scan's peak resident memory (`scan CORPUS`, load included) is the
# largest of its phases' (memory_phases), each a sum of named costs per document, per distinct
# text, per candidate and per pair. What the band phase holds a text is fixed whatever the cap
# (the cap moves candidates and pairs to disk, not signatures); a change to what it holds (the
# signatures, sketches, tags, nibbles) is a change to the constants below.
# The process whatever the corpus: the interpreter, numpy, SQLite, the loaded kernels.
PROCESS_BYTES = 300 << 20
# From the exact groups on, per document: exact_of, lengths, the representatives and their
# exact hash prefixes (local.py).
EXACT_BYTES_PER_DOCUMENT = 32
# The band phase, per distinct text (candidates.Signed, _BandCandidates): its signature (uint32
# a permutation), packed nibbles (4 bits a permutation), band tags (uint16 a band), its index,
# and its normalised text's offset (the texts themselves: a byte a byte, unless they wait on disk).
SIGNATURE_BYTES_PER_PERM = 4
NIBBLE_BYTES_PER_PERM = 0.5
TAG_BYTES_PER_BAND = 2
INDEX_BYTES_PER_TEXT = 8
TEXT_OFFSET_BYTES = 8
# Verification, per distinct text beside its text (the merged candidates' index into it).
VERIFY_BYTES_PER_TEXT = 16
# A verified pair held in memory until it is written (one pass, nothing spilled: sorted copies,
# the spanning forest); in passes, an edge of the spanning forest kept across them.
PAIR_BYTES_IN_MEMORY = 80
FOREST_BYTES_PER_EDGE = 32
# Signing ahead (ahead.py): the load holds every document's signature and normalised text; the
# scan then copies its distinct texts' out of them, job by job, the jobs' memory freed as it
# goes, so at most this share of the copy is held beside them.
AHEAD_TAKE_OVERLAP = 0.25
# ... and what that leaves in the heap through the bands, a distinct text (the signing thread's
# partly used pages): measured 116 B at 2.5M short documents, 95 B at 4.2M (bands 2.39 and 3.75
# GB, against 2.13 and 3.39 without it).
AHEAD_LEFT_PER_TEXT = 100
# The split of a bucket over --max-bucket by sub-bands (kernels.bands.split_bucket_survivors),
# a member of the bucket, while a band thread splits it: its packed row (half a byte a
# permutation) and its groups in the earlier bands (4 B a band), kept throughout; while the
# groups are made, 40 B of hash table and the earlier bands' columns copied (4 B a band a row,
# or read in place); then, sub-band by sub-band, the sort of one (its key 8 B, the sort's index
# 8 B and merge buffer 4 B) beside the sub-bands' columns copied (4 B a row) and 16 bits of
# their keys. With all of it, 810 B a member in the last of 39 bands of 3 rows at 128
# permutations (41 sub-bands; measured: 164 MB for 200,000 members). Under its budget
# (split_budget) the split copies the sub-bands' columns a slice at a time, then reads the rest
# in place (split_layout): at least SPLIT_SORT_BYTES and one sub-band's (34 B a member)
# whatever the budget.
SPLIT_SORT_BYTES = 20
SPLIT_COLUMN_BYTES = 4
SPLIT_TAG_BYTES = 2
SPLIT_GROUP_BYTES = 4
SPLIT_GROUP_TABLE_BYTES = 40
# The budget: a share of the cap, within these bounds (a band thread splits one bucket at a time:
# the scan holds it once a thread). 128 MB holds a bucket of 165,000 members whole (mixed10m's
# largest, 64,332: 52 MB); 1M members sharing a key take slices of 8 sub-bands (134 B a member).
SPLIT_BUDGET_SHARE = 64
SPLIT_BUDGET_LEAST = 8 << 20
SPLIT_BUDGET_MOST = 128 << 20


# Signing ahead (ahead.SignedAhead) holds every text's signature and normalised text from the
# load on, outside the scan's memory cap: a corpus whose files times this would not fit the cap
# is not signed ahead (its texts and signatures: ~1 B a byte + 512 B a text, ~2.2x a corpus of
# 450 B texts).
AHEAD_BYTES_PER_CORPUS_BYTE = 3


def mapped_budget(cap: int, held: int, n: int) -> int:
    """The pages of spilled signatures the bands may keep mapped (passes.MappedSpill): half of
    what the cap leaves beside what they hold anyway (the rest for the candidates they hold and
    count, 8 B a document, and for what the kernels touch between two checks), at least
    MIN_MAPPED."""
    return max((cap - held) // 2 - 8 * n, MIN_MAPPED)


MIN_MAPPED = 128 << 20


def split_budget(cap: int) -> int:
    """The bytes a band thread's split of a bucket may hold (kernels.bands.split_bucket_survivors)
    under `cap` (0: none)."""
    if cap <= 0:
        return SPLIT_BUDGET_MOST
    return min(max(cap // SPLIT_BUDGET_SHARE, SPLIT_BUDGET_LEAST), SPLIT_BUDGET_MOST)


def split_member_bytes(rows, words, band, slice_subs, gather, gather_groups):
    """The most a split holds a member (the comment above) with `slice_subs` sub-bands of `rows`
    rows copied at a time, its packed row of `words` words and groups in `band` earlier bands
    copied or not (gather), and those bands' columns copied to make the groups or not."""
    sorting = SPLIT_SORT_BYTES + (SPLIT_COLUMN_BYTES * rows + SPLIT_TAG_BYTES) * slice_subs
    if not gather:
        return sorting
    grouping = SPLIT_GROUP_TABLE_BYTES + (SPLIT_COLUMN_BYTES * band * rows if gather_groups else 0)
    return 8 * words + SPLIT_GROUP_BYTES * band + max(grouping, sorting)


def split_layout(m, subs, rows, words, band, budget):
    """How a split of m members (band `band`, `subs` sub-bands of `rows` rows, packed rows of
    `words` words) keeps within `budget` bytes: (sub-bands whose columns are copied at a time,
    whether the packed rows and the earlier bands' groups are copied or read in place, whether
    the groups are made from copied columns, the most members of a sub-bucket whose packed rows
    are copied side by side). Every member's share first, then a slice of the sub-bands; under
    one sub-band a member (34 B at 3 rows), one slice of one, over the budget. The packed rows
    and groups are copied when the slices are then at most twice as many as without them
    (each slice is a pass over the members' signatures)."""
    room = budget // max(m, 1)
    per_sub = SPLIT_COLUMN_BYTES * rows + SPLIT_TAG_BYTES
    layout = (subs, True, True)
    if split_member_bytes(rows, words, band, *layout) > room:
        in_place = max(1, min(subs, (room - SPLIT_SORT_BYTES) // per_sub))
        layout = (in_place, False, False)
        kept = split_member_bytes(rows, words, band, 0, True, False) - SPLIT_SORT_BYTES
        copied = min(subs, (room - kept - SPLIT_SORT_BYTES) // per_sub)
        fits = copied >= 1 and split_member_bytes(rows, words, band, copied, True, False) <= room
        if fits and -(-subs // copied) <= 2 * -(-subs // in_place):
            layout = (copied, True, False)
    used = split_member_bytes(rows, words, band, *layout)
    return max(layout[0], 1), layout[1], layout[2], max(budget - m * used, 0) // (8 * max(words, 1))


def split_layout_of(m: int, packed: np.ndarray, sub_positions: np.ndarray, band: int, budget: int) -> np.ndarray:
    """split_bucket_survivors' `layout` for a bucket of m members of `band` within `budget`
    bytes (split_layout: worked out before the call, not in the kernel, whose cached code
    would not follow a change to this module)."""
    subs, rows = sub_positions.shape[1], sub_positions.shape[2]
    return np.array(split_layout(m, subs, rows, packed.shape[1], band, budget), np.int64)


def split_bytes(m: float, num_perm: int, rows: int, bands: int, budget: int) -> float:
    """The most a band thread holds to split a bucket of m members under `budget` (split_layout),
    in the last band (the most earlier bands' groups)."""
    subs = (num_perm - rows) // rows
    if not m or not subs:
        return 0.0
    whole = split_member_bytes(rows, -(-num_perm // 16), bands - 1, subs, True, True)
    return max(min(float(budget), m * whole), m * split_member_bytes(rows, 0, 0, 1, False, False))


@dataclass
class MemoryModel:
    """The scan's resident memory in each phase (bytes), by the model above, and how it runs."""

    phases: dict
    passes: int
    spilling: bool  # candidates go to the spill folder (verified in passes)
    texts_wait: bool  # the texts wait on disk while the candidates are found
    signed_ahead: bool  # the load signs the texts as it goes (ahead.py)
    candidates: int  # candidates that reach verification
    signatures_wait: bool = False  # the signatures (and band keys) wait on disk while the bands run

    @property
    def peak(self) -> int:
        return int(max(self.phases.values()))

    @property
    def peak_phase(self) -> str:
        return max(self.phases, key=lambda name: self.phases[name])

    @property
    def band_phase(self) -> int:
        """What the band phase holds whatever the cap (the cap cannot lower it)."""
        return int(self.phases.get("bands", 0))


def memory_model(
    documents: int,
    distinct: int,
    text_bytes: float,
    sketched: float,
    candidates: float,
    pairs: float,
    cap: int,
    num_perm: int,
    bands: int,
    corpus_bytes: int = 0,
    workers: int = 0,
    warm: bool = True,
    lean: bool = False,
    largest_bucket: float = 0.0,
) -> MemoryModel:
    """The scan's memory phase by phase: `text_bytes` (normalised UTF-8) and `sketched` (texts
    of at least SKETCH_MIN_BYTES) of the `distinct` texts, `candidates` that reach verification,
    `pairs` found, under `cap` (`lean`: no band keys kept), the largest bucket split by sub-bands
    `largest_bucket` members (split_bytes; 0: none). Mirrors the scan's own decisions:
    whether the load signs ahead (ahead.SignedAhead.for_corpus), whether the texts wait on disk
    and whether the signatures do too (candidates._what_spills), the candidates held and per pass
    (_candidate_limits)."""
    from .passes import (
        BAND_THREAD_BYTES_PER_TEXT,
        BYTES_PER_CANDIDATE,
        MAX_PASS_CANDIDATES,
        MIN_PASS_CANDIDATES,
        SPILL_BLOCK,
        VERIFY_JOB_BYTES,
    )
    from .sketch import SKETCH_BINS

    workers = workers or os.cpu_count() or 1
    n, candidates, pairs = distinct, max(candidates, 0.0), max(pairs, 0.0)
    signature = SIGNATURE_BYTES_PER_PERM * num_perm
    base = PROCESS_BYTES + EXACT_BYTES_PER_DOCUMENT * documents
    threads = workers * BAND_THREAD_BYTES_PER_TEXT * n
    signed = (
        n * (signature + NIBBLE_BYTES_PER_PERM * num_perm + TAG_BYTES_PER_BAND * bands + INDEX_BYTES_PER_TEXT)
        + sketched * SKETCH_BINS
    )
    texts = text_bytes + TEXT_OFFSET_BYTES * n
    texts_wait, signatures_wait = what_waits_on_disk(cap, base + threads, signed, texts)
    fixed = base + signed + threads + (0 if texts_wait else texts)
    freed_after_bands = n * signature + sketched * SKETCH_BINS
    # (candidates._what_spills) when the signatures and sketches do not fit beside the rest
    # either, they go to the spill folder as they are made, no sketches are made, and the bands
    # keep at most a budget of the signatures' pages mapped (mapped_budget)
    held = fixed - n * signature - sketched * SKETCH_BINS
    if signatures_wait:
        mapped = min(mapped_budget(cap, int(held), n), n * signature)
        fixed, freed_after_bands = held + mapped, mapped
    verify_work = workers * 2 * VERIFY_JOB_BYTES
    before_verify = fixed - threads - freed_after_bands + (texts if texts_wait else 0)
    pass_limit = (cap - before_verify - VERIFY_BYTES_PER_TEXT * n - verify_work) // BYTES_PER_CANDIDATE
    pass_limit = min(max(pass_limit, MIN_PASS_CANDIDATES), MAX_PASS_CANDIDATES)
    # (the candidates held leave room for a split in each band thread: candidates._candidate_limits)
    budget = split_budget(cap)
    held_room = (cap - fixed - workers * budget) // 8
    hold_limit = min(max(min(pass_limit, held_room), MIN_PASS_CANDIDATES), MAX_PASS_CANDIDATES)
    spilling = candidates > hold_limit
    passes = max(1, -int(-candidates // pass_limit)) if spilling else 1
    kept = 0  # (the short band keys kept for incremental scans wait in a file)
    phases = {
        # (per text a count, or the candidates; each band thread's split of the largest bucket)
        "bands": fixed
        + 8 * (n if spilling else candidates)
        + workers * split_bytes(largest_bucket, num_perm, num_perm // max(bands, 1), bands, budget),
        "verify": base
        + kept
        + texts
        + VERIFY_BYTES_PER_TEXT * n
        + BYTES_PER_CANDIDATE * min(candidates, pass_limit)
        + verify_work
        + (FOREST_BYTES_PER_EDGE * min(pairs, n) if spilling else 0),
        "write": base + kept + (3 * 8 * SPILL_BLOCK if spilling else PAIR_BYTES_IN_MEMORY * pairs),
    }
    signed_ahead = warm and 0 < corpus_bytes * AHEAD_BYTES_PER_CORPUS_BYTE <= cap
    if signed_ahead:  # every document's signature and text from the load on, then the scan's copy
        phases["bands"] += AHEAD_LEFT_PER_TEXT * n
        every_text = text_bytes * documents / max(n, 1)
        phases["load"] = (
            base
            + documents * signature
            + sketched * documents / max(n, 1) * SKETCH_BINS
            + every_text
            + AHEAD_TAKE_OVERLAP * (n * signature + text_bytes)
        )
    phases = {name: int(size) for name, size in phases.items()}
    return MemoryModel(
        phases, int(passes), bool(spilling), bool(texts_wait), bool(signed_ahead), int(candidates), signatures_wait
    )
