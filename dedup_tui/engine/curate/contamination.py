"""The contamination report: which documents of the data match a reference source (an
evaluation set, an already-curated base) at a threshold, with id and source of both sides.

A match is a stored pair at or above the threshold between a document of a normal source and
one of a reference source, or the same normalised text in both (exact, similarity 1.0); an
exact copy of a matched document matches as its first copy does. Reviewer decisions do not
change what matches: the report is about the corpus, not about what the review removed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..display import literal_line
from ..graph.pairs import PairGraph
from ..outputs import check_outputs, project_protected
from ..progress import Control
from ..store import Project
from .export import AtomicFile, check_threshold, similarity_values


@dataclass
class Match:
    """A document of the data and the reference document it matches best (ords)."""

    doc: int
    reference: int
    similarity: float
    doc_id: str | int = ""
    doc_source: str = ""
    reference_id: str | int = ""


@dataclass
class ReferenceSourceReport:
    source_id: int
    path: str
    documents: int  # the reference source's documents
    matched_documents: int  # documents of the other (normal) sources matching one of them
    matched_references: int  # its documents matched by at least one of those
    highest: float | None  # the highest similarity of a match (None: no match)
    matches: list[Match] = field(default_factory=list)  # one per matched document, most similar first


@dataclass
class ContaminationReport:
    threshold: float
    documents: int  # documents of the normal sources (the data checked)
    contaminated: int  # of them, those matching any reference document
    sources: list[ReferenceSourceReport]


def _roots(graph: PairGraph) -> np.ndarray:
    return np.where(graph.exact_of >= 0, graph.exact_of, np.arange(graph.n))


def contamination(
    project: Project, threshold: float, graph: PairGraph | None = None, control: Control | None = None
) -> ContaminationReport:
    """Per reference source: the documents of the normal sources that match one of its
    documents at `threshold`, each with its most similar reference document (the earliest on
    ties). DedupError when the project has no reference source or no current scan."""
    from ..errors import DedupError
    from ..store.scans import load_graph

    control = control or Control()
    check_threshold(project, threshold)
    refs = project.reference_sources()
    if not refs:
        raise DedupError(
            f"{project.path}: no reference source (load one with dedup-tui load PROJECT --reference FILE..., then scan)"
        )
    graph = graph if graph is not None else load_graph(project)
    n = graph.n
    reference = project.reference_mask(n)
    data = ~reference
    roots = _roots(graph)
    above = graph.jaccard >= threshold
    pa, pb, pj = graph.a[above], graph.b[above], graph.jaccard[above]
    paths = project.source_paths()
    sizes = {r["id"]: r["documents"] for r in project.source_rows("id, documents")}
    contaminated = np.zeros(n, dtype=bool)
    reports = []
    for source_id in refs:
        control.check()
        mine = project.source_mask([source_id], n)
        has_ref = np.zeros(n, dtype=bool)
        has_ref[roots[mine]] = True
        has_data = np.zeros(n, dtype=bool)
        has_data[roots[data]] = True
        # root-level matches (reference root, data root, similarity): pairs either way, and
        # texts both sides share
        fwd = has_ref[pa] & has_data[pb]
        back = has_ref[pb] & has_data[pa]
        shared = np.flatnonzero(has_ref & has_data)
        r_root = np.concatenate([pa[fwd], pb[back], shared])
        d_root = np.concatenate([pb[fwd], pa[back], shared])
        sims = np.concatenate([pj[fwd], pj[back], np.ones(len(shared))])
        matches = _best_per_document(roots, mine, data, r_root, d_root, sims)
        contaminated[[m.doc for m in matches]] = True
        _name(project, paths, matches)
        reports.append(
            ReferenceSourceReport(
                source_id,
                paths.get(source_id, "?"),
                int(sizes.get(source_id) or mine.sum()),
                len(matches),
                len(_matched_references(roots, mine, data, r_root, d_root)),
                max((m.similarity for m in matches), default=None),
                matches,
            )
        )
    return ContaminationReport(threshold, int(data.sum()), int(contaminated.sum()), reports)


def _members(roots: np.ndarray, mask: np.ndarray, wanted: np.ndarray) -> dict[int, list[int]]:
    """root -> the documents of `mask` with that root, for the roots in `wanted`."""
    ords = np.flatnonzero(mask & np.isin(roots, wanted))
    out: dict[int, list[int]] = {}
    for o, r in zip(ords.tolist(), roots[ords].tolist()):
        out.setdefault(r, []).append(o)
    return out


def _best_per_document(roots, mine, data, r_root, d_root, sims) -> list[Match]:
    """Each data document's best match among the reference documents, most similar first."""
    refs_of = _members(roots, mine, np.unique(r_root))
    docs_of = _members(roots, data, np.unique(d_root))
    best: dict[int, tuple[float, int]] = {}
    for r, d, s in zip(r_root.tolist(), d_root.tolist(), sims.tolist()):
        ref_docs, docs = refs_of.get(r), docs_of.get(d)
        if not ref_docs or not docs:
            continue
        ref = ref_docs[0]  # the earliest reference document with this text
        for doc in docs:
            old = best.get(doc)
            if old is None or (s, -ref) > (old[0], -old[1]):
                best[doc] = (s, ref)
    matches = [Match(doc, ref, s) for doc, (s, ref) in best.items()]
    matches.sort(key=lambda m: (-m.similarity, m.doc))
    return matches


def _matched_references(roots, mine, data, r_root, d_root) -> set[int]:
    """The reference documents some data document matches."""
    present = set(np.unique(roots[data]).tolist())
    wanted = np.unique(r_root[np.isin(d_root, list(present))]) if len(r_root) else np.empty(0, np.int64)
    return {o for docs in _members(roots, mine, wanted).values() for o in docs}


def _name(project: Project, paths: dict[int, str], matches: list[Match]) -> None:
    if not matches:
        return
    docs = [m.doc for m in matches]
    refs = [m.reference for m in matches]
    doc_ids = project.json_ids_for(docs)
    ref_ids = project.json_ids_for(refs)
    sources = project.sources_for(docs)
    for m, doc_id, ref_id, source in zip(matches, doc_ids, ref_ids, sources):
        m.doc_id, m.reference_id, m.doc_source = doc_id, ref_id, paths.get(source, "?")


def format_report(r: ContaminationReport, shown: int = 10) -> str:
    """The report as plain text (what `dedup-tui contamination` prints); ids and paths escaped."""
    out: list[str] = []
    add = out.append
    share = r.contaminated / r.documents if r.documents else 0.0
    add(
        f"Contamination at threshold {r.threshold:.2f}: {r.contaminated:,} of {r.documents:,} documents of the "
        f"data ({share:.2%}) match a reference document"
    )
    for s in r.sources:
        add("")
        add(f"Reference {literal_line(s.path)}: {s.documents:,} documents")
        if not s.matches:
            add("  no document of the data matches it")
            continue
        add(
            f"  {s.matched_documents:,} documents of the data match it; {s.matched_references:,} of its documents "
            f"are matched; highest similarity {s.highest:.3f}"
        )
        add(f"  {'similarity':>10}  document (source)  ->  reference document")
        for m in s.matches[:shown]:
            # ids whole (of one corpus they often differ only in the middle or at the end)
            add(
                f"  {m.similarity:>10.3f}  {literal_line(str(m.doc_id))} ({literal_line(Path(m.doc_source).name)})"
                f"  ->  {literal_line(str(m.reference_id))}"
            )
        if len(s.matches) > shown:
            add(f"  ... and {len(s.matches) - shown:,} more (all of them with --out FILE.jsonl)")
    return "\n".join(out)


def write_matches(project: Project, r: ContaminationReport, path: str | Path, force: bool = True) -> int:
    """One JSON line per matched document and reference source: {reference_source, reference_id,
    source, id, similarity}, each reference source's most similar first (similarities as every
    output gives them: export.SIMILARITY_DECIMALS). Returns how many."""
    check_outputs({"contamination report": path}, force, project_protected(project))
    count = 0
    with AtomicFile(Path(path), "wb", overwrite=force) as fh:
        for s in r.sources:
            for m in s.matches:
                row = {
                    "reference_source": s.path,
                    "reference_id": m.reference_id,
                    "source": m.doc_source,
                    "id": m.doc_id,
                    "similarity": similarity_values([m.similarity])[0],
                }
                fh.write(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")
                count += 1
    return count
