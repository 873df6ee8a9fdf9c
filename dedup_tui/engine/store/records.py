"""A record stored without its text: a JSON Lines line (or a JSON row) holds the document's text
as a JSON string, which the project already keeps in documents.text. Where the record holds it
as json.dumps(text, ensure_ascii=False) would write it, the stored record leaves it out:

    NUL, the offset of the text's JSON string (uint32, little-endian), the record without it

and every reader puts it back (unpack_record) before the record is used or checked against the
document's checksum (which is of the whole record). On the 841k package summaries this is
55 B a document, a sixth of the documents table; on 4 KB pages half of it. A record that does
not hold its text that way (escaped otherwise, or a short text) is stored whole."""

from __future__ import annotations

from json.encoder import encode_basestring  # (the C one, ensure_ascii=False)

SPLICED = b"\x00"  # no JSON line or row starts with it: a whole record never does
MIN_TEXT = 12  # a shorter text saves less than the 5 bytes the splice adds


def _token(text: str) -> bytes:
    return encode_basestring(text).encode("utf-8", "surrogatepass")


def pack_record(text, record):
    """The record as stored: without its text's JSON string where it holds it, else as it is."""
    if type(record) is not bytes or type(text) is not str or len(text) < MIN_TEXT:
        return record
    token = _token(text)
    at = record.find(token)
    if at < 0:
        return record
    return SPLICED + at.to_bytes(4, "little") + record[:at] + record[at + len(token) :]


def unpack_record(text, stored):
    """The whole record from what pack_record stored (anything else: as it is)."""
    if type(stored) is bytes and stored[:1] == SPLICED and type(text) is str and len(stored) >= 5:
        at = int.from_bytes(stored[1:5], "little")
        rest = stored[5:]
        return rest[:at] + _token(text) + rest[at:]
    return stored
