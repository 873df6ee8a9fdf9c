"""The diff behind the pair view: short texts word by word (with characters), long ones aligned
by units first so that two 2 MB near-duplicates take about a second, not minutes, and stop when
the view closes."""

from __future__ import annotations

import random

import pytest

from dedup_tui.ui.diff import CHANGE, DELETE, INSERT, WORD_DIFF_MAX_TOKENS, DiffCancelled, diff


def _long_pair(seed: int, words: int, sentences: bool = True):
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(3000)]
    base = []
    for _ in range(words):
        base.append(rng.choice(vocab))
        if sentences and rng.random() < 0.05:
            base.append("end.")
    changed = sorted(rng.sample(range(len(base)), 200))
    other = list(base)
    for i in changed:
        other[i] = "CHANGED"
    left, right = " ".join(base), " ".join(other)
    starts, pos = [], 0
    for w in other:
        starts.append(pos)
        pos += len(w) + 1
    return left, right, [starts[i] for i in changed]


@pytest.mark.parametrize("sentences", [True, False])
def test_long_texts_every_change_is_marked_and_little_else(sentences):
    left, right, changed_at = _long_pair(1, 60_000, sentences)
    result = diff(left, right)
    assert WORD_DIFF_MAX_TOKENS < 60_000  # the long path is the one tested
    marked = [(s, e) for s, e, kind in result.right if kind in (CHANGE, INSERT)]
    for pos in changed_at:
        assert any(s <= pos < e for s, e in marked), pos
    assert sum(e - s for s, e in marked) < 0.05 * len(right)
    assert all(kind in (CHANGE, DELETE) for _s, _e, kind in result.left)


def test_identical_long_texts_have_no_differences():
    left, _right, _ = _long_pair(2, 40_000)
    assert diff(left, left).left == [] and diff(left, left).right == []


def test_a_long_diff_stops_when_cancelled():
    left, right, _ = _long_pair(3, 60_000)
    calls = []

    def cancelled() -> bool:
        calls.append(1)
        return len(calls) > 1

    with pytest.raises(DiffCancelled):
        diff(left, right, cancelled=cancelled)
    assert len(calls) == 2  # it checked again after the first block, and stopped there


def test_short_texts_still_get_character_highlights():
    result = diff("the quick brown fox", "the quick brawn fox")
    assert (10, 15, CHANGE) in result.left and any(kind == "char" for *_x, kind in result.left)


def test_normalized_diff_ignores_case_and_spacing_only():
    left, right = "The Quick  brown fox\njumps", "the quick brown fox jumps over"
    plain = diff(left, right)
    assert any(kind == CHANGE for *_x, kind in plain.left)  # "The Quick" differs in case
    same = diff(left, right, normalized=True)
    assert same.left == [] and [(right[s:e].strip(), kind) for s, e, kind in same.right] == [("over", INSERT)]
    long_left = (left + " ") * 3000
    long_right = (right.replace("over", "") + " ") * 3000
    assert diff(long_left, long_right, normalized=True).left == []  # the long path too


# -- line-aligned view ---------------------------------------------------------------------

from dedup_tui.ui.diff import EQUAL, align_lines, fold_rows, lines_of  # noqa: E402


def _doc(n: int, prefix: str = "line") -> list[str]:
    return [f"{prefix} {i} of the page" for i in range(n)]


def test_aligned_lines_pair_equal_lines_and_leave_gaps_for_inserted_and_deleted_ones():
    left = _doc(40)
    right = list(left)
    right[10] = "line 10 of the PAGE, changed"
    del right[20]  # left's line 20 has no partner
    right.insert(30, "a brand new line")
    result = align_lines("\n".join(left), "\n".join(right) + "\n")
    assert [r.left for r in result.rows if r.left is not None] == list(range(40))  # every line once, in order
    assert [r.right for r in result.rows if r.right is not None] == list(range(len(right)))
    changed = [(r.left, r.right, r.kind) for r in result.rows if r.kind != EQUAL]
    assert changed == [(10, 10, CHANGE), (20, None, DELETE), (None, 30, INSERT)]
    assert all(left[r.left] == right[r.right] for r in result.rows if r.kind == EQUAL)
    (s, e, _), *_ = result.right_spans[10]
    assert "PAGE" in right[10][s:e] and not any("line 10" in left[10][a:b] for a, b, _k in result.left_spans[10])
    assert result.change_starts() == [i for i, r in enumerate(result.rows) if r.kind != EQUAL]


def test_aligned_lines_ignore_case_and_spacing_when_normalized():
    left, right = "One  Line\ntwo\nthree", "one line\nTWO\nthree"
    assert {r.kind for r in align_lines(left, right).rows} == {CHANGE, EQUAL}
    assert {r.kind for r in align_lines(left, right, normalized=True).rows} == {EQUAL}
    assert lines_of("a\nb\n") == ["a", "b"] and lines_of("") == [""] and lines_of("\n") == [""]


def test_folding_keeps_context_around_changes_and_counts_every_hidden_line():
    left = _doc(200)
    right = list(left)
    right[100] = "changed"
    rows = align_lines("\n".join(left), "\n".join(right)).rows
    folded = fold_rows(rows, context=3)
    hidden = [x for x in folded if isinstance(x, int)]
    shown = [x for x in folded if not isinstance(x, int)]
    assert hidden == [97, 96] and len(shown) == 7  # 3 lines, the change, 3 lines
    assert sum(hidden) + len(shown) == len(rows)
    assert [r.left for r in shown] == list(range(97, 104))
    assert fold_rows(align_lines("a\nb", "a\nc").rows) == align_lines("a\nb", "a\nc").rows  # nothing to fold


def test_aligned_lines_stop_when_cancelled():
    left = "\n".join(_doc(5000))
    right = "\n".join(_doc(5000, "LINE"))
    with pytest.raises(DiffCancelled):
        align_lines(left, right, cancelled=lambda: True)
