"""The curated export: the kept records with the removed log, the decisions log and a manifest,
all from one clustering with the reviewer's decisions applied."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from ..graph.clustering import EXACT, KEPT, NEAR, REASON_NAMES, REVIEWER, Clustering, cluster
from ..graph.pairs import PairGraph, Policy
from ..outputs import check_outputs, project_protected
from ..progress import Control
from ..ray.partial import refuse_local_export
from ..store import Project, now_iso
from ..store.audits import manifest_entry as audit_entry
from ..store.reviewer import ACTIVE, DISCARDED, UNDONE
from .cluster_table import cluster_table_format, write_cluster_table
from .decisions import REFERENCE_REMOVAL, Overrides, active, all_decisions, not_applied, on_documents
from .export import AtomicFile, ExportReport, check_threshold, export, removal_links, similarity_values
from .keep_rules import cluster_with_decisions, keep_rule, with_references

DecisionStatus = Literal["active", "undone", "discarded"]
STATUS_NAMES: dict[int, DecisionStatus] = {ACTIVE: "active", UNDONE: "undone", DISCARDED: "discarded"}


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
                    _name_sources(
                        row, paths, source_of, d, int(clustering.keeper[d]), link_of[d][0] if d in links else -1
                    )
                fh.write(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")


def _name_sources(row: dict, paths: dict[int, str], source_of: dict[int, int], doc: int, keeper: int, via: int) -> None:
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
    source_of = (
        project.sources_of_ids(
            [d.doc_id for d in decisions if d.other_id is not None] + [d.other_id for d in decisions]
        )
        if len(paths) > 1
        else {}
    )
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


def manifest(
    project: Project, clustering: Clustering, threshold: float, policy: Policy, outputs: dict, rule: str | None = None
) -> dict:
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
    from ..store.scans import load_graph

    refuse_local_export(project)
    if clusters_out:
        cluster_table_format(clusters_out)
    check_threshold(project, threshold)
    check_outputs(
        {
            "kept records": out,
            "removed log": removed_out,
            "decisions log": decisions_out,
            "manifest": manifest_out,
            "cluster table": clusters_out,
        },
        force,
        project_protected(project),
    )
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
        write_cluster_table(
            project,
            graph,
            clustering,
            clusters_out,
            kept_by_reviewer=overrides.keep if overrides else set(),
            decided=overrides.decided if overrides else set(),
        )
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
        outputs: dict[str, object] = {
            "kept": str(out),
            "format": fmt,
            "removed": result.removed_out,
            "decisions": result.decisions_out,
            "decisions_applied": use_decisions,
        }
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
