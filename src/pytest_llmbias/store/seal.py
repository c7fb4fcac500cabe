"""A record's seal: the CRC-32 of its text, kept as its last member, so that a byte changed on
disk is told from an answer (SQLite keeps no checksum of its pages, and a changed byte inside an
answer's text may still read as text and JSON)."""

from __future__ import annotations

import re
import zlib

#: the member a record's text ends with once sealed: the CRC-32 of the text without it
_SEAL = ',"crc32":'
#: the most characters a seal takes: its member, ten digits and the closing brace
_SEAL_LEN = len(_SEAL)
_SEAL_MAX = _SEAL_LEN + 11
#: the shape of a seal, whatever its name reads
_SHAPE = re.compile(r',"[^"\\]{5}":[0-9]{1,10}\}$')


def seal(text: str) -> str:
    """``text`` (a record: one JSON object) with a last member ``"crc32"``, the CRC-32 of
    ``text``'s UTF-8 bytes. SQLite keeps no checksum of its pages, and a byte changed on disk inside
    an answer's text may still read as text and JSON: :func:`unseal` tells. A reader that does not
    look (an earlier release) reads one more member, which it ignores."""
    return text[:-1] + _SEAL + str(zlib.crc32(text.encode("utf-8"))) + "}"


def unseal(raw: str | bytes) -> str:
    """The text :func:`seal` sealed into ``raw``; a record written without a seal, as it is.
    ``ValueError`` where the checksum does not match the bytes, or the seal itself was changed
    (on disk, since they were written)."""
    text = raw if type(raw) is str else raw.decode("utf-8")  # type: ignore[union-attr]
    at = text.rfind(_SEAL, -_SEAL_MAX)  # in the record's last characters, or not there
    if at < 0:
        if _SHAPE.search(text, max(0, len(text) - _SEAL_MAX)):
            # a seal whose name was changed: no record of an earlier release ends with a member of
            # five characters holding an integer (theirs end with "sample", "version", "request" or
            # an answer's field)
            raise ValueError("its seal was changed on disk")
        return text
    digits = text[at + _SEAL_LEN : -1]
    original = text[:at] + "}"
    if not digits.isdigit() or zlib.crc32(original.encode("utf-8")) != int(digits):
        raise ValueError("its bytes do not match the checksum written with them (changed on disk since)")
    return original
