"""Which files a command may write: never the project, its companions or its corpus, never one
file for two outputs, and never an existing file unless the caller says to replace it."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from .errors import DedupError

# Files SQLite and dedup-tui keep beside a project.
PROJECT_COMPANIONS = ("", "-wal", "-shm", "-journal", ".lock")


class OutputError(DedupError):
    """An output path that must not be written. `exists` is set when only replacing it was refused."""

    def __init__(self, message: str, exists: bool = False):
        super().__init__(message)
        self.exists = exists


# Names that mean "this process's standard output" (or another of its open descriptors).
_STREAM_NAMES = re.compile(r"^(-|/dev/stdout|/dev/stderr|/dev/fd/\d+|/proc/self/fd/\d+)$")


def is_stream(path: str | Path) -> bool:
    """True when writing `path` means writing a stream, never replacing a file: `-` (standard
    output), /dev/stdout, /dev/fd/N, or an existing FIFO or character device (/dev/null, a
    terminal, a named pipe)."""
    if _STREAM_NAMES.match(str(path)):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def writes_to_stdout(path: str | Path | None) -> bool:
    """Whether writing `path` writes this process's standard output (see open_stream)."""
    name = str(path) if path else ""
    return name in ("-", "/dev/stdout") or (bool(_STREAM_NAMES.match(name)) and name.rsplit("/", 1)[1] == "1")


def open_stream(path: str | Path) -> int:
    """A descriptor to write the stream `path` (is_stream): standard output and /dev/fd/N are
    duplicated, so a `>>` redirection keeps appending; a FIFO or a device is opened for writing."""
    name = str(path)
    if name in ("-", "/dev/stdout"):
        return os.dup(1)
    if name == "/dev/stderr":
        return os.dup(2)
    if _STREAM_NAMES.match(name):
        return os.dup(int(name.rsplit("/", 1)[1]))
    return os.open(path, os.O_WRONLY)


def _not_a_file(path: Path) -> str | None:
    """What an existing path is when it is neither a regular file nor a stream (and so can be
    neither replaced nor written): a socket, a block device."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISBLK(mode):
        return "a block device"
    return None


def _stream_path(path: Path) -> Path:
    return Path("/dev/stdout") if str(path) == "-" else path


def _identity(path: Path) -> tuple:
    """What makes two paths one file: (device, inode) when it exists (hard links, symlinks,
    `..`), else the resolved path."""
    try:
        st = os.stat(path)
        return ("inode", st.st_dev, st.st_ino)
    except OSError:
        return ("path", str(path.resolve()))


def protected_files(project_path: str | Path | None, sources: Iterable[str] = ()) -> dict[Path, str]:
    """The project file and its companions, and the corpus files it was loaded from, each with
    what it is."""
    out: dict[Path, str] = {}
    if project_path is not None:
        for suffix in PROJECT_COMPANIONS:
            out[Path(str(project_path) + suffix)] = (
                f"the project's {suffix.lstrip('-.')} file" if suffix else "the project"
            )
    for s in sources:
        out[Path(s)] = (
            "the corpus folder the project was loaded from"
            if Path(s).is_dir()
            else "a corpus file the project was loaded from"
        )
    return out


def _inside_folder(path: Path, folders: dict[Path, str]) -> tuple[Path, str] | None:
    """The protected folder that holds `path` (at any depth, also through links), if any."""
    try:
        resolved = path.resolve()
    except OSError:
        return None
    for folder, label in folders.items():
        if folder in resolved.parents:
            return folder, label
    return None


def check_outputs(
    outputs: Mapping[str, str | Path | None],
    force: bool,
    protected: dict[Path, str] | None = None,
    streams: bool = True,
) -> None:
    """Raise OutputError unless every named output may be written.

    `outputs` maps what a file is ("kept records", "removed log") to its path (None: not asked
    for). Refused: a protected file (even via a link or another spelling), two outputs on one
    file, a folder, a file inside a corpus folder, and an existing file unless `force`. Only a
    regular file is ever replaced: a FIFO, a character device (/dev/null), `-` and /dev/stdout
    are written as streams (no `force` needed, nothing replaced); a socket or a block device is
    refused. `streams=False` (the app, which owns the terminal) refuses streams too.
    """
    guarded: dict[tuple, str] = {}
    folders: dict[Path, str] = {}
    for p, label in (protected or {}).items():
        guarded.setdefault(_identity(Path(p)), label)
        guarded.setdefault(("path", str(Path(p).resolve())), label)
        if Path(p).is_dir():
            folders[Path(p).resolve()] = label
    seen: dict[tuple, str] = {}
    for what, path in outputs.items():
        if path is None or str(path) == "":
            continue
        path = Path(path)
        ident = _identity(_stream_path(path))
        protected_as = guarded.get(ident) or guarded.get(("path", str(path.resolve())))
        if protected_as:
            raise OutputError(f"{path}: is {protected_as}; choose another file for the {what}")
        if ident in seen and ident != _identity(Path(os.devnull)):  # discarding two outputs is fine
            raise OutputError(f"{path}: given for both the {seen[ident]} and the {what}; each needs its own file")
        seen[ident] = what
        if is_stream(path):
            if not streams:
                raise OutputError(
                    f"{path}: is a stream (standard output, a pipe or a device), not a file; "
                    f"the app writes the {what} to a file"
                )
            continue
        kind = _not_a_file(path)
        if kind:
            raise OutputError(
                f"{path}: is {kind}; write the {what} to a regular file, a new path, "
                f"a named pipe or - (standard output)"
            )
        inside = _inside_folder(path, folders)
        if inside:
            raise OutputError(
                f"{path}: is inside {inside[1]} ({inside[0]}); writing there would change "
                f"the corpus: choose a file outside it for the {what}"
            )
        moved = _corpus_folder_by_name(path, protected)
        if moved:
            raise OutputError(
                f"{path}: is inside {moved}, a folder of .txt files named as the corpus folder the "
                f"project was loaded from (moved or copied?); choose a file outside it for the {what}"
            )
        copy = _copy_of_corpus(path, protected)
        if copy:
            raise OutputError(
                f"{path}: holds the same bytes as the corpus file {copy} the project was loaded from "
                f"(moved or copied?); choose another file for the {what}"
            )
        database = _database_of(path)
        if database is not None:
            what_it_is = (
                "a SQLite database (a dedup-tui project?)"
                if database == path
                else f"a companion file of the SQLite database {database}"
            )
            raise OutputError(f"{path}: is {what_it_is}; choose another file for the {what}")
        if path.is_dir():
            raise OutputError(f"{path}: is a folder; the {what} needs a file name")
        if path.exists() and not force:
            raise OutputError(f"{path}: already exists", exists=True)


def _database_of(path: Path) -> Path | None:
    """The SQLite database this path is (itself) or belongs to (its -wal, -shm, -journal or
    .lock file), or None. Any project, not only the one a command was given."""
    if _sqlite_file(path):
        return path
    for suffix in PROJECT_COMPANIONS[1:]:
        if str(path).endswith(suffix) and _sqlite_file(base := Path(str(path)[: -len(suffix)])):
            return base
    return None


def _sqlite_file(path: Path) -> bool:
    """True when path is an existing SQLite database file (by its header). Only a regular file
    is opened: opening a FIFO to read its header would wait for a writer forever."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


class Protected(dict):
    """protected_files, plus what recognises the corpus after it (or the project) moved: its
    files by size and SHA-256, its .txt folders by name."""

    def __init__(self, files: dict[Path, str], digests: dict[tuple[int, str], str], folder_names: set[str]):
        super().__init__(files)
        self.digests, self.folder_names = digests, folder_names


def project_protected(project) -> Protected:
    """protected_files of an open Project (its path and its sources' paths), recognising the
    corpus files by content and its folders by name too: a project folder moved or copied with
    its corpus keeps the stored paths of the old place."""
    rows = [
        r
        for r in (tuple(row.values()) for row in project.source_rows("path, sha256, size_bytes"))
        if isinstance(r[0], str) and r[0]
    ]  # (a damaged row's path may be anything)
    # Only a corpus no longer at its stored path is looked for elsewhere (a copy of a corpus that
    # is still in place, such as an export that removed nothing, may be replaced).
    gone = [r for r in rows if not os.path.exists(r[0])]
    digests = {
        (size, sha): os.path.basename(path)
        for path, sha, size in gone
        if isinstance(sha, str) and isinstance(size, int)
    }
    folders = {os.path.basename(path.rstrip("/")) for path, sha, _size in gone if sha is None}
    return Protected(protected_files(project.path, [r[0] for r in rows]), digests, folders)


def _copy_of_corpus(path: Path, protected) -> str | None:
    """The name of the corpus file that `path` holds the same bytes as (by size, then SHA-256)."""
    import hashlib

    digests = getattr(protected, "digests", None)
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not digests or not stat.S_ISREG(st.st_mode) or st.st_size not in {size for size, _ in digests}:
        return None
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None
    return digests.get((st.st_size, h.hexdigest()))


def _corpus_folder_by_name(path: Path, protected) -> Path | None:
    """A folder holding `path` that has the name of a .txt folder corpus and holds .txt files:
    that corpus, moved or copied with the project."""
    names = getattr(protected, "folder_names", None)
    if not names:
        return None
    try:
        resolved = path.resolve()
    except OSError:
        return None
    for folder in resolved.parents:
        if folder.name in names and any(folder.glob("*.txt")):
            return folder
    return None
