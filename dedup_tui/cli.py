"""Command line: headless commands over the engine; bare `dedup-tui` opens the review app."""

from __future__ import annotations

import difflib
import json
import math
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

# No command does linear algebra, yet numpy's OpenBLAS (and scipy's, which numba imports when
# present) starts a thread per core that spins a while: ~0.25 s of CPU taken from a scan of the
# manual pages on its two cores. Set before numpy loads (here and in the warm-up process, which
# inherits it); a value the user set wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .engine.compile import warmup

# First run: `scan`/`load` of a large corpus starts compiling the kernels in another process
# now, before this module's imports (numba-free; see engine/warmup.py).
warmup.start_early(sys.argv)

import click

from .engine.curate.export import FORMATS, check_threshold
from .engine.display import literal_line
from .engine.errors import Cancelled, DedupError
from .engine.graph.pairs import POLICIES
from .engine.orchestration import LoadAndScan
from .engine.outputs import OutputError, check_outputs, project_protected, writes_to_stdout
from .engine.progress import STAGE_NAMES, Control, ShardLoaded, describe_rate
from .engine.scanning.settings import (
    CLUSTER_MAX_BUCKET,
    DEFAULT_FLOOR,
    DEFAULT_K,
    DEFAULT_MAX_BUCKET,
    DEFAULT_NUM_PERM,
    DEFAULT_SEED,
    METHODS,
    ScanSettings,
)
from .engine.store import Project, check_snapshots
from .engine.store.scans import load_graph

if TYPE_CHECKING:
    from rich.progress import Progress


class _TerminalProgress:
    """rich.progress on stderr when it is a terminal (silent otherwise): one row per stage, named
    as in the app, with counts, rate, elapsed time and time left; a finished stage keeps its
    final numbers."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()
        self.progress: Progress | None = None
        self.task = None
        self.stage: str | None = None
        self.started = 0.0
        self.last = (0, 0)

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.progress is None:
            # (rich loads only to draw: ~25 ms of every command whose stderr is no terminal)
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn

            self.progress = Progress(
                TextColumn("{task.description:<14}"),
                BarColumn(bar_width=30),
                TextColumn("{task.fields[counts]}"),
                TextColumn("{task.fields[rate]}", style="dim"),
                console=Console(stderr=True),
                refresh_per_second=8,
            )
            self.progress.start()
        now = time.perf_counter()
        if stage != self.stage:
            self._finish()
            self.stage, self.started = stage, now
            self.task = self.progress.add_task(STAGE_NAMES.get(stage, stage), total=total or None, counts="", rate="")
        self._show(done, total, now)

    def shard(self, shard: ShardLoaded) -> None:
        """A line above the rows for each shard a load of several has read."""
        if not self.enabled:
            return
        line = _one_line(shard.describe())
        if self.progress is not None:
            self.progress.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            click.echo(line, err=True)

    def _show(self, done: int, total: int, now: float) -> None:
        self.last = (done, total)
        counts = f"{done:,}/{total:,}" if total else f"{done:,}"
        self.progress.update(
            self.task,
            completed=done,
            total=total or None,
            counts=counts,
            rate=describe_rate(done, total, now - self.started),
        )

    def _finish(self, complete: bool = True) -> None:
        """Freeze the stage's row: complete when the next stage began, as it was otherwise."""
        if self.task is not None:
            done, total = self.last
            if complete:
                done = total = total or done
            self._show(done, total, time.perf_counter())
            self.task = None

    def close(self) -> None:
        if self.progress is not None:
            self._finish(complete=False)
            self.progress.stop()
            self.progress = None
        self.stage = None


def _one_line(message) -> str:
    """The message on one line, with control and invisible characters shown as escapes."""
    return literal_line(str(message))


def _say(message: str, *outputs) -> None:
    """A command's closing line: on stderr when an output is being streamed to stdout."""
    click.echo(message, err=any(writes_to_stdout(o) for o in outputs))


def _fail(message: str, code: int = 1) -> None:
    click.echo(f"error: {_one_line(message)}", err=True)
    sys.exit(code)


class _Fraction(click.FloatRange):
    """A number in [0, 1] (or (0, 1] with min_open); NaN is refused as the usage error it is."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value!r} is not a number in [0, 1]", param, ctx)
        return number


class _Size(click.ParamType):
    """A size in bytes as people write it (memory.parse_size: 4G, 500M), at least memory.MIN_CAP."""

    name = "SIZE"

    def convert(self, value, param, ctx):
        from .engine.scanning.memory import MIN_CAP, SizeError, format_size, parse_size

        if isinstance(value, int):
            return value
        try:
            size = parse_size(value)
        except SizeError as exc:
            self.fail(str(exc), param, ctx)
        if size < MIN_CAP:
            self.fail(f"{value!r} is below the {format_size(MIN_CAP)} a scan needs at least", param, ctx)
        return size


class _Main(click.Group):
    """`dedup-tui PATH` and bare `dedup-tui` mean `dedup-tui open ...`."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and not args[0].startswith("-") and not Path(args[0]).exists():
            close = difflib.get_close_matches(args[0], list(self.commands), n=1, cutoff=0.6)
            if close:
                click.echo(
                    f"error: {_one_line(args[0])}: no such command or file (did you mean `dedup-tui {close[0]}`?)",
                    err=True,
                )
                sys.exit(2)
        if not args or (args[0] not in self.commands and not args[0].startswith("-")):
            args = ["open", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dedup-tui")
def main() -> None:
    """Find, review and remove duplicate documents in text corpora.

    Run without arguments to open the review app on a bundled sample corpus, or give a
    project file (.db) or a corpus (.jsonl, .csv, .tsv, also .gz or .zst; a folder of .txt or of
    shards) to open.
    """


_skip_teardown = False  # set by a command whose success leaves nothing to the interpreter's teardown


def run() -> None:
    """The console script: main(). A load or scan that succeeded then ends the process without
    the interpreter's teardown (~0.2 s after the result is printed, spent freeing numba's
    modules and the scan's arrays object by object): by then the command has closed its project
    (click closes it when the command ends, before main() exits) and no thread has work left."""
    try:
        main()
    except SystemExit as exc:
        if exc.code in (0, None) and _skip_teardown:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        raise


def _end_without_teardown() -> None:
    global _skip_teardown
    _skip_teardown = True


def _run(fn, *args, unchanged: str = "the project is unchanged", **kwargs):
    progress = _TerminalProgress()
    try:
        result = fn(*args, control=Control(progress, on_shard=progress.shard), **kwargs)
        check_snapshots("what it reports may mix the old and the new project")
        return result
    except KeyboardInterrupt:
        progress.close()
        _fail(f"interrupted; {unchanged}", 130)
    except BrokenPipeError:
        # The reader of a streamed output stopped early (`| head`): quiet, as a Unix tool is.
        progress.close()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(141)
    except Cancelled:
        progress.close()
        _fail(f"cancelled; {unchanged}", 130)
    except OutputError as exc:
        progress.close()
        _fail(str(exc) + (" (use --force to overwrite)" if exc.exists else ""))
    except DedupError as exc:
        progress.close()
        _fail(str(exc))
    except (OSError, sqlite3.Error, MemoryError) as exc:
        progress.close()
        if os.environ.get("DEDUP_TUI_DEBUG"):
            raise
        _fail(f"{type(exc).__name__}: {exc}")
    finally:
        progress.close()


def _open_project(db: str, create: bool = False) -> Project:
    """The command's project, closed when the command ends (also when it fails)."""
    try:
        project = Project(db, create=create)
    except DedupError as exc:
        _fail(str(exc))
    click.get_current_context().call_on_close(project.close)
    project.on_notice = _note
    return project


def _note(message: str) -> None:
    """What the engine repaired while reading (a packed copy rebuilt from its source)."""
    click.echo(f"note: {_one_line(message)}", err=True)


def _db_option(help_text: str):
    return click.option(
        "--db",
        metavar="PROJECT",
        type=click.Path(dir_okay=False, readable=False),
        help=f"{help_text}, if not given as the PROJECT argument.",
    )


_PROJECT_ARGUMENT = click.argument(
    "project_path", required=False, metavar="[PROJECT]", type=click.Path(dir_okay=False, readable=False)
)


def _the_project(given: str | None, db: str | None, usage: str, hint: str = "") -> str:
    """The project a command was given, as its PROJECT argument or with --db (both spellings stay
    valid): exactly one of them, else a one-line usage error showing the command's form."""
    if given is not None and db is not None:
        _fail(f"the project is given twice ({given} and --db {db}): give it once, as PROJECT or with --db", 2)
    project = given if given is not None else db
    if project is None:
        command = click.get_current_context().info_name
        _fail(f"give the project: dedup-tui {command} {usage} (or --db PROJECT){hint}", 2)
    _refuse_stream_project(project)
    return project


def _refuse_stream_project(project: str | None) -> None:
    if project is not None and str(project) == "-":
        _fail("-: a project is a file (.db), not standard input or output", 2)


def _project_and_files(files: tuple[str, ...], db: str | None, usage: str) -> tuple[str, list[str]]:
    """For a command whose arguments are files (CORPUS...): the first one is the project when it
    is one by name (.db, .sqlite, .sqlite3) or by content (a SQLite file), which no corpus file
    is; a project anywhere else among them is a usage error."""
    from .engine.opening import PROJECT_SUFFIXES, is_project_file

    files = list(files)
    if db is not None:  # every file is meant as a corpus: one that is SQLite inside cannot be read as one
        for name in files:
            if Path(name).suffix.lower() not in PROJECT_SUFFIXES and is_project_file(name):
                _fail(f"{name}: is a SQLite file (a project?), not a corpus file; nothing was loaded", 1)
    given = files.pop(0) if files and is_project_file(files[0]) else None
    for name in files:
        if is_project_file(name):
            command = click.get_current_context().info_name
            _fail(f"{name}: is a project, not a corpus file; give the project first: dedup-tui {command} {usage}", 2)
    hint = (
        f"; {files[0]} was read as a corpus file: a project's name ends in .db, .sqlite or .sqlite3"
        if files and given is None and db is None
        else ""
    )
    return _the_project(given, db, usage, hint), files


def _folder_out(out_dir: str) -> None:
    """`-` is standard output for the outputs that are streams; a folder output is none."""
    if out_dir == "-":
        command = click.get_current_context().info_name
        _fail(f"--out -: {command} writes a folder (several files), not a stream; give the folder's path", 2)


_LOAD_OPTIONS = [
    click.option(
        "--id-field",
        default=None,
        help='Field holding the document id; it must exist. [default: "id" where the records have one, else '
        "the line number]",
    ),
    click.option("--text-field", default="text", show_default=True, help="Field holding the document text."),
    click.option(
        "--skip-bad", is_flag=True, help="Skip bad records (counted, line numbers reported) instead of stopping."
    ),
]


def _load_options(fn):
    for option in reversed(_LOAD_OPTIONS):
        fn = option(fn)
    return fn


class _TakesReferences(click.Command):
    """`--reference A B C`: every file after the option, up to the next option, is a reference
    (so a shell glob works: `--reference evals/*.jsonl`)."""

    def parse_args(self, ctx, args):
        out: list[str] = []
        taking = pending = False
        for arg in args:
            if arg == "--reference" and not pending:
                taking = pending = True
            elif arg.startswith("--reference=") and not pending:
                out += ["--reference", arg.split("=", 1)[1]]
                taking = True
            elif taking and not arg.startswith("-"):
                out += ["--reference", arg]
                pending = False
            elif pending:
                break
            else:
                taking = False
                out.append(arg)
        if pending:
            _fail(
                f"--reference: give the reference files after it: dedup-tui {ctx.info_name} PROJECT [CORPUS]... "
                f"--reference FILE...",
                2,
            )
        return super().parse_args(ctx, out)


def _scan_settings_options(
    floor_help: str,
    method_help: str | None = None,
    max_bucket_help: str | None = None,
    described: bool = True,
    workers: bool = False,
    max_bucket_default: int = DEFAULT_MAX_BUCKET,
):
    """The scan settings' options of scan, plan and cluster-scan, with one name, default and
    range each, in this order: --k, --floor, --method (given its help), --num-perm, --seed,
    --workers (when asked), --max-bucket. `described`: --num-perm and --seed say what they are."""
    options = [
        click.option(
            "--k", default=DEFAULT_K, show_default=True, type=click.IntRange(1, 64), help="Shingle size in characters."
        ),
        click.option(
            "--floor", default=DEFAULT_FLOOR, show_default=True, type=_Fraction(0, 1, min_open=True), help=floor_help
        ),
    ]
    if method_help is not None:
        options.append(
            click.option("--method", default="auto", show_default=True, type=click.Choice(METHODS), help=method_help)
        )
    options += [
        click.option(
            "--num-perm",
            default=DEFAULT_NUM_PERM,
            show_default=True,
            type=click.IntRange(1, 1024),
            help="MinHash permutations." if described else None,
        ),
        click.option(
            "--seed",
            default=DEFAULT_SEED,
            show_default=True,
            type=click.IntRange(0, 2**63 - 1),
            help="Seed of the MinHash permutations." if described else None,
        ),
    ]
    if workers:
        options.append(
            click.option(
                "--workers",
                default=0,
                type=click.IntRange(0, 64),
                help="Threads for the compiled scan kernels (0: one per core).",
            )
        )
    options.append(
        click.option(
            "--max-bucket", default=max_bucket_default, show_default=True, type=click.IntRange(2), help=max_bucket_help
        )
    )

    def add(fn):
        for option in reversed(options):
            fn = option(fn)
        return fn

    return add


_REFERENCE_OPTION = click.option(
    "--reference",
    "references",
    multiple=True,
    metavar="FILE...",
    type=click.Path(exists=False, readable=False),
    help="Load these files as references (every file after the option): their documents are matched but never "
    "removed and never exported, e.g. evaluation sets, or an already-curated base when only new data is "
    "exported.",
)


def _load_into(db: str, job: LoadAndScan) -> Project:
    """Load the job's corpus files (and references) into the project (created if needed) and
    report; the project stays open until the command ends (click closes it)."""
    if Path(db).exists():
        project = _open_project(db, create=True)
        _, report = _run(job.load, project)
    else:
        # A new project appears only once its first load is complete (kill -9 included).
        project, report = _run(job.load, db)
        click.get_current_context().call_on_close(project.close)
        project.on_notice = _note
    as_reference = f" ({len(report.references)} as reference)" if report.references else ""
    click.echo(
        f"loaded {report.documents:,} documents from {len(report.sources)} source(s){as_reference} into {_one_line(db)}"
    )
    for path, lines in report.skipped.items():
        shown = ", ".join(map(str, lines[:20])) + (" ... (all in the sources table)" if len(lines) > 20 else "")
        reason = report.reasons.get(path)
        click.echo(
            f"skipped {len(lines):,} bad record(s) in {_one_line(path)}: lines {shown}"
            + (f" (first: {_one_line(reason)})" if reason else "")
        )
    return project


@main.command(cls=_TakesReferences)
@click.argument("corpus", nargs=-1, metavar="[PROJECT] CORPUS...", type=click.Path(exists=False, readable=False))
@_db_option("Project file to create or add to")
@_load_options
@_REFERENCE_OPTION
def load(corpus, db, id_field, text_field, skip_bad, references):
    """Load CORPUS files (JSONL, CSV/TSV, also .gz or .zst; Parquet; a folder of .txt) into
    PROJECT (a .db file, created if needed): `dedup-tui load notes.db notes.jsonl`. A folder of
    shards or a quoted glob loads each file in turn: `dedup-tui load P.db 'data/part-*.jsonl.zst'`.
    Files after --reference are loaded as references: matched, never removed, never exported."""
    db, corpus = _project_and_files(corpus, db, "PROJECT CORPUS...")
    _no_project_among(references, "PROJECT CORPUS... --reference FILE...")
    if not corpus and not references:
        _fail("give the CORPUS files to load: dedup-tui load PROJECT CORPUS...", 2)
    # a large corpus is scanned next: its kernels compile meanwhile (no signing ahead: no scan follows here)
    with LoadAndScan(
        corpus,
        references,
        load_options=dict(id_field=id_field, text_field=text_field, skip_bad=skip_bad),
        sign_ahead=False,
    ) as job:
        job.start()
        _load_into(db, job)
    _end_without_teardown()


def _no_project_among(references, usage: str) -> None:
    from .engine.opening import is_project_file

    for name in references:
        if is_project_file(name):
            command = click.get_current_context().info_name
            _fail(f"--reference {name}: is a project, not a corpus file: dedup-tui {command} {usage}", 2)


@main.command(cls=_TakesReferences)
@_db_option("Project file")
@_scan_settings_options(
    floor_help="Lowest similarity stored; thresholds below it need a rescan.",
    method_help="Candidate pairs from MinHash LSH, an exhaustive comparison, or whichever suits the corpus size.",
    workers=True,
    max_bucket_help="LSH buckets larger than this are split by sub-bands where that saves work, else compared pair "
    "by pair; never skipped.",
)
@click.option(
    "--full",
    is_flag=True,
    help="Compare every document again, even when only documents loaded since the last scan need it.",
)
@click.option(
    "--memory",
    type=_Size(),
    default=None,
    help="Memory the scan keeps within, e.g. 4G or 500M; what does not fit goes to a folder beside the "
    "project for the scan's time. [default: half of the memory available]",
)
@click.option(
    "--no-plan",
    is_flag=True,
    help="Start at once, without the plan (`dedup-tui plan`) a scan of 200 MB of corpus or more prints first, "
    "and without checking the disk against it.",
)
@click.option(
    "--lean",
    is_flag=True,
    help="Keep no band keys for incremental scans: a smaller project (no ~125 B a document), but the "
    "next scan after a load compares every document again.",
)
@click.argument("corpus", nargs=-1, metavar="[PROJECT] [CORPUS]...", type=click.Path(exists=False, readable=False))
@_load_options
@_REFERENCE_OPTION
def scan(
    db,
    k,
    floor,
    method,
    num_perm,
    seed,
    workers,
    max_bucket,
    full,
    memory,
    no_plan,
    lean,
    corpus,
    id_field,
    text_field,
    skip_bad,
    references,
):
    """Find exact duplicates and verified near-duplicate pairs (Jaccard >= floor) in PROJECT.

    Given CORPUS files after it, loads them into the project first (created if needed), as
    `load` does, in the same run: `dedup-tui scan notes.db notes.jsonl`. Files after
    --reference are loaded as references (matched, never removed, never exported):
    `dedup-tui scan P.db train/*.jsonl --reference evals/*.jsonl`.

    Documents loaded into a scanned project are scanned incrementally: compared with one
    another and with the scanned documents only, with the same result as a full rescan
    (--full forces one; so do settings other than the last scan's). After a --lean scan, which
    keeps no band keys, the next scan compares every document again.
    """
    db, corpus = _project_and_files(corpus, db, "PROJECT [CORPUS]...")
    _no_project_among(references, "PROJECT [CORPUS]... --reference FILE...")
    loading = [*corpus, *references]
    if not loading and (id_field is not None or text_field != "text" or skip_bad):
        _fail("--id-field, --text-field and --skip-bad apply to the CORPUS files given to scan; none given", 2)
    settings = ScanSettings(
        k=k, floor=floor, method=method, num_perm=num_perm, seed=seed, workers=workers, max_bucket=max_bucket
    )
    from .engine.scanning.memory import default_cap, describe_cap

    cap = default_cap() if memory is None else memory
    load_options = dict(id_field=id_field, text_field=text_field, skip_bad=skip_bad)
    if loading:
        click.echo(describe_cap(cap, memory is not None))
    if not no_plan:  # before any work: a disk too small is refused with nothing loaded
        _plan_first(db, loading, settings, id_field, text_field, lean, memory)
    with LoadAndScan(corpus, references, settings, load_options, full, memory=cap, lean=lean) as job:
        job.start()  # first run: the kernels compile while the corpus loads; (warm kernels) signed as they load
        if loading:
            project = _load_into(db, job)
        else:  # (a project that cannot be opened, or scanned, is a one-line error)
            project = _open_project(db)
            try:
                project.check_writable("scanned")
            except DedupError as exc:
                _fail(str(exc))
            click.echo(describe_cap(cap, memory is not None))
        for run in project.interrupted_runs("scan"):
            click.echo(
                f"note: the scan started {run['started_at']} (run {run['id']}) was interrupted before it "
                f"finished; nothing of it was kept, scanning again from the start",
                err=True,
            )
        r = _run(job.scan, project)
    if r.incremental:
        click.echo(
            f"incremental scan: {r.new_documents:,} new documents compared with one another and with the "
            f"{r.documents - r.new_documents:,} scanned before"
        )
    elif r.full_reason and not full:
        click.echo(f"full scan: {r.full_reason}")
    if lean:
        click.echo("lean: no band keys kept; the next scan after a load compares every document again")
    extra = f", LSH {r.bands}x{r.rows}, {r.candidates:,} candidates" if r.method == "lsh" else ""
    click.echo(
        f"{r.documents:,} documents: {r.exact_duplicates:,} exact duplicates in {r.exact_groups:,} groups; "
        f"{r.pairs:,} near pairs >= {floor} ({r.method}{extra}) in {r.timings.get('total', 0):.2f}s"
    )
    if r.passes > 1:
        from .engine.scanning.memory import format_size

        click.echo(
            f"candidates verified in {r.passes:,} passes under the {format_size(r.memory_cap)} cap, "
            f"{format_size(r.spill_bytes)} at most in the spill folder"
        )
    if r.memory_cap and r.fixed_bytes > r.memory_cap:
        from .engine.scanning.memory import format_size

        click.echo(
            f"warning: the scan held {format_size(r.fixed_bytes)} before its candidates (signatures, texts), "
            f"more than the {format_size(r.memory_cap)} cap: a cap below that is exceeded",
            err=True,
        )
    if r.oversized_buckets:
        dense = r.oversized_buckets - r.split_buckets
        click.echo(
            f"{r.oversized_buckets:,} LSH buckets{' with a new document' if r.incremental else ''} larger than "
            f"--max-bucket {max_bucket:,} (largest "
            f"{r.largest_bucket:,} documents): {r.split_buckets:,} split by sub-bands, {dense:,} dense ones "
            f"compared pair by pair; none skipped"
        )
    _end_without_teardown()


def _plan_first(
    db: str, loading: list[str], settings: ScanSettings, id_field, text_field, lean: bool, cap: int | None
) -> None:
    """The plan's lines (from PLAN_IN_SCAN_BYTES of corpus on: a smaller corpus scans in less
    time than the plan takes, so its disk is checked from its size), then the disk check: a scan
    that would not fit stops here, before anything is loaded."""
    from .engine.compile.warmup import corpus_bytes
    from .engine.plan import PLAN_IN_SCAN_BYTES, DiskTooSmall, check_disk, make_plan_apart, size_only_need

    if not Path(db).exists() and not loading:
        return  # no project and nothing to load: the scan says so
    # (a rescan of a project: its corpus was about a seventh of the project file)
    size = corpus_bytes(loading, PLAN_IN_SCAN_BYTES) if loading else Path(db).stat().st_size // 7
    if size < PLAN_IN_SCAN_BYTES and not loading:
        return  # a small rescan: a disk that fills up while it writes is the scan's one-line error
    if size < PLAN_IN_SCAN_BYTES:
        try:
            check_disk(size_only_need(size), db)
        except DiskTooSmall as exc:
            _fail(f"{exc}; nothing was loaded or scanned (--no-plan skips this check)")
        return
    try:
        plan = make_plan_apart(
            loading,
            db if Path(db).exists() else None,
            settings=settings,
            id_field=id_field,
            text_field=text_field,
            lean=lean,
            quick=True,
            cap=cap,
        )
    except KeyboardInterrupt:
        _fail("interrupted; nothing was done", 130)
    except DedupError as exc:
        _fail(str(exc))
    if plan.scanned_sample:
        for line in plan.lines():
            click.echo(line)
    try:
        check_disk(plan, db)
    except DiskTooSmall as exc:
        _fail(f"{exc}; nothing was loaded or scanned")


@main.command(cls=_TakesReferences)
@click.argument("corpus", nargs=-1, metavar="[PROJECT] CORPUS...", type=click.Path(exists=False, readable=False))
@_scan_settings_options(floor_help="Lowest similarity the scan would store.", method_help="As scan's.", described=False)
@click.option("--lean", is_flag=True, help="Plan a scan --lean (no band keys kept).")
@click.option("--memory", default=None, help="The scan's memory cap (e.g. 4G). [default: half the memory available]")
@click.option("--json", "as_json", is_flag=True, help="The plan as one JSON object.")
@_load_options
@_REFERENCE_OPTION
def plan(
    corpus,
    k,
    floor,
    method,
    num_perm,
    seed,
    max_bucket,
    lean,
    memory,
    as_json,
    id_field,
    text_field,
    skip_bad,
    references,
):
    """Estimate what loading CORPUS into a project and scanning it will take, before doing it:
    documents and distinct texts, near pairs, peak memory under the cap, disk for the project
    and for the temporary files, and time on this machine. Reads the corpus once and scans a
    sample of it (every copy of a text sampled together) in a temporary folder; writes no
    project. Given a PROJECT first, its documents count too (`dedup-tui plan P.db new.jsonl`).

    Each `scan` prints the same plan first and refuses to start when the disk cannot hold
    what it needs (scan --no-plan skips both).
    """
    from .engine.plan import DiskTooSmall, check_disk, make_plan
    from .engine.scanning.memory import SizeError, parse_size

    files = list(corpus)
    from .engine.opening import is_project_file

    db = files.pop(0) if files and is_project_file(files[0]) else None
    loading = [*files, *references]
    if not loading and db is None:
        _fail("give the corpus files to plan: dedup-tui plan [PROJECT] CORPUS...", 2)
    try:
        cap = parse_size(memory) if memory is not None else None
    except SizeError as exc:
        _fail(f"--memory: {exc}", 2)
    settings = ScanSettings(k=k, floor=floor, method=method, num_perm=num_perm, seed=seed, max_bucket=max_bucket)
    existing = _open_project(db) if db is not None else None
    result = _run(make_plan, loading, settings, id_field, text_field, lean, cap=cap, project=existing)
    target = db or str(Path(loading[0]).with_suffix(".db"))
    if as_json:
        click.echo(json.dumps(result.as_json()))
    else:
        for line in result.lines():
            click.echo(line)
        for line in result.detail_lines():
            click.echo(line)
    try:
        check_disk(result, target)
    except DiskTooSmall as exc:
        _fail(str(exc))


@main.command()
@_PROJECT_ARGUMENT
@_db_option("Project file")
@click.option(
    "--min", "minimum", default=None, type=_Fraction(0, 1), help="Lowest Jaccard to write (default: the floor)."
)
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, readable=False),
    help='Output JSONL: {"a", "b", "jaccard"} a line, jaccard cut to 6 decimals (- for standard output).',
)
@click.option("--force", is_flag=True, help="Overwrite the output file if it exists.")
def pairs(project_path, db, minimum, out, force):
    """Write PROJECT's verified near-duplicate pairs, a before b in corpus order (--out -:
    standard output)."""
    db = _the_project(project_path, db, "PROJECT --out FILE")
    project = _open_project(db)
    try:
        project.require_current_scan()
        floor = float(project.scan_params()["floor"])
    except DedupError as exc:
        _fail(str(exc))
    if minimum is not None and minimum < floor:
        _fail(
            f"--min {minimum} is below the scan's floor {floor}: pairs under the floor were never stored "
            f"(rescan with a lower --floor)"
        )
    from .engine.curate.export import write_pairs

    count = _run(write_pairs, project, out, minimum if minimum is not None else 0.0, force=force)
    _say(f"wrote {count:,} pairs to {_one_line(out)}", out)


@main.command(name="export")
@_PROJECT_ARGUMENT
@_db_option("Project file")
@click.option(
    "--threshold",
    type=_Fraction(0, 1),
    help="Similarity at or above which documents are duplicates. [default: the one the project was last reviewed with]",
)
@click.option(
    "--policy",
    type=click.Choice(POLICIES),
    help="How clusters are formed. [default: the one the project was last reviewed with, else components]",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, readable=False),
    help="Kept records, in corpus order (- for standard output).",
)
@click.option(
    "--removed",
    type=click.Path(dir_okay=False, readable=False),
    help="Removed documents: {id, duplicate_of, similarity, reason} a line, and via, via_similarity when "
    "linked through another member (reason: exact, near or reviewer; duplicate_of: always a kept "
    "document; similarities: 6 decimals, cut).",
)
@click.option(
    "--clusters",
    type=click.Path(dir_okay=False, readable=False),
    help="A table of every document for pandas, CSV or Parquet by the suffix (.csv, .parquet): id, "
    "source, cluster, duplicate_of, similarity, via, via_similarity, status, reason, "
    "reviewer_decided, reviewer_saw.",
)
@click.option(
    "--format",
    "fmt",
    default=None,
    type=click.Choice(FORMATS),
    help="Format of the kept records. [default: the one --out ends in (.jsonl, .csv, .parquet), else jsonl]",
)
@click.option(
    "--decisions-log",
    type=click.Path(dir_okay=False, readable=False),
    help="Write every review decision as JSONL: who, what, when, and its status: active (in force), "
    "undone (redo brings it back), discarded (out of force for good: withdrawn, or undone and then "
    "replaced by a newer decision) or not applied (in force but unable to apply, with its reason: "
    "the removal of a reference document).",
)
@click.option(
    "--manifest",
    type=click.Path(dir_okay=False, readable=False),
    help="Write a JSON manifest: input files' SHA-256, scan parameters, threshold, policy, counts, time.",
)
@click.option(
    "--keep",
    "keep",
    metavar="RULE",
    help="Which document a cluster keeps when no reviewer chose: first (in corpus order), longest, "
    "max:FIELD or min:FIELD (the highest / lowest value of a record field: max:date for the newest, "
    "max:score for the best); saved in the project. [default: the project's, else first]",
)
@click.option(
    "--ignore-decisions", is_flag=True, help="Export the automatic clustering only, ignoring the reviewer's decisions."
)
@click.option(
    "--only",
    type=click.Choice(["new"]),
    help="new: write only the documents loaded since the scan before the last one (after a first scan: "
    "every source that is not a reference, e.g. new data against a curated base loaded with "
    "--reference); the removed log lists theirs alone.",
)
@click.option(
    "--sources",
    "chosen_sources",
    metavar="FILE[,FILE...]",
    multiple=True,
    help="Write only the documents of these sources (their path as loaded, their file name, or their "
    "number in the manifest's list, from 1); the removed log lists theirs alone. Clustering still "
    "sees every source.",
)
@click.option("--force", is_flag=True, help="Overwrite output files that already exist.")
def export_cmd(
    project_path,
    db,
    threshold,
    policy,
    out,
    removed,
    clusters,
    fmt,
    decisions_log,
    manifest,
    keep,
    ignore_decisions,
    only,
    chosen_sources,
    force,
):
    """Write PROJECT's curated corpus at a threshold, with the review decisions applied.

    Decisions made in the review app (keep, remove, not a duplicate) override the automatic
    policy unless --ignore-decisions is given. --removed, --decisions-log and --manifest
    write the optional logs; --clusters a table of every document (CSV or Parquet). Every file
    is written to a temporary file and renamed into place; existing files are never overwritten
    without --force. Any output given as - is written to standard output (and this summary to
    standard error).
    """
    from .engine.curate.curated import export_curated

    db = _the_project(project_path, db, "PROJECT --out FILE")

    if clusters:
        from .engine.curate.cluster_table import cluster_table_format

        try:
            cluster_table_format(clusters)
        except DedupError as exc:
            _fail(f"--clusters {exc}", 2)
    suffix = Path(out).suffix.lower().lstrip(".")
    if fmt is None:
        fmt = suffix if suffix in FORMATS else "jsonl"
    elif suffix in FORMATS and suffix != fmt:
        _fail(f"--out {out} ends in .{suffix} but --format is {fmt}: change one of them", 2)
    project = _open_project(db)
    sources = _export_sources(project, db, only, chosen_sources)
    threshold, policy = _review_settings(project, db, threshold, policy)
    if keep is not None:
        from .engine.curate.keep_rules import check_keep_rule, describe_keep_rule, parse_keep_rule, record_keep_rule

        try:
            keep = parse_keep_rule(keep)
        except DedupError as exc:
            _fail(f"--keep: {exc}", 2)
        if project.readonly:  # the rule is for this export; the project cannot keep it
            keep = _run(lambda control: check_keep_rule(project, keep))
            click.echo(
                f"keeping {describe_keep_rule(keep)} for this export (the project is read-only, so the rule "
                f"is not saved in it)",
                err=True,
            )
        else:
            # one step of the undo history, as K in the app (an undo there puts back the rule it replaced)
            _run(lambda control: record_keep_rule(project, keep, threshold=threshold, policy=policy))
    _warn_if_audit_stale(project, threshold, policy, keep)
    r = _run(
        export_curated,
        project,
        threshold,
        policy,
        out,
        fmt=fmt,
        removed_out=removed,
        decisions_out=decisions_log,
        manifest_out=manifest,
        use_decisions=not ignore_decisions,
        force=force,
        keep=keep,
        sources=sources,
        clusters_out=clusters,
    )
    of = f" of {len(sources)} source{'s' if len(sources) != 1 else ''}" if sources is not None else ""
    refs = f"; {r.references:,} reference documents matched, not written" if r.references else ""
    _say(
        f"kept {r.kept:,} documents{of} in {_one_line(out)}; "
        f"removed {r.removed:,} ({r.exact:,} exact, {r.near:,} near, {r.reviewer:,} by reviewer){refs}; "
        f"{r.decisions_line()}",
        out,
        removed,
        decisions_log,
        manifest,
        clusters,
    )


def _warn_if_audit_stale(project: Project, threshold: float, policy: str, keep: str | None) -> None:
    """One line on stderr when the last audit does not describe this export."""
    from .engine.curate.keep_rules import keep_rule
    from .engine.store.audits import staleness

    why = _run(lambda control: staleness(project, threshold, policy, keep or keep_rule(project)))
    if why:
        click.echo(f"warning: {_one_line(why)}", err=True)


def _export_sources(project: Project, db: str, only: str | None, chosen: tuple[str, ...]) -> list[int] | None:
    """The ids of the sources export writes (--only new, --sources), or None for all of them;
    a usage error for a source that is not in the project or is a reference."""
    if only is None and not chosen:
        return None
    roles = project.source_roles()
    paths = project.source_paths()
    if only == "new" and not chosen:
        new_from = project.new_from_ord()
        loaded_since = project.sources_from_ord(new_from) if new_from is not None else set(paths)
        return [s for s in sorted(paths) if roles.get(s) != "reference" and s in loaded_since]
    ordered = sorted(paths)
    names = [n.strip() for given in chosen for n in given.split(",") if n.strip()]
    picked: list[int] = []
    for name in names:
        resolved = str(Path(name).resolve())
        found = [s for s in ordered if paths[s] == resolved] or [s for s in ordered if Path(paths[s]).name == name]
        if not found and name.isdigit() and 1 <= int(name) <= len(ordered):
            found = [ordered[int(name) - 1]]
        if len(found) != 1:
            listed = ", ".join(f"{i} {_one_line(Path(paths[s]).name)}" for i, s in enumerate(ordered, 1))
            why = "no source of the project is" if not found else "several sources are"
            _fail(f"--sources {name}: {why} named so; its sources: {listed}", 2)
        if roles.get(found[0]) == "reference":
            _fail(f"--sources {name}: is a reference source: its documents are matched but never exported", 2)
        picked.append(found[0])
    return sorted(set(picked))


def _review_settings(project: Project, db: str, threshold: float | None, policy: str | None) -> tuple[float, str]:
    """The threshold and policy given, else the ones the project was last reviewed with."""
    reviewed = json.loads(project.get_meta("ui_state") or "{}")
    chosen = []
    if threshold is None:
        if "threshold" not in reviewed:
            _fail(f"{db}: give --threshold (the project was never reviewed in the app, so it has none of its own)", 2)
        threshold = float(reviewed["threshold"])
        chosen.append(f"threshold {threshold:.2f}")
    if policy is None:
        if reviewed.get("policy") in POLICIES:
            policy = reviewed["policy"]
            chosen.append(f"policy {policy}")
        else:
            policy = "components"
    if chosen:
        click.echo(f"using {' and '.join(chosen)}, as the project was last reviewed", err=True)
    return threshold, policy


@main.command()
@click.option("--n-unique", default=50, show_default=True, type=click.IntRange(1), help="Base documents.")
@click.option(
    "--copies",
    default=3,
    show_default=True,
    type=click.IntRange(1),
    help="Documents per base (the base and its noisy copies).",
)
@click.option(
    "--noise",
    default=0.15,
    show_default=True,
    type=_Fraction(0, 1),
    help="Fraction of characters replaced in each copy.",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Random seed.")
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, readable=False),
    help="Output JSONL with id, text, group (- for standard output).",
)
@click.option("--force", is_flag=True, help="Overwrite the output file if it exists.")
def synth(n_unique, copies, noise, seed, out, force):
    """Write a synthetic corpus with planted noisy copies (ground truth in `group`)."""
    from .engine.curate.export import AtomicFile
    from .engine.outputs import check_outputs
    from .engine.text.synth import synthetic_corpus

    docs = synthetic_corpus(n_unique, copies, noise, seed)

    def write(control) -> None:
        check_outputs({"corpus": out}, force)
        if force and not _synthetic_or_absent(Path(out)):
            raise DedupError(
                f"{out}: is not a corpus written by synth (its first line is not an id, text and "
                f"group record); synth --force replaces only an earlier synthetic corpus"
            )
        with AtomicFile(Path(out), "w", overwrite=force) as fh:
            for d in docs:
                fh.write(json.dumps(d) + "\n")

    _run(write)
    _say(f"wrote {len(docs):,} documents ({n_unique:,} groups) to {_one_line(out)}", out)


def _synthetic_or_absent(path: Path) -> bool:
    """True when `path` is missing, empty, a stream, or starts with a record synth writes:
    --force must not replace a real corpus that happens to have the name given."""
    from .engine.outputs import is_stream

    if is_stream(path) or not path.is_file():
        return True
    try:
        with open(path, "rb") as fh:
            first = fh.readline(1 << 20)
        if not first.strip():
            return True
        record = json.loads(first)
        return isinstance(record, dict) and set(record) == {"id", "text", "group"}
    except (OSError, ValueError, TypeError):
        return False


_ADDRESS = click.option(
    "--address",
    default=None,
    metavar="ADDRESS",
    help="Ray cluster: ray://host:10001, or 'auto' for the cluster this machine is part of. "
    "[default: a Ray started on this machine]",
)


@main.command(name="cluster-scan", cls=_TakesReferences)
@click.argument("corpus", nargs=-1, required=True, type=click.Path(exists=False, readable=False))
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, readable=False),
    help="Folder to write (SCAN_DIR): pairs, exact groups, the records of their documents, a manifest.",
)
@_ADDRESS
@_scan_settings_options(
    floor_help="Lowest similarity stored.",
    max_bucket_help="LSH buckets larger than this are reported (compared pair by pair, never skipped).",
    max_bucket_default=CLUSTER_MAX_BUCKET,
)
@click.option(
    "--piece-mb",
    default=64,
    show_default=True,
    type=click.IntRange(1),
    help="Size of the pieces each file is read in, one task a piece.",
)
@click.option(
    "--partitions",
    default=0,
    type=click.IntRange(0),
    help="Partitions of each shuffle. [default: twice the cluster's CPUs]",
)
@click.option(
    "--memory",
    type=_Size(),
    default=None,
    help="Memory each worker keeps within, e.g. 4G or 500M: smaller pieces under a small cap, and the "
    "candidates a task cannot hold in a folder of its worker for the task's time. [default: half of the "
    "memory a CPU has on the smallest node]",
)
@click.option("--force", is_flag=True, help="Replace SCAN_DIR if it exists.")
@_load_options
@_REFERENCE_OPTION
def cluster_scan_cmd(
    corpus,
    out_dir,
    address,
    k,
    floor,
    num_perm,
    seed,
    max_bucket,
    piece_mb,
    partitions,
    memory,
    force,
    id_field,
    text_field,
    skip_bad,
    references,
):
    """Scan JSONL (also .gz, .zst) or Parquet shards on a Ray cluster (CORPUS: files, folders or glob patterns).

    The same exact groups and near pairs as `scan` (LSH) on the same files, in SCAN_DIR;
    `dedup-tui import SCAN_DIR P.db` makes a review project of them. The files and
    SCAN_DIR must be at the same path on every node (a shared file system). Ctrl-C cancels the
    job's tasks on the cluster.
    """
    _folder_out(out_dir)
    from .engine.ray import job
    from .engine.ray import settings as ray_settings

    settings = ray_settings.ClusterScanSettings(
        k=k,
        floor=floor,
        num_perm=num_perm,
        seed=seed,
        max_bucket=max_bucket,
        id_field=id_field,
        text_field=text_field,
        skip_bad=skip_bad,
        piece_bytes=piece_mb << 20,
        partitions=partitions,
        memory=memory or 0,
    )
    r = _run(
        job.cluster_scan,
        list(corpus),
        out_dir,
        settings,
        address=address,
        force=force,
        references=list(references),
        notice=click.echo,
        unchanged=f"nothing was written to {out_dir}; the job's tasks were cancelled",
    )
    click.echo(
        f"{r.documents:,} documents in {r.pieces:,} piece{'s' if r.pieces != 1 else ''}: "
        f"{r.exact_duplicates:,} exact duplicates in {r.exact_groups:,} groups; "
        f"{r.pairs:,} near pairs >= {floor} (LSH {r.bands}x{r.rows}, {r.candidates:,} candidates); "
        f"{r.participants:,} documents to review, in {_one_line(out_dir)} "
        f"({r.timings.get('total', 0):.1f}s)"
    )
    if r.tasks_in_passes:
        from .engine.scanning.memory import format_size

        click.echo(
            f"candidates taken in passes by {r.tasks_in_passes:,} task(s) under the {format_size(r.memory_cap)} "
            f"cap per worker, {format_size(r.spill_bytes)} at most in a worker's spill folder"
        )
    if r.skipped_records:
        click.echo(f"skipped {r.skipped_records:,} bad record(s) (their lines are in the manifest)")
    if r.oversized_buckets:
        click.echo(
            f"compared {r.oversized_buckets:,} LSH buckets larger than --max-bucket {max_bucket:,} pair by pair "
            f"(largest {r.largest_bucket:,} documents; none skipped)"
        )


@main.command(name="import")
@click.argument("scan_dir", type=click.Path(exists=False, readable=False))
@_PROJECT_ARGUMENT
@_db_option("Project file to create")
@click.option(
    "--review-from",
    type=click.Path(dir_okay=False, readable=False),
    help="An earlier project of the same corpus whose decisions, labels and keep rule to carry over "
    "(after a new cluster-scan).",
)
def import_cmd(scan_dir, project_path, db, review_from):
    """Make PROJECT, a review project of a cluster scan's SCAN_DIR: the documents in some pair
    or exact group, with their records, pairs and groups. Open it with `dedup-tui PROJECT`."""
    from .engine.opening import is_project_file
    from .engine.ray.partial import partial_view
    from .engine.ray.scandir import import_scan

    if project_path is not None and is_project_file(scan_dir) and not is_project_file(project_path):
        _fail(
            f"{scan_dir}: is a project, not a scan folder; give the scan folder first: "
            f"dedup-tui import SCAN_DIR PROJECT",
            2,
        )
    db = _the_project(project_path, db, "SCAN_DIR PROJECT")

    if review_from and not Path(review_from).is_file():
        _fail(f"{review_from}: no such project file", 2)
    project = _run(import_scan, scan_dir, db, review_from=review_from, unchanged=f"{db} was not created")
    click.echo(f"imported into {_one_line(db)}: {partial_view(project).describe()}")
    if review_from:
        carried = json.loads(project.get_meta("carried_review") or "{}")
        click.echo(
            f"carried over {carried.get('decisions', 0):,} decisions from {_one_line(review_from)}: "
            f"{carried.get('matched', 0):,} name documents of this scan"
            + (
                f", {carried['unmatched']:,} name documents without a duplicate in this scan (kept as they are)"
                if carried.get("unmatched")
                else ""
            )
        )
        if carried.get("other_files"):
            names = ", ".join(_one_line(n) for n in carried["other_files"][:3])
            click.echo(
                f"warning: {_one_line(review_from)} was loaded from files this scan did not read ({names}"
                f"{' and more' if len(carried['other_files']) > 3 else ''}): check that it reviewed this corpus",
                err=True,
            )
    project.close()


@main.command(name="cluster-export")
@click.argument("corpus", nargs=-1, metavar="[PROJECT] CORPUS...", type=click.Path(exists=False, readable=False))
@_db_option("The reviewed project (imported, or local)")
@click.option(
    "--threshold",
    type=_Fraction(0, 1),
    help="Similarity at or above which documents are duplicates. [default: the one the project was last reviewed with]",
)
@click.option(
    "--policy",
    type=click.Choice(POLICIES),
    help="How clusters are formed. [default: the one the project was last reviewed with, else components]",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, readable=False),
    help="Folder for the curated shards (named as the input's), removed.jsonl, decisions.jsonl and manifest.json.",
)
@_ADDRESS
@click.option("--ignore-decisions", is_flag=True, help="Apply the automatic clustering only.")
@click.option("--force", is_flag=True, help="Replace outputs that exist.")
def cluster_export_cmd(corpus, db, threshold, policy, out_dir, address, ignore_decisions, force):
    """Apply the review to the whole corpus on a Ray cluster: each shard's kept records,
    unchanged and in its own format, plus the removed log, decisions log and manifest.
    A shard is renamed into place only when every shard was written and is still the file
    scanned. PROJECT is the reviewed project: `dedup-tui cluster-export review.db shards/ --out curated/`."""
    db, corpus = _project_and_files(corpus, db, "PROJECT CORPUS... --out DIR")
    if not corpus:
        _fail("give the CORPUS the project was scanned from: dedup-tui cluster-export PROJECT CORPUS... --out DIR", 2)
    _folder_out(out_dir)
    from .engine.ray.export import cluster_export

    project = _open_project(db)
    threshold, policy = _review_settings(project, db, threshold, policy)
    project.close()
    r = _run(
        cluster_export,
        db,
        threshold,
        policy,
        list(corpus),
        out_dir,
        address=address,
        force=force,
        use_decisions=not ignore_decisions,
        unchanged="no shard was written",
    )
    click.echo(
        f"kept {r.kept:,} documents in {len(r.shards)} shard(s) in {_one_line(out_dir)}; removed {r.removed:,} "
        f"(listed in {_one_line(r.removed_out)})"
    )


@main.command(name="open", cls=_TakesReferences)
@click.argument("path", required=False, type=click.Path(readable=False))
@click.option(
    "--db",
    type=click.Path(dir_okay=False, readable=False),
    help="Project file to create for a corpus (default: beside it).",
)
@click.option("--id-field", default=None, help="Corpus: field holding the document id (as for load).")
@click.option("--text-field", default="text", show_default=True, help="Corpus: field holding the document text.")
@click.option("--skip-bad", is_flag=True, help="Corpus: skip bad records instead of stopping.")
@click.option(
    "--read-only",
    is_flag=True,
    help="Project: look without changing anything (no decisions, notes, "
    "labels or exports; another window may have the project open meanwhile).",
)
@click.option(
    "--read-only-if-open",
    is_flag=True,
    hidden=True,
    help="Project: read-only when another window has it open (each browser of `serve`).",
)
@_REFERENCE_OPTION
def open_cmd(path, db, id_field, text_field, skip_bad, read_only, read_only_if_open, references):
    """Open the review app on PATH (a project .db or a corpus), or on the bundled sample.

    A corpus is loaded (with the files after --reference as references) and scanned in the app.
    """
    _refuse_stream_project(db)
    _no_project_among(references, "CORPUS --reference FILE...")
    try:
        from .ui.run import launch
    except ImportError as exc:  # pragma: no cover - the UI ships with the package
        _fail(f"the review app is unavailable ({exc})")
    try:
        options = {"id_field": id_field, "text_field": text_field, "skip_bad": skip_bad, "references": list(references)}
        launch(
            path,
            db,
            read_only=True if read_only else "if-open" if read_only_if_open else False,
            **{k: v for k, v in options.items() if v not in (None, False, "text", [])},
        )
    except DedupError as exc:
        _fail(str(exc))


@main.command()
@_PROJECT_ARGUMENT
@_db_option("Project file to review")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; 0.0.0.0 serves every network of this machine (then the token is the "
    "only protection, and the traffic is not encrypted: put a TLS proxy in front).",
)
@click.option(
    "--port",
    default=8000,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (0: a free one, printed).",
)
@click.option(
    "--public-url",
    default=None,
    metavar="URL",
    help="The address browsers use, when it is not http://HOST:PORT (a proxy or a tunnel); its host "
    "and origin are allowed.",
)
@click.option(
    "--token",
    default=None,
    envvar="DEDUP_TUI_TOKEN",
    show_envvar=True,
    metavar="TOKEN",
    help="The secret every browser needs (16+ letters, digits, . _ ~ -) [default: a new random one, "
    "printed in the URL]. Prefer the environment variable: other users can see a command line.",
)
@click.option(
    "--allow-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Another name browsers may use for this server (besides loopback names, the address "
    "listened on and --public-url's host); repeatable.",
)
@click.option(
    "--max-sessions",
    default=4,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Browser sessions (app processes) at once; more get a page that says why.",
)
@click.option("--read-only", is_flag=True, help="Every browser gets a read-only view.")
def serve(project_path, db, host, port, public_url, token, allowed_hosts, max_sessions, read_only):
    """Review PROJECT in a web browser: the same app, one per browser tab, served with
    textual-serve. The first browser reviews; a second one on the same project gets a read-only
    view that says so. Listens on 127.0.0.1 (this machine only) unless --host says otherwise.
    Only the URL printed gets in: it holds a token (--token or DEDUP_TUI_TOKEN, else a random one)."""
    db = _the_project(project_path, db, "PROJECT [--host HOST] [--port PORT]")
    from .engine.opening import is_project_file

    if not is_project_file(db):
        _fail(f"{db}: serve opens a project file (.db); make one with dedup-tui scan PROJECT CORPUS", 2)
    try:  # a clear error now for a missing or damaged project, not in each browser
        Project(db).close()
    except DedupError as exc:
        _fail(str(exc))
    from .ui.serve import ServeError, serve_project

    try:
        serve_project(
            Path(db),
            host,
            port,
            public_url=public_url,
            read_only=read_only,
            token=token,
            allowed_hosts=allowed_hosts,
            max_sessions=max_sessions,
        )
    except ServeError as exc:
        _fail(str(exc), 2)
    except OSError as exc:
        _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")


@main.command()
@_PROJECT_ARGUMENT
@_db_option("Project file (scanned)")
@click.option(
    "--threshold", type=_Fraction(0, 1), help="Threshold to report at (default: the app's current one, else 0.8)."
)
@click.option(
    "--target-precision",
    default=0.95,
    show_default=True,
    type=_Fraction(0, 1, min_open=True),
    help="Precision the recommended threshold must reach (estimated from your labels).",
)
@click.option(
    "--labels-out",
    type=click.Path(dir_okay=False, readable=False),
    help="Write the labels as JSONL: {a, b, label, similarity, time, author} (- for standard output).",
)
@click.option(
    "--bins", default=20, show_default=True, type=click.IntRange(2, 200), help="Histogram bins from the floor to 1.0."
)
@click.option(
    "--chain-margin",
    default=0.2,
    show_default=True,
    type=_Fraction(0, 1),
    help="Flag clusters whose most distant members are this far below the threshold.",
)
@click.option("--force", is_flag=True, help="Overwrite the labels file if it exists.")
def tune(project_path, db, threshold, target_precision, labels_out, bins, chain_margin, force):
    """Evidence for choosing PROJECT's threshold: similarity histogram, kept documents per threshold for
    both policies, the scan's LSH S-curve, label statistics with a recommended threshold, the
    shingle-size experiment and chained clusters. Label pairs in the app's tuning screen (T)."""
    from . import cli_reports
    from .engine.curate import tune as tuning

    db = _the_project(project_path, db, "PROJECT")
    project = _open_project(db)

    def work(control):
        if labels_out:  # refuse a bad path before the work, not after
            check_outputs({"labels": labels_out}, force, project_protected(project))
        graph = load_graph(project)
        t = threshold
        if t is None:
            state = json.loads(project.get_meta("ui_state") or "{}")
            t = float(state.get("threshold", 0.8))
        check_threshold(project, t)
        report = tuning.report(project, graph, t, target_precision, bins=bins, margin=chain_margin)
        written = tuning.export_labels(project, labels_out, force=force) if labels_out else None
        return report, written

    report, written = _run(work)
    _say(cli_reports.format_report(report), labels_out)
    if labels_out:
        _say(f"\nwrote {written:,} labels to {_one_line(labels_out)}", labels_out)


@main.command()
@_PROJECT_ARGUMENT
@_db_option("Project file (scanned, with a reference source)")
@click.option(
    "--threshold",
    type=_Fraction(0, 1),
    help="Similarity at or above which a document matches a reference document. [default: the app's "
    "current one, else 0.8]",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, readable=False),
    help="Write every match as JSONL: {reference_source, reference_id, source, id, similarity} (- for "
    "standard output).",
)
@click.option(
    "--shown",
    default=10,
    show_default=True,
    type=click.IntRange(0),
    help="Matches listed per reference source in the text report.",
)
@click.option("--force", is_flag=True, help="Overwrite the output file if it exists.")
def contamination(project_path, db, threshold, out, shown, force):
    """Which documents of PROJECT's data match its reference sources (evaluation sets loaded
    with --reference): per reference source, how many documents match it at the threshold, the
    highest similarity, and the matches, with the id and source of both sides."""
    from .engine.curate import contamination as report_on

    db = _the_project(project_path, db, "PROJECT")
    project = _open_project(db)

    def work(control):
        if out:  # refuse a bad path before the work, not after
            check_outputs({"contamination report": out}, force, project_protected(project))
        t = threshold
        if t is None:
            t = float(json.loads(project.get_meta("ui_state") or "{}").get("threshold", 0.8))
        report = report_on.contamination(project, t, control=control)
        written = report_on.write_matches(project, report, out, force=force) if out else None
        return report, written

    report, written = _run(work)
    _say(report_on.format_report(report, shown), out)
    if out:
        _say(f"\nwrote {written:,} matches to {_one_line(out)}", out)


@main.command()
@_PROJECT_ARGUMENT
@_db_option("Project file (scanned)")
@click.option(
    "--threshold",
    type=_Fraction(0, 1),
    help="Threshold of the export to audit. [default: the one the project was last reviewed with]",
)
@click.option(
    "--policy",
    type=click.Choice(POLICIES),
    help="Policy of the export to audit. [default: the one the project was last reviewed with, else components]",
)
@click.option(
    "--size",
    default=300,
    show_default=True,
    type=click.IntRange(0),
    help="Removals to sample (spread over the similarity bands in proportion, at least 5 per band).",
)
@click.option(
    "--kept-size",
    default=100,
    show_default=True,
    type=click.IntRange(0),
    help="Pairs of kept documents to sample just below the threshold (duplicates left in).",
)
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=int,
    help="Random seed: the same seed on the same project draws the same sample.",
)
@click.option(
    "--target-width",
    default=0.02,
    show_default=True,
    type=_Fraction(0, 1, min_open=True),
    help="Width of the 95% interval of wrong removals to plan labels for (0.02: 2 percentage points).",
)
@click.option(
    "--labels",
    "labels_file",
    type=click.Path(dir_okay=False),
    help='Save labels from a JSONL file: {"id": "R3", "label": "duplicate" | '
    '"not" | "skip"} a line (ids '
    "as --list prints them).",
)
@click.option(
    "--prompt/--no-prompt",
    default=None,
    help="Ask for a label of each unlabelled sampled pair. [default: when standard input is a terminal]",
)
@click.option(
    "--list",
    "list_sample",
    is_flag=True,
    help="Print the sample as JSONL ({id, side, a, b, similarity, band, label}) instead of the report.",
)
def audit(project_path, db, threshold, policy, size, kept_size, seed, target_width, labels_file, prompt, list_sample):
    """Estimate how many of the export's removals that no reviewer decided are wrong.

    Draws a seeded sample of them, stratified by similarity to the kept document (exact copies
    are certain duplicates and not sampled), asks for a label of each (d/n/s/q; each saved at
    once, so a session can stop and resume), and reports the share of wrong removals per
    similarity band and overall with 95% intervals, and how many more labels would narrow it
    to --target-width. Also samples pairs of kept documents just below the threshold, to
    estimate the duplicates left in. The audit never records a decision; `export --manifest`
    carries its result.
    """
    from .engine.curate import audit as auditing

    db = _the_project(project_path, db, "PROJECT")
    project = _open_project(db)
    threshold, policy = _review_settings(project, db, threshold, policy)

    def draw(control):
        return auditing.run_audit(
            project, threshold, policy, size=size, kept_size=kept_size, seed=seed, target_width=target_width
        )

    result = _run(draw)
    if labels_file is not None:
        given = _run(lambda control: auditing.apply_labels_file(project, result, labels_file))
        click.echo(f"saved {given:,} labels from {_one_line(labels_file)}", err=True)
        result = _run(draw)
    if prompt is None:
        prompt = labels_file is None and not list_sample and sys.stdin.isatty()
    if prompt and result.unlabelled():
        _label_interactively(project, auditing, result)
        result = _run(draw)
    if not project.readonly:
        _run(lambda control: auditing.save(project, result))
    if list_sample:
        for pair in result.sample:
            click.echo(
                json.dumps(
                    {
                        "id": pair.key,
                        "side": pair.side,
                        "a": pair.a_id,
                        "b": pair.b_id,
                        "similarity": pair.similarity,
                        "band": pair.stratum,
                        "label": pair.label,
                    },
                    ensure_ascii=False,
                )
            )
        return
    click.echo(_audit_report(result, db))


# The audit prompt's answers: the app's audit screen's label keys
PROMPT_ANSWERS = {"1": "duplicate", "2": "not_duplicate", "0": "skip"}


def _label_interactively(project: Project, auditing, result) -> None:
    """Each unlabelled pair as plain text (corpus text escaped: never a terminal sequence), then
    1 (duplicate) / 2 (not) / 0 (skip) / q, the keys of the app's audit screen (the words, or
    their first letters, are taken too); each label saved at once."""
    from .engine.display import literal

    todo = result.unlabelled()
    shown = 1200
    for i, pair in enumerate(todo, 1):
        first, second = project.texts_for([pair.a, pair.b])
        role = ("removed", "kept") if pair.side == "removed" else ("kept", "kept")
        click.echo(
            f"\n— {pair.key} ({i} of {len(todo)} to label) · similarity {pair.similarity:.3f} · band {pair.stratum} —"
        )
        for name, doc_id, text in ((role[0], pair.a_id, first), (role[1], pair.b_id, second)):
            cut = text if len(text) <= shown else text[:shown] + f"… ({len(text):,} characters)"
            click.echo(f"{name}: {_one_line(doc_id)}\n{literal(cut)}")
        click.echo(
            f"differences ([-{role[0]} only-] {{+{role[1]} only+}}):\n"
            f"{literal(auditing.marked_words(first[:20000], second[:20000]))}"
        )
        while True:
            try:
                answer = (
                    click.prompt("duplicate? 1 duplicate / 2 not / 0 skip / q quit", default="", show_default=False)
                    .strip()
                    .lower()
                )
            except click.Abort:
                answer = "q"
            if answer in ("q", "quit"):
                click.echo(f"stopped: {i - 1:,} labelled this time; run the same command to go on", err=True)
                return
            value = PROMPT_ANSWERS.get(answer) or auditing.LABEL_WORDS.get(answer)
            if value is not None:
                break
            click.echo("answer 1 (duplicate), 2 (not), 0 (skip) or q (quit)")
        _run(lambda control: auditing.label(project, pair, value))  # noqa: B023 - run before the next pair


def _audit_report(result, db: str) -> str:
    def pct(x):
        return "—" if x is None else f"{100 * x:.1f}%"

    def table(strata, wrong_name):
        rows = [
            f"  {'band':<34}{'pairs':>9}{'known':>7}{'sampled':>9}{'labelled':>10}{wrong_name:>10}{'share':>8}  95% CI"
        ]
        for s in strata:
            if not s.units:
                continue
            ci = f"{pct(s.low_ci)}–{pct(s.high_ci)}" if s.low_ci is not None else ""
            rows.append(
                f"  {s.name:<34}{s.units:>9,}{s.known:>7,}{s.sampled:>9,}{s.labelled:>10,}{s.wrong:>10,}"
                f"{pct(s.share):>8}  {ci}"
            )
        return rows

    t = result.totals
    e = result.removed.estimate
    lines = [
        f"audit of the export at threshold {result.threshold:.2f}, policy {result.policy}, keep rule "
        f"{result.keep_rule}, seed {result.seed}",
        f"removals: {t.removed:,}; {t.exact:,} exact copies and {t.decided:,} decided by the reviewer are "
        f"counted as right; {t.frame:,} near duplicates nobody decided are sampled",
        result.headline(),
    ]
    if t.frame:
        lines += table(result.removed.strata, "not dup.")
        if e.share is not None:
            lines.append(
                f"  wrong removals among the {t.frame:,} nobody decided: {pct(e.share)} "
                f"(95% CI {pct(e.low)}–{pct(e.high)}), about {e.wrong:,.0f} "
                f"({e.low * e.units:,.0f}–{e.high * e.units:,.0f})"
            )
        if e.more_labels:
            lines.append(
                f"  about {e.more_labels:,} more labels would narrow the interval to "
                f"{100 * result.target_width:.1f} points (raise --size)"
            )
        elif e.more_labels is None:
            lines.append(
                f"  even labelling every removal would not narrow it to {100 * result.target_width:.1f} points"
            )
    k = result.kept.estimate
    if result.kept_band:
        lo, hi = result.kept_band
        lines.append(
            f"duplicates left among kept documents: {k.units:,} pairs of kept documents with similarity "
            f"in [{lo:.2f}, {hi:.2f})"
        )
        if k.units:
            lines += table(result.kept.strata, "dup.")
            if k.share is not None:
                lines.append(
                    f"  estimated {k.wrong:,.0f} duplicate pairs left ({pct(k.share)}, 95% CI "
                    f"{pct(k.low)}–{pct(k.high)}: {k.low * k.units:,.0f}–{k.high * k.units:,.0f})"
                )
    todo = len(result.unlabelled())
    if todo:
        lines.append(
            f"{todo:,} sampled pairs to label: run dedup-tui audit {_one_line(db)} in a terminal, or give "
            f"--labels FILE (pair ids: --list)"
        )
    lines.append("the audit records no decision; export --manifest carries this estimate")
    return "\n".join(lines)
