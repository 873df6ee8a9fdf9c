"""The cluster table: one row per document of the project, for pandas (`export --clusters FILE`,
CSV or Parquet by the file's suffix).

Columns (CLUSTER_COLUMNS):
- id, source: the document's id (as the corpus gave it: integers where every id was one) and
  the path of the file it was loaded from.
- cluster: the cluster at the export's threshold, named by its first document in corpus order
  (its position from 0 in the order the corpus was loaded; a document in no cluster has its
  own). It does not change with the keep rule or keep / remove decisions; the threshold and
  not-duplicate decisions change which documents share it.
- duplicate_of, similarity, via, via_similarity: exactly the removed log's (the kept document it
  is removed against, the similarity to it cut to 6 decimals, the member it is linked through);
  empty for a kept document.
- status: kept, removed (by the threshold and keep rule, as proposed), reviewer_kept (a keep
  decision), reviewer_removed (a remove decision) or reference (matched, never removed, never
  exported).
- reason: kept, exact, near or reviewer (the removed log's).
- reviewer_decided: a reviewer's decision settles it (keep, remove, not a duplicate, or
  listed in an accepted cluster). False throughout when decisions are ignored.
- reviewer_saw: its text was on a reviewer's screen in the review app (its row drawn in the
  members pane, or a side of the pair view), or an exact copy of a text that was (store/shown.py
  records what was shown). A decision can cover documents nobody saw (accepting a cluster):
  reviewer_decided and not reviewer_saw. Recorded since this column exists: false for what
  older versions showed.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from ..errors import DedupError
from ..graph.clustering import KEPT, REASON_NAMES, REVIEWER, Clustering
from ..graph.pairs import PairGraph
from ..store import Project
from ..store.shown import shown_ords
from .export import AtomicFile, removal_links, similarity_values

CLUSTER_COLUMNS = (
    "id",
    "source",
    "cluster",
    "duplicate_of",
    "similarity",
    "via",
    "via_similarity",
    "status",
    "reason",
    "reviewer_decided",
    "reviewer_saw",
)
CLUSTER_TABLE_FORMATS = {".csv": "csv", ".parquet": "parquet"}
STATUSES = ("kept", "removed", "reviewer_kept", "reviewer_removed", "reference")


def cluster_table_format(path: str | Path) -> str:
    """csv or parquet, by the file's suffix; a DedupError for any other."""
    fmt = CLUSTER_TABLE_FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise DedupError(f"{path}: the cluster table is written as CSV or Parquet: name it .csv or .parquet")
    return fmt


def cluster_columns(
    project: Project,
    graph: PairGraph,
    clustering: Clustering,
    kept_by_reviewer: set[int] | frozenset[int],
    decided: set[int] | frozenset[int],
) -> dict[str, list]:
    """The table's columns (CLUSTER_COLUMNS), one value per document in corpus order."""
    c = clustering
    n = len(c.reason)
    ords = np.arange(n)
    first = np.full(n, n, dtype=np.int64)
    np.minimum.at(first, c.cluster, ords)
    removed = np.flatnonzero(c.reason != KEPT)
    links = removal_links(graph, c, removed)
    ids = project.json_ids_for(ords.tolist())
    paths = project.source_paths()
    reference = c.reference if c.reference is not None else np.zeros(n, dtype=bool)
    status = np.where(c.reason == KEPT, "kept", "removed").astype(object)
    status[c.reason == REVIEWER] = "reviewer_removed"
    if kept_by_reviewer:
        chosen = np.fromiter(kept_by_reviewer, np.int64, len(kept_by_reviewer))
        chosen = chosen[chosen < n]
        status[chosen[c.reason[chosen] == KEPT]] = "reviewer_kept"
    status[reference] = "reference"
    reviewer_decided = np.zeros(n, dtype=bool)
    if decided:
        marked = np.fromiter(decided, np.int64, len(decided))
        reviewer_decided[marked[marked < n]] = True
    roots = np.where(graph.exact_of[:n] >= 0, graph.exact_of[:n], ords)  # each text's first copy
    shown = shown_ords(project)
    reviewer_saw = np.isin(roots, roots[shown[shown < n]])
    similarity = similarity_values(c.similarity)
    keeper = c.keeper.tolist()
    via_ord = [links[o][0] if o in links else -1 for o in range(n)] if links else [-1] * n
    return {
        "id": ids,
        "source": [paths.get(s) for s in project.sources_for(ords.tolist())],
        "cluster": first[c.cluster].tolist(),
        "duplicate_of": [ids[k] if k >= 0 else None for k in keeper],
        "similarity": similarity,
        "via": [ids[v] if v >= 0 else None for v in via_ord],
        "via_similarity": [links[o][1] if v >= 0 else None for o, v in enumerate(via_ord)],
        "status": status.tolist(),
        "reason": [REASON_NAMES[r] for r in c.reason.tolist()],
        "reviewer_decided": reviewer_decided.tolist(),
        "reviewer_saw": reviewer_saw.tolist(),
    }


def write_cluster_table(
    project: Project,
    graph: PairGraph,
    clustering: Clustering,
    path: str | Path,
    kept_by_reviewer: set[int] | frozenset[int] = frozenset(),
    decided: set[int] | frozenset[int] = frozenset(),
) -> int:
    """Write the cluster table (CSV or Parquet by the suffix); returns its rows."""
    fmt = cluster_table_format(path)
    columns = cluster_columns(project, graph, clustering, set(kept_by_reviewer), set(decided))
    rows = len(columns["id"])
    if fmt == "csv":
        with AtomicFile(Path(path), "w") as fh:
            writer = csv.writer(fh)
            writer.writerow(CLUSTER_COLUMNS)
            writer.writerows(zip(*(columns[name] for name in CLUSTER_COLUMNS)))
        return rows
    import pyarrow as pa
    import pyarrow.parquet as pq

    id_type = _id_type(pa, columns["id"])
    types = {
        "id": id_type,
        "source": pa.string(),
        "cluster": pa.int64(),
        "duplicate_of": id_type,
        "similarity": pa.float64(),
        "via": id_type,
        "via_similarity": pa.float64(),
        "status": pa.string(),
        "reason": pa.string(),
        "reviewer_decided": pa.bool_(),
        "reviewer_saw": pa.bool_(),
    }
    as_text = id_type == pa.string()
    table = pa.table(
        {
            name: pa.array(
                _ids_as_text(columns[name]) if as_text and name in ("id", "duplicate_of", "via") else columns[name],
                types[name],
            )
            for name in CLUSTER_COLUMNS
        }
    )
    with AtomicFile(Path(path), "wb") as fh:
        pq.write_table(table, fh)
    return rows


def _id_type(pa, ids: list):
    """int64 when every id is an integer that fits, else text (integers written as digits)."""
    if ids and all(type(i) is int and -(2**63) <= i < 2**63 for i in ids):
        return pa.int64()
    return pa.string()


def _ids_as_text(values: list) -> list:
    return [v if v is None or isinstance(v, str) else str(v) for v in values]
