"""The curated corpus written on a Ray cluster (`dedup-tui cluster-export`).

The review (the policy at a threshold, the keep rule and every decision) is applied in the
project, which knows every document that takes part in a pair or group; that gives the ids to
remove. One task a shard then reads it again and writes its kept records unchanged, in the
shard's own format, under the shard's name. Each shard is written beside its final name and
renamed into place only when every shard's task succeeded and every shard's SHA-256 still is
the one scanned: a failed job leaves no shard named as done.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import Cancelled, CorpusError, DedupError, ProjectError
from ..graph.pairs import Policy
from ..outputs import check_outputs, protected_files
from ..progress import Control
from ..store import Project
from .address import connect
from .job import process_gone, stale_work, this_process, work_name
from .pieces import PieceSpec, cluster_format, id_prefixes, labelled_inputs, piece_records
from .stages import Stage, os_reason


@dataclass
class ClusterExportResult:
    kept: int = 0
    removed: int = 0
    shards: list[str] = field(default_factory=list)
    removed_out: str = ""
    manifest_out: str = ""
    decisions_out: str = ""


class _Watch:
    """A shard task's check, about once a second, that its work is still wanted: the job's
    driver runs (when it is on this machine: a killed cluster-export whose workers Ray did not
    stop at once) and the part is still the file this task writes (a later run removes the
    parts of a dead one). Else the part is removed and the task stops."""

    def __init__(self, driver: tuple, part: str):
        self.driver, self.part = driver, part
        self.next = 0.0

    def check(self, fh=None) -> None:
        now = time.monotonic()
        if now < self.next:
            return
        self.next = now + 1.0
        why = f"the job's driver (process {self.driver[-1]}) is gone" if process_gone(self.driver) else None
        if fh is not None:
            try:
                ours = os.path.samestat(os.fstat(fh.fileno()), os.stat(self.part))
            except FileNotFoundError:
                ours = False
            if not ours:
                why = "it was removed by a later run"
            elif why:
                os.unlink(self.part)
        if why:
            raise DedupError(f"{self.part}: stopped writing, {why}")


def _open_part(part: str, shard: str):
    """The curated part, written compressed as its shard is (.gz, .zst) or plain."""
    if shard.lower().endswith(".gz"):
        return gzip.open(part, "wb")
    if shard.lower().endswith(".zst"):
        import zstandard

        return zstandard.open(part, "wb", cctx=zstandard.ZstdCompressor(write_checksum=True))
    return open(part, "wb")


def export_shard(
    path: str,
    fmt: str,
    prefix: str,
    id_field: str | None,
    text_field: str,
    skipped_lines: list[int],
    removed: frozenset,
    part: str,
    driver: tuple | None = None,
) -> dict:
    """Write the shard's kept records to `part`; (kept, removed, sha256 of the input). It
    stops (removing the part) when the job's driver (this_process() of it) is gone."""
    watch = _Watch(driver or this_process(), part)
    watch.check()
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    skip = set(skipped_lines)
    errors: list = []
    piece = PieceSpec(0, path, fmt, 0, -1, 1 if fmt == "jsonl" else 0, prefix)
    kept = dropped = 0

    def decided():
        """(record, whether it is kept) of every record the scan took."""
        for rec in piece_records(piece, id_field, text_field, errors, {}):
            if rec.line not in skip:
                yield rec, (rec.doc_id if rec.doc_id is not None else f"{prefix}{rec.line}") not in removed

    if fmt == "jsonl":
        try:
            with _open_part(part, path) as out:
                for rec, keep in decided():
                    if keep:
                        out.write(rec.record + b"\n")
                        kept += 1
                    else:
                        dropped += 1
                    watch.check(out)
        except OSError as exc:  # writing the part (reading errors are CorpusErrors)
            raise DedupError(f"{part}: cannot be written ({os_reason(exc)})") from None
    else:
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        mask = np.zeros(pf.metadata.num_rows, bool)
        for rec, keep in decided():
            mask[rec.line - 1] = keep
            dropped += not keep
        table = pf.read().filter(mask)
        watch.check()
        try:
            pq.write_table(table, part)
        except OSError as exc:
            raise DedupError(f"{part}: cannot be written ({os_reason(exc)})") from None
        kept = int(mask.sum())
    if errors and len({b.line for b in errors} - skip):
        bad = min(b.line for b in errors if b.line not in skip)
        raise CorpusError(path, bad, "a bad record the scan did not skip: the file changed since it was scanned")
    return {"kept": kept, "removed": dropped, "sha256": h.hexdigest()}


def cluster_export(
    db: str | Path,
    threshold: float,
    policy: Policy,
    paths,
    out_dir: str | Path,
    control: Control | None = None,
    address: str | None = None,
    force: bool = False,
    use_decisions: bool = True,
) -> ClusterExportResult:
    from ..curate.curated import write_decisions_log, write_removed
    from ..curate.export import check_threshold
    from ..curate.keep_rules import cluster_with_decisions, with_references
    from ..graph.clustering import KEPT, cluster
    from ..store.scans import load_graph

    control = control or Control()
    project = Project(db)
    try:
        check_threshold(project, threshold)
        plan = _ExportPlan(project, paths, Path(out_dir))
        check_outputs(
            {f"curated shard {n}": plan.out_dir / n for n in plan.written_names()}
            | {f"{k} log": p for k, p in plan.logs.items()},
            force,
            plan.protected,
        )
        ray = connect(address)  # an unreachable cluster is said before the work
        control.report("graph", 0, 0)
        graph = with_references(project, load_graph(project))
        clustering = (
            cluster_with_decisions(project, graph, threshold, policy)
            if use_decisions
            else cluster(graph, threshold, policy)
        )
        removed_ids = frozenset(project.ids_for(np.flatnonzero(clustering.reason != KEPT).tolist()))
        plan.out_dir.mkdir(parents=True, exist_ok=True)
        parts = [plan.out_dir.resolve() / work_name(n, "part") for n in plan.written_names()]
        try:
            results = _export_shards(ray, plan, parts, removed_ids, control)
            write_removed(project, clustering, plan.logs["removed"], graph)
            write_decisions_log(project, plan.logs["decisions"])
            for part, name in zip(parts, plan.written_names()):
                os.replace(part, plan.out_dir / name)
        finally:
            for part in parts:
                part.unlink(missing_ok=True)
        result = ClusterExportResult(
            kept=sum(r["kept"] for r in results),
            removed=sum(r["removed"] for r in results),
            shards=[str(plan.out_dir / n) for n in plan.written_names()],
            removed_out=str(plan.logs["removed"]),
            decisions_out=str(plan.logs["decisions"]),
            manifest_out=str(plan.logs["manifest"]),
        )
        _write_manifest(project, clustering, threshold, policy, result, use_decisions)
        return result
    finally:
        project.close()


class _ExportPlan:
    """What a cluster export reads and writes, checked before any work: the corpus files (the
    ones the project was scanned from, in order), the shards' names and the logs in out_dir,
    and the files no output may replace."""

    def __init__(self, project: Project, paths, out_dir: Path):
        self.out_dir, self.project_path = out_dir, project.path
        self.sources = [
            tuple(r.values())
            for r in project.source_rows("id, path, format, sha256, id_field, text_field, skipped_lines")
        ]
        self.files, labels, sharded = labelled_inputs(paths)
        self.prefixes = id_prefixes(self.files, labels, sharded)
        if len(self.files) != len(self.sources):
            raise DedupError(
                f"{len(self.files)} corpus file(s) given, but {project.path} was scanned from "
                f"{len(self.sources)}: give the same files, in the same order"
            )
        for f, src in zip(self.files, self.sources):
            if src[2] not in ("jsonl", "parquet") or cluster_format(f) != src[2]:
                raise CorpusError(str(f), None, f"is not the {src[2]} file scanned as {src[1]}")
        self.names = [f.name for f in self.files]
        # A reference source (an evaluation set) is never written: no shard of it at all.
        roles = project.source_roles()
        self.written = [i for i, src in enumerate(self.sources) if roles.get(src[0]) != "reference"]
        if len(set(self.names)) != len(self.names):
            raise DedupError("two corpus files share a name; cluster-export writes each shard under its own name")
        if (out_dir / "manifest.json").is_file() and (
            (out_dir / "pairs.parquet").exists() or (out_dir / "documents").is_dir()
        ):
            raise DedupError(
                f"{out_dir}: is a cluster scan folder, which holds only what a scan wrote; write the "
                f"curated corpus to another folder"
            )
        self.logs = {
            "removed": out_dir / "removed.jsonl",
            "decisions": out_dir / "decisions.jsonl",
            "manifest": out_dir / "manifest.json",
        }
        clash = {p.name for p in self.logs.values()} & set(self.names)
        if clash:
            raise DedupError(f"a corpus shard is named {sorted(clash)[0]}, as one of the logs cluster-export writes")
        # Never the project, its companions or an input shard (OUT_DIR may be the corpus's
        # folder: a shard would be replaced by its own curated copy), never a file twice.
        self.protected = protected_files(project.path, [r[1] for r in self.sources] + [str(f) for f in self.files])

    def written_names(self) -> list[str]:
        """The names of the shards written (every source's but a reference's)."""
        return [self.names[i] for i in self.written]


def _export_shards(ray, plan: _ExportPlan, parts: list[Path], removed_ids: frozenset, control: Control) -> list[dict]:
    """Each shard's kept records written to its part file by a worker; refused (nothing
    renamed into place) when a shard changed since the scan or the removed documents are not
    all found."""
    stage = Stage(ray, control, [], {str(f.resolve()): str(f) for f in plan.files})
    removed_ref = ray.put(removed_ids)
    # The workers write the parts; those a killed run of this machine left are removed.
    for n in plan.names:
        for stale in stale_work(plan.out_dir, n, "part"):
            if stale.is_file() or stale.is_symlink():
                stale.unlink(missing_ok=True)
    driver = this_process()
    prefixes = plan.prefixes
    chosen = [(plan.files[i], plan.sources[i], prefixes[i]) for i in plan.written]
    refs = [
        ray.remote(export_shard).remote(
            str(f.resolve()),
            src[2],
            prefix,
            None if src[4] == "id" else src[4],
            src[5],
            json.loads(src[6] or "[]"),
            removed_ref,
            str(part),
            driver,
        )
        for (f, src, prefix), part in zip(chosen, parts)
    ]
    try:
        results = stage.run("export", refs)
    except (Cancelled, KeyboardInterrupt):
        stage.cancel()
        raise
    for (f, src, _prefix), r in zip(chosen, results):
        if src[3] and r["sha256"] != src[3]:
            raise CorpusError(
                str(f),
                None,
                f"changed since it was scanned (SHA-256 {r['sha256'][:12]}..., "
                f"scanned {src[3][:12]}...); nothing was written",
            )
    if sum(r["removed"] for r in results) != len(removed_ids):
        raise ProjectError(
            f"{len(removed_ids):,} documents to remove, but "
            f"{sum(r['removed'] for r in results):,} found in the corpus: these are not the "
            f"files {plan.project_path} was scanned from; nothing was written"
        )
    return results


def _write_manifest(
    project: Project, clustering, threshold: float, policy: Policy, result: ClusterExportResult, use_decisions: bool
) -> None:
    from ..curate.curated import manifest
    from ..curate.export import AtomicFile

    data = manifest(
        project,
        clustering,
        threshold,
        policy,
        {
            "shards": result.shards,
            "format": "as the input",
            "removed": result.removed_out,
            "decisions": result.decisions_out,
            "decisions_applied": use_decisions,
        },
    )
    data["counts"]["kept"] = result.kept
    data["counts"]["documents"] = result.kept + result.removed
    with AtomicFile(result.manifest_out, "w") as fh:
        json.dump(data, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
