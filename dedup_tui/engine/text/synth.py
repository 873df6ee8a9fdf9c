"""Synthetic corpora with planted noisy copies (the walkthrough's generator, seeded)."""

from __future__ import annotations

import numpy as np


def noisy_copy(rng: np.random.RandomState, text: str, n_changes: int) -> str:
    """Replace n_changes randomly chosen characters (with repetition) by digits 0-8."""
    chars = list(text)
    for _ in range(n_changes):
        pos = rng.randint(0, len(chars))
        chars[pos] = str(rng.randint(0, 9))
    return "".join(chars)


def synthetic_corpus(n_unique: int = 50, copies: int = 3, noise: float = 0.15, seed: int = 0) -> list[dict]:
    """n_unique base documents ("Document i: wordN ..."), each followed by copies - 1 noisy
    copies with max(1, int(len * noise)) characters replaced; then shuffled. Each record has
    a ground-truth `group` (the base document's index)."""
    rng = np.random.RandomState(seed)
    bases = []
    for i in range(n_unique):
        n_words = rng.randint(20, 50)
        bases.append(f"Document {i}: " + " ".join(f"word{rng.randint(0, 200)}" for _ in range(n_words)))
    corpus: list[tuple[str, str, int]] = []
    for group, base in enumerate(bases):
        corpus.append((f"doc_{len(corpus):04d}", base, group))
        for _ in range(copies - 1):
            corpus.append((f"doc_{len(corpus):04d}", noisy_copy(rng, base, max(1, int(len(base) * noise))), group))
    rng.shuffle(corpus)
    return [{"id": doc_id, "text": text, "group": group} for doc_id, text, group in corpus]


def document_pair(rng: np.random.RandomState, base_length: int = 200, noise_fraction: float = 0.0) -> tuple[str, str]:
    """A document of base_length words and a copy with a fraction of its characters replaced."""
    base = " ".join(f"word{rng.randint(0, 300)}" for _ in range(base_length))
    return base, noisy_copy(rng, base, int(len(base) * noise_fraction))


SWEEP_K = (3, 5, 7, 9, 12)
SWEEP_NOISE = (0.0, 0.05, 0.10, 0.20, 0.35, 0.50)


def shingle_size_sweep(k_values=SWEEP_K, noise_fractions=SWEEP_NOISE, seed: int = 7) -> dict[int, list[float]]:
    """Jaccard of a 200-word document and its noisy copy, per k and noise level."""
    from .sets import jaccard, shingle_set

    rng = np.random.RandomState(seed)
    pairs = [document_pair(rng, 200, noise) for noise in noise_fractions]
    return {k: [jaccard(shingle_set(a, k), shingle_set(b, k)) for a, b in pairs] for k in k_values}
