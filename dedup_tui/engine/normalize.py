"""Text normalisation shared by exact hashing and shingling."""

from __future__ import annotations

import hashlib
import re

_WHITESPACE_RUN = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Lowercase, strip, and collapse every whitespace run to a single space."""
    return _WHITESPACE_RUN.sub(" ", text.lower().strip())


def exact_key(text: str) -> str:
    """SHA-256 hex digest of the normalised text: equal keys mean exact duplicates."""
    return hashlib.sha256(normalize(text).encode("utf-8", "surrogatepass")).hexdigest()
