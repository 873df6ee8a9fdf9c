"""The engine: loading, scanning, clustering, review decisions and export, with no user
interface (the CLI, the app and a notebook call the same functions).

The names a library caller needs are importable from here, each loaded on first use (so
`import dedup_tui.engine` imports nothing else: the warm-up is spawned and small commands run
without numpy, numba or pyarrow):

    from dedup_tui.engine import Project, ScanSettings, load_corpus, scan, load_graph, cluster_with_decisions

Its map, by concern (each subpackage's docstring lists its modules; tests/test_architecture.py
checks that they import each other without cycles and never use each other's underscore names):

- store/        the project file: schema, migrations, connections and locks, every SQL statement
- readers/      reading corpora: one module per format, one Record interface
- text/         the definitions: normalising, shingles, exact keys, plain sets and Jaccard
- scanning/     the scan: signatures, candidates, verification, the local and incremental
                scans; kernels/ their compiled twins, one module per stage
- compile/      numba set-up, the kernel cache, the warm-up that fills it ahead of a first scan
- graph/        the pair graph, clustering at any threshold, the greedy policy
- curate/       decisions, keep rules, the curated export, tuning, the audit, contamination
- ray/          the scan on a Ray cluster: connecting, pieces, stages, the job; its import
- ingest        load_corpus: a reader per file, the documents written to the project
- orchestration the load-and-scan sequence the CLI and the app share (warm-up, signing ahead,
                loading, scanning)
- opening       what `dedup-tui PATH` opens: a project, a corpus beside its project, the sample
- progress, errors, outputs, display: Control (progress and cancel), the errors, which files
                a command may write, corpus text shown literally
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

# name -> the module (under dedup_tui.engine) that defines it: its one home.
PUBLIC = {
    "Project": "store.project",
    "build_project": "store.project",
    "load_graph": "store.scans",
    "load_corpus": "ingest",
    "LoadReport": "ingest",
    "ScanSettings": "scanning.settings",
    "scan": "scanning.local",
    "ScanResult": "scanning.settings",
    "LoadAndScan": "orchestration",
    "load_and_scan": "orchestration",
    "PairGraph": "graph.pairs",
    "Policy": "graph.pairs",
    "cluster": "graph.clustering",
    "Clustering": "graph.clustering",
    "cluster_with_decisions": "curate.keep_rules",
    "export_curated": "curate.curated",
    "Control": "progress",
    "Cancelled": "errors",
    "DedupError": "errors",
}

__all__ = sorted(PUBLIC)

if TYPE_CHECKING:  # (for type checkers and editors; at run time each name loads on first use)
    from .curate.curated import export_curated
    from .curate.keep_rules import cluster_with_decisions
    from .errors import Cancelled, DedupError
    from .graph.clustering import Clustering, cluster
    from .graph.pairs import PairGraph, Policy
    from .ingest import LoadReport, load_corpus
    from .orchestration import LoadAndScan, load_and_scan
    from .progress import Control
    from .scanning.local import scan
    from .scanning.settings import ScanResult, ScanSettings
    from .store.project import Project, build_project
    from .store.scans import load_graph


def __getattr__(name: str):
    home = PUBLIC.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # (the next lookup is a plain one)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(PUBLIC))
