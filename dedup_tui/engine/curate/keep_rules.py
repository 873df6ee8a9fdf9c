"""Keep rules: which document a cluster keeps (the longest, the first, a record field's max or
min), and clustering with the reviewer's decisions and the keep rule applied."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import numpy as np

from ..display import literal_line
from ..errors import DedupError
from ..graph.clustering import KEPT, Clustering, cluster, forget_rejected, protect_references, removal_reasons
from ..graph.pairs import PairGraph, Policy
from ..progress import Control
from ..store import Project, now_iso, reviewer, transaction
from .decisions import Decision, Overrides, PairIndex, apply_overrides, decision_from_row, default_author
from .export import as_object

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
    raise DedupError(
        f"unknown keep rule {rule!r} (choose from {', '.join(KEEP_RULES)}, max:FIELD or min:FIELD, "
        f"e.g. max:date for the newest, max:score for the best)"
    )


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


def record_keep_rule(
    project: Project, rule: str, threshold: float | None = None, policy: Policy | None = None, author: str | None = None
) -> Decision | None:
    """Set the project's keep rule as one step of the undo history (a `keep_rule` decision: undo
    puts the rule it replaced back, redo sets it again); None when `rule` is the one in force."""
    rule = check_keep_rule(project, rule)
    before = keep_rule(project)
    if rule == before:
        return None
    with transaction(project.conn):
        reviewer.discard_redoable(project)
        got = reviewer.insert_decisions(
            project,
            [
                {
                    "kind": "keep_rule",
                    "doc_id": None,
                    "other_id": None,
                    "value": json.dumps({"from": before, "to": rule}, ensure_ascii=False),
                    "threshold": threshold,
                    "policy": policy,
                    "author": author or default_author(),
                    "created_at": now_iso(),
                }
            ],
            batch=False,
        )
        project.set_meta(keep_rule=rule)
    return decision_from_row(got[0])


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
        from ..readers import parse_json_int

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


def cluster_with_decisions(
    project: Project,
    graph: PairGraph,
    threshold: float,
    policy: Policy = "components",
    overrides: Overrides | None = None,
    rule: str | None = None,
    control: Control | None = None,
) -> Clustering:
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
