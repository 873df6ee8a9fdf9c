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


# Control characters json.dumps writes as \b, \f or \u00XX (not as \t, \n or \r).
_OTHER_CONTROLS = bytes(c for c in range(0x20) if c not in (0x09, 0x0A, 0x0D))


def _token(text: str) -> bytes:
    """The text as json.dumps(text, ensure_ascii=False) writes it, in UTF-8: by replacing the
    five characters it escapes in the UTF-8 bytes (each at memchr speed, 0.10 s instead of
    0.16 s for the manual pages' 40 MB) unless the text is short or holds another control
    character."""
    if len(text) < _SHORT:
        return _token_slow(text)
    data = text.encode("utf-8", "surrogatepass")
    if len(data.translate(None, _OTHER_CONTROLS)) != len(data):
        return _token_slow(text)
    # (the backslashes first; a replace that finds nothing returns its bytes, no copy)
    data = data.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n")
    return b'"' + data.replace(b"\r", b"\\r").replace(b"\t", b"\\t") + b'"'


_SHORT = 2048  # characters: below, json's own C encoder is as fast (a few calls cost what the scans save)


def _token_slow(text: str) -> bytes:
    return encode_basestring(text).encode("utf-8", "surrogatepass")


def pack_record(text, record):
    """The record as stored: without its text's JSON string where it holds it, else as it is."""
    if type(record) is not bytes or type(text) is not str or len(text) < MIN_TEXT:
        return record
    token = _token(text)
    # (the first place where its start is followed by the rest: record.find(token) compared
    # the whole token at many places, 0.045 s for the manual pages instead of 0.01 s)
    head = token[:64]
    at = record.find(head)
    while at >= 0 and not record.startswith(token, at):
        at = record.find(head, at + 1)
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
