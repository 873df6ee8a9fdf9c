"""A folder of text files: each file one document, its id the file's path in the folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..errors import CorpusError
from .record import BadRecord, Record

TEXT_SUFFIXES = {".txt", ".text", ".md"}


def read_text_folder(path: Path, errors: list) -> Iterator[Record]:
    files = sorted(
        (p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES),
        key=lambda p: p.relative_to(path).as_posix(),
    )
    if not files:
        raise CorpusError(str(path), None, "folder holds no .txt files")
    for number, file in enumerate(files, start=1):
        rel = file.relative_to(path).as_posix()
        try:
            data = file.read_bytes()
        except OSError as exc:
            errors.append(BadRecord(number, f"{rel}: cannot read ({exc.strerror})"))
            continue
        try:
            text = data.decode("utf-8")  # a leading U+FEFF is part of the text: kept, as in every format
        except UnicodeDecodeError as exc:
            errors.append(BadRecord(number, f"{rel}: invalid UTF-8 at byte {exc.start}"))
            continue
        yield Record(number, rel, text, None)
