"""Starting the app from the command line: prepare what to open (launch.py), let the user pick
the fields of a corpus that does not open as it is, then run the app."""

from __future__ import annotations

import sys
from pathlib import Path

from ..engine.errors import CorpusError, ProjectError
from ..engine.opening import is_project_file, prepare
from .app import DedupApp


def launch(path: str | None = None, db: str | None = None, read_only: bool | str = False, **load_options) -> None:
    """read_only: see DedupApp (True, or "if-open": read-only when another window has it)."""
    if read_only and (path is None or not is_project_file(path) or db is not None):
        raise ProjectError(
            f"{path or 'the sample'}: a read-only view opens a project file (.db), made with "
            f"dedup-tui scan PROJECT CORPUS"
        )
    try:
        spec = prepare(path, db, **load_options)
    except CorpusError as exc:
        # A corpus that does not open as it is (its text is in another field, a bad record):
        # in a terminal, choose the fields and skip-bad from its first records, then open.
        chosen = pick_fields(path, exc, load_options) if path is not None and sys.stdin.isatty() else None
        if chosen is None:
            raise
        spec = prepare(
            path, db, **chosen, **({"references": load_options["references"]} if load_options.get("references") else {})
        )
    if spec.notice:  # before the app takes the screen: it is there again when the app closes
        print(spec.notice, file=sys.stderr, flush=True)
    (DedupApp(spec, read_only=read_only) if read_only else DedupApp(spec)).run()


def pick_fields(path: str | Path, problem: CorpusError, load_options: dict) -> dict | None:
    """The load options chosen in the field picker (checked: the corpus loads with them), or
    None when the corpus has no fields to offer or the user cancelled."""
    from ..engine.ingest import sample_fields
    from .setup import FieldPickerApp

    fields = sample_fields(path)
    if not fields:
        return None
    return FieldPickerApp(path, fields, str(problem), load_options).run()
