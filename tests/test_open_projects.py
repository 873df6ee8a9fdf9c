"""The tests' own check that every project a test opens is closed (tests/open_projects.py)."""

from __future__ import annotations

import sys

from dedup_tui.engine.scanning.settings import ScanSettings
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


def test_a_project_the_app_holds_is_closed_without_blame(make_project):
    from dedup_tui.engine.scanning import local
    from dedup_tui.review.model import Review

    from .conftest import NEAR_CORPUS

    project = make_project(NEAR_CORPUS)
    local.scan(project, ScanSettings(floor=0.3, method="exhaustive"))
    project.close()
    kept_before = len(OPEN_PROJECTS.kept_by_app)
    scope = OPEN_PROJECTS.begin()
    review = Review.open(project.path, author="t")  # the review opens (and owns) its project
    assert OPEN_PROJECTS.end(scope) == []
    assert not is_open(review.project)
    [kept] = OPEN_PROJECTS.kept_by_app[kept_before:]
    assert kept.startswith(f"{project.path} (opened at dedup_tui/")  # by the review's code, not the test's
    del OPEN_PROJECTS.kept_by_app[kept_before:]  # not a leak of the run's
