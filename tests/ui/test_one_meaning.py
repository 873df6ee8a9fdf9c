"""Issue 39, part 1: a key means one thing on every screen (the action table), and a threshold
change always says where it moved."""

from __future__ import annotations

from collections import defaultdict

import pytest

from dedup_tui.ui.app import create_app
from dedup_tui.ui.keymap import SCREENS

from .conftest import settle

# Keys whose meaning must be the same wherever they are bound: the threshold and the moves.
ONE_MEANING = ("plus", "minus", "ctrl+right", "ctrl+left", "right_square_bracket", "left_square_bracket",
               "right_curly_bracket", "left_curly_bracket", "t", "u", "r", "k", "x", "N")


def meanings() -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for screen, acts in SCREENS.items():
        for act in acts:
            for key in act.key.split(","):
                out[key].add((screen, act.action))
    return out


@pytest.mark.parametrize("key", ONE_MEANING)
def test_a_threshold_or_move_key_means_one_thing_on_every_screen(key):
    bound = meanings()[key]
    actions = {action for screen, action in bound if screen in ("main", "pair")} | \
        {action for screen, action in bound if action.startswith("threshold")}
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
