"""Seeded MinHash signatures over batches of shingle hashes (uint32 arithmetic)."""

from __future__ import annotations

import numpy as np

# Columns per block: large enough to amortise numpy's per-call cost, small enough that the
# num_perm x block matrix stays in cache (measured best at 16k on this machine).
_BLOCK = 16384


class MinHasher:
    """num_perm permutations h_j(x) = (a_j * x + b_j) mod 2^32 of each shingle hash's high word.

    The parameters derive only from the seed, so signatures are identical on every run and
    machine.
    """

    def __init__(self, num_perm: int = 128, seed: int = 1):
        if num_perm < 1:
            raise ValueError("num_perm must be at least 1")
        self.num_perm = num_perm
        self.seed = seed
        rng = np.random.Generator(np.random.PCG64(seed))
        self._a = (rng.integers(0, 2**32, num_perm, dtype=np.uint64) | np.uint64(1)).astype(np.uint32)[:, None]
        self._b = rng.integers(0, 2**32, num_perm, dtype=np.uint64).astype(np.uint32)[:, None]

    @property
    def multipliers(self) -> np.ndarray:
        """a_j of each permutation, contiguous uint32 (for the compiled kernels)."""
        return np.ascontiguousarray(self._a[:, 0])

    @property
    def increments(self) -> np.ndarray:
        """b_j of each permutation, contiguous uint32."""
        return np.ascontiguousarray(self._b[:, 0])

    def signatures(self, hashes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """(n_docs, num_perm) uint32 minima; every document must have at least one hash."""
        n_docs = len(offsets) - 1
        sig = np.empty((self.num_perm, n_docs), dtype=np.uint32)
        if n_docs == 0:
            return sig.T.copy()
        x = (hashes >> np.uint64(32)).astype(np.uint32)
        total = len(x)
        doc_starts = offsets[:-1]
        buf = np.empty((self.num_perm, min(_BLOCK, total)), dtype=np.uint32)
        first_doc = 0  # first document overlapping the current block
        for start in range(0, total, _BLOCK):
            stop = min(start + _BLOCK, total)
            block = buf[:, : stop - start]
            np.multiply(self._a, x[start:stop][None, :], out=block)
            np.add(block, self._b, out=block)
            last_doc = int(np.searchsorted(doc_starts, stop, side="left"))  # exclusive
            seg_starts = doc_starts[first_doc:last_doc] - start
            continued = seg_starts[0] < 0  # first doc began in an earlier block
            seg_starts = np.maximum(seg_starts, 0)
            mins = np.minimum.reduceat(block, seg_starts, axis=1)
            if continued:
                np.minimum(sig[:, first_doc], mins[:, 0], out=sig[:, first_doc])
                sig[:, first_doc + 1 : last_doc] = mins[:, 1:]
            else:
                sig[:, first_doc:last_doc] = mins
            # The last doc may continue into the next block.
            first_doc = last_doc - 1 if offsets[last_doc] > stop else last_doc
        return np.ascontiguousarray(sig.T)
