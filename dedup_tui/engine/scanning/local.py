"""The scan of a project on this machine: exact groups, then verified near-duplicate pairs >=
floor (candidates.py), written atomically; only the documents loaded since the last scan when
that gives a full rescan's result (incremental.py)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict

import numpy as np

from ..errors import Cancelled, ProjectError
from ..progress import Control
from ..ray.partial import refuse_local_rescan
from ..store import Project, transaction
from ..store.derived import forget_scan_keys
from ..store.scan_keys import set_scan_keys_meta, write_scan_keys
from ..store.scans import (
    DerivedDamaged,
    documents_version,
    exact_groups_with_hashes,
    scan_keys_meta,
    write_scan_result,
    write_spilled_scan_result,
)
from . import incremental, lsh
from .candidates import KeptKeys, find_pairs
from .incremental import coverage, first_copies, keys_meta_for, scan_added
from .memory import default_cap, release_free_memory
from .passes import SpilledPairs, SpillFolder, remove_stale_spill_folders
from .settings import DEFAULT_MAX_BUCKET, DEFAULT_NUM_PERM, DEFAULT_SEED, ScanResult, ScanSettings, SettingsError


def scan(
    project: Project,
    settings: ScanSettings | None = None,
    control: Control | None = None,
    full: bool = False,
    ahead=None,
    memory: int | None = None,
    lean: bool = False,
) -> ScanResult:
    """Find exact groups and verified near pairs; replace the project's previous scan atomically.

    When documents were loaded since a scan by LSH with the same settings, only they are
    compared (with one another and with the scanned documents; incremental.py): the result
    is a full rescan's. `full` compares everything again; so does a scan whose settings differ
    (result.full_reason says why).

    On cancellation (Cancelled) or any error nothing is written: the project keeps its
    previous scan (or none).

    `ahead`: an ahead.SignedAhead that signed documents as this process loaded them; the scan
    starts from its signatures where they are of its documents and settings.

    `memory`: the cap in bytes (None: memory.default_cap()) under which a full LSH scan keeps
    its candidates and pairs, spilling beyond it to a private folder beside the project
    (passes.py). It changes neither the result nor whether the next scan can be incremental.

    `lean` keeps no band keys (LEAN_NOTE): the project is smaller, and the next scan after a
    load compares everything again. A lean scan is always a full one.
    """
    settings = settings or ScanSettings()
    settings.validate()
    control = control or Control()
    if project.document_count() == 0:
        raise ProjectError(f"{project.path}: no documents loaded (run dedup-tui load first)")
    from ..store import WriteGuard

    refuse_local_rescan(project, "scanned")
    # Refused while a review app in another process has the project open; held until the end.
    project.check_writable("scanned")
    guard = WriteGuard(project.path).acquire()
    try:
        # A scan killed mid-way left only its 'running' row (its results are written in one
        # transaction at the end): record it as interrupted; this scan starts from scratch.
        project.mark_interrupted(project.interrupted_runs("scan"))
        removed = remove_stale_spill_folders(project.path.parent)  # (of scans killed beside it)
        if removed:
            project.notice(removed)
        cap = default_cap() if memory is None else memory
        result = ScanResult(memory_cap=cap)
        reason = "--full" if full else _reuse_problem(project, settings)
        if lean and reason is None:
            reason = "--lean keeps no band keys, so it compares everything"

        run_id = project.start_run("scan", asdict(settings))
        t_start = time.perf_counter()
        folder = SpillFolder(project.path.parent)
        try:
            if reason is None:
                try:
                    scan_added(project, settings, control, result, t_start, run_id, ahead, folder)
                    return result
                except incremental.FullScanNeeded as exc:
                    reason = str(exc)
                    result = ScanResult(memory_cap=cap)
                except DerivedDamaged as exc:  # a full scan derives all of it again from the documents
                    reason = f"{exc.what} do not match their checksum (the project file is damaged there)"
                    result = ScanResult(memory_cap=cap)
                folder.close()  # (what the incremental attempt spilled)
            if project.scan_state == "stale":
                result.full_reason = reason or ""
            _scan_all(project, settings, control, result, t_start, run_id, ahead, folder, lean)
        except (Cancelled, KeyboardInterrupt):
            project.finish_run(run_id, "cancelled", result.timings, result.counts())
            raise
        except BaseException:
            project.finish_run(run_id, "failed", result.timings, result.counts())
            raise
        finally:
            result.spill_bytes = max(result.spill_bytes, folder.peak)
            folder.close()
    finally:
        guard.release()
    return result


def last_scan_settings(project: Project) -> ScanSettings | None:
    """The settings of the project's last scan (None: not scanned), so that scanning it again
    where nobody chose settings (the app) keeps them and can be incremental. A last scan that
    compared every pair gives `auto`: a bigger corpus may need LSH."""
    params = project.scan_params()
    if not params:
        return None
    try:
        settings = ScanSettings(
            k=int(params["k"]),
            floor=float(params["floor"]),
            method="lsh" if params.get("method") == "lsh" else "auto",
            num_perm=int(params.get("num_perm", DEFAULT_NUM_PERM)),
            seed=int(params.get("seed", DEFAULT_SEED)),
            max_bucket=int(params.get("max_bucket", DEFAULT_MAX_BUCKET)),
        )
        settings.validate()
    except (KeyError, TypeError, ValueError, SettingsError):
        return None
    return settings


def _reuse_problem(project: Project, settings: ScanSettings) -> str | None:
    banding = lsh.choose_banding(settings.floor, settings.num_perm)
    return incremental.reuse_problem(
        project.scan_state, project.scan_params(), scan_keys_meta(project), settings, banding, project.next_ord()
    )


def _scan_all(
    project: Project,
    settings: ScanSettings,
    control: Control,
    result: ScanResult,
    t_start: float,
    run_id: int,
    ahead=None,
    folder: SpillFolder | None = None,
    lean: bool = False,
) -> None:
    t0 = time.perf_counter()
    control.report("exact", 0, 0)
    documents_before = documents_version(project)
    exact_of, lengths, rep_hashes = exact_groups_with_hashes(project)
    result.documents = len(exact_of)
    result.exact_duplicates = int((exact_of >= 0).sum())
    result.exact_groups = first_copies(exact_of)
    reps = np.flatnonzero(exact_of < 0)
    result.representatives = len(reps)
    result.timings["exact"] = time.perf_counter() - t0
    release_free_memory()  # (the exact hashes)
    kept = None if lean else KeptKeys()
    try:
        found = find_pairs(
            project,
            reps,
            lengths,
            settings,
            control,
            result,
            kept,
            None if ahead is None else (ahead, rep_hashes),
            result.memory_cap,
            folder,
        )
        control.check()
        release_free_memory()  # (verification's shingles)
        t0 = time.perf_counter()
        count = found.count if isinstance(found, SpilledPairs) else len(found[0])
        control.report("write", 0, count)
        with transaction(project.conn):
            conn = project.conn
            if documents_version(project) != documents_before:
                raise ProjectError(
                    f"{project.path}: documents were loaded while this scan ran; its result "
                    f"would leave them unscanned, so it was not kept. Scan again."
                )
            if isinstance(found, SpilledPairs):
                write_spilled_scan_result(conn, exact_of, found)
            else:
                write_scan_result(conn, exact_of, *found)
            del found
            if kept is not None and result.method == "lsh" and kept.complete:
                t_keys = time.perf_counter()
                write_scan_keys(
                    conn,
                    0,
                    reps,
                    rep_hashes,
                    (kept.band_keys(band) for band in range(result.bands)),
                    keys_meta_for(settings, result, len(exact_of), int(lengths[reps].sum())),
                )
                result.timings["keep_keys"] = time.perf_counter() - t_keys
            else:
                forget_scan_keys(conn)
                if lean:  # said by the next scan's reason for comparing everything
                    set_scan_keys_meta(conn, {"lean": True})
            result.pairs = count
            control.report("write", count, count)
            result.timings["write"] = time.perf_counter() - t0
            result.timings["total"] = time.perf_counter() - t_start
            if folder is not None:  # (recorded with the run's counts; the spill is all written by now)
                result.spill_bytes = folder.peak
            params = asdict(settings) | {"method": result.method, "bands": result.bands, "rows": result.rows}
            project.set_meta(scan_state="complete", scan_params=json.dumps(params), **coverage(project))
            project.finish_run(run_id, "complete", result.timings, result.counts())
    finally:
        if kept is not None:
            kept.close()
