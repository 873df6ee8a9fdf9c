"""Reviewer decisions: recorded by document id, undoable, and applied over the automatic policy.

Kinds (the `decisions` table's `kind` column):
- keep          doc_id is kept; it becomes the document kept in its cluster.
- remove        doc_id is removed (as a duplicate of its cluster's kept document, or alone).
- not_duplicate doc_id / other_id are never joined: the pair is split off at every threshold.
- accept        the cluster whose kept document is doc_id was accepted as proposed
                (value: JSON list of the member ids at the time).
- note          a free-text note (value) on doc_id.

Every call commits at once. Undo marks the newest active decision `undone = 1`; redo brings
back the oldest undone one; a new decision discards what could still be redone
(`undone = 2`). For keep/remove, the newest active decision on a document wins.
"""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, get_args

import numpy as np

from ..display import literal_line
from ..errors import DedupError
from ..graph.clustering import KEPT, REVIEWER, Clustering, forget_rejected, removal_reasons
from ..graph.pairs import PairGraph, Policy
from ..store import Project, now_iso, reviewer, transaction
from ..store.reviewer import ACTIVE, UNDONE

# What a decision says (the `decisions` table's `kind` column), and its state (`undone`).
DecisionKind = Literal["keep", "remove", "not_duplicate", "accept", "note", "keep_rule"]
KINDS: tuple[DecisionKind, ...] = get_args(DecisionKind)


@dataclass
class Decision:
    id: int
    kind: DecisionKind
    doc_id: str | None
    other_id: str | None
    value: str | None
    threshold: float | None
    policy: Policy | None
    author: str | None
    created_at: str
    undone: int = 0
    batch: int | None = None
    batch_size: int = 1  # set by undo/redo of a bulk action: how many decisions the step took

    def describe(self) -> str:
        """One line for people (ids and notes escaped: they come from the corpus or a reviewer)."""
        doc, other = literal_line(self.doc_id or ""), literal_line(self.other_id or "")
        if self.kind == "not_duplicate":
            if self.batch_size > 1:
                return f"not a duplicate: {self.batch_size:,} links cut ({doc} / {other} and others)"
            return f"not a duplicate: {doc} / {other}"
        if self.kind == "note":
            return f"note on {doc}: {literal_line(self.value or '')}"
        if self.kind == "accept":
            return f"accept {self.batch_size:,} clusters" if self.batch_size > 1 else f"accept cluster of {doc}"
        if self.kind == "keep_rule":
            change = json.loads(self.value or "{}")
            return (
                f"the keep rule {literal_line(str(change.get('to')), 40)} "
                f"(was {literal_line(str(change.get('from')), 40)})"
            )
        return f"{self.kind} {doc}"


# The `value` of the not_duplicate decision a "not a duplicate" tuning label records: the pair is
# split, but neither document counts as reviewed.
LABEL_VALUE = "label"


def is_label_split(d: Decision) -> bool:
    """The not_duplicate decision a tuning label recorded (engine.curate.tune.set_label)."""
    return d.kind == "not_duplicate" and d.value == LABEL_VALUE


def decides_its_document(d: Decision) -> bool:
    """Whether `d` makes the document it names decided (reviewed): not a note, and not a tuning
    label (evidence, never a review of its documents)."""
    return d.doc_id is not None and d.kind != "note" and not is_label_split(d)


def default_author() -> str:
    try:
        return os.environ.get("DEDUP_TUI_AUTHOR") or getpass.getuser()
    except Exception:  # noqa: BLE001 - getuser raises various errors without a passwd entry
        return "unknown"


def record(
    project: Project,
    kind: DecisionKind,
    doc_id: str,
    other_id: str | None = None,
    value: str | None = None,
    threshold: float | None = None,
    policy: Policy | None = None,
    author: str | None = None,
) -> Decision:
    """Record one decision and commit it. Discards anything that could be redone."""
    return record_many(project, [(kind, doc_id, other_id, value)], threshold, policy, author)[0]


def decision_from_row(r: dict) -> Decision:
    return Decision(**r)


def undo(project: Project) -> Decision | None:
    """Undo the newest active decision (with the rest of its bulk action); returns it, or None
    when there is nothing to undo."""
    return _switch(project, reviewer.newest_active_decision, ACTIVE, UNDONE)


def next_undo(project: Project) -> Decision | None:
    """The decision undo() would undo now (read only), or None."""
    r = reviewer.newest_active_decision(project)
    return decision_from_row(r) if r is not None else None


def next_redo(project: Project) -> Decision | None:
    """The decision redo() would bring back now (read only), or None."""
    r = reviewer.oldest_undone_decision(project)
    return decision_from_row(r) if r is not None else None


def redo(project: Project) -> Decision | None:
    """Bring back the most recently undone decision (with the rest of its bulk action)."""
    return _switch(project, reviewer.oldest_undone_decision, UNDONE, ACTIVE)


def _switch(project: Project, find, old_state: int, new_state: int) -> Decision | None:
    """The decision find(project) names, with the rest of its bulk action, from old_state to new_state."""
    with transaction(project.conn):
        r = find(project)
        if r is None:
            return None
        d = decision_from_row(r)
        if d.batch is None:
            reviewer.set_decision_state(project, d.id, new_state)
        else:
            d.batch_size = reviewer.set_batch_state(project, d.batch, old_state, new_state)
        if d.kind == "keep_rule":  # the rule it replaced back (undo), or the one it set (redo)
            change = json.loads(d.value or "{}")
            project.set_meta(keep_rule=change.get("from" if new_state == UNDONE else "to") or "first")
    return d


def record_many(
    project: Project,
    rows: Sequence[tuple[str, str, str | None, str | None]],
    threshold: float | None = None,
    policy: Policy | None = None,
    author: str | None = None,
) -> list[Decision]:
    """Record several decisions (kind, doc_id, other_id, value) as one step: one transaction,
    one undo. Discards anything that could be redone. Returns them, oldest first."""
    if not rows:
        return []
    for kind, _doc_id, other_id, _value in rows:
        if kind not in KINDS or kind == "keep_rule":  # (record_keep_rule: it names no document)
            raise DedupError(f"unknown decision kind {kind!r} (choose from {', '.join(KINDS[:-1])})")
        if kind == "not_duplicate" and not other_id:
            raise DedupError("a not_duplicate decision needs two documents")
    refuse_removing_references(project, [doc_id for kind, doc_id, _o, _v in rows if kind == "remove"])
    author = author or default_author()
    created = now_iso()
    with transaction(project.conn):
        reviewer.discard_redoable(project)
        got = reviewer.insert_decisions(
            project,
            [
                {
                    "kind": kind,
                    "doc_id": doc_id,
                    "other_id": other_id,
                    "value": value,
                    "threshold": threshold,
                    "policy": policy,
                    "author": author,
                    "created_at": created,
                }
                for kind, doc_id, other_id, value in rows
            ],
            batch=len(rows) > 1,
        )
    return [decision_from_row(r) for r in got]


class ReferenceRemoval(DedupError):
    """A decision that would remove a reference document (never removed: it is only matched)."""


def refuse_removing_references(project: Project, doc_ids: list[str]) -> None:
    """ReferenceRemoval naming the first of `doc_ids` that is a reference document, and its file."""
    refs = set(project.reference_sources())
    if not refs or not doc_ids:
        return
    source_of = project.sources_of_ids(doc_ids)
    for doc_id in doc_ids:
        if source_of.get(doc_id) in refs:
            path = project.source_paths().get(source_of[doc_id], "?")
            raise ReferenceRemoval(
                f"{literal_line(doc_id, 60)} is a reference document (from {literal_line(path)}): "
                f"reference documents are matched but never removed"
            )


REFERENCE_REMOVAL = "it removes a reference document, and reference documents are matched but never removed"


def not_applied(project: Project, decisions: list[Decision]) -> dict[int, str]:
    """{decision id: why} of the active decisions among `decisions` that cannot apply: a
    removal of a reference document (refused when recorded, but inserted by hand or by an older
    version). They stay in the log, marked so, and are not counted as applied."""
    removals = [d for d in decisions if d.kind == "remove" and d.undone == ACTIVE and d.doc_id is not None]
    refs = set(project.reference_sources()) if removals else set()
    if not refs:
        return {}
    source_of = project.sources_of_ids([d.doc_id for d in removals])
    return {d.id: REFERENCE_REMOVAL for d in removals if source_of.get(d.doc_id) in refs}


def accept_clusters(
    project: Project,
    clusters: list[tuple[str, list[str]]],
    threshold: float | None = None,
    policy: Policy | None = None,
    author: str | None = None,
) -> int:
    """Accept many clusters (kept id, member ids) as one bulk action: one transaction, one undo
    step. Returns how many were accepted."""
    rows = [("accept", kept, None, json.dumps(ids, ensure_ascii=False)) for kept, ids in clusters]
    return len(record_many(project, rows, threshold, policy, author))


def active(project: Project) -> list[Decision]:
    return [decision_from_row(r) for r in reviewer.decision_rows(project, "undone = ?", [ACTIVE])]


def on_documents(project: Project) -> list[Decision]:
    """The active decisions on documents: what an export applies and counts (keep-rule changes
    name no document; the rule in force is the manifest's `keep_rule`)."""
    return [d for d in active(project) if d.kind != "keep_rule"]


def all_decisions(project: Project) -> list[Decision]:
    return [decision_from_row(r) for r in reviewer.decision_rows(project)]


def can_undo(project: Project) -> bool:
    return reviewer.has_decision(project, ACTIVE)


def can_redo(project: Project) -> bool:
    return reviewer.has_decision(project, UNDONE)


def notes_for(project: Project, doc_id: str) -> list[str]:
    """The active notes on a document, oldest first."""
    return reviewer.active_notes(project, doc_id)


def ords_for_ids(project: Project, ids) -> dict[str, int]:
    return project.ords_for_ids(ids)


def roots_of(project: Project, ords) -> dict[int, int]:
    """ord -> the first copy of its text (itself when it is the first)."""
    return project.exact_roots(ords)


@dataclass
class Overrides:
    """Active decisions resolved to ords (decisions on ids not in the project are ignored).

    What a decision settles for the review queue (`decided`): keep and remove settle their
    document; not_duplicate settles the document the reviewer split off (doc_id), not the one
    it was compared with; accept settles the members listed when the cluster was accepted (a
    member that joins it later, at another threshold, is not settled). A not_duplicate that a
    tuning label recorded splits its pair but settles neither document (is_label_split)."""

    keep: set[int]
    remove: set[int]
    split_pairs: set[tuple[int, int]]  # first copies (a < b): the stored pairs they name
    accepted: set[int]  # ords of documents named by accept decisions (the kept one of the cluster)
    decided: set[int]  # every ord a decision settled (see above)
    # Documents a reviewer judged others against: the kept document of an accepted cluster and
    # the one a removed document was a duplicate of. A keep rule never moves a cluster off them.
    pinned: set[int] = field(default_factory=set)

    @classmethod
    def load(cls, project: Project) -> Overrides:
        decisions = active(project)
        listed = [m for d in decisions if d.kind == "accept" for m in json.loads(d.value or "[]")]
        ords = ords_for_ids(project, [d.doc_id for d in decisions] + [d.other_id for d in decisions] + listed)
        state: dict[int, str] = {}
        split_docs: list[tuple[int, int]] = []
        accepted: set[int] = set()
        decided: set[int] = set()
        pinned: set[int] = set()
        for d in decisions:
            o = ords.get(d.doc_id) if d.doc_id is not None else None
            if o is None:
                continue
            if d.kind == "note":
                continue
            if decides_its_document(d):
                decided.add(o)
            if d.kind in ("keep", "remove"):
                state[o] = d.kind
                judged_against = ords.get(d.other_id) if d.kind == "remove" and d.other_id else None
                if judged_against is not None and judged_against != o:
                    pinned.add(judged_against)
            elif d.kind == "not_duplicate":
                other = ords.get(d.other_id)
                if other is not None and other != o:
                    split_docs.append((o, other))
            elif d.kind == "accept":
                accepted.add(o)
                pinned.add(o)
                for member in json.loads(d.value or "[]"):
                    m = ords.get(member)
                    if m is not None:
                        decided.add(m)
        root = roots_of(project, [x for pair in split_docs for x in pair]) if split_docs else {}
        split = {
            (min(ra, rb), max(ra, rb))
            for ra, rb in ((root.get(a, a), root.get(b, b)) for a, b in split_docs)
            if ra != rb
        }
        keep = {o for o, k in state.items() if k == "keep"}
        remove = {o for o, k in state.items() if k == "remove"}
        return cls(keep, remove, split, accepted, decided, pinned - remove)

    def after_keep(self, o: int) -> Overrides | None:
        """What load() reads back once a keep of `o` is recorded after these decisions (the
        newest keep or remove decision on a document wins), or None when that is not known from
        these alone: `o` removed (its removal taken over may make a judged-against pin of it
        count again)."""
        if o in self.remove:
            return None
        return replace(self, keep=self.keep | {o}, decided=self.decided | {o})


def _roots(graph: PairGraph, ords: np.ndarray) -> np.ndarray:
    ex = graph.exact_of[ords]
    return np.where(ex >= 0, ex, ords)


class PairIndex:
    """Stored Jaccard between two documents (through their exact-group representatives)."""

    def __init__(self, graph: PairGraph):
        self.graph = graph

    def similarity(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        rx, ry = _roots(self.graph, x), _roots(self.graph, y)
        out = np.full(len(rx), np.nan)
        same = rx == ry
        out[same] = 1.0
        at, found = self.graph.pair_index(np.minimum(rx, ry), np.maximum(rx, ry))
        found &= ~same
        out[found] = self.graph.jaccard[at[found]]
        return out


def apply_overrides(graph: PairGraph, clustering: Clustering, ov: Overrides) -> Clustering:
    """Apply keep/remove decisions to a clustering (in place, returned for convenience)."""
    c = clustering
    # a pinned document already kept in its cluster needs nothing (most accepted clusters)
    moved_pins = {p for p in ov.pinned if c.reason[p] != KEPT or c.cluster[p] != p}
    touched = ov.keep | ov.remove | moved_pins
    c.overridden = {}
    if not touched:
        return clustering
    index = PairIndex(graph)
    for label, members in _clusters_holding(c.cluster, touched).items():
        c.overridden[_override_cluster(graph, c, members, label, ov, index)] = label
    return forget_rejected(c)


def _clusters_holding(cluster: np.ndarray, docs: set[int]) -> dict[int, list[int]]:
    """The clusters holding `docs`: label -> every member, in ord order."""
    labels = np.unique(cluster[np.fromiter(docs, np.int64, len(docs))])
    members_all = np.flatnonzero(np.isin(cluster, labels))
    groups: dict[int, list[int]] = {}
    for m, label in zip(members_all.tolist(), cluster[members_all].tolist()):
        groups.setdefault(label, []).append(m)
    return groups


def _override_cluster(
    graph: PairGraph, c: Clustering, members: list[int], label: int, ov: Overrides, index: PairIndex
) -> int:
    """Settle one cluster (its members in ord order, `label` its label before any decision) by
    the decisions in `ov`, in place; returns its label after them. Every member's keeper,
    similarity and reason is set here, whatever it was."""
    forced_keep = [m for m in members if m in ov.keep]
    # A reference is never removed (a remove decision on one is refused when recorded and
    # ignored here), and a cluster holding one keeps it.
    ref = graph.reference if graph.has_references() else None
    refs = [m for m in members if ref is not None and ref[m]]
    candidates = [m for m in members if m not in ov.remove or m in refs]
    pins = [m for m in candidates if m in ov.pinned]
    if refs:
        rep = label if label in refs else next((m for m in refs if m in ov.keep or m in ov.pinned), refs[0])
    elif forced_keep:
        rep = forced_keep[0]
    elif pins:
        rep = label if label in pins else pins[0]
    elif label in candidates:
        rep = label
    elif candidates:
        rep = candidates[0]
    else:
        rep = -1
    arr = np.array(members, dtype=np.int64)
    c.cluster[arr] = rep if rep >= 0 else label
    if rep >= 0:
        c.keeper[rep], c.reason[rep], c.similarity[rep] = -1, KEPT, np.nan
        others = arr[arr != rep]
        if len(others):
            c.keeper[others] = rep
            sims = index.similarity(np.full(len(others), rep), others)
            c.similarity[others] = sims
            c.reason[others] = removal_reasons(graph, others, np.full(len(others), rep))
    for m in forced_keep + refs:
        if m != rep:
            c.keeper[m], c.reason[m], c.similarity[m] = -1, KEPT, np.nan
    for m in members:
        if m in ov.remove and m not in refs:
            c.reason[m] = REVIEWER
            if rep < 0:
                c.keeper[m], c.similarity[m] = -1, np.nan
    return rep if rep >= 0 else label


def changed_documents(old: Overrides, new: Overrides) -> set[int]:
    """Documents whose keep, remove, pin or settled state differs between two sets of decisions."""
    return (old.keep ^ new.keep) | (old.remove ^ new.remove) | (old.pinned ^ new.pinned) | (old.decided ^ new.decided)


def reapply_overrides(graph: PairGraph, previous: Clustering, old: Overrides, new: Overrides) -> Clustering | None:
    """What cluster_with_decisions gives with the decisions `new`, worked out from `previous`,
    its result with `old` (same graph, threshold, policy and keep rule): a copy in which only
    the clusters holding a document whose decision changed are settled again. Decisions do not
    move documents between clusters (splits do: then None), so a keep or a removal redoes one
    cluster instead of the whole corpus. None also when a cluster's state before every decision
    is not known (a decision taken back, or `previous` not made by apply_overrides)."""
    if previous.overridden is None or old.split_pairs != new.split_pairs:
        return None
    overridden = dict(previous.overridden)
    c = replace(
        previous,
        keeper=previous.keeper.copy(),
        similarity=previous.similarity.copy(),
        reason=previous.reason.copy(),
        cluster=previous.cluster.copy(),
        overridden=overridden,
    )
    changed = (old.keep ^ new.keep) | (old.remove ^ new.remove) | (old.pinned ^ new.pinned)
    if not changed:
        return c
    index = PairIndex(graph)
    for now, members in _clusters_holding(previous.cluster, changed).items():
        before = overridden.pop(now, None)
        base = now if before is None else before
        # before any decision a cluster's label is its kept document, and no other member is both
        # kept and its own cluster: a pin moves the cluster unless it is that document
        touched = any(m in new.keep or m in new.remove or (m in new.pinned and m != base) for m in members)
        if not touched:
            if before is not None:
                return None  # its state before the decisions is gone: cluster again
            continue
        overridden[_override_cluster(graph, c, members, base, new, index)] = base
    return forget_rejected(c)
