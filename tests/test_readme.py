"""The README's "engine as a library" example runs as written, on the bundled sample, and does
what its comments say."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "dedup_tui" / "samples" / "notes.jsonl"


def _library_example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("#### The engine as a library"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readmes_library_example_loads_scans_clusters_and_exports(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.jsonl").write_bytes(SAMPLE.read_bytes())
    exec(compile(_library_example(), "README.md", "exec"), {"__name__": "readme_example"})
    lines = capsys.readouterr().out.splitlines()

    pairs, exact = map(int, re.match(r"(\d+) pairs, (\d+) exact copies", lines[0]).groups())
    kept, removed = map(int, re.match(r"kept (\d+), removed (\d+)", lines[-1]).groups())
    members = [line.rsplit(" ", 1) for line in lines[1:-1]]
    assert pairs > 0 and exact > 0
    assert len(members) >= 2  # the biggest cluster: its kept document and its duplicates
    similarities = [float(s) for _, s in members]
    assert sum(math.isnan(s) for s in similarities) == 1  # the kept document
    # to the kept document, which a member may reach through others at >= 0.8: a stored pair
    assert all(0.5 <= s <= 1.0 for s in similarities if not math.isnan(s))

    curated = [json.loads(line)["id"] for line in (tmp_path / "curated.jsonl").read_text().splitlines()]
    removed_ids = [json.loads(line)["id"] for line in (tmp_path / "removed.jsonl").read_text().splitlines()]
    corpus = [json.loads(line)["id"] for line in SAMPLE.read_text().splitlines()]
    assert (len(curated), len(removed_ids)) == (kept, removed)
    assert sorted(curated + removed_ids) == sorted(corpus)
    kept_member = next(doc for doc, s in members if s == "nan")
    assert kept_member in curated and all(doc in removed_ids for doc, s in members if s != "nan")


def test_every_name_in_the_readmes_engine_table_exists():
    import importlib

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("#### The engine as a library"):]
    rows = [line for line in section.split("```")[0].splitlines() if line.startswith("| `engine.")]
    assert len(rows) >= 8
    for row in rows:
        modules_cell, names_cell = row.strip("|").split("|")[:2]
        modules = [importlib.import_module(f"dedup_tui.{m}") for m in re.findall(r"`(engine\.[\w.]+)`", modules_cell)]
        for name in re.findall(r"`(?:[\w.]+\.)?(\w+)[(`]", names_cell):
            if name[0].isupper() or name.islower():
                owners = modules + [importlib.import_module(f"dedup_tui.{m}") for m in
                                    re.findall(r"`(engine\.[\w.]+)\.\w+\(", names_cell)]
                assert any(hasattr(m, name) for m in owners), f"{name} is in no module of: {row}"
