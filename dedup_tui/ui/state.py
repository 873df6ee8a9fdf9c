"""What the app's screens share: the review session (`dedup_tui.review.session.ReviewSession`:
the model once the main screen has opened the project, what was shown, key intake, the list's
re-building and the carrying out of every plan), and the host that gives it the app's threads,
writer, notices and questions.

Screens read the model and send the session intents; none of them holds another screen.
Every screen on top hears of a new cluster list through a `ReviewChanged` message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.message import Message

from ..review import DEFAULT_THRESHOLD
from ..review.session import ReviewSession

__all__ = ["DEFAULT_THRESHOLD", "AppHost", "ReviewChanged", "ReviewSession"]


class ReviewChanged(Message):
    """The cluster list changed (a decision, a threshold, a policy)."""


class AppHost:
    """The session's host (review.session.Host) in a Textual app."""

    def __init__(self, app) -> None:
        self.app = app
        self.writer = app.writer

    def run_in_thread(self, work: Callable[[], None]) -> None:
        # (a description: the default one is the function's repr)
        self.app.run_worker(work, thread=True, group="cluster", exit_on_error=False, description="recluster")

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            self.app.call_later(fn, *args)
        except RuntimeError:
            pass  # the app has stopped: nothing to show it on

    def last_key(self) -> float:
        return self.app.last_key

    def interrupted_by_keys(self):
        return self.app.interrupted_by_keys()

    def notify(self, message: str, *, warning: bool = False, timeout: float = 5, replaces: str | None = None) -> None:
        self.app.notify(
            message, severity="warning" if warning else "information", timeout=timeout, replaces=replaces, markup=False
        )

    def ask_yes(self, question: str, refusal: str, then: Callable[[], Any]) -> None:
        from .screens.dialogs import AskScreen

        def answered(answer: str | None) -> None:
            if answer:
                then()

        self.app.push_screen(
            AskScreen(
                question, placeholder="yes", validate=lambda t: None if t.strip().lower() in ("y", "yes") else refusal
            ),
            answered,
        )
