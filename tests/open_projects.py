"""Which projects a test (or a module's fixtures) opened and left open.

Python 3.11's sqlite3 says nothing about a connection that is never closed, so the tests keep
count themselves: every `Project` opened while a scope (a test, a test module) is active is
noted there, and when the scope ends the ones still open are closed and named.

A project opened by the tests' own code (the nearest caller outside store.py is a file under
tests/) must be closed by them: it is held until the scope ends, so one that was merely dropped
is caught too. A project the app or the engine opened (a review, a screen's writer) is held
weakly: one still alive at the end is one the app keeps until it is torn down; it is closed,
and listed in the run's summary without failing the test. A `Project(...)` that raises after
opening its connection leaves that connection to the garbage collector; it is closed at once
and counted in `engine_leaks`."""

from __future__ import annotations

import os
import sqlite3
import sys
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from dedup_tui.engine import store

TESTS = os.path.dirname(os.path.realpath(__file__)) + os.sep
_STORE = os.path.dirname(os.path.realpath(store.__file__)) + os.sep  # the store package
_real_paths: dict[str, str] = {}


def _real(filename: str) -> str:
    if filename not in _real_paths:
        _real_paths[filename] = os.path.realpath(filename)
    return _real_paths[filename]


def _opener() -> tuple[str, int]:
    """The file and line that asked for the project: the innermost frame outside the store package."""
    frame = sys._getframe(2)
    while frame is not None and _real(frame.f_code.co_filename).startswith(_STORE):
        frame = frame.f_back
    if frame is None:  # pragma: no cover
        return "?", 0
    return _real(frame.f_code.co_filename), frame.f_lineno


def is_open(project: store.Project) -> bool:
    conn = getattr(project, "conn", None)
    if conn is None:
        return False
    try:
        conn.total_changes  # noqa: B018 - raises on a closed connection
    except sqlite3.ProgrammingError:  # "Cannot operate on a closed database."
        return False
    return True


@dataclass(eq=False)  # scopes are told apart by identity
class Scope:
    """The projects opened while one test (or one module's fixtures) ran."""

    by_tests: list[tuple[store.Project, str]] = field(default_factory=list)
    by_app: weakref.WeakKeyDictionary[store.Project, str] = field(default_factory=weakref.WeakKeyDictionary)

    def close_all(self, kept_by_app: list[str]) -> list[str]:
        """Close every project still open; return where the tests' own open ones were opened
        (and add the app's to `kept_by_app`)."""
        left = []
        for project, where in self.by_tests:
            if is_open(project):
                left.append(f"{project.path} (opened at {where})")
                project.close()
        for project, where in list(self.by_app.items()):
            if is_open(project):
                kept_by_app.append(f"{project.path} (opened at {where})")
                project.close()
        self.by_tests.clear()
        return left


class Tracker:
    def __init__(self) -> None:
        self.scopes: list[Scope] = []
        self.engine_leaks: list[str] = []
        self.kept_by_app: list[str] = []
        self._init = store.Project.__init__

    def install(self, monkeypatch) -> None:
        real_init, tracker = self._init, self

        def __init__(project, *args, **kwargs):
            try:
                real_init(project, *args, **kwargs)
            except BaseException:
                if is_open(project):  # the engine's own leak: closed here, counted for the summary
                    tracker.engine_leaks.append(f"{project.path} (opened at {_where(_opener())})")
                    project.conn.close()
                raise
            if tracker.scopes:
                tracker.note(project, _opener())

        monkeypatch.setattr(store.Project, "__init__", __init__)

    def note(self, project: store.Project, opener: tuple[str, int]) -> None:
        scope = self.scopes[-1]
        if opener[0].startswith(TESTS):
            scope.by_tests.append((project, _where(opener)))
        else:
            scope.by_app[project] = _where(opener)

    def begin(self) -> Scope:
        scope = Scope()
        self.scopes.append(scope)
        return scope

    def end(self, scope: Scope) -> list[str]:
        self.scopes.remove(scope)
        return scope.close_all(self.kept_by_app)


def _where(opener: tuple[str, int]) -> str:
    filename, line = opener
    root = str(Path(TESTS).parent) + os.sep
    return f"{filename.removeprefix(root)}:{line}"
