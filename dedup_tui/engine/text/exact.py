"""Exact keys (normalize.exact_key) of a batch of texts: a large batch is normalised by a
compiled pass when the kernels cost no compiling here."""

from __future__ import annotations

import hashlib
import sys

from ..compile.kernel_cache import is_warm
from .normalize import exact_key

# A batch with at least this many characters is normalised by the compiled kernel: below it,
# importing numba would cost more than it saves (and a small corpus opens without it).
COMPILED_MIN_CHARS = 1 << 18


def exact_keys(texts: list[str]) -> list[str]:
    """[exact_key(t) for t in texts], the large batches normalised by a compiled pass."""
    return exact_keys_and_text(texts)[0]


def exact_keys_and_text(texts: list[str], need_text: bool = False):
    """(exact_keys(texts), the normalised texts as a kernels.TextBuffer when the compiled pass
    made them, else None). need_text: the compiled pass whatever the batch's size, when the
    kernels cost no compiling here."""
    if (not need_text and sum(map(len, texts)) < COMPILED_MIN_CHARS) or not compiled_ready():
        return [exact_key(t) for t in texts], None
    from ..scanning.kernels.text import normalized_buffer

    buf = normalized_buffer(texts)
    data, bounds = memoryview(buf.data), buf.offsets.tolist()  # type: ignore[arg-type]  # (typed from 3.12)
    sha256 = hashlib.sha256
    return [sha256(data[s:e]).hexdigest() for s, e in zip(bounds, bounds[1:])], buf


def compiled_ready() -> bool:
    """The compiled pass costs no compiling here: its kernels are loaded, or cached (a first
    run's load leaves the compiling to the warm-up process instead of doing it twice)."""
    if "dedup_tui.engine.scanning.kernels.text" in sys.modules:
        return True
    return is_warm()
