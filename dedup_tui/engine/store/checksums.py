"""A checksum per stored document (documents.checksum), checked by every export."""

from __future__ import annotations

import hashlib
import sqlite3
import struct
import zlib

import numpy as np

# -- a checksum per stored document --------------------------------------------------------
#
# Written with the row (load, import, and the migration from schema 3 for older projects) and
# checked by every export before it writes the document: a flipped bit in a stored record,
# text, id, line, source or position (which PRAGMA integrity_check does not see) is reported,
# not written.

_CHECKSUM_HEAD = struct.Struct("<12q")  # (type, length or value) of each of the six fields
_INT64 = 1 << 63


def _typed(value) -> tuple[int, int, bytes]:
    """(type tag, length or integer value, bytes) of one field, for document_checksum."""
    if type(value) is str:
        data = value.encode("utf-8", "surrogatepass")
        return 2, len(data), data
    if value is None:
        return 0, 0, b""
    if type(value) is int and -_INT64 <= value < _INT64:
        return 1, value, b""
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return 3, len(data), data
    data = (str(value) if isinstance(value, int) else repr(value)).encode("utf-8", "surrogatepass")
    return 4, len(data), data


def document_checksum(ord_, doc_id, source_id, line, text, record) -> str:
    """BLAKE2b-128 (hex) of a stored document's fields with their types (a TEXT column read
    back as a BLOB is a change too)."""
    if (
        type(doc_id) is str
        and type(text) is str
        and type(record) is bytes
        and type(source_id) is int
        and type(line) is int
        and type(ord_) is int
        and -_INT64 <= line < _INT64
        and -_INT64 <= source_id < _INT64
        and -_INT64 <= ord_ < _INT64
    ):
        # What load and import store, without the generic path's calls (a load of 100k documents hashes each).
        d, t = doc_id.encode("utf-8", "surrogatepass"), text.encode("utf-8", "surrogatepass")
        head = _CHECKSUM_HEAD.pack(1, ord_, 2, len(d), 1, source_id, 1, line, 2, len(t), 3, len(record))
        return hashlib.blake2b(head + d + t + record, digest_size=16).hexdigest()
    fields = [_typed(v) for v in (ord_, doc_id, source_id, line, text, record)]
    head = _CHECKSUM_HEAD.pack(*(n for tag, size, _ in fields for n in (tag, size)))
    return hashlib.blake2b(head + b"".join(data for *_, data in fields), digest_size=16).hexdigest()


def utf8_of(texts) -> list[bytes | None]:
    """Each str text's UTF-8 (surrogatepass; None for any other value): what a load encodes once
    for the checksums, the exact keys and the records stored without their text."""
    return [t.encode("utf-8", "surrogatepass") if type(t) is str else None for t in texts]


# A document whose text and record take this many bytes is hashed part by part (hashlib lets go
# of the GIL for each part of 2 KiB or more) rather than joined first: on the manual pages (4 KB
# texts, each in a record as long) the joins copied ~120 MB holding the GIL while the load's
# main thread parsed JSON.
STREAMED_BYTES = 4096


def document_checksums(ords, doc_ids, source_ids, lines, texts, records, text_bytes=None) -> list[str]:
    """[document_checksum(*row) for row in zip(...)] for a load's batch, ~40% faster: the
    common row (str id and text, bytes record, int64 numbers) is hashed inline; any other
    goes through document_checksum. `text_bytes`: each str text's UTF-8 (surrogatepass), when
    the caller has them (a load encodes each text once, for this and for records.pack_record)."""
    pack, blake2b = _CHECKSUM_HEAD.pack, hashlib.blake2b
    low, high = -_INT64, _INT64
    out = []
    if text_bytes is None:
        text_bytes = utf8_of(texts)
    for o, d, s, ln, t, r, tb in zip(ords, doc_ids, source_ids, lines, texts, records, text_bytes):
        if (
            type(d) is str
            and type(t) is str
            and type(r) is bytes
            and type(s) is int
            and type(ln) is int
            and type(o) is int
            and low <= ln < high
            and low <= s < high
            and low <= o < high
        ):
            db = d.encode("utf-8", "surrogatepass")
            head = pack(1, o, 2, len(db), 1, s, 1, ln, 2, len(tb), 3, len(r)) + db
            if len(tb) + len(r) < STREAMED_BYTES:
                out.append(blake2b(head + tb + r, digest_size=16).hexdigest())
            else:  # (hashed in place, without the GIL: no copy of the text and record joined)
                h = blake2b(head, digest_size=16)
                h.update(tb)
                h.update(r)
                out.append(h.hexdigest())
        else:
            out.append(document_checksum(o, d, s, ln, t, r))
    return out


def has_checksums(conn: sqlite3.Connection) -> bool:
    """Whether the documents have checksums (not in a schema-3 project opened read-only)."""
    return "checksum" in {r[1] for r in conn.execute("PRAGMA table_info(documents)")}


# -- a checksum per derived table ------------------------------------------------------------
#
# What a scan derives and later commands read back instead of recomputing it (the packed
# pairs, their spanning forest, exact_of, the incremental scan's keys) has a checksum in `meta`,
# written in the transaction that writes the data and checked whenever it is read: PRAGMA
# integrity_check does not see a flipped bit inside a blob. The checksum is of the values
# (the arrays' little-endian bytes, in order), not of how they are split into rows, so the
# same values rebuilt from their readable source (`pairs`, documents.exact_of) can be checked
# against it too.


def arrays_checksum(*arrays) -> str:
    """CRC-32 (8 hex digits) of arrays (or bytes): each one's type, length and raw bytes
    (little-endian), in order. CRC-32, not a cryptographic hash: the threat is bit rot, not a
    crafted edit, and a CRC-32 detects every error of up to 3 flipped bits and every burst of
    up to 32 (random damage passes 1 time in 4 billion); zlib's runs at ~3.4 GB/s, 2.4 times
    OpenSSL's SHA-256, and an incremental scan of 841k documents checks ~300 MB."""
    crc = 0
    for array in arrays:
        if isinstance(array, (bytes, bytearray, memoryview)):
            kind, data = b"bytes", memoryview(array).cast("B")
        else:
            array = np.ascontiguousarray(array)
            array = array.astype(array.dtype.newbyteorder("<"), copy=False)
            kind, data = array.dtype.str.encode(), array.reshape(-1).data.cast("B")
        crc = zlib.crc32(struct.pack("<8sq", kind, data.nbytes), crc)
        crc = zlib.crc32(data, crc)
    return f"{crc:08x}"


# -- a checksum of what load derives from each text ------------------------------------------
#
# documents.exact_hash and documents.length are computed from the text by load (and import) and
# read by every scan instead of the texts; the document checksum does not cover them. Their
# checksums are in `document_sums`, one row per block of DERIVED_BLOCK ords: a CRC-32 of the
# block's exact hashes (each followed by a line feed) and one of its lengths (int64,
# little-endian), in ord order. Documents are only appended, so a load extends the last
# block's CRCs (zlib.crc32 continues from a previous value) in the transaction that inserts
# them; a scan checks the blocks it reads (store/scans.py), so an incremental scan reads and
# checks only the blocks of the documents it looks at.

DERIVED_BLOCK = 256


def derived_crcs(hashes, lengths, previous: tuple[int, int] = (0, 0)) -> tuple[int, int]:
    """(CRC-32 of the exact hashes, CRC-32 of the lengths), continuing `previous`; TypeError,
    ValueError or OverflowError when a value is not what load stores (a str, an int64)."""
    if not len(hashes):
        return previous
    text = "\n".join(hashes) + "\n"
    lengths = np.asarray(lengths)
    if lengths.dtype.kind not in "iu":
        raise TypeError("a length that is not an integer")
    return (
        zlib.crc32(text.encode("utf-8", "surrogatepass"), previous[0]),
        zlib.crc32(lengths.astype("<i8", copy=False).tobytes(), previous[1]),
    )


def has_derived_sums(conn: sqlite3.Connection) -> bool:
    """Whether the project has document_sums (not a schema-7 or older project opened read-only)."""
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'document_sums'").fetchone()
    return row is not None


def stored_derived_sums(conn: sqlite3.Connection, first_block: int, last_block: int) -> dict[int, tuple[int, int, int]]:
    """{block: (documents, exact-hash CRC, length CRC)} of the blocks first_block..last_block."""
    return {
        b: (d, h, ln)
        for b, d, h, ln in conn.execute(
            "SELECT block, documents, exact_hash, length FROM document_sums WHERE block BETWEEN ? AND ?",
            (first_block, last_block),
        )
    }


def extend_derived_sums(conn: sqlite3.Connection, ords, hashes, lengths) -> None:
    """The blocks' checksums extended with documents just appended (ascending ords, after every
    stored one), inside the caller's transaction."""
    if not len(ords):
        return
    ords = np.asarray(ords, np.int64)
    blocks = ords // DERIVED_BLOCK
    first, last = int(blocks[0]), int(blocks[-1])
    stored = stored_derived_sums(conn, first, last)
    bounds = np.searchsorted(blocks, np.arange(first, last + 2)).tolist()
    rows = []
    for block, s, e in zip(range(first, last + 1), bounds, bounds[1:]):
        if e > s:
            count, hash_crc, length_crc = stored.get(block, (0, 0, 0))
            rows.append((block, count + e - s, *derived_crcs(hashes[s:e], lengths[s:e], (hash_crc, length_crc))))
    conn.executemany(
        "INSERT OR REPLACE INTO document_sums(block, documents, exact_hash, length) VALUES (?, ?, ?, ?)", rows
    )


def write_derived_sums(conn: sqlite3.Connection) -> None:
    """document_sums computed from the stored exact hashes and lengths as they are (the upgrade
    to schema 8: damage done before it cannot be told from the load's values)."""
    conn.execute("DELETE FROM document_sums")
    last = conn.execute("SELECT max(ord) FROM documents").fetchone()[0]
    step = 64 * DERIVED_BLOCK
    for lo in range(0, -1 if last is None else last + 1, step):
        rows = conn.execute(
            "SELECT ord, CAST(exact_hash AS BLOB), length FROM documents WHERE ord >= ? AND ord < ? ORDER BY ord",
            (lo, lo + step),
        ).fetchall()
        blocks = np.fromiter((r[0] // DERIVED_BLOCK for r in rows), np.int64, len(rows))
        first = lo // DERIVED_BLOCK
        bounds = np.searchsorted(blocks, np.arange(first, first + 65)).tolist()
        sums = []
        for block, s, e in zip(range(first, first + 64), bounds, bounds[1:]):
            if e > s:
                hashes = [
                    r[1].decode("utf-8", "surrogateescape") if isinstance(r[1], bytes) else str(r[1]) for r in rows[s:e]
                ]
                lengths = [r[2] if type(r[2]) is int and -_INT64 <= r[2] < _INT64 else -1 for r in rows[s:e]]
                sums.append((block, e - s, *derived_crcs(hashes, lengths)))
        conn.executemany("INSERT INTO document_sums(block, documents, exact_hash, length) VALUES (?, ?, ?, ?)", sums)
