"""The keys an LSH scan keeps for the incremental scans after it, as stored (scan_keys,
scan_band_keys): their encodings and their writing, apart from the Project so the schema's
migrations can write them too."""

from __future__ import annotations

import json
import zlib

import numpy as np

from .checksums import arrays_checksum
from .derived import SCAN_KEYS_CHECKSUMS, SCAN_KEYS_META


def write_scan_keys(conn, chunk: int, ords: np.ndarray, hashes: np.ndarray, band_keys, meta: dict) -> None:
    """Store one chunk of scan keys (inside the caller's transaction); chunk 0 replaces every
    stored chunk (a full scan). ords: the chunk's representatives (ascending); hashes: their
    hash prefixes; band_keys: per band, the rows' short keys (short_band_keys, in row
    order; an iterable, taken one band at a time). `meta` (JSON) says which scan and documents
    they are of. Their checksums go with them (SCAN_KEYS_CHECKSUMS)."""
    if chunk == 0:
        conn.execute("DELETE FROM scan_keys")
        conn.execute("DELETE FROM scan_band_keys")
        conn.execute("DELETE FROM meta WHERE key = ?", (SCAN_KEYS_CHECKSUMS,))
    ords, hashes = ords.astype("<i8", copy=False), hashes.astype("<u8", copy=False)
    conn.execute(
        "INSERT INTO scan_keys(chunk, ords, hashes) VALUES (?, ?, ?)",
        (chunk, packed_ords(ords), hashes.tobytes()),
    )
    band_sums: list[str] = []

    def rows():
        for band, keys in enumerate(band_keys):
            keys = np.ascontiguousarray(keys, "<u4")
            if len(keys) != len(ords) or (len(keys) and int(keys.max()) >> SHORT_KEY_BITS):
                raise ValueError(f"band {band}: {len(keys)} short keys for {len(ords)} documents, or not short")
            band_sums.append(arrays_checksum(keys))
            yield chunk, band, packed_short_keys(keys)

    conn.executemany("INSERT INTO scan_band_keys(chunk, band, keys) VALUES (?, ?, ?)", rows())
    sums = scan_key_sums(conn)
    sums["chunks"][str(chunk)] = {"keys": chunk_checksum(ords, hashes), "bands": band_sums}
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (SCAN_KEYS_CHECKSUMS, json.dumps(sums)))
    set_scan_keys_meta(conn, meta)


def short_band_keys(keys: np.ndarray) -> np.ndarray:
    """The high SHORT_KEY_BITS bits of 64-bit band keys (as uint32): what scan_band_keys keeps
    (3 bytes a key). A scan's bucket is the keys' high 64 - index_bits bits (index_bits <= 40
    below 2^40 documents), so keys in one bucket have the same short key; keys with the same
    short key may still differ below it."""
    return (np.asarray(keys, np.uint64) >> np.uint64(64 - SHORT_KEY_BITS)).astype(np.uint32)


SHORT_KEY_BITS = 24
# 24 bits, not 32: 39 B less per distinct text (94 MB at 2.5M documents), for old rows x new
# rows / 2^24 old documents per band an incremental scan signs again because their short key
# matches a new one's while their whole keys differ (~1,400 a band adding 10k to 2.4M).


def packed_short_keys(keys: np.ndarray) -> bytes:
    """uint32 keys below 2^24 as 3 little-endian bytes each."""
    return np.ascontiguousarray(keys, "<u4").view(np.uint8).reshape(-1, 4)[:, :3].tobytes()


def unpacked_short_keys(data: bytes) -> np.ndarray:
    three = np.frombuffer(data, np.uint8).reshape(-1, 3)
    four = np.zeros((len(three), 4), np.uint8)
    four[:, :3] = three
    return four.view("<u4").ravel()


def packed_ords(ords: np.ndarray) -> bytes:
    """Ascending ords as stored: zlib of their differences (int64, the first from 0). Nearly every
    difference is 1 (most documents are first copies): a few bytes per thousand documents."""
    return zlib.compress(np.diff(ords, prepend=np.int64(0)).astype("<i8").tobytes(), 1)


def unpacked_ords(data) -> np.ndarray | None:
    try:
        raw = zlib.decompress(data)
    except (zlib.error, TypeError):
        return None
    if len(raw) % 8:
        return None
    return np.cumsum(np.frombuffer(raw, "<i8"), dtype=np.int64)


def chunk_checksum(ords: np.ndarray, hashes: np.ndarray) -> str:
    return arrays_checksum(ords.astype("<i8", copy=False), hashes.astype("<u8", copy=False))


def scan_key_sums(conn) -> dict:
    """The stored SCAN_KEYS_CHECKSUMS ({"meta": ..., "chunks": {chunk: {"keys", "bands"}}}),
    or an empty one."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (SCAN_KEYS_CHECKSUMS,)).fetchone()
    try:
        sums = json.loads(row[0]) if row else {}
    except (TypeError, ValueError):
        sums = {}
    if not isinstance(sums, dict) or not isinstance(sums.get("chunks"), dict):
        sums = {"chunks": {}}
    return sums


def set_scan_keys_meta(conn, meta: dict) -> None:
    """Which scan and documents the stored scan keys are of (JSON in meta), and its checksum."""
    raw = json.dumps(meta)
    sums = scan_key_sums(conn)
    sums["meta"] = arrays_checksum(raw.encode())
    conn.executemany(
        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
        [(SCAN_KEYS_META, raw), (SCAN_KEYS_CHECKSUMS, json.dumps(sums))],
    )


def rows_with_keys(keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Rows (ascending) of `keys` (short keys, below 2^SHORT_KEY_BITS) whose key is in `wanted`:
    a look-up each in a bitmap of the wanted keys (where a binary search took ~20 steps), one
    bit a key (2 MB, mostly in cache: a byte a key, 16 MB, took 2.5 times as long)."""
    if not len(wanted) or not len(keys):
        return np.empty(0, np.int64)
    wanted = np.asarray(wanted, np.uint32)
    bitmap = np.zeros(1 << (SHORT_KEY_BITS - 3), np.uint8)
    np.bitwise_or.at(bitmap, wanted >> 3, np.left_shift(1, wanted & 7).astype(np.uint8))
    keys = np.asarray(keys, np.uint32)
    return np.flatnonzero((bitmap[keys >> 3] >> (keys & 7).astype(np.uint8)) & 1)
