"""Many texts at once, for the plan's pass over a corpus: each normalised text's 64-bit hash
(equal for exact copies, as the scan groups them), the ASCII ones normalised by numpy as one
buffer."""

from __future__ import annotations

import itertools

import numpy as np


def text_hashes(texts: list[str]) -> np.ndarray:
    """A 64-bit hash of each normalised text (equal for exact copies, as the scan groups them):
    the ASCII texts normalised all at once by numpy (4x faster than the compiled pass, which
    takes the texts one by one, and with no kernels to load), the others by Python; then
    hashed all at once."""
    ascii = np.fromiter(map(str.isascii, texts), np.bool_, len(texts))
    hashes = np.empty(len(texts), np.uint64)
    if ascii.any():
        chosen = texts if ascii.all() else list(itertools.compress(texts, ascii))
        normalized = ascii_normalized(chosen)
        if normalized is None:  # (a text with a 0 byte: by Python)
            ascii[:] = False
        else:
            hashes[ascii] = buffer_hashes(*normalized)
    if not ascii.all():
        from .normalize import normalize

        encoded = [normalize(t).encode("utf-8", "surrogatepass") for t in itertools.compress(texts, ~ascii)]
        offsets = np.zeros(len(encoded) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
        hashes[~ascii] = buffer_hashes(np.frombuffer(b"".join(encoded), np.uint8), offsets)
    return hashes


# ASCII whitespace (str.isspace) to a space: the ASCII texts are normalised as one buffer
_SPACE_BYTES = bytes(c for c in range(128) if chr(c).isspace())
_ASCII_SPACES = bytes.maketrans(_SPACE_BYTES, b" " * len(_SPACE_BYTES))


def ascii_normalized(texts: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """text.normalize of ASCII texts, all at once, as (bytes, offsets): each text ends with a
    0 byte (None when a text holds one): lower case, every run of whitespace one space, none at
    either end."""
    joined = ("\0".join(texts) + "\0").encode("ascii")
    if joined.count(0) != len(texts):
        return None
    data = np.frombuffer(joined.lower().translate(_ASCII_SPACES), np.uint8)
    space = data == 32
    keep = ~space
    keep[0] = True
    keep[1:] |= ~space[:-1]  # (the first space of a run)
    data = data[keep]
    space = data == 32
    ends = data == 0
    edge = np.ones(len(data), np.bool_)  # a space after a text's start or before its end goes
    edge[1:] = ends[:-1]
    edge[:-1] |= ends[1:]
    data = data[~(space & edge)]
    offsets = np.zeros(len(texts) + 1, np.int64)
    offsets[1:] = np.flatnonzero(data == 0) + 1
    return data, offsets


# The texts' hash: a polynomial hash over their bytes (each byte first mapped to a random 64-bit
# word) modulo 2^64, computed for a whole batch by numpy, then mixed (splitmix64's finaliser) so
# that its low 32 bits, which draw the sample, are uniform. Fixed: the same sample every run.
_BYTE_WORDS = np.frombuffer(np.random.default_rng(41).bytes(256 * 8), np.uint64)
_BASE = 0x9E3779B97F4A7C15  # odd: invertible modulo 2^64
_powers: list[np.ndarray] = [np.ones(1, np.uint64), np.ones(1, np.uint64)]  # base^i, base^-i


def powers_to(n: int) -> tuple[np.ndarray, np.ndarray]:
    if len(_powers[0]) < n:
        size = max(n, 2 * len(_powers[0]), 1 << 16)
        for i, base in enumerate((_BASE, pow(_BASE, -1, 1 << 64))):
            steps = np.full(size, base, np.uint64)
            steps[0] = 1
            _powers[i] = np.cumprod(steps, dtype=np.uint64)  # (wraps modulo 2^64)
    return _powers[0], _powers[1]


def buffer_hashes(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each of the texts data[offsets[i]:offsets[i + 1]]."""
    count = len(offsets) - 1
    if count <= 0:
        return np.empty(0, np.uint64)
    lengths = np.diff(offsets)
    hashes = np.zeros(count, np.uint64)
    if len(data):
        powers, inverse = powers_to(len(data) + 1)
        terms = _BYTE_WORDS[data] * powers[: len(data)]
        starts = offsets[:-1]
        sums = np.add.reduceat(terms, np.minimum(starts, len(data) - 1))
        sums[lengths == 0] = 0
        hashes = sums * inverse[starts]  # (each text's sum as if it started at 0)
    hashes ^= lengths.astype(np.uint64) * np.uint64(0xD6E8FEB86659FD93)
    hashes ^= hashes >> np.uint64(30)
    hashes *= np.uint64(0xBF58476D1CE4E5B9)
    hashes ^= hashes >> np.uint64(27)
    hashes *= np.uint64(0x94D049BB133111EB)
    hashes ^= hashes >> np.uint64(31)
    return hashes
