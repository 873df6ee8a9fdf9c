"""Issue 39, part 1: a key means one thing on every screen (the action table), and a threshold
change always says where it moved."""

from __future__ import annotations

from collections import defaultdict

import pytest

from dedup_tui.ui.actions import SAME_MEANING
from dedup_tui.ui.app import create_app
from dedup_tui.ui.keymap import SCREENS
from dedup_tui.ui.screens.help import keys_table

from .conftest import settle

# Keys whose meaning must be the same wherever they are bound: the threshold and the moves.
ONE_MEANING = (
    "plus",
    "minus",
    "ctrl+right",
    "ctrl+left",
    "right_square_bracket",
    "left_square_bracket",
    "right_curly_bracket",
    "left_curly_bracket",
    "t",
    "u",
    "r",
    "k",
    "x",
    "N",
)


def meanings() -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for screen, acts in SCREENS.items():
        for act in acts:
            for key in act.key.split(","):
                out[key].add((screen, act.action))
    return out


DECISIONS = {"keep", "remove", "not_duplicate", "none_duplicates", "accept", "bulk_accept"}


def actions_by_key() -> dict[str, dict[str, set[str]]]:
    """key -> action (without its app. namespace) -> the screens it runs on there."""
    out: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for screen, acts in SCREENS.items():
        for act in acts:
            for key in act.key.split(","):
                out[key][act.action.removeprefix("app.")].add(screen)
    return out


def test_every_key_runs_one_action_on_every_screen_but_the_few_documented_equivalents():
    """(On the tuning screen a applied the recommended threshold and x split a chain, s saved an
    SVG and enter opened a chain; in the labelling queues d labelled a duplicate and s skipped.)"""
    two = {
        key: {a: sorted(s) for a, s in actions.items()}
        for key, actions in actions_by_key().items()
        if len(actions) > 1 and set(actions) - SAME_MEANING.get(key, (set(), ""))[0]
    }
    assert two == {}


def test_the_equivalents_are_bound_as_documented():
    """Each documented equivalence is one still bound (a stale entry would excuse a later clash)."""
    for key, (actions, meaning) in SAME_MEANING.items():
        assert set(actions_by_key()[key]) == actions, key
        assert meaning


def test_no_label_key_is_a_decision_key_anywhere():
    """A label is evidence for tuning: its keys (1 2 0) decide nothing on any screen."""
    by_key = actions_by_key()
    label_keys = {k for k, actions in by_key.items() if any(a.startswith("label(") for a in actions)}
    decision_keys = {k for k, actions in by_key.items() if set(actions) & DECISIONS}
    assert label_keys and decision_keys
    assert label_keys.isdisjoint(decision_keys), sorted(label_keys & decision_keys)


def test_the_help_lists_every_screen_s_keys():
    table = keys_table()
    titles = {str(cell) for cell in table.columns[1]._cells}
    assert [act.id for acts in SCREENS.values() for act in acts if act.title not in titles] == []


@pytest.mark.parametrize("key", ONE_MEANING)
def test_a_threshold_or_move_key_means_one_thing_on_every_screen(key):
    bound = meanings()[key]
    actions = {action for screen, action in bound if screen in ("main", "pair")} | {
        action for screen, action in bound if action.startswith("threshold")
    }
    assert len(actions) <= 1, (key, sorted(bound))
    if key in ("plus", "minus", "ctrl+right", "ctrl+left"):
        assert {screen for screen, _ in bound} == {"main", "tune"}
        assert all(action.startswith("threshold(") for _, action in bound)
    if "bracket" in key:
        assert not any(action.startswith("threshold") for _, action in bound), (key, sorted(bound))


async def test_next_cluster_on_the_main_screen_moves_to_the_next_cluster_not_the_threshold(corpus):
    app = create_app(corpus, author="tester")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        main = app.main
        assert main.threshold == pytest.approx(0.80) and main.model.position == 0
        await pilot.press("right_curly_bracket")
        await settle(pilot)
        assert main.threshold == pytest.approx(0.80)  # (it moved the threshold to 0.85, silently)
        assert main.model.position == 1 and main.model.cursor.cluster_id == int(main.index.labels[1])
        await pilot.press("left_curly_bracket")
        await settle(pilot)
        assert main.model.position == 0
        await pilot.press("right_square_bracket")  # a pair view key: it says where it acts
        await settle(pilot)
        assert main.threshold == pytest.approx(0.80) and "pair view" in app.told[-1]
        await pilot.press("plus")
        await settle(pilot)
        assert main.threshold == pytest.approx(0.81) and app.told[-1] == "threshold 0.80 → 0.81"
        await pilot.press("ctrl+left")
        await settle(pilot)
        assert main.threshold == pytest.approx(0.76) and app.told[-1] == "threshold 0.81 → 0.76"
        await pilot.press("T")  # the tuning screen moves it with the same keys, and says so too
        await settle(pilot)
        await pilot.press("minus")
        await settle(pilot)
        assert main.threshold == pytest.approx(0.75) and app.told[-1] == "threshold 0.76 → 0.75"
