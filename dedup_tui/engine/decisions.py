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
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Literal, get_args

import numpy as np

from .cluster import (EXACT, KEPT, NEAR, REASON_NAMES, REVIEWER, Clustering, PairGraph, Policy, cluster,
                      forget_rejected, protect_references, removal_reasons)
from .cluster_table import cluster_table_format, write_cluster_table
from .display import literal_line
from .errors import DedupError
from .outputs import check_outputs, project_protected
from .export import ExportReport, AtomicFile, as_object, check_threshold, export, removal_links, similarity_values
from .partial import refuse_local_export
from .progress import Control
from .store import Project, now_iso, review, transaction
from .store.audits import manifest_entry as audit_entry
from .store.review import ACTIVE, DISCARDED, UNDONE

# What a decision says (the `decisions` table's `kind` column), and its state (`undone`).
DecisionKind = Literal["keep", "remove", "not_duplicate", "accept", "note", "keep_rule"]
DecisionStatus = Literal["active", "undone", "discarded"]
KINDS: tuple[DecisionKind, ...] = get_args(DecisionKind)
STATUS_NAMES: dict[int, DecisionStatus] = {ACTIVE: "active", UNDONE: "undone", DISCARDED: "discarded"}


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
            return (f"the keep rule {literal_line(str(change.get('to')), 40)} "
                    f"(was {literal_line(str(change.get('from')), 40)})")
        return f"{self.kind} {doc}"



# The `value` of the not_duplicate decision a "not a duplicate" tuning label records: the pair is
# split, but neither document counts as reviewed.
LABEL_VALUE = "label"


def is_label_split(d: Decision) -> bool:
    """The not_duplicate decision a tuning label recorded (engine.tune.set_label)."""
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


def _row(r: dict) -> Decision:
    return Decision(**r)


def undo(project: Project) -> Decision | None:
    """Undo the newest active decision (with the rest of its bulk action); returns it, or None
    when there is nothing to undo."""
    return _switch(project, review.newest_active_decision, ACTIVE, UNDONE)


def next_undo(project: Project) -> Decision | None:
    """The decision undo() would undo now (read only), or None."""
    r = review.newest_active_decision(project.db)
    return _row(r) if r is not None else None


def next_redo(project: Project) -> Decision | None:
    """The decision redo() would bring back now (read only), or None."""
    r = review.oldest_undone_decision(project.db)
    return _row(r) if r is not None else None


def redo(project: Project) -> Decision | None:
    """Bring back the most recently undone decision (with the rest of its bulk action)."""
    return _switch(project, review.oldest_undone_decision, UNDONE, ACTIVE)


def _switch(project: Project, find, old_state: int, new_state: int) -> Decision | None:
    """The decision find(db) names, with the rest of its bulk action, from old_state to new_state."""
    with transaction(project.conn):
        r = find(project.db)
        if r is None:
            return None
        d = _row(r)
        if d.batch is None:
            review.set_decision_state(project.db, d.id, new_state)
        else:
            d.batch_size = review.set_batch_state(project.db, d.batch, old_state, new_state)
        if d.kind == "keep_rule":  # the rule it replaced back (undo), or the one it set (redo)
            change = json.loads(d.value or "{}")
            project.set_meta(keep_rule=change.get("from" if new_state == UNDONE else "to") or "first")
    return d


def record_many(project: Project, rows: Sequence[tuple[str, str, str | None, str | None]], threshold: float | None = None,
                policy: Policy | None = None, author: str | None = None) -> list[Decision]:
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
        review.discard_redoable(project.db)
        got = review.insert_decisions(project.db, [
            {"kind": kind, "doc_id": doc_id, "other_id": other_id, "value": value, "threshold": threshold,
             "policy": policy, "author": author, "created_at": created} for kind, doc_id, other_id, value in rows],
            batch=len(rows) > 1)
    return [_row(r) for r in got]


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
            raise ReferenceRemoval(f"{literal_line(doc_id, 60)} is a reference document (from {literal_line(path)}): "
                                   f"reference documents are matched but never removed")


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


def accept_clusters(project: Project, clusters: list[tuple[str, list[str]]], threshold: float | None = None,
                    policy: Policy | None = None, author: str | None = None) -> int:
    """Accept many clusters (kept id, member ids) as one bulk action: one transaction, one undo
    step. Returns how many were accepted."""
    rows = [("accept", kept, None, json.dumps(ids, ensure_ascii=False)) for kept, ids in clusters]
    return len(record_many(project, rows, threshold, policy, author))


def active(project: Project) -> list[Decision]:
    return [_row(r) for r in review.decision_rows(project.db, "undone = ?", [ACTIVE])]


def on_documents(project: Project) -> list[Decision]:
    """The active decisions on documents: what an export applies and counts (keep-rule changes
    name no document; the rule in force is the manifest's `keep_rule`)."""
    return [d for d in active(project) if d.kind != "keep_rule"]


def all_decisions(project: Project) -> list[Decision]:
    return [_row(r) for r in review.decision_rows(project.db)]


def can_undo(project: Project) -> bool:
    return review.has_decision(project.db, ACTIVE)


def can_redo(project: Project) -> bool:
    return review.has_decision(project.db, UNDONE)


def notes_for(project: Project, doc_id: str) -> list[str]:
    """The active notes on a document, oldest first."""
    return review.active_notes(project.db, doc_id)


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
        split = {(min(ra, rb), max(ra, rb)) for ra, rb in ((root.get(a, a), root.get(b, b)) for a, b in split_docs)
                 if ra != rb}
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


def _override_cluster(graph: PairGraph, c: Clustering, members: list[int], label: int, ov: Overrides,
                      index: PairIndex) -> int:
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
    c = replace(previous, keeper=previous.keeper.copy(), similarity=previous.similarity.copy(),
                reason=previous.reason.copy(), cluster=previous.cluster.copy(), overridden=overridden)
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


KEEP_RULES = {
    "first": "the first in corpus order",
    "longest": "the longest text (the earliest on ties)",
}
# Besides those: "max:FIELD" / "min:FIELD", the document whose record has the highest / lowest
# value of FIELD (the newest date, the best score), the earliest on ties. Numbers (NUMBER_TEXT:
# also written as strings) compare exactly and come before any other string; documents without it last.
_FIELD_RULE = re.compile(r"(max|min):(.+)", re.DOTALL)


def parse_keep_rule(rule: str) -> str:
    """The rule as stored, or DedupError saying what is allowed."""
    rule = rule.strip()
    if rule in KEEP_RULES:
        return rule
    m = _FIELD_RULE.fullmatch(rule)
    if m and m.group(2).strip():
        return f"{m.group(1)}:{m.group(2).strip()}"
    raise DedupError(f"unknown keep rule {rule!r} (choose from {', '.join(KEEP_RULES)}, max:FIELD or min:FIELD, "
                     f"e.g. max:date for the newest, max:score for the best)")


def describe_keep_rule(rule: str) -> str:
    if rule in KEEP_RULES:
        return KEEP_RULES[rule]
    direction, name = rule.split(":", 1)
    return f"the {'highest' if direction == 'max' else 'lowest'} {name} (the earliest on ties)"


def keep_rule(project: Project) -> str:
    """Which document of a cluster is kept when no reviewer chose: the project's setting."""
    rule = project.get_meta("keep_rule") or "first"
    try:
        return parse_keep_rule(rule)
    except DedupError:
        return "first"


def record_fields(project: Project, wanted: str | None = None, sample: int = 1000) -> tuple[bool, list[str]]:
    """Whether some record has the field `wanted` (every record is read until one has it), and
    the fields of the first `sample` records, in first-seen order."""
    sources = project.record_sources()
    seen: dict[str, None] = {}
    for i, (_ord, doc_id, text, source_id, record) in enumerate(project.records()):
        try:
            fields = as_object(sources[source_id], doc_id, text, record)
        except (ValueError, AttributeError):
            continue
        if not isinstance(fields, dict):
            continue
        if i < sample:
            seen.update(dict.fromkeys(fields))
        if wanted is not None and fields.get(wanted) is not None:
            return True, list(seen)
        if wanted is None and i >= sample:
            break
    return False, list(seen)


def check_keep_rule(project: Project, rule: str) -> str:
    """The rule as stored; a field rule whose field no record has is refused (DedupError
    listing the fields the records have)."""
    rule = parse_keep_rule(rule)
    if rule not in KEEP_RULES:
        name = rule.split(":", 1)[1]
        found, fields = record_fields(project, name)
        if not found:
            listed = ", ".join(literal_line(f, 40) for f in fields[:20]) or "none"
            raise DedupError(f"no record has a field {literal_line(name, 40)!r}: the records' fields are {listed}")
    return rule


def record_keep_rule(project: Project, rule: str, threshold: float | None = None, policy: Policy | None = None,
                     author: str | None = None) -> Decision | None:
    """Set the project's keep rule as one step of the undo history (a `keep_rule` decision: undo
    puts the rule it replaced back, redo sets it again); None when `rule` is the one in force."""
    rule = check_keep_rule(project, rule)
    before = keep_rule(project)
    if rule == before:
        return None
    with transaction(project.conn):
        review.discard_redoable(project.db)
        got = review.insert_decisions(project.db, [
            {"kind": "keep_rule", "doc_id": None, "other_id": None,
             "value": json.dumps({"from": before, "to": rule}, ensure_ascii=False), "threshold": threshold,
             "policy": policy, "author": author or default_author(), "created_at": now_iso()}], batch=False)
        project.set_meta(keep_rule=rule)
    return _row(got[0])


def set_keep_rule(project: Project, rule: str) -> None:
    rule = check_keep_rule(project, rule)
    with transaction(project.conn):
        project.set_meta(keep_rule=rule)


def _lengths(project: Project, graph: PairGraph) -> np.ndarray:
    """Characters of every document's text (read once per graph)."""
    return graph.per_document("lengths", project.lengths)


# What a number is for max:FIELD / min:FIELD: a JSON number, or a string that is exactly one
# decimal number in ASCII digits as JSON writes them (leading zeros allowed). Not " 3 ", "1_000",
# fullwidth digits, "0x10", "inf" or "NaN": Python's float() and Decimal() would take some of
# those, and then which strings count as numbers would depend on the parser.
NUMBER_TEXT = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def exact_number(digits: str):
    """The exact value of a number matching NUMBER_TEXT: an int when it is written as an
    integer, else a Decimal. An exponent beyond what Decimal holds (about 10**18) makes it an
    infinity, or zero when the exponent is negative."""
    try:
        number = Decimal(digits)
    except ArithmeticError:
        mantissa, _, exponent = digits.lower().partition("e")
        if exponent.startswith("-") or not mantissa.strip("-0."):
            return 0
        return float("-inf") if digits.startswith("-") else float("inf")
    return int(number) if number.as_tuple().exponent == 0 else number


_EXACT_JSON = None


def _exact_decoder():
    """JSON as parse_record reads it, but every non-integer number exact_number of its digits
    as written: numbers compare by exact value (a JSON 0.1 equals the string "0.1", 1e400 is
    below 2e400, and integers beyond 2**53 stay distinct)."""
    global _EXACT_JSON
    if _EXACT_JSON is None:
        from .readers import parse_json_int

        _EXACT_JSON = json.JSONDecoder(parse_float=exact_number, parse_int=parse_json_int)
    return _EXACT_JSON


def _field_value(source: dict, doc_id: str, text: str, record, field: str):
    """The record's value of `field` (a number that is not an integer as exact_number gives
    it), or None."""
    value = as_object(source, doc_id, text, record).get(field)
    if type(value) is float and value == value:  # not NaN: read again, its digits as written
        raw = str(record, "utf-8", "surrogatepass") if isinstance(record, (bytes, bytearray, memoryview)) else record
        value = _exact_decoder().decode(raw).get(field)
    return value


NOT_A_NUMBER = object()


def as_number(value):
    """A field's value as an exactly comparable number (int, Decimal, or a float infinity),
    None for a value that counts as missing (null, boolean, NaN, list, object), or
    NOT_A_NUMBER for a string that is not a number (NUMBER_TEXT)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, Decimal)):
        return value
    if isinstance(value, float):  # an infinity (JSON's Infinity constant, or 1e400 overflowing a float)
        return None if value != value else value
    if not isinstance(value, str):
        return None
    if not NUMBER_TEXT.fullmatch(value):  # (a LongNumber, an integer of over 4,300 digits, matches)
        return NOT_A_NUMBER
    return exact_number(value)


def _dense_ranks(values: list) -> np.ndarray:
    """0 for the smallest value, 1 for the next distinct one, ...: exact for ints of any size,
    Decimals and floats, and between them (Python compares them by exact value)."""
    if all(type(v) is int and -(2**63) <= v < 2**63 for v in values):
        return np.unique(np.array(values, np.int64), return_inverse=True)[1].reshape(-1)
    index = {v: i for i, v in enumerate(sorted(set(values)))}
    return np.fromiter((index[v] for v in values), np.int64, len(values))


def field_ranks(project: Project, field: str, n: int, direction: str = "max") -> np.ndarray:
    """Every document's preference by the value of `field` in its record, higher preferred:
    a number (a JSON number, or a string that reads as one) is preferred to any other string
    (ISO dates, in their order), and any string to a document whose record has no such field,
    or a null, boolean, NaN, list or object there (-1). Among numbers the highest (max) or
    lowest (min) value, compared exactly (integers beyond 2**53, decimals as written); among
    strings the last (max) or first (min) in code-point order."""
    sources = project.record_sources()
    numbers: list[tuple[int, object]] = []
    texts: list[tuple[int, str]] = []
    for ordinal, doc_id, text, source_id, record in project.records():
        try:
            value = _field_value(sources[source_id], doc_id, text, record, field)
        except (ValueError, AttributeError, KeyError, TypeError, RecursionError):
            continue
        number = as_number(value)
        if number is NOT_A_NUMBER:
            texts.append((ordinal, value))
        elif number is not None:
            numbers.append((ordinal, number))
    ranks = np.full(n, -1, np.int64)
    base = 0
    for found in (texts, numbers):  # numbers above strings, in either direction
        if not found:
            continue
        ords, values = zip(*found)
        if found is texts:
            dense = np.unique(np.array(values, dtype=object), return_inverse=True)[1].reshape(-1)
        else:
            dense = _dense_ranks(list(values))
        top = int(dense.max())
        ranks[np.array(ords)] = base + (dense if direction == "max" else top - dense)
        base += top + 1
    return ranks


def _field_scores(project: Project, graph: PairGraph, rule: str) -> np.ndarray:
    """Higher is preferred (field_ranks). Read once per graph and rule (a pass over every record)."""
    direction, name = rule.split(":", 1)
    return graph.per_document(f"field_scores {rule}", lambda: field_ranks(project, name, graph.n, direction))


def keep_longest(graph: PairGraph, c: Clustering, lengths: np.ndarray) -> Clustering:
    """keep_best by text length."""
    return keep_best(graph, c, lengths, "longest")


def keep_best(graph: PairGraph, c: Clustering, score: np.ndarray, rule: str) -> Clustering:
    """Re-centre every cluster on its highest-scoring document (the earliest on ties), in place:
    the clusters stay, their kept document changes. Copies of the new kept one's text and later
    copies of any member's text are exact, the others near; each with its stored similarity to
    it (nan when there is none)."""
    c.kept_by = rule
    sizes = np.bincount(c.cluster, minlength=len(c.cluster))
    members = np.flatnonzero(sizes[c.cluster] >= 2)
    if not len(members):
        return c
    preferred = c.reference[members] if c.reference is not None else np.zeros(len(members), dtype=bool)
    # per cluster: a reference first, then the best, the earliest on ties
    order = np.lexsort((members, -score[members], ~preferred, c.cluster[members]))
    ordered = members[order]
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = c.cluster[ordered[1:]] != c.cluster[ordered[:-1]]
    rep_of = np.full(len(c.cluster), -1, dtype=np.int64)
    rep_of[c.cluster[ordered[first]]] = ordered[first]
    new_rep = rep_of[c.cluster[members]]
    moved = members[new_rep != c.cluster[members]]  # members of clusters whose kept one changes
    if not len(moved):
        return c
    reps = rep_of[c.cluster[moved]]
    is_rep = moved == reps
    others, their_rep = moved[~is_rep], reps[~is_rep]
    c.keeper[moved[is_rep]], c.reason[moved[is_rep]], c.similarity[moved[is_rep]] = -1, KEPT, np.nan
    c.keeper[others] = their_rep
    c.reason[others] = removal_reasons(graph, others, their_rep)
    c.similarity[others] = PairIndex(graph).similarity(their_rep, others)
    c.cluster[moved] = reps
    return forget_rejected(protect_references(graph, c))


def with_references(project: Project, graph: PairGraph) -> PairGraph:
    """The graph with its documents' roles: which come from a reference source (read once per
    graph; the clusters then keep them and exports leave them out). Returns the graph."""
    if graph.reference is None:
        mask = graph.per_document("reference", lambda: project.reference_mask(graph.n))
        graph.reference = mask if mask.any() else np.zeros(graph.n, dtype=bool)
    return graph


def cluster_with_decisions(project: Project, graph: PairGraph, threshold: float, policy: Policy = "components",
                           overrides: Overrides | None = None, rule: str | None = None,
                           control: Control | None = None) -> Clustering:
    """cluster() with the project's not-duplicate splits, then its keep rule (which document a
    cluster keeps; `rule` instead when given), then the reviewer's keep/remove overrides.
    control: checked between the steps (Cancelled: work ahead of the reviewer gives way)."""
    ov = overrides if overrides is not None else Overrides.load(project)
    with_references(project, graph)
    c = cluster(graph, threshold, policy, split_pairs=ov.split_pairs or None)
    if control is not None:
        control.check()
    rule = rule or keep_rule(project)
    if rule == "longest":
        c = keep_longest(graph, c, _lengths(project, graph))
    elif rule != "first":
        c = keep_best(graph, c, _field_scores(project, graph, rule), rule)
    return apply_overrides(graph, c, ov)


# -- export ---------------------------------------------------------------------------------

@dataclass
class CuratedExport:
    kept: int
    removed: int
    exact: int
    near: int
    reviewer: int
    clusters: int
    decisions: int
    out: str
    removed_out: str | None = None
    decisions_out: str | None = None
    manifest_out: str | None = None
    clusters_out: str | None = None
    references: int = 0  # reference documents left out of the export (never written)
    not_applied: int = 0  # active decisions that cannot apply (not_applied), not counted in `decisions`

    def decisions_line(self) -> str:
        """'N decisions applied', and how many were not and why."""
        line = f"{self.decisions:,} decision{'s' * (self.decisions != 1)} applied"
        if self.not_applied:
            line += f", {self.not_applied:,} not applied: {REFERENCE_REMOVAL}"
        return line


def beside(out: str | Path, suffix: str) -> Path:
    """`curated.jsonl` -> `curated.<suffix>` (e.g. removed.jsonl, decisions.jsonl, manifest.json).
    The whole stem is kept (`sample.v2.jsonl` -> `sample.v2.removed.jsonl`), so no two outputs
    and no output and its own log share a name."""
    out = Path(out)
    return out.with_name(f"{out.stem or out.name}.{suffix}")


def write_removed(project: Project, clustering: Clustering, path: str | Path, graph: PairGraph | None = None) -> None:
    """{id, duplicate_of, similarity, reason} a line; reason is exact, near or reviewer.
    duplicate_of is always a kept document: the one its cluster keeps, and similarity the
    similarity to it (removal_links: cut to SIMILARITY_DECIMALS). A document linked to it
    through another member also has `via` and `via_similarity`: a later copy of a text the
    cluster does not keep, via its first copy (1.0); a near duplicate with no pair of its own at
    the threshold with it (or one a reviewer rejected), via the member it is most similar to. A
    rejected pair is never cited."""
    removed = np.flatnonzero(clustering.reason != KEPT)
    if clustering.export_only is not None:  # an export of some sources: their removed documents
        removed = removed[clustering.export_only[removed]]
    link_of = removal_links(graph, clustering, removed) if graph is not None else {}
    paths = project.source_paths()
    several = len(paths) > 1
    with AtomicFile(Path(path), "wb") as fh:
        for s in range(0, len(removed), 5000):
            docs = removed[s : s + 5000]
            ids = project.json_ids_for(docs.tolist())
            source_of = {}
            if several:  # a match across sources names both sides' files
                keeper_ords = clustering.keeper[docs]
                via_ords = [link_of[int(d)][0] for d in docs if int(d) in link_of]
                wanted = np.unique(np.concatenate([docs, keeper_ords[keeper_ords >= 0], np.array(via_ords, np.int64)]))
                source_of = dict(zip(wanted.tolist(), project.sources_for(wanted.tolist())))
            keepers = clustering.keeper[docs]
            has = keepers >= 0
            keeper_ids = iter(project.json_ids_for(keepers[has].tolist()))
            here = [int(d) for d in docs if int(d) in link_of]
            via_ids = project.json_ids_for([link_of[d][0] for d in here])
            links = {d: (via_id, link_of[d][1]) for d, via_id in zip(here, via_ids)}
            similarities = similarity_values(clustering.similarity[docs])
            for d, doc_id, h, sim in zip(docs.tolist(), ids, has.tolist(), similarities):
                row = {
                    "id": doc_id,
                    "duplicate_of": next(keeper_ids) if h else None,
                    "similarity": sim,
                    "reason": REASON_NAMES[int(clustering.reason[d])],
                }
                if d in links:
                    row["via"], row["via_similarity"] = links[d]
                if source_of:
                    _name_sources(row, paths, source_of, d, int(clustering.keeper[d]),
                                  link_of[d][0] if d in links else -1)
                fh.write(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")


def _name_sources(row: dict, paths: dict[int, str], source_of: dict[int, int], doc: int, keeper: int,
                  via: int) -> None:
    """A removed log row whose document matched one of another source: both sides' files
    (`source`, `duplicate_of_source`, `via_source`)."""
    mine = source_of.get(doc)
    others = {"duplicate_of_source": keeper, "via_source": via}
    if any(o >= 0 and source_of.get(o) != mine for o in others.values()):
        row["source"] = paths.get(mine)
        for key, o in others.items():
            if o >= 0:
                row[key] = paths.get(source_of.get(o))


def write_decisions_log(project: Project, path: str | Path, include_undone: bool = True) -> int:
    """Every decision, oldest first: who, what, when, and whether it is still in force. A
    decision on two documents of different sources names both files (doc_source, other_source)."""
    decisions = all_decisions(project) if include_undone else active(project)
    inapplicable = not_applied(project, decisions)
    as_given = project.json_id_map([d.doc_id for d in decisions] + [d.other_id for d in decisions])
    paths = project.source_paths()
    source_of = project.sources_of_ids([d.doc_id for d in decisions if d.other_id is not None]
                                       + [d.other_id for d in decisions]) if len(paths) > 1 else {}
    with AtomicFile(Path(path), "wb") as fh:
        for d in decisions:
            row = asdict(d)
            mine, other = source_of.get(d.doc_id), source_of.get(d.other_id)
            if mine is not None and other is not None and mine != other:
                row["doc_source"], row["other_source"] = paths.get(mine), paths.get(other)
            row["doc_id"], row["other_id"] = as_given.get(d.doc_id, d.doc_id), as_given.get(d.other_id, d.other_id)
            row["status"] = STATUS_NAMES[d.undone]
            if d.id in inapplicable:
                row["status"], row["reason"] = "not applied", inapplicable[d.id]
            row.pop("undone")
            row.pop("batch_size")  # only meaningful for an undo or redo just made
            fh.write(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")
    return len(decisions)


def manifest(project: Project, clustering: Clustering, threshold: float, policy: Policy, outputs: dict,
             rule: str | None = None) -> dict:
    try:
        from importlib.metadata import version

        ver = version("dedup-tui")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        ver = "unknown"
    sources = project.source_rows("path, format, sha256, size_bytes, documents, loaded_at")
    roles = list(project.source_roles().values())  # in id order, as the rows
    for row, role in zip(sources, roles):
        if role is not None:
            row["role"] = role
    reason = clustering.reason
    return {
        "created_at": now_iso(),
        "created_unix": time.time(),
        "dedup_tui_version": ver,
        "project": str(project.path),
        "sources": sources,
        "scan_params": project.scan_params(),
        "threshold": threshold,
        "policy": policy,
        "keep_rule": rule or keep_rule(project),
        "counts": {
            "documents": len(reason),
            "kept": int((reason == KEPT).sum()),
            "exported": int(clustering.exported().sum()),
            "references": int(clustering.reference.sum()) if clustering.reference is not None else 0,
            "removed": int((reason != KEPT).sum()),
            "exact": int((reason == EXACT).sum()),
            "near": int((reason == NEAR).sum()),
            "reviewer": int((reason == REVIEWER).sum()),
            "clusters": clustering.cluster_count,
            "active_decisions": len(applied := on_documents(project)),
            "decisions_not_applied": len(not_applied(project, applied)),
        },
        "outputs": outputs,
        # The last audit's estimate of wrong removals and its sample (engine/audit.py), or None.
        "audit": audit_entry(project, threshold, policy, rule or keep_rule(project)),
    }


def export_curated(
    project: Project,
    threshold: float,
    policy: Policy,
    out: str | Path,
    fmt: str = "jsonl",
    removed_out: str | Path | None = None,
    decisions_out: str | Path | None = None,
    manifest_out: str | Path | None = None,
    use_decisions: bool = True,
    force: bool = True,
    graph: PairGraph | None = None,
    control: Control | None = None,
    keep: str | None = None,
    sources: list[int] | None = None,
    clusters_out: str | Path | None = None,
) -> CuratedExport:
    """Write the curated corpus with the reviewer's decisions applied, plus the logs asked for.
    `keep`: a keep rule for this export only (the project's own is used otherwise). `sources`:
    the ids of the sources to write (their kept documents, and their removed ones in the
    removed log; clustering still sees every document); all of them when None. Reference
    documents are never written. `clusters_out`: the cluster table (cluster_table.py: every
    document, CSV or Parquet by its suffix)."""
    from .store.scans import load_graph

    refuse_local_export(project)
    if clusters_out:
        cluster_table_format(clusters_out)
    check_threshold(project, threshold)
    check_outputs({"kept records": out, "removed log": removed_out, "decisions log": decisions_out,
                   "manifest": manifest_out, "cluster table": clusters_out}, force, project_protected(project))
    graph = with_references(project, graph if graph is not None else load_graph(project))
    overrides = Overrides.load(project) if use_decisions else None
    if use_decisions:
        clustering = cluster_with_decisions(project, graph, threshold, policy, overrides=overrides, rule=keep)
    else:
        clustering = cluster(graph, threshold, policy)
    if sources is not None:
        clustering.export_only = project.source_mask(sources, graph.n)
    # The engine writes the kept records (and fills in missing similarities); the removed log
    # is written here because reviewer removals have reasons the engine does not know.
    report: ExportReport = export(project, clustering, out, fmt=fmt, force=force, control=control)
    if removed_out:
        write_removed(project, clustering, removed_out, graph)
    if clusters_out:
        write_cluster_table(project, graph, clustering, clusters_out,
                            kept_by_reviewer=overrides.keep if overrides else set(),
                            decided=overrides.decided if overrides else set())
    in_force = on_documents(project)
    inapplicable = not_applied(project, in_force) if use_decisions else {}
    n_decisions = len(in_force) - len(inapplicable)
    if decisions_out:
        write_decisions_log(project, decisions_out)
    reason = clustering.reason
    counted = clustering.export_only if clustering.export_only is not None else np.ones(len(reason), dtype=bool)
    result = CuratedExport(
        kept=report.kept,
        removed=int(((reason != KEPT) & counted).sum()),
        exact=int(((reason == EXACT) & counted).sum()),
        near=int(((reason == NEAR) & counted).sum()),
        reviewer=int(((reason == REVIEWER) & counted).sum()),
        clusters=clustering.cluster_count,
        decisions=n_decisions if use_decisions else 0,
        out=str(out),
        removed_out=str(removed_out) if removed_out else None,
        decisions_out=str(decisions_out) if decisions_out else None,
        manifest_out=str(manifest_out) if manifest_out else None,
        clusters_out=str(clusters_out) if clusters_out else None,
        references=int((clustering.reference & counted).sum()) if clustering.reference is not None else 0,
        not_applied=len(inapplicable),
    )
    if manifest_out:
        outputs: dict[str, object] = {"kept": str(out), "format": fmt, "removed": result.removed_out, "decisions": result.decisions_out,
                   "decisions_applied": use_decisions}
        if clusters_out:
            outputs["clusters"] = result.clusters_out
        if sources is not None:
            paths = project.source_paths()
            outputs["sources"] = [paths[s] for s in sorted(sources) if s in paths]
        data = manifest(project, clustering, threshold, policy, outputs, rule=keep)
        if not use_decisions and data["audit"] is not None:  # an audit is of the export with them
            data["audit"].update(current=False, stale="the audit was made with the decisions applied")
        with AtomicFile(Path(manifest_out), "w") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
    return result
