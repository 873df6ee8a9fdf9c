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
    if (type(doc_id) is str and type(text) is str and type(record) is bytes and type(source_id) is int
            and type(line) is int and type(ord_) is int and -_INT64 <= line < _INT64 and -_INT64 <= source_id < _INT64
            and -_INT64 <= ord_ < _INT64):
        # What load and import store, without the generic path's calls (a load of 100k documents hashes each).
        d, t = doc_id.encode("utf-8", "surrogatepass"), text.encode("utf-8", "surrogatepass")
        head = _CHECKSUM_HEAD.pack(1, ord_, 2, len(d), 1, source_id, 1, line, 2, len(t), 3, len(record))
        return hashlib.blake2b(head + d + t + record, digest_size=16).hexdigest()
    fields = [_typed(v) for v in (ord_, doc_id, source_id, line, text, record)]
    head = _CHECKSUM_HEAD.pack(*(n for tag, size, _ in fields for n in (tag, size)))
    return hashlib.blake2b(head + b"".join(data for *_, data in fields), digest_size=16).hexdigest()


def document_checksums(ords, doc_ids, source_ids, lines, texts, records) -> list[str]:
    """[document_checksum(*row) for row in zip(...)] for a load's batch, ~40% faster: the
    common row (str id and text, bytes record, int64 numbers) is hashed inline; any other
    goes through document_checksum."""
    pack, blake2b = _CHECKSUM_HEAD.pack, hashlib.blake2b
    low, high = -_INT64, _INT64
    out = []
    for o, d, s, ln, t, r in zip(ords, doc_ids, source_ids, lines, texts, records):
        if (type(d) is str and type(t) is str and type(r) is bytes and type(s) is int and type(ln) is int
                and type(o) is int and low <= ln < high and low <= s < high and low <= o < high):
            db, tb = d.encode("utf-8", "surrogatepass"), t.encode("utf-8", "surrogatepass")
            out.append(blake2b(pack(1, o, 2, len(db), 1, s, 1, ln, 2, len(tb), 3, len(r)) + db + tb + r,
                               digest_size=16).hexdigest())
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
            kind, data = array.dtype.str.encode(), memoryview(array.reshape(-1)).cast("B")
        crc = zlib.crc32(struct.pack("<8sq", kind, data.nbytes), crc)
        crc = zlib.crc32(data, crc)
    return f"{crc:08x}"
