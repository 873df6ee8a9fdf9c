"""What the reviewer was shown, and the one rule every screen follows with it: a decision that
covers members the reviewer was not shown (accept a cluster, none are duplicates) asks first,
with their count.

A member counts as shown once its text was on screen: its row drawn in the visible part of the
main screen's members pane, or the document on the right of the pair view. Exact copies share
their text's first copy, so a copy of a text shown (or of the kept document) counts as shown.

`record`, when given, hears of each document the first time it is shown (the app stores them in
the project, for the cluster table's reviewer_saw column).
"""

from __future__ import annotations

from collections.abc import Callable

from .model import Review


class ShownMembers:
    """The texts (first copies) shown in one place; `also` (another ShownMembers) hears of each
    one too: what the pair view shows was on screen for the whole session."""

    def __init__(
        self,
        model: Review | None = None,
        also: ShownMembers | None = None,
        record: Callable[[int], object] | None = None,
    ) -> None:
        self.model = model
        self.also = also
        self.record = record
        self.texts: set[int] = set()
        # the documents heard of: a row drawn again (every repaint draws each visible row) costs
        # one set lookup, not Review.root
        self.documents: set[int] = set()

    def add(self, o: int) -> None:
        if o in self.documents or self.model is None or self.model.index is None:
            return
        o = int(o)
        self.documents.add(o)
        self.texts.add(self.model.root(o))
        if self.record is not None:
            self.record(o)
        if self.also is not None:
            self.also.add(o)

    def clear(self) -> None:
        self.texts.clear()
        self.documents.clear()

    def unseen(self, cluster_id: int | None) -> list[int]:
        """The cluster's members to review whose text was not shown (its kept document's text
        counts as shown: every view of a cluster shows it)."""
        r = self.model
        if r is None or r.index is None or cluster_id is None:
            return []
        members = r.members(cluster_id)
        kept = {r.root(m) for m in members if r.is_kept(m)}
        return [m for m in members if r.to_review(m) and r.root(m) not in self.texts and r.root(m) not in kept]


def unseen_question(what: str, count: int) -> str:
    """The question a decision covering `count` members not shown asks: "accept the cluster,
    with 262 members you have not seen? Type yes"."""
    members = f"{count:,} member{'s' if count != 1 else ''}"
    return f"{what}, with {members} you have not seen? Type yes to decide {'it' if count == 1 else 'them'} too"
