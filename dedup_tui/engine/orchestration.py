"""Loading a corpus and scanning it, in the order both the CLI (`dedup-tui scan CORPUS`) and the
app (opening a corpus) run it:

1. the compile warm-up, started before loading when what follows will likely compile
   (compile/warmup.py: another process, on another core);
2. signing ahead: while the corpus loads, the other core computes the signatures the scan
   needs (scanning/ahead.py; only with warm kernels and a large corpus);
3. the project: an open one, or a new one made only once its first load completes
   (store.build_project: a cancelled or killed load leaves no project behind);
4. loading (ingest.load_corpus, with its references);
5. preparing the scan: a first run's scan waits at each stage for the kernels it needs next
   (compile.warmup.prepare);
6. scanning (scanning/local.py: incremental when only new documents need it).

Progress and cancel come through a Control (progress.py) each step takes, so a caller can
show each step its own way: LoadAndScan runs the steps one by one (the CLI reports the load
before the scan starts), load_and_scan runs them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .progress import Control
from .scanning.settings import ScanSettings
from .store import Project

if TYPE_CHECKING:
    from .scanning.ahead import SignedAhead


@dataclass
class Outcome:
    """What load_and_scan did: the project (open: the caller closes it), the load's report
    (None: nothing was loaded) and the scan's result (None: no scan was asked for)."""

    project: Project
    loaded: object | None = None  # ingest.LoadReport
    scanned: object | None = None  # scanning.settings.ScanResult


class LoadAndScan:
    """One load-and-scan, step by step (see the module's docstring); a context manager that
    lets go of what signing ahead computed, whatever happened.

    `settings`: the scan's (None: the last scan's of the project, else the defaults; an
    incremental scan then follows a full one with the same settings). `load_options`: the
    readers' (id_field, text_field, skip_bad). `sign_ahead`: False when no scan follows the
    load (`dedup-tui load`: the warm-up still starts, for the scan that will). `memory`: the
    scan's cap in bytes (None: scanning.memory.default_cap())."""

    def __init__(
        self,
        corpus=(),
        references=(),
        settings: ScanSettings | None = None,
        load_options: dict | None = None,
        full: bool = False,
        sign_ahead: bool = True,
        memory: int | None = None,
        lean: bool = False,
    ):
        self.load_options = dict(load_options or {})
        self.corpus = [Path(p) for p in corpus]
        # (the app's opening keeps the references with the readers' options)
        self.references = [Path(p) for p in [*references, *(self.load_options.pop("references", None) or ())]]
        self.settings = settings
        self.full = full
        self.lean = lean  # keep no band keys (scanning.local.scan)
        self.sign_ahead = sign_ahead
        self.memory = memory
        self.ahead: SignedAhead | None = None
        self._started = False

    @property
    def loading(self) -> list[Path]:
        return [*self.corpus, *self.references]

    def __enter__(self) -> LoadAndScan:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.discard()
            self.ahead = None

    def settings_for(self, project: Project | None) -> ScanSettings:
        if self.settings is None:
            from .scanning.local import last_scan_settings

            self.settings = (last_scan_settings(project) if project is not None else None) or ScanSettings()
        return self.settings

    def start(self, project: Project | None = None) -> None:
        """Steps 1 and 2, before loading (once; nothing when there is nothing to load)."""
        if self._started or not self.loading:
            return
        self._started = True
        from .compile import warmup
        from .scanning.ahead import SignedAhead

        settings = self.settings_for(project)
        warmup.start_for_corpus(self.loading, settings.method)  # first run: the kernels compile while it loads
        if self.sign_ahead:
            self.ahead = SignedAhead.for_corpus(
                settings, self.loading, self.memory
            )  # (warm kernels) signed as they load

    def load(self, target: Project | str | Path, control: Control | None = None):
        """Steps 3 and 4: (the project, the load's report). `target`: an open project, or the
        path of a new one (made once the load completes)."""
        from .ingest import load_corpus
        from .store import build_project

        control = control or Control()
        project = target if isinstance(target, Project) else None
        self.start(project)

        def load_into(into: Project):
            return load_corpus(
                into, self.corpus, control=control, references=self.references, ahead=self.ahead, **self.load_options
            )

        if not isinstance(target, Project):
            return build_project(target, load_into)
        return target, load_into(target)

    def scan(self, project: Project, control: Control | None = None):
        """Steps 5 and 6: the scan's result (scanning.settings.ScanResult)."""
        from .compile import warmup
        from .scanning.local import scan

        control = control or Control()
        settings = self.settings_for(project)
        # first run only: the scan follows the kernels' compiling in another process
        return scan(
            project,
            settings,
            warmup.prepare(project, settings, control),
            full=self.full,
            ahead=self.ahead,
            memory=self.memory,
            lean=self.lean,
        )


def load_and_scan(
    target: Project | str | Path,
    corpus=(),
    references=(),
    settings: ScanSettings | None = None,
    control: Control | None = None,
    load_options: dict | None = None,
    full: bool = False,
    scan: bool = True,
    lean: bool = False,
) -> Outcome:
    """Load `corpus` (and `references`) into `target` (an open project, or the path of a new
    one) and scan it, as `dedup-tui scan PROJECT CORPUS` does; with no corpus, only the scan.
    The project is returned open (one opened here is closed again when a step fails)."""
    with LoadAndScan(corpus, references, settings, load_options, full, lean=lean) as job:
        project, loaded = (
            job.load(target, control)
            if job.loading
            else (target if isinstance(target, Project) else Project(target), None)
        )
        try:
            return Outcome(project, loaded, job.scan(project, control) if scan else None)
        except BaseException:
            if project is not target:
                project.close()
            raise
