"""Text normalisation shared by exact hashing and shingling."""

from __future__ import annotations

import hashlib
import re

_WHITESPACE_RUN = re.compile(r"\s+")
# Above this length the regex is used: split() would hold every word as a separate string.
_SPLIT_MAX_CHARS = 1 << 20


def normalize(text: str) -> str:
    r"""Lowercase, strip, and collapse every whitespace run to a single space.

    Equivalent to re.sub(r"\s+", " ", text.lower().strip()): str.split() and the regex
    class \s both use Python's str.isspace(), and split() already drops the ends. (A test
    checks the two on every whitespace code point.) About 3x faster on long texts.
    """
    if len(text) > _SPLIT_MAX_CHARS:
        return _WHITESPACE_RUN.sub(" ", text.lower().strip())
    return " ".join(text.lower().split())


def exact_key(text: str) -> str:
    """SHA-256 hex digest of the normalised text: equal keys mean exact duplicates."""
    return hashlib.sha256(normalize(text).encode("utf-8", "surrogatepass")).hexdigest()
