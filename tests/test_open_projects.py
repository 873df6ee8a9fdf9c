"""The tests' own check that every project a test opens is closed (tests/open_projects.py)."""

from __future__ import annotations

import sys

from dedup_tui.engine.store import Project

from .conftest import OPEN_PROJECTS
from .open_projects import is_open


def test_a_project_left_open_is_named_and_closed(tmp_path):
    scope = OPEN_PROJECTS.begin()
    closed = Project(tmp_path / "closed.db", create=True)
    closed.close()
    with Project(tmp_path / "with.db", create=True):
        pass
    line = sys._getframe().f_lineno + 1
    left_open = Project(tmp_path / "left.db", create=True)
    left = OPEN_PROJECTS.end(scope)
    assert left == [f"{tmp_path / 'left.db'} (opened at tests/test_open_projects.py:{line})"]
    assert not is_open(left_open)


def test_a_dropped_project_is_caught_too(tmp_path):
    scope = OPEN_PROJECTS.begin()
    Project(tmp_path / "dropped.db", create=True).document_count()  # never closed, never kept
    assert [entry.split(" (")[0] for entry in OPEN_PROJECTS.end(scope)] == [str(tmp_path / "dropped.db")]

