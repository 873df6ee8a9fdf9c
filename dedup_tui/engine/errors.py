"""Errors the engine raises for a user to read: one line, naming the file and line."""

from __future__ import annotations


class DedupError(Exception):
    """A problem the user can fix; the CLI prints it as one line and exits 1."""


class CorpusError(DedupError):
    def __init__(self, path: str, line: int | None, message: str):
        self.path, self.line, self.message = path, line, message
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")

    def __reduce__(self):  # rebuilt from its parts when it crosses a process boundary
        return (CorpusError, (self.path, self.line, self.message))


class ProjectError(DedupError):
    pass


class Cancelled(DedupError):
    """Raised when a cancel event is set; the project is left as it was before the step."""
