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


# Control characters json.dumps writes as \b, \f or \u00XX (not as \t, \n or \r).
_OTHER_CONTROLS = bytes(c for c in range(0x20) if c not in (0x09, 0x0A, 0x0D))
# Every byte json.dumps escapes, in UTF-8 (no byte of a multi-byte character is one of them).
_ESCAPED = bytes(range(0x20)) + b'"\\'


def _token(text: str, data: bytes | None = None) -> bytes:
    """The text as json.dumps(text, ensure_ascii=False) writes it, in UTF-8, from its UTF-8 bytes
    `data` (encoded here when not given): the bytes themselves in quotes when none needs
    escaping, else the five escapes json.dumps writes as \\\\, \\", \\n, \\r and \\t replaced
    (each at memchr speed; a replace that finds nothing makes no copy), unless the text holds
    another control character. From the bytes a load has already made for the checksum, that
    is half of what json's C encoder costs (0.19 s against 0.40 s for the 64k families' texts)."""
    if data is None:
        data = text.encode("utf-8", "surrogatepass")
    if len(data.translate(None, _ESCAPED)) == len(data):
        return b'"' + data + b'"'
    if len(data.translate(None, _OTHER_CONTROLS)) != len(data):
        return encode_basestring(text).encode("utf-8", "surrogatepass")
    # (the backslashes first)
    data = data.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n")
    return b'"' + data.replace(b"\r", b"\\r").replace(b"\t", b"\\t") + b'"'


def _templated(doc_id: str, text: str, encode=encode_basestring) -> bytes:
    return ('{"id": ' + encode(doc_id) + ', "text": ' + encode(text) + "}").encode("utf-8", "surrogatepass")


def pack_record(text, record, doc_id, data: bytes | None = None):
    """The record as stored: one byte when it is just its id and text, without its text's JSON
    string where it holds it, else as it is. `data`: the text's UTF-8 bytes (surrogatepass),
    when the caller has them."""
    if type(record) is not bytes or type(text) is not str:
        return record
    token = None
    if type(doc_id) is str and record[:8] == b'{"id": "' and record[-2:] == b'"}':
        # (the text's token, made once, is compared after the id's part: a record with other
        # fields costs no whole templated record, let alone two)
        head = ('{"id": ' + encode_basestring(doc_id) + ', "text": ').encode("utf-8", "surrogatepass")
        if record.startswith(head):
            token = _token(text, data)
            if len(record) == len(head) + len(token) + 1 and record.startswith(token, len(head)):
                return TEMPLATED
        # (an ASCII-escaped record is all ASCII: a record with raw UTF-8 costs no templated record)
        if (
            not (doc_id.isascii() and text.isascii())
            and record.isascii()
            and record == _templated(doc_id, text, encode_basestring_ascii)
        ):
            return TEMPLATED_ASCII
    if len(text) < MIN_TEXT:
        return record
    token = token if token is not None else _token(text, data)
    # (the first place where its start is followed by the rest: record.find(token) compared
    # the whole token at many places, 0.045 s for the manual pages instead of 0.01 s)
    head = token[:64]
    at = record.find(head)
    while at >= 0 and not record.startswith(token, at):
        at = record.find(head, at + 1)
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
