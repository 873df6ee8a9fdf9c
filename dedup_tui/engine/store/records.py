"""A record stored without what the project already keeps: a JSON Lines line (or a JSON row)
holds the document's text as a JSON string, which the project keeps in documents.text, and
usually its id, which it keeps in documents.doc_id. A record stored whole is the record's
bytes; otherwise it is one of:

    TEMPLATED (0x01), or TEMPLATED_ASCII (0x02): the record is exactly
        {"id": ID, "text": TEXT}
    with ID and TEXT the id's and text's JSON strings as json.dumps writes them
    (ensure_ascii=False, or True for 0x02), nothing else: one byte for the whole record;

    SPLICED (NUL), the offset of the text's JSON string (uint32, little-endian), the record
    without it: where the record holds the text as json.dumps(text, ensure_ascii=False) would
    write it.

Every reader puts the record back (unpack_record) before it is used or checked against the
document's checksum (which is of the whole record). On the 841k package summaries the splice
saves 55 B a document, a sixth of the documents table; records of just an id and a text (both
shared corpora, and the scale benchmark's) are a byte each, where the splice left ~33. A record
that fits neither form (escaped otherwise, or a short text) is stored whole."""

from __future__ import annotations

from json.encoder import (
    encode_basestring,  # (the C one, ensure_ascii=False)
    encode_basestring_ascii,
)

SPLICED = b"\x00"  # no JSON line or row starts with a control character: a whole record never does
TEMPLATED = b"\x01"
TEMPLATED_ASCII = b"\x02"
MIN_TEXT = 12  # a shorter text saves less than the 5 bytes the splice adds


def _token(text: str) -> bytes:
    return encode_basestring(text).encode("utf-8", "surrogatepass")


def _templated(doc_id: str, text: str, encode=encode_basestring) -> bytes:
    return ('{"id": ' + encode(doc_id) + ', "text": ' + encode(text) + "}").encode("utf-8", "surrogatepass")


def pack_record(text, record, doc_id):
    """The record as stored: one byte when it is just its id and text, without its text's JSON
    string where it holds it, else as it is."""
    if type(record) is not bytes or type(text) is not str:
        return record
    if type(doc_id) is str and record[:8] == b'{"id": "':
        if record == _templated(doc_id, text):
            return TEMPLATED
        if record == _templated(doc_id, text, encode_basestring_ascii):
            return TEMPLATED_ASCII
    if len(text) < MIN_TEXT:
        return record
    token = _token(text)
    at = record.find(token)
    if at < 0:
        return record
    return SPLICED + at.to_bytes(4, "little") + record[:at] + record[at + len(token) :]


def unpack_record(text, stored, doc_id):
    """The whole record from what pack_record stored (anything else: as it is)."""
    if type(stored) is bytes and type(text) is str:
        if len(stored) == 1 and type(doc_id) is str:
            if stored == TEMPLATED:
                return _templated(doc_id, text)
            if stored == TEMPLATED_ASCII:
                return _templated(doc_id, text, encode_basestring_ascii)
        if stored[:1] == SPLICED and len(stored) >= 5:
            at = int.from_bytes(stored[1:5], "little")
            rest = stored[5:]
            return rest[:at] + _token(text) + rest[at:]
    return stored
