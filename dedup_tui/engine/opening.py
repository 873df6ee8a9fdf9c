"""What `dedup-tui [PATH] [--db DB]` opens: a project, a corpus to load and scan, or the sample."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .compile.kernel_cache import notice, private_dir
from .errors import ProjectError
from .scanning.passes import remove_stale_spill_folders
from .scanning.settings import ScanSettings
from .store import Project

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "notes.jsonl"


@dataclass
class OpenSpec:
    db: Path  # the project file (exists when the app starts)
    corpus: list[Path] = field(default_factory=list)  # files to load first (empty: already loaded)
    load_options: dict = field(default_factory=dict)
    scan_settings: ScanSettings | None = None
    warning: str | None = None  # shown when the app opens (e.g. the corpus changed since it was loaded)
    created: bool = False  # the project file was made for this opening (removed again if nothing loads)
    notice: str | None = None  # said before the app opens (where the sample's project was made)


_fresh_sample_dir: Path | None = None


def sample_dir() -> Path:
    """A user data directory for the sample's copy; a temp directory when that is not writable."""
    global _fresh_sample_dir
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "dedup-tui" / "sample"
    try:
        base.mkdir(parents=True, exist_ok=True)
        probe = base / ".write-test"
        probe.write_text("")
        probe.unlink()
        return base
    except OSError:
        # (in the shared temporary folder, a predictable name: used only when it is this user's
        # own private folder, as kernel_cache does for its cache; else a new one)
        fallback = Path(tempfile.gettempdir()) / f"dedup-tui-sample-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
        usable, reason = private_dir(fallback)
        if usable:
            return fallback
        if reason is not None:
            notice(f"not using {fallback} for the sample: {reason}")
        if _fresh_sample_dir is None or not _fresh_sample_dir.is_dir():
            _fresh_sample_dir = Path(tempfile.mkdtemp(prefix="dedup-tui-sample-"))  # (one per process)
        return _fresh_sample_dir


def project_beside(corpus: Path) -> Path:
    """notes.jsonl -> notes.db, pkg.v2.jsonl -> pkg.v2.db (the whole stem: two versions of a
    corpus never share a project); a folder docs/ -> docs.db beside it."""
    corpus = corpus.resolve()
    stem = corpus.name if corpus.is_dir() else (corpus.stem or corpus.name)
    return corpus.parent / f"{stem}.db"


PROJECT_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def is_project_file(path: str | Path) -> bool:
    """Whether `path` names a project rather than a corpus: a .db, .sqlite or .sqlite3 name, or
    an existing SQLite file (no corpus format is one)."""
    path = Path(path)
    if path.suffix.lower() in PROJECT_SUFFIXES:
        return True
    try:
        if path.is_file():
            with open(path, "rb") as fh:
                return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False
    return False


def prepare(path: str | Path | None = None, db: str | Path | None = None, **load_options) -> OpenSpec:
    """Resolve the command line to a project file (created if needed) and what to load into it."""
    sample = path is None
    if sample:
        where = sample_dir()
        corpus = where / SAMPLE.name
        digest = hashlib.sha256(SAMPLE.read_bytes()).hexdigest()
        if not corpus.exists() or hashlib.sha256(corpus.read_bytes()).hexdigest() != digest:
            shutil.copyfile(SAMPLE, corpus)
            stale = Path(db) if db else where / "notes.db"
            for suffix in ("", "-wal", "-shm"):
                Path(str(stale) + suffix).unlink(missing_ok=True)
        path = corpus
        db = db or where / "notes.db"
    assert path is not None  # (the sample's, or the one given)
    path = Path(path).expanduser()
    if not path.exists():
        raise ProjectError(f"{path}: no such file or folder")
    references = [Path(r).expanduser() for r in load_options.get("references") or ()]
    field_options = {k: v for k, v in load_options.items() if k != "references"}
    if is_project_file(path) and db is None:
        if references:
            raise ProjectError(
                f"{path}: references are loaded with a corpus; into this project: "
                f"dedup-tui load {path} --reference FILE..."
            )
        Project(path).close()  # checks that it is a project
        return OpenSpec(path.resolve(), notice=remove_stale_spill_folders(path.resolve().parent))
    target = Path(db).expanduser().resolve() if db else project_beside(path)
    created = not target.exists()
    if created:  # a new project: refuse a corpus that cannot load before creating it
        from .ingest import check_corpus

        for corpus in (path, *references):
            check_corpus(corpus, **field_options)
    project = Project(target, create=True)
    try:
        loaded = project.document_count() > 0
        if loaded and references:
            raise ProjectError(
                f"{target}: already holds {path.name}; load references into it with "
                f"dedup-tui load {target} --reference FILE..."
            )
        warning = _check_corpus(project, path) if loaded else None
    finally:
        project.close()
    notice = sample_notice(path, target) if sample and created else remove_stale_spill_folders(target.parent)
    return OpenSpec(target, [] if loaded else [path], load_options, warning=warning, created=created, notice=notice)


def sample_notice(corpus: Path, db: Path) -> str:
    """What the first run of bare `dedup-tui` says: where it put the sample and its project
    (the folder as ~/... when it is under the home folder)."""
    folder = db.parent
    try:
        shown = f"~/{folder.relative_to(Path.home())}"
    except ValueError:
        shown = str(folder)
    return f"dedup-tui: first run: copied the sample to {shown}/ ({corpus.name}; your review goes in {db.name})"


def _check_corpus(project: Project, corpus: Path) -> str | None:
    """Refuse a project that was loaded from other files; a warning when this corpus changed
    since it was loaded (its SHA-256 is in `sources`)."""
    from .readers import file_sha256
    from .readers.shards import expand

    sources = project.sources()
    shards = expand(corpus)
    if shards is not None:
        return _check_shards(project, corpus, shards)
    resolved = str(corpus.resolve())
    mine = [s for s in sources if s["path"] == resolved]
    if not mine:
        shown = ", ".join(Path(s["path"]).name for s in sources[:3]) + (" ..." if len(sources) > 3 else "")
        raise ProjectError(
            f"{project.path}: holds documents loaded from {shown}, not from {corpus}; open that "
            f"project as it is (dedup-tui {project.path}) or choose another with --db"
        )
    sha = mine[-1]["sha256"]
    if sha and file_sha256(corpus)[0] != sha:
        return (
            f"{corpus.name} changed since it was loaded ({mine[-1]['loaded_at']}): this project shows the "
            f"documents as they were then. To review the new version, load it into a new project "
            f"(dedup-tui {corpus} --db NEW.db)."
        )
    return None


def _check_shards(project: Project, folder: Path, shards: list[Path]) -> str | None:
    """_check_corpus for a folder of shards: the project must hold some of them; a warning when
    some changed since they were loaded, or were added since."""
    from .readers import file_sha256

    loaded = {s["path"]: s for s in project.sources()}  # (the last load of each path)
    mine = [(shard, loaded.get(str(shard.resolve()))) for shard in shards]
    if not any(source for _, source in mine):
        raise ProjectError(
            f"{project.path}: holds documents loaded from other files than the shards in {folder}; open "
            f"that project as it is (dedup-tui {project.path}) or choose another with --db"
        )
    changed = [s.name for s, source in mine if source and source["sha256"] and file_sha256(s)[0] != source["sha256"]]
    added = [s.name for s, source in mine if source is None]
    if not changed and not added:
        return None
    parts = [f"changed since the load: {len(changed)} ({', '.join(changed[:3])})"] if changed else []
    parts += [f"added since: {len(added)} ({', '.join(added[:3])})"] if added else []
    return (
        f"shards in {folder.name} {'; '.join(parts)}: this project shows the documents as they were loaded. "
        f"To review the new version, load it into a new project (dedup-tui {folder} --db NEW.db)."
    )


def default_export_path(db: Path) -> Path:
    """Where the export dialog proposes to write: beside the project, except for the bundled
    sample, whose project lives in a hidden data folder: there, the current folder."""
    folder = Path.cwd() if db.resolve().parent == sample_dir().resolve() else db.parent
    return folder / f"{db.stem}.curated.jsonl"
