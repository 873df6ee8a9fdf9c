"""A corpus given as shards: a folder of data files, or a glob pattern (quoted, so the shell leaves
it) that names them. Each is expanded to its files in a stable order, before anything is read.
A shard's generated ids (records without an id field) start with its path in the folder, or
from the pattern's first folder with a glob character: "part-0003.jsonl.zst:17", "en/part-1.jsonl:5".

A folder holding data files (SHARD_SUFFIXES, also .gz or .zst; in subfolders too) is a folder of
shards. A folder without any is a folder of text documents (folder.py), as before. A folder that
holds both is refused: which of its files are documents would be a guess.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path

from ..errors import CorpusError
from .files import COMPRESSED_SUFFIXES, without_compression
from .folder import TEXT_SUFFIXES

# Data files a folder of shards is made of (.json is not one: in a dataset's folder it is most
# often its metadata; give JSON Lines named .json as a glob).
SHARD_SUFFIXES = (".jsonl", ".ndjson", ".csv", ".tsv", ".parquet")
GLOB_CHARACTERS = re.compile(r"[*?[]")


def natural_key(relative: str) -> list:
    """Sorts part-2 before part-10 (and part-0002 before part-0010, as plain sorting does)."""
    return [(0, int(piece), piece) if piece.isdigit() else (1, 0, piece) for piece in re.split(r"(\d+)", relative)]


def is_shard(path: Path) -> bool:
    name = without_compression(path.name)
    if name.endswith(".parquet") and name != path.name.lower():
        return False  # (a compressed Parquet file is refused where it is given by itself)
    return name.endswith(SHARD_SUFFIXES)


def is_pattern(path: Path) -> bool:
    """A path that does not exist and holds glob characters (*, ?, [)."""
    return not path.exists() and GLOB_CHARACTERS.search(str(path)) is not None


def folder_shards(folder: Path) -> list[Path]:
    """The folder's data files (none: it is a folder of text documents, or empty), in natural
    order of their paths in it; hidden files and folders (.cache/, .git/) are left out."""
    shards, texts = [], []
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        if is_shard(path):
            shards.append(path)
        elif path.suffix.lower() in TEXT_SUFFIXES:
            texts.append(relative.as_posix())
    if shards and texts:
        texts.sort(key=natural_key)
        shown = ", ".join(texts[:3]) + (" ..." if len(texts) > 3 else "")
        kinds = sorted({_kind(p) for p in shards})
        pattern = f"{folder}/**/*{without_compression(kinds[0])}*"
        raise CorpusError(
            str(folder),
            None,
            f"holds both {len(shards):,} data shard(s) ({', '.join(kinds)}) and {len(texts):,} text document(s) "
            f"({shown}): give the shards as a quoted glob ('{pattern}'), or the documents in a folder of their own",
        )
    return sorted(shards, key=lambda p: natural_key(p.relative_to(folder).as_posix()))


def matching(pattern: str) -> list[Path]:
    """The files a glob pattern names (** spans folders), in natural order; a folder it names
    stands for its shards, or for itself when it is a folder of text documents."""
    found = sorted(glob.glob(pattern, recursive=True), key=natural_key)
    if not found:
        raise CorpusError(pattern, None, "no file matches this pattern")
    paths: list[Path] = []
    for name in found:
        path = Path(name)
        paths += (folder_shards(path) or [path]) if path.is_dir() else [path]
    return paths


def root(path: Path) -> Path:
    """The folder a folder's or a pattern's shards are named from: the folder, or the pattern's
    folders up to the first with a glob character."""
    if not is_pattern(path):
        return path
    parts = path.parts
    fixed = next(i for i, part in enumerate(parts) if GLOB_CHARACTERS.search(part))
    return Path(*parts[:fixed]) if fixed else Path(".")


def expand(path: Path) -> list[Path] | None:
    """The shard files that `path` (a folder or a glob pattern) stands for, or None when it is
    one corpus by itself (a file, or a folder of text documents)."""
    if is_pattern(path):
        return matching(str(path))
    if path.is_dir():
        return folder_shards(path) or None
    return None


def _kind(path: Path) -> str:
    """A shard's ending, e.g. .jsonl.zst."""
    name = path.name.lower()
    compressed = next((s for s in COMPRESSED_SUFFIXES if name.endswith(s)), "")
    base = without_compression(name)
    return next(s for s in SHARD_SUFFIXES if base.endswith(s)) + compressed
