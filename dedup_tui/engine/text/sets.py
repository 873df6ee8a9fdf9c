"""Plain-Python shingle sets and Jaccard: the readable definition the fast paths must match."""

from __future__ import annotations

from collections.abc import Iterable

from .normalize import normalize

DEFAULT_K = 5


def shingle_set(text: str, k: int = DEFAULT_K) -> set[str]:
    """Character k-shingles of the normalised text; a text shorter than k is one shingle."""
    if k < 1:
        raise ValueError("shingle size k must be at least 1")
    norm = normalize(text)
    if len(norm) < k:
        return {norm}
    return {norm[i : i + k] for i in range(len(norm) - k + 1)}


def jaccard(a: set | frozenset, b: set | frozenset) -> float:
    """|A ∩ B| / |A ∪ B|; two empty sets are identical (1.0)."""
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def greedy_keep_first(
    documents: Iterable[tuple[str, str]], k: int = DEFAULT_K, threshold: float = 0.5
) -> tuple[list[str], list[tuple[str, str, float]]]:
    """The quadratic greedy pass, in corpus order, over plain sets.

    A document is removed when its highest similarity to an already kept document is
    >= threshold, and is reported against the first kept document reaching that maximum.
    Used as an oracle in tests and for tiny corpora; the scalable path is graph.greedy.
    """
    kept: list[tuple[str, set[str]]] = []
    removed: list[tuple[str, str, float]] = []
    for doc_id, text in documents:
        shingles = shingle_set(text, k)
        best, best_id = 0.0, None
        for kept_id, kept_set in kept:
            sim = jaccard(shingles, kept_set)
            if sim > best:
                best, best_id = sim, kept_id
        if best_id is not None and best >= threshold:
            removed.append((doc_id, best_id, best))
        else:
            kept.append((doc_id, shingles))
    return [doc_id for doc_id, _ in kept], removed
