"""The review session without Textual (issue 39, part 1): key intake, on a fake clock."""

from __future__ import annotations

from dedup_tui.review.session import KeyIntake, ignored_notice


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def intake() -> tuple[KeyIntake, Clock, list[str]]:
    clock, told = Clock(), []
    return KeyIntake(clock=clock, notify=told.append), clock, told


def test_a_key_pressed_after_the_document_was_drawn_is_admitted():
    keys, clock, told = intake()
    keys.showing("pair", 7)
    clock.now = 101.0
    keys.drawn("pair", 7)
    with keys.key(101.5):
        assert keys.admit("pair", 7)
    assert told == []


def test_keys_pressed_before_the_next_document_was_drawn_are_dropped_with_one_growing_notice():
    keys, clock, told = intake()
    keys.showing("pair", 1)
    keys.drawn("pair", 1)  # at 100
    burst = [100.1, 100.13, 100.16, 100.19]  # x four times, 30 ms apart
    with keys.key(burst[0]):
        assert keys.admit("pair", 1)
    keys.showing("pair", 2)  # the decision moved on: document 2 is being shown
    for at in burst[1:]:
        with keys.key(at):
            assert not keys.admit("pair", 2)
    clock.now = 100.2
    keys.drawn("pair", 2)  # drawn after every key of the burst was pressed: they stay dropped
    assert told == [ignored_notice(1), ignored_notice(2), ignored_notice(3)]
    assert told[-1] == "3 keys ignored: the next document was not on screen yet"
    with keys.key(100.25):  # pressed after it was drawn
        assert keys.admit("pair", 2)
    assert keys.ignored == 0  # the next burst counts afresh


def test_a_key_is_refused_for_a_document_its_place_does_not_show():
    keys, clock, _told = intake()
    keys.showing("main", 3)
    keys.drawn("main", 3)
    with keys.key(101.0):
        assert not keys.admit("main", 4)  # the cursor moved on, the screen did not follow yet
        assert not keys.admit("pair", 3)  # shown in another place only
        assert not keys.admit("main", None)


def test_showing_the_same_document_again_keeps_it_drawn():
    keys, clock, _told = intake()
    keys.showing("main", 3)
    keys.drawn("main", 3)
    keys.showing("main", 3)  # the list rebuilt after a decision, the cursor on the same document
    with keys.key(100.5):
        assert keys.admit("main", 3)


def test_a_drawn_report_for_a_document_no_longer_shown_counts_for_nothing():
    keys, clock, _told = intake()
    keys.showing("pair", 1)
    keys.showing("pair", 2)
    keys.drawn("pair", 1)  # (a redraw queued for the document before)
    assert keys.on_screen("pair") is None
    with keys.key(101.0):
        assert not keys.admit("pair", 2)


def test_an_action_without_a_key_needs_the_document_drawn_by_now():
    keys, clock, _told = intake()
    keys.showing("main", 5)
    assert not keys.admit("main", 5)
    keys.drawn("main", 5)
    assert keys.admit("main", 5)

