"""The review model (dedup_tui.review.model.Review) without any user interface: the queue's
rules of its docstring, checked on small scanned projects, then by a stateful property test.

The projects are built once per module (tests/review/conftest.py: a scan takes a moment); each
test reviews a copy of the project file."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from dedup_tui.engine.curate import decisions, keep_rules
from dedup_tui.engine.errors import DedupError
from dedup_tui.engine.graph import clustering
from dedup_tui.engine.graph.clustering import EXACT, KEPT, NEAR
from dedup_tui.engine.store import reviewer as reviewer_tables
from dedup_tui.review.index import SORTS, Listing
from dedup_tui.review.model import NeedsConfirmation, Review, ReviewError, View

from .conftest import (
    FLOOR,
    FOCUSED,
    THRESHOLD,
    active,
    cluster_order,
    copy_project,
    label_of,
    listed_members,
    ords,
    similarity,
)


def test_corpus_has_chains_copies_and_families(review):
    """What the other tests rely on: at the default threshold a chain is one cluster whose ends
    are below the threshold, copies join their family, the families keep their base."""
    o, ix = ords(review), review.index
    texts = {r["id"]: r["text"] for r in FOCUSED}
    assert review.view.threshold == THRESHOLD
    assert similarity(texts["chain0_a"], texts["chain0_c"]) < THRESHOLD
    assert label_of(review, o["chain0_c"]) == label_of(review, o["chain0_a"]) == o["chain0_a"]
    assert label_of(review, o["fam0_copy"]) == o["fam0_0"] and ix.clustering.reason[o["fam0_copy"]] == EXACT
    assert label_of(review, o["fam2_vcopy"]) == o["fam2_0"] and review.root(o["fam2_vcopy"]) == o["fam2_1"]
    assert len(review.members(o["fam0_0"])) == 7 and int(ix.labels[0]) == o["fam0_0"]
    assert len(ix.labels) == 6  # 3 families, 2 chains, 1 exact group
    assert review.cursor.doc is not None and not review.cursor.auto


# -- the queue ----------------------------------------------------------------------------------


def test_remove_advances_through_every_member_in_order_then_to_the_next_cluster(review):
    r = review
    label = int(r.index.labels[0])
    r.select_cluster(label)
    members = r.members(label)
    expected = [m for m in members if not r.is_kept(m)]
    assert len(expected) == len(members) - 1 >= 5
    visited = []
    for done, _m in enumerate(expected):
        assert r.progress(label) == (done, len(expected))
        assert not r.index.decided[r.index.position(label)] and not r.cluster_decided(label)
        assert label_of(r, r.cursor.doc) == label
        visited.append(r.cursor.doc)
        r.remove()
    assert visited == expected  # every non-kept member, in member order, never the kept one
    pos = r.index.position(label)
    assert pos == 0 and r.index.decided[pos] and r.cluster_decided(label)
    assert r.progress(label) == (len(expected), len(expected))
    assert (int(r.index.reviewed[pos]), int(r.index.to_review[pos])) == (len(expected), len(expected))
    assert r.is_kept(label)
    # then the next cluster in list order, at its first member to review
    following = int(r.index.labels[1])
    assert r.cursor.auto and label_of(r, r.cursor.doc) == following
    assert r.cursor.doc == next(m for m in r.members(following) if not r.is_kept(m))


def test_a_cluster_is_decided_only_when_every_member_it_does_not_keep_is(review):
    r, o = review, ords(review)
    label = o["fam1_0"]
    members = [m for m in r.members(label) if not r.is_kept(m)]
    r.keep(members[0])  # a keep decision on a member: the cluster now keeps it
    assert r.is_kept(members[0]) and label_of(r, label) == members[0]
    label = members[0]
    pos = r.index.position(label)
    assert not r.index.decided[pos]  # the document kept before is now a member to review
    assert r.to_review(o["fam1_0"])
    for m in r.members(label):
        if r.to_review(m):
            assert not r.cluster_decided(label)
            r.remove(m)
    assert r.index.decided[r.index.position(label)] and r.cluster_decided(label)


def test_accepting_a_cluster_decides_it(review):
    r = review
    label = int(r.index.labels[1])
    r.select_cluster(label)
    r.accept()
    pos = r.index.position(label)
    assert pos == 1 and r.index.decided[pos]
    assert all(m in r.index.overrides.decided for m in r.members(label))
    assert label_of(r, r.cursor.doc) == int(r.index.labels[2])  # on to the next cluster


def test_a_tuning_label_decides_no_document(review):
    """A "not a duplicate" label on a pair (from the labelling queue) splits that pair, but it
    is evidence for tuning: the labelled document stays to review, its cluster undecided and
    listed under the undecided filter, and the export still removes it (issue 39)."""
    from dedup_tui.engine.curate import tune

    r, o = review, ords(review)
    member, unrelated = o["chain0_b"], o["fam0_5"]  # (of another cluster, listed later)
    cluster = label_of(r, member)
    assert r.to_review(member) and r.progress(cluster) == (0, 2)
    tune.set_label(r.project, "chain0_b", "fam0_5", "not_duplicate", 0.3, author="t")
    r.refresh()
    assert active(r) == [("not_duplicate", "chain0_b", "fam0_5")]  # the label's split is recorded
    assert r.to_review(member) and not r.is_decided(member) and r.to_review(unrelated)
    assert r.progress(cluster) == (0, 2) and not r.index.decided[r.index.position(cluster)]
    r.set_filter("undecided")
    r.refresh(keep_order=False)
    assert r.index.position(cluster) is not None
    assert r.index.clustering.reason[member] != KEPT  # (and the export still removes it)
    r.undo()
    r.redo()  # a redone label decides nothing either, and does not move on past its document
    assert active(r) == [("not_duplicate", "chain0_b", "fam0_5")]
    assert not r.is_decided(member) and r.to_review(member) and r.to_review(unrelated)
    assert r.cursor.doc == member, (r.cursor, member)


def test_removing_a_kept_document_needs_confirmation(review):
    r = review
    label = int(r.index.labels[0])
    r.select(label)
    assert r.is_kept(label)
    with pytest.raises(NeedsConfirmation):
        r.remove()
    with pytest.raises(NeedsConfirmation):
        r.remove(label)
    assert active(r) == [] and r.is_kept(label)
    others = [m for m in r.members(label) if m != label]
    r.remove(label, confirmed=True)
    assert active(r) == [("remove", r.project.ids_for([label])[0], None)]
    c = r.index.clustering
    assert c.reason[label] == clustering.REVIEWER and not r.is_kept(label)
    new_label = label_of(r, others[0])
    assert new_label != label and r.is_kept(new_label) and new_label in others


def test_separate_splits_a_chained_member_off_its_cluster(review):
    r, o = review, ords(review)
    a, b, c = o["chain0_a"], o["chain0_b"], o["chain0_c"]
    assert sorted(r.members(a)) == [a, b, c]
    assert r.links_to_cut(c) == [(c, b, pytest.approx(r.graph.jaccard[r.graph.pair_index([b], [c])[0][0]]))]
    r.separate(c)
    assert len(r.index.members(label_of(r, c))) == 1  # c was held only by b: it is alone now
    assert label_of(r, b) == a  # a ~ b stay together
    assert active(r) == [("not_duplicate", "chain0_c", "chain0_b")]
    assert c in r.index.overrides.decided and b not in r.index.overrides.decided


def test_separate_refuses_an_exact_copy_of_the_kept_document(review):
    r, o = review, ords(review)
    copy = o["fam0_copy"]
    assert r.root(copy) == o["fam0_0"] == label_of(r, copy)
    with pytest.raises(ReviewError):
        r.separate(copy)
    with pytest.raises(ReviewError):
        r.separate(o["fam0_0"])  # the kept document itself
    assert active(r) == [] and label_of(r, copy) == o["fam0_0"]


def test_none_duplicates_leaves_only_exact_copies_together(review):
    r, o = review, ords(review)
    for label in (o["fam2_0"], o["chain1_a"]):
        members = r.members(label)
        assert len({r.root(m) for m in members}) >= 3
        r.none_duplicates(label)
        c = r.index.clustering
        for i, x in enumerate(members):
            for y in members[i + 1 :]:
                if c.cluster[x] == c.cluster[y]:
                    assert r.root(x) == r.root(y), r.project.ids_for([x, y])
        # the copies stay with their first copy
    assert label_of(r, o["fam2_copy"]) == label_of(r, o["fam2_0"])
    assert label_of(r, o["fam2_vcopy"]) == label_of(r, o["fam2_1"]) != label_of(r, o["fam2_0"])
    with pytest.raises(ReviewError):
        r.none_duplicates(o["exact0_0"])  # one text: nothing to split


def test_a_decision_never_reorders_the_list(review):
    r = review
    r.set_sort("borderline")
    assert r.view.sort == "borderline" and r.index.sort == "borderline"
    before = r.index.labels.tolist()
    pos = 2
    doc = next(m for m in r.members(before[pos]) if r.index.clustering.reason[m] == NEAR)
    r.select(doc)  # keeping a near member changes the cluster's similarities (its borderline rank)
    resorted = False
    for decide in (lambda: r.keep(doc), lambda: r.remove(), lambda: r.remove(), lambda: r.undo()):
        listed = r.index.labels.tolist()
        decide()
        after = r.index.labels.tolist()
        kept_order = cluster_order(r, listed)
        assert kept_order == after[: len(kept_order)]
        assert r.index.position(label_of(r, doc)) == pos  # the cluster reviewed stays where it was
        resorted |= r.index.with_listing(Listing("borderline")).labels.tolist() != after
    assert resorted  # (a fresh borderline sort would have moved it: the test means something)
    r.set_sort("borderline")  # re-sorting is the reviewer's to ask for
    assert r.index.labels.tolist() == r.index.with_listing(Listing("borderline")).labels.tolist()


@pytest.mark.parametrize("relist", ["set_filter", "set_sort"])
def test_a_cluster_decided_under_the_undecided_filter_stays_listed_until_relisted(review, relist):
    r = review
    r.set_filter("undecided")
    assert r.view.filter == "undecided"
    labels = r.index.labels.tolist()
    pos = 1
    label = labels[pos]
    r.select_cluster(label)
    while not r.cluster_decided(label):
        assert label_of(r, r.cursor.doc) == label
        r.remove()
        assert r.index.labels.tolist() == labels  # decided members: the list is as it was
    assert r.index.decided[pos] and r.index.position(label) == pos
    assert label_of(r, r.cursor.doc) == labels[pos + 1]
    if relist == "set_filter":
        r.set_filter("undecided")
    else:
        r.set_sort(r.view.sort)
    assert r.index.position(label) is None
    assert r.index.labels.tolist() == [x for x in labels if x != label]
    assert not r.index.decided.any()


# -- keep rules ---------------------------------------------------------------------------------


def _lengths(r: Review) -> dict[int, int]:
    return dict(r.project.conn.execute("SELECT ord, length FROM documents").fetchall())


def _longest(r: Review, label: int) -> int:
    length = _lengths(r)
    members = sorted(r.members(label))
    return max(members, key=lambda m: (length[m], -m))


def test_a_keep_rule_never_overrides_a_reviewer(review):
    r = review
    moved = [int(label) for label in r.index.labels if _longest(r, int(label)) != int(label)]
    assert len(moved) >= 3  # clusters the rule "longest" would re-centre
    accepted, judged, untouched = moved[:3]
    longest = {label: _longest(r, label) for label in moved}
    r.accept(accepted)
    # a removal pins the document its cluster kept (the one it was judged against)
    r.remove(next(m for m in r.members(judged) if not r.is_kept(m) and m != longest[judged]))
    said = r.set_keep_rule("longest")  # one aside, not "(the earliest on ties) (unless you chose)"
    assert said == "Each cluster keeps the longest text (the earliest on ties); clusters you decided keep theirs"
    assert keep_rules.keep_rule(r.project) == "longest"
    for label in (accepted, judged):  # the reviewer's clusters
        assert r.is_kept(label) and label_of(r, label) == label and r.index.position(label) is not None
        assert not r.is_kept(longest[label]) and label_of(r, longest[label]) == label
    new = longest[untouched]  # an untouched cluster is re-centred
    assert r.is_kept(new) and label_of(r, untouched) == new and not r.is_kept(untouched)


def test_a_keep_rule_on_a_field_no_record_has_is_refused_with_the_fields(review):
    r = review
    with pytest.raises(DedupError) as err:
        r.set_keep_rule("max:nosuchfield")
    message = str(err.value)
    assert "nosuchfield" in message
    for name in ("id", "text", "date", "score"):
        assert name in message
    assert keep_rules.keep_rule(r.project) == "first"
    r.set_keep_rule("max:score")  # a field the records have
    assert keep_rules.keep_rule(r.project) == "max:score"
    r.remove()  # the review goes on
    assert [kind for kind, _doc, _other in active(r)] == ["keep_rule", "remove"]  # (each one undo step)


# -- the stored view ------------------------------------------------------------------------------


def test_the_view_and_the_cursor_are_restored_when_the_project_is_opened_again(review):
    r = review
    r.change_view(threshold=0.7, policy="greedy")
    r.set_sort("low")
    r.set_filter("undecided")
    view = View(0.7, "greedy", "low", "undecided")
    assert r.view == view and (r.index.threshold, r.index.policy, r.index.sort) == (0.7, "greedy", "low:undecided")
    label = int(r.index.labels[1])
    doc = r.members(label)[-1]
    r.select(doc)
    r.save_view()
    path = r.project.path
    again = Review.open(path, author="t")
    try:
        assert again.view == view
        assert (again.index.threshold, again.index.policy, again.index.sort) == (0.7, "greedy", "low:undecided")
        assert again.cursor.doc == doc and label_of(again, doc) == label
        assert again.index.labels.tolist() == r.index.labels.tolist()
    finally:
        again.close()


# -- search ---------------------------------------------------------------------------------------


def test_search_returns_every_match(review):
    r, o = review, ords(review)
    by_prefix = r.search(r.project, "fam0_")
    assert sorted(m.doc_id for m in by_prefix) == sorted(d["id"] for d in FOCUSED if d["id"].startswith("fam0_"))
    assert [m.doc_id for m in r.search(r.project, "fam0_1")] == ["fam0_1"]
    base = next(d["text"] for d in FOCUSED if d["id"] == "fam0_0")
    for word in base.split()[:6]:
        found = r.search(r.project, word)
        assert sorted(m.doc_id for m in found) == sorted(d["id"] for d in FOCUSED if word in d["text"].lower())
        for m in found:
            assert m.doc == o[m.doc_id]
            label = label_of(r, m.doc)
            assert m.cluster_id == (label if r.index.position(label) is not None else None)
    [kept] = r.search(r.project, "fam0_0")
    assert kept.cluster_id == o["fam0_0"] and "(kept)" in kept.status and "cluster of 7" in kept.status
    [single] = r.search(r.project, "single0")
    assert single.cluster_id is None and "no duplicate" in single.status


def test_search_says_a_document_of_a_decided_cluster_is_hidden_by_the_filter(review):
    r, o = review, ords(review)
    label = o["fam1_0"]
    members = r.members(label)
    for m in members:
        if not r.is_kept(m):
            r.remove(m)
    assert r.cluster_decided(label)
    r.set_filter("undecided")
    assert r.index.position(label) is None
    for m in members:
        [match] = r.search(r.project, r.project.ids_for([m])[0])
        assert match.cluster_id is None
        assert "hidden by the current filter" in match.status and "removed" not in match.status, match.status
    r.set_filter("all")
    [match] = r.search(r.project, "fam1_1")
    assert match.cluster_id == label and "(decided)" in match.status


# -- an exact copy of a member the cluster does not keep (its keeper is that member, its first copy) --


def test_removing_an_exact_copy_of_a_member_keeps_the_kept_document(review):
    r, o = review, ords(review)
    kept, vcopy = o["fam2_0"], o["fam2_vcopy"]
    assert r.is_kept(kept) and label_of(r, vcopy) == kept and r.root(vcopy) == o["fam2_1"] != kept
    r.remove(vcopy)
    assert r.is_kept(kept) and label_of(r, vcopy) == kept
    assert not r.to_review(kept)


def test_separate_splits_off_an_exact_copy_of_a_member_with_its_first_copy(review):
    r, o = review, ords(review)
    kept, variant, vcopy = o["fam2_0"], o["fam2_1"], o["fam2_vcopy"]
    r.separate(vcopy)
    assert label_of(r, vcopy) == label_of(r, variant) != label_of(r, kept)


@pytest.fixture
def shuffled_review(built, tmp_path):
    r = Review.open(copy_project(built["machine"], tmp_path / "project"), author="t")
    yield r
    r.close()


def test_separate_goes_on_to_the_members_left_in_the_cluster(shuffled_review):
    r, o = shuffled_review, ords(shuffled_review)
    label = o["fam1_3"]
    names = ["fam1_3", "fam1_copy", "fam1_0", "fam1_1", "fam1_2"]
    assert r.members(label) == [o[n] for n in names]
    # fam1_0 is an exact copy of fam1_copy: at its similarity to the kept one (it was listed first, at
    # 1.00 to its first copy)
    assert r.root(o["fam1_0"]) == o["fam1_copy"]
    r.select(o["fam1_0"])
    r.separate()
    assert label_of(r, o["fam1_0"]) == label_of(r, o["fam1_copy"]) != label
    assert r.members(label) == [o["fam1_3"], o["fam1_1"], o["fam1_2"]] and r.to_review(o["fam1_1"])
    assert r.cursor.doc == o["fam1_1"]


def test_separate_that_dissolves_the_cluster_goes_on_to_the_next_cluster(review):
    r, o = review, ords(review)
    a, b, c = o["chain0_a"], o["chain0_b"], o["chain0_c"]
    labels = r.index.labels.tolist()
    pos = labels.index(a)
    assert 0 < pos < len(labels) - 1
    r.select(b)  # the link of the chain a ~ b ~ c: the plan moves the cursor on to c
    r.separate()
    assert all(r.index.position(label_of(r, x)) is None for x in (a, b, c))  # no cluster left
    assert r.index.labels.tolist() == labels[:pos] + labels[pos + 1 :]
    following = labels[pos + 1]
    assert r.cursor.doc == next(m for m in r.members(following) if r.to_review(m)) and r.cursor.auto


def test_separate_goes_on_to_the_exact_copies_split_off_with_it(shuffled_review):
    r, o = shuffled_review, ords(shuffled_review)
    label = o["fam2_copy"]
    assert sorted(r.members(label)) == sorted(o[n] for n in ("fam2_copy", "fam2_0", "fam2_1", "fam2_2", "fam2_vcopy"))
    assert r.root(o["fam2_1"]) == o["fam2_vcopy"]  # fam2_1 is an exact copy of fam2_vcopy
    r.remove(o["fam2_0"])
    r.remove(o["fam2_2"])
    r.select(o["fam2_vcopy"])
    r.separate()  # fam2_vcopy leaves with its copy fam2_1, which is still to review
    pair = label_of(r, o["fam2_1"])
    assert pair == o["fam2_vcopy"] and r.to_review(o["fam2_1"])
    assert r.index.position(pair) == r.index.position(label) + 1
    assert r.cursor.doc == o["fam2_1"]


def test_none_duplicates_goes_on_to_the_copies_still_to_review(review):
    r, o = review, ords(review)
    label = o["fam2_0"]
    # fam2_vcopy, a copy of fam2_1, at fam2_1's similarity to the kept one (it was listed at 1.00)
    assert r.members(label) == [o[n] for n in ("fam2_0", "fam2_copy", "fam2_2", "fam2_1", "fam2_vcopy")]
    r.remove(o["fam2_1"])  # the first copy of fam2_vcopy
    r.select(o["fam2_copy"])  # an exact copy of the kept document
    r.none_duplicates()
    # fam2_copy stays with fam2_0, still to review; fam2_vcopy now keeps its own cluster (fam2_1 removed)
    assert r.members(label) == [o["fam2_0"], o["fam2_copy"]] and r.to_review(o["fam2_copy"])
    assert r.is_kept(o["fam2_vcopy"]) and label_of(r, o["fam2_1"]) == o["fam2_vcopy"]
    assert r.index.position(o["fam2_vcopy"]) == r.index.position(label) + 1
    assert r.cursor.doc == o["fam2_copy"]


def test_a_filter_that_lists_no_cluster_leaves_no_cursor(review):
    r = review
    for label in r.index.labels.tolist():
        r.accept(label)
    assert r.index.decided.all() and r.cursor.doc is not None
    r.set_filter("undecided")
    assert len(r.index.labels) == 0
    assert r.cursor.doc is None


@pytest.mark.parametrize("sort", sorted(SORTS))
@pytest.mark.parametrize("flt", ["all", "undecided", "near", "exact", "undecided,size>=5,sim<=0.9", "exact,size=2"])
def test_a_listing_round_trips_through_its_stored_string(sort, flt):
    listing = Listing(sort, flt)
    text = str(listing)
    assert text == (sort if flt == "all" else f"{sort}:{flt}")  # the format projects store
    assert Listing.parse(text) == listing


@pytest.mark.parametrize(
    "text, error",
    [
        ("bogus", "unknown sort 'bogus'"),
        ("bogus:undecided", "unknown sort 'bogus'"),
        ("size:decided", "unknown filter 'decided'"),
        ("high:undecided,size>>2", "unknown filter 'size>>2'"),
    ],
)
def test_a_listing_that_names_an_unknown_sort_or_filter_is_refused(text, error):
    with pytest.raises(ValueError) as raised:
        Listing.parse(text)
    assert str(raised.value) == error


def test_the_review_lists_its_view_and_stores_it_as_strings(review):
    r = review
    r.set_sort("low")
    r.set_filter("undecided")
    assert r.view.listing == Listing("low", "undecided") == r.index.listing
    assert r.index.sort == "low:undecided"
    state = json.loads(r.view_state())
    assert (state["sort"], state["filter"]) == ("low", "undecided")


# -- the queue's rules after every step of random reviews --------------------------------------------

# The machine tolerated bugs the tests above found, now fixed.
KNOWN_BUGS = False

THRESHOLDS = st.one_of(
    st.sampled_from([FLOOR, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0]), st.floats(FLOOR, 1.0, allow_nan=False)
)


@dataclass
class Step:
    """A decision the machine made: where the cursor was and what was listed."""

    doc: int  # the cursor's document (the decision was made on it or on its cluster)
    members: list[int]  # its cluster's members, as listed
    kept: list[int]  # the ones the clustering kept
    labels: list[int]  # the list
    pos: int  # the cluster's place in it
    removed_member: bool = False  # a remove of a member the clustering did not keep
    planned: int | None = None  # where the plan put the cursor (before the list was rebuilt)
    kind: str = ""  # the rule that made it


class ReviewMachine(RuleBasedStateMachine):
    """Random reviews of a copy of the project; the queue's rules hold after every step."""

    source: Path  # the project file, set by the test

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="review_machine_"))
        self.review = Review.open(copy_project(self.source, self.dir), author="t")
        self.step: Step | None = None  # the decision of the last step
        self.made: list[int] = []  # the cursor's document when each decision was made (undo: back there)
        self.undone: list[int] = []
        self.expect_cursor: int | None = None  # after an undo or redo: where the cursor must be
        self.expect_rule = "first"  # the keep rule the steps made, undid and redid leave in force

    def teardown(self) -> None:
        self.review.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- steps
    def _decide(self, plan, removed_member: bool = False, kind: str = "") -> None:
        """Plan a decision with the cursor where it is and run it (ReviewError: nothing was
        decided)."""
        r = self.review
        doc = r.cursor.doc
        label = label_of(r, doc)
        members = r.members(label)
        step = Step(
            doc,
            members,
            [m for m in members if r.is_kept(m)],
            r.index.labels.tolist(),
            r.index.position(label),
            removed_member,
            kind=kind,
        )
        try:
            made = plan()
        except ReviewError:
            return
        step.planned = r.cursor.doc
        r.run(made)
        self.step = step
        self.made.append(doc)
        self.undone.clear()

    @precondition(lambda self: self.review.cursor.doc is not None)
    @rule()
    def keep(self) -> None:
        self._decide(lambda: self.review.plan_keep())

    @precondition(lambda self: self.review.cursor.doc is not None)
    @rule()
    def remove(self) -> None:
        r = self.review
        kept = r.is_kept(r.cursor.doc)
        self._decide(lambda: r.plan_remove(confirmed=kept), removed_member=not kept)

    @precondition(lambda self: self.review.cursor.doc is not None)
    @rule()
    def separate(self) -> None:
        self._decide(lambda: self.review.plan_separate(), kind="separate")

    @precondition(lambda self: self.review.cursor.doc is not None)
    @rule()
    def none_duplicates(self) -> None:
        self._decide(lambda: self.review.plan_none_duplicates())

    @precondition(lambda self: self.review.cursor.doc is not None)
    @rule()
    def accept(self) -> None:
        self._decide(lambda: self.review.plan_accept())

    @rule(rule=st.sampled_from(["first", "longest", "max:score"]))
    def keep_rule(self, rule: str) -> None:
        """A keep rule change: one undo step, about no document (the cursor stays)."""
        r = self.review
        before = keep_rules.keep_rule(r.project)
        r.set_keep_rule(rule)
        if rule != before:
            self.made.append(("rule", before, rule))
            self.undone.clear()
        self.expect_rule = rule

    @rule(i=st.integers(0, 10_000), j=st.integers(0, 10_000), label=st.sampled_from(["not_duplicate", "duplicate"]))
    def label_pair(self, i: int, j: int, label: str) -> None:
        """A tuning label on any two documents (the labelling queue's): evidence, not a review.
        (Its split is recorded as a decision: u takes it back like any other step.)"""
        from dedup_tui.engine.curate import tune

        r = self.review
        n = r.project.next_ord()
        a, b = i % n, j % n
        if r.root(a) == r.root(b):
            return
        ids = r.project.ids_for([a, b])
        before = len(decisions.all_decisions(r.project))
        tune.set_label(r.project, ids[0], ids[1], label, 0.5, author="t")
        r.refresh()
        if len(decisions.all_decisions(r.project)) > before:  # its split recorded: the newest step u takes back
            self.made.append(("label",))
            self.undone.clear()

    @rule()
    def undo(self) -> None:
        r = self.review
        at = r.cursor.doc
        r.undo()
        if self.made:
            self.undone.append(self.made.pop())
            step = self.undone[-1]
            if isinstance(step, tuple) and step[0] == "rule":  # the rule before it is back, the cursor stays
                self.expect_rule = step[1]  # (unless it was placed on a member that is now kept: on from there)
                assert r.cursor.doc == at or not r.to_review(at), (at, r.cursor)
            elif isinstance(step, tuple):
                pass  # a label's split taken back (the cursor goes to the document it names)
            else:
                self.expect_cursor = step

    @rule()
    def redo(self) -> None:
        r = self.review
        row = r.project.conn.execute(
            "SELECT doc_id FROM decisions WHERE undone = ? ORDER BY id LIMIT 1", (reviewer_tables.UNDONE,)
        ).fetchone()
        at = r.cursor.doc
        named = ords(r).get(row[0]) if row is not None else None
        step = None
        if named is not None and self._listed(named):  # the queue's rules, as after the decision itself
            label = label_of(r, named)
            members = r.members(label)
            step = Step(
                named, members, [m for m in members if r.is_kept(m)], r.index.labels.tolist(), r.index.position(label)
            )
        r.redo()
        if self.undone:
            self.made.append(self.undone.pop())
            if isinstance(self.made[-1], tuple) and self.made[-1][0] == "rule":
                self.expect_rule = self.made[-1][2]
                assert r.cursor.doc == at or not r.to_review(at), (at, r.cursor)
            elif isinstance(self.made[-1], tuple):
                pass  # a label's split again
            else:
                self.step = step
                assert (
                    r.cursor.doc is None
                    or not r.cursor.auto
                    or not r.is_kept(r.cursor.doc)
                    or not any(r.to_review(m) for m in listed_members(r))
                ), r.cursor

    @precondition(lambda self: len(self.review.index.labels) > 0)
    @rule(i=st.integers(0, 1000))
    def select(self, i: int) -> None:
        members = listed_members(self.review)
        self.review.select(members[i % len(members)])

    @rule(flt=st.sampled_from(["undecided", "all"]))
    def set_filter(self, flt: str) -> None:
        self.review.set_filter(flt)

    @rule(sort=st.sampled_from(sorted(SORTS)))
    def set_sort(self, sort: str) -> None:
        self.review.set_sort(sort)

    @rule(threshold=THRESHOLDS)
    def set_threshold(self, threshold: float) -> None:
        self.review.change_view(threshold=threshold)

    # -- the rules
    def _listed(self, o: int) -> bool:
        return self.review.index.position(label_of(self.review, o)) is not None

    @invariant()
    def cursor_is_on_a_listed_cluster(self) -> None:
        r = self.review
        if r.cursor.doc is not None:
            assert self._listed(r.cursor.doc), r.cursor
        elif len(r.index.labels):
            raise AssertionError("no cursor on a list of clusters")

    @invariant()
    def auto_advance_never_lands_on_a_kept_document(self) -> None:
        r = self.review
        if r.cursor.doc is not None and r.cursor.auto and any(r.to_review(m) for m in listed_members(r)):
            assert not r.is_kept(r.cursor.doc), r.cursor

    @invariant()
    def progress_is_a_recount(self) -> None:
        ix = self.review.index
        decided = ix.overrides.decided
        assert len(ix.labels) == len(ix.decided) == len(ix.reviewed) == len(ix.to_review)
        for p, label in enumerate(ix.labels.tolist()):
            members = ix.members(label)
            removed = ix.clustering.reason[members] != KEPT
            settled = np.array([int(m) in decided for m in members], dtype=bool)
            assert int(ix.to_review[p]) == int(removed.sum()), label
            assert int(ix.reviewed[p]) == int((removed & settled).sum()), label
            assert bool(ix.decided[p]) == bool(ix.reviewed[p] >= ix.to_review[p]), label

    @invariant()
    def only_review_decisions_decide_documents(self) -> None:
        """A document counts as decided only through a decision the reviewer made on it (a keep,
        a removal, a split, an accept listing it), never through a tuning label."""
        r = self.review
        named: set[str] = set()
        for d in decisions.active(r.project):
            if d.kind in ("keep", "remove", "not_duplicate", "accept") and not decisions.is_label_split(d):
                named.add(d.doc_id)
                if d.kind == "accept":
                    named.update(json.loads(d.value or "[]"))
        ids = r.project.ids_for(sorted(r.index.overrides.decided))
        assert set(ids) <= named, set(ids) - named

    @invariant()
    def the_keep_rule_is_the_one_the_steps_left(self) -> None:
        r = self.review
        assert keep_rules.keep_rule(r.project) == self.expect_rule == r.index.clustering.kept_by

    @invariant()
    def undo_and_redo_put_the_cursor_back(self) -> None:
        expected, self.expect_cursor = self.expect_cursor, None
        if expected is not None and self._listed(expected):
            assert self.review.cursor.doc == expected, (expected, self.review.cursor)

    @invariant()
    def no_member_is_skipped_and_the_queue_goes_on_in_list_order(self) -> None:
        step, self.step = self.step, None
        if step is None or step.pos is None:  # (pos None: made on a cursor left on no listed cluster)
            return
        r = self.review
        if step.removed_member:
            assert all(r.is_kept(k) for k in step.kept), "a remove changed the document its cluster keeps"
        left = [m for m in step.members if self._listed(m) and r.to_review(m)]
        cur = r.cursor.doc
        if left:  # still in the cluster the decision was made in
            if KNOWN_BUGS and step.kind == "separate" and all(r.root(m) == r.root(step.doc) for m in left):
                return  # test_separate_goes_on_to_the_exact_copies_split_off_with_it
            if (
                KNOWN_BUGS
                and step.planned is not None
                and r.is_kept(step.planned)
                and label_of(r, step.planned) not in {label_of(r, m) for m in left}
            ):
                return  # test_none_duplicates_goes_on_to_the_copies_still_to_review
            assert cur is not None and (cur in step.members or label_of(r, cur) in {label_of(r, m) for m in left}), (
                step,
                left,
                r.cursor,
            )
            return
        # else: the first member to review of the next cluster in list order (wrapping round)
        following = step.labels[step.pos + 1 :] + step.labels[: step.pos]
        expected = next((m for label in following for m in r.members(label_of(r, label)) if r.to_review(m)), None)
        if expected is not None:
            assert cur == expected and r.cursor.auto, (step, expected, r.cursor)


def test_the_queue_rules_hold_after_every_step(built):
    # (REVIEW_MODEL_EXAMPLES / REVIEW_MODEL_STEPS: more, to hunt for bugs)
    machine = type("Machine", (ReviewMachine,), {"source": built["machine"]})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=int(os.environ.get("REVIEW_MODEL_EXAMPLES", "25")),
            stateful_step_count=int(os.environ.get("REVIEW_MODEL_STEPS", "20")),
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


def test_the_review_s_literal_kinds_are_the_engine_s():
    from typing import get_args

    from dedup_tui.engine.graph.pairs import POLICIES, Policy
    from dedup_tui.review.index import FILTERS, FilterName, Sort
    from dedup_tui.review.model import DecisionKind

    assert get_args(Policy) == POLICIES
    assert get_args(Sort) == tuple(SORTS) and get_args(FilterName) == tuple(FILTERS)
    assert get_args(DecisionKind) == decisions.KINDS
