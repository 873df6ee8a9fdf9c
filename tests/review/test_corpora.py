"""The review corpora kept in tests/fixtures/review_corpora.json hold what make_corpus promises
and the review tests rely on: families near together, chains near only to their neighbours,
copies that are copies."""

from __future__ import annotations

import re
from itertools import combinations, pairwise

import pytest

from .conftest import FOCUSED, MACHINE, THRESHOLD, similarity


def groups(records: list[dict]) -> dict[str, dict[str, str]]:
    """{group: {member: text}}: fam0 -> {"0": ..., "1": ..., "copy": ...}, chain1 -> {"a": ...}."""
    out: dict[str, dict[str, str]] = {}
    for r in records:
        group, member = r["id"].rsplit("_", 1) if "_" in r["id"] else (r["id"], "")
        out.setdefault(group, {})[member] = r["text"]
    return out


@pytest.mark.parametrize("name, records", [("focused", FOCUSED), ("machine", MACHINE)])
def test_the_kept_corpora_hold_families_chains_and_copies(name, records):
    assert len({r["id"] for r in records}) == len(records)
    assert all(set(r) == {"id", "text", "date", "score"} for r in records)
    found = groups(records)
    families = {g: m for g, m in found.items() if re.fullmatch(r"fam\d+", g)}
    chains = {g: m for g, m in found.items() if re.fullmatch(r"chain\d+", g)}
    exact = {g: m for g, m in found.items() if re.fullmatch(r"exact\d+", g)}
    assert families and chains and exact, sorted(found)
    for group, members in families.items():
        variants = [members[k] for k in sorted((k for k in members if k.isdigit()), key=int)]
        assert len(variants) >= 2
        assert all(similarity(a, b) >= 0.82 for a, b in combinations(variants, 2)), group
        assert members["copy"] == "  " + variants[0].upper() + " "
        assert members.get("vcopy", variants[1] + "\n") == variants[1] + "\n"
    for group, members in chains.items():
        texts = [members[k] for k in sorted(members)]
        assert len(texts) >= 3
        assert all(similarity(a, b) >= 0.82 for a, b in pairwise(texts)), group
        far = [similarity(texts[i], texts[j]) for i in range(len(texts)) for j in range(i + 2, len(texts))]
        assert max(far) <= 0.77 < THRESHOLD, group
    for group, members in exact.items():
        assert len(members) >= 2 and len(set(members.values())) == 1, group
