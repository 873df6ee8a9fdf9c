"""Usage errors (exit 2, click's message): scan settings out of range, numbers that are not
numbers or out of range, and a mistyped command, named.

History: from the promises issue's attack list."""

from __future__ import annotations

import pytest

from .conftest import run


@pytest.mark.parametrize("args", [("--seed", "-1"), ("--seed", str(2**64)), ("--k", "0")])
def test_scan_settings_out_of_range_are_usage_errors(project_files, args):
    _tmp, _corpus, db = project_files
    result = run("scan", "--db", db, *args)
    assert result.exit_code == 2
    assert f"Invalid value for '{args[0]}': {args[1]} is not in the range" in result.output  # not an unknown option


@pytest.mark.parametrize(
    "args",
    [
        ("pairs", "--db", "P.db", "--min", "nan", "--out", "x.jsonl"),
        ("tune", "--db", "P.db", "--threshold", "1.5"),
        ("export", "--db", "P.db", "--threshold", "nan", "--out", "x.jsonl"),
    ],
)
def test_bad_numbers_are_usage_errors(project_files, args, monkeypatch):
    monkeypatch.chdir(project_files[0])
    result = run(*args)
    assert result.exit_code == 2
    option, value = args[3], args[4]
    assert f"Invalid value for '{option}': " in result.output and value in result.output  # not an unknown option


def test_a_mistyped_command_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run("exprot")
    assert result.exit_code == 2 and "did you mean `dedup-tui export`" in result.output
