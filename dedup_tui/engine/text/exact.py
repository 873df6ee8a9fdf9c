"""Exact keys (normalize.exact_key) of a batch of texts: a large batch is normalised by a
compiled pass when the kernels are loaded already, or when the normalised text is wanted too
(signing ahead) and the kernels cost no compiling here."""

from __future__ import annotations

import hashlib
import sys

from ..compile.kernel_cache import is_warm
from .normalize import exact_key

# A batch with at least this many characters is normalised by the compiled kernel (when it is
# loaded): below it, the calls cost more than they save.
COMPILED_MIN_CHARS = 1 << 18
_KERNELS = "dedup_tui.engine.scanning.kernels.text"


def exact_keys(texts: list[str]) -> list[str]:
    """[exact_key(t) for t in texts], the large batches normalised by a compiled pass."""
    return exact_keys_and_text(texts)[0]


def exact_keys_and_text(texts: list[str], need_text: bool = False, encoded: list | None = None):
    """(exact_keys(texts), the normalised texts as a kernels.TextBuffer when the compiled pass
    made them, else None). need_text: the compiled pass whatever the batch's size, when the
    kernels cost no compiling here. Without it, only when they are loaded already: loading them
    (numba and its cached code, ~0.3 s) costs more than the pass saves over Python's own
    normalisation (0.24-0.35 s against 0.38 s for the 64k families' 28 MB of text, 0.28-0.31 s
    against 0.30 s for the manual pages' 40 MB), so a load that signs nothing ahead does not.
    `encoded`: each text's UTF-8 (surrogatepass), when the caller has them."""
    compiled = compiled_ready() if need_text else _KERNELS in sys.modules
    if not compiled or (not need_text and sum(map(len, texts)) < COMPILED_MIN_CHARS):
        return [exact_key(t) for t in texts], None
    from ..scanning.kernels.text import normalized_buffer

    buf = normalized_buffer(texts, encoded)
    data, bounds = memoryview(buf.data), buf.offsets.tolist()  # type: ignore[arg-type]  # (typed from 3.12)
    sha256 = hashlib.sha256
    return [sha256(data[s:e]).hexdigest() for s, e in zip(bounds, bounds[1:])], buf


def compiled_ready() -> bool:
    """The compiled pass costs no compiling here: its kernels are loaded, or cached (a first
    run's load leaves the compiling to the warm-up process instead of doing it twice)."""
    if _KERNELS in sys.modules:
        return True
    return is_warm()
