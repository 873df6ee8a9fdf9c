"""The review session: what every screen (the main screen, the pair view, the tuning and audit
screens, the browser) drives, without Textual.

Key intake: a decision key acts on the document that was on screen when the key was pressed.
Each place a document is shown in ("main": the members pane and its preview, "pair": the pair
view's right side) tells the session which document it is showing and, once the screen was
redrawn with it, that it was drawn. A decision key is admitted only when the document it would
decide is the one its place shows and was drawn at or before the key arrived: keys typed ahead of
the screen (a burst of x faster than the redraw) are dropped, with one notice that replaces
itself, and never decide a document (or a cluster) that was not on screen.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass


def ignored_notice(count: int, noun: str = "document") -> str:
    keys = f"{count} key{'s' if count != 1 else ''}"
    return f"{keys} ignored: the next {noun} was not on screen yet"


@dataclass
class OnScreen:
    doc: Hashable  # a document (its ord), or what else a place shows (the audit: a sampled pair's key)
    drawn_at: float | None = None  # None: being shown, not drawn yet


class KeyIntake:
    """Which document each place shows and since when, and which keys may decide it."""

    IGNORED = "ignored-keys"  # the kind of notice that replaces itself

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 notify: Callable[[str], None] | None = None) -> None:
        self.clock = clock
        self.notify = notify or (lambda message: None)
        self._key_time: float | None = None
        self._places: dict[str, OnScreen] = {}
        self.ignored = 0  # keys dropped since the last one admitted

    @contextlib.contextmanager
    def key(self, arrived: float) -> Iterator[None]:
        """While a key's action runs: `arrived` is when it was pressed (Textual's Key.time, the
        same clock as `clock`)."""
        before, self._key_time = self._key_time, arrived
        try:
            yield
        finally:
            self._key_time = before

    def showing(self, place: str, doc: Hashable) -> None:
        """`place` is being redrawn with `doc` (the same document again stays drawn)."""
        shown = self._places.get(place)
        if shown is None or shown.doc != doc:
            self._places[place] = OnScreen(doc)

    def forget(self, place: str) -> None:
        """`place` shows nothing any more (a screen closed or opened afresh)."""
        self._places.pop(place, None)

    def drawn(self, place: str, doc: Hashable) -> None:
        """The screen was redrawn with `doc` at `place` (called after the refresh that shows it)."""
        shown = self._places.get(place)
        if shown is not None and shown.doc == doc and shown.drawn_at is None:
            shown.drawn_at = self.clock()

    def on_screen(self, place: str) -> Hashable | None:
        """The document drawn at `place` (None: none, or the next one is not drawn yet)."""
        shown = self._places.get(place)
        return shown.doc if shown is not None and shown.drawn_at is not None else None

    def admit(self, place: str, doc: Hashable | None, noun: str = "document") -> bool:
        """Whether the decision key being handled may decide `doc`: it is the document `place`
        shows, drawn before the key arrived (an action without a key, a click: drawn by now).
        A key refused is counted in one notice ("3 keys ignored: the next {noun} ...")."""
        at = self._key_time if self._key_time is not None else self.clock()
        shown = self._places.get(place)
        if doc is not None and shown is not None and shown.doc == doc and shown.drawn_at is not None \
                and shown.drawn_at <= at:
            self.ignored = 0
            return True
        self.ignored += 1
        self.notify(ignored_notice(self.ignored, noun))
        return False

