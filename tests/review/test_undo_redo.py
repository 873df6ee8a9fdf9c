"""Undo and redo of the review model (dedup_tui.review.model.Review) without any user interface:
the cursor goes back where the decision was made (a bulk accept's too), redo goes on as the
decision did, and a keep rule change is one step. The session's (a keep rule change with a fake
writer) is in tests/review/test_review_session.py; the app's in tests/ui/test_undo_redo.py."""

from __future__ import annotations

from dedup_tui.engine.curate import decisions, keep_rules
from dedup_tui.engine.graph import clustering

from .conftest import (
    THRESHOLD,
    active,
    label_of,
)


def test_undo_puts_the_cursor_back_where_the_decision_was_made(review):
    r = review
    label = int(r.index.labels[0])
    r.select_cluster(label)
    first = r.cursor.doc
    r.remove()
    second = r.cursor.doc
    assert second != first
    r.keep()
    assert r.cursor.doc not in (first, second)
    r.undo()
    assert r.cursor.doc == second
    r.undo()
    assert r.cursor.doc == first
    assert active(r) == []
    r.redo()  # on from the document it names, as after the decision: the next member to review
    assert r.cursor.doc == second and active(r) == [
        ("remove", r.project.ids_for([first])[0], r.project.ids_for([label])[0])
    ]


def test_undo_of_a_bulk_accept_puts_the_cursor_back(review):
    r = review
    labels, _removed = r.bulk_candidates(THRESHOLD)
    assert 2 <= len(labels) < len(r.index.labels)  # the chains are not accepted (a link below 0.8)
    target = labels[-1]
    doc = r.members(target)[-1]
    r.select(doc)
    r.bulk_accept(THRESHOLD)
    assert len(active(r)) == len(labels)
    assert all(r.cluster_decided(label) for label in labels)
    assert r.cursor.doc != doc and r.cursor.auto and not r.cluster_decided(label_of(r, r.cursor.doc))
    r.undo()
    assert active(r) == []
    assert r.cursor.doc == doc and label_of(r, doc) == target


def test_a_keep_rule_change_is_one_undo_step(review):
    """u after a keep rule change puts the previous rule back (it used to undo an earlier,
    unrelated removal and leave the rule changed); r sets it again; the cursor stays."""
    r = review
    removed = r.cursor.doc
    r.remove()
    at = r.cursor.doc
    r.set_keep_rule("longest")
    assert keep_rules.keep_rule(r.project) == "longest"
    said = r.undo()
    assert said == "Undone: the keep rule longest (was first)"
    assert keep_rules.keep_rule(r.project) == "first" and r.index.clustering.kept_by == "first"
    assert r.index.clustering.reason[removed] == clustering.REVIEWER  # the removal stands
    assert r.cursor.doc == at
    assert r.redo() == "Redone: the keep rule longest (was first)"
    assert keep_rules.keep_rule(r.project) == "longest"
    r.undo()
    r.undo()  # then the removal
    assert keep_rules.keep_rule(r.project) == "first" and active(r) == []
    assert r.set_keep_rule("first") and len(decisions.all_decisions(r.project)) == 2  # the rule in force: no step
