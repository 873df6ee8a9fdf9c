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


def _commands(heading: str) -> list[list[str]]:
    """The section's first bash block as argument lists (comments dropped, globs expanded as a
    shell would, from the current folder)."""
    import glob
    import shlex

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index(heading):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    commands = []
    for line in block.splitlines():
        args = shlex.split(line, comments=True)
        if args:
            commands.append([m for a in args for m in (sorted(glob.glob(a)) if "*" in a else [a])])
    return commands


def test_the_readmes_evaluation_set_commands_run_and_never_write_a_reference(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from dedup_tui.cli import main

    monkeypatch.chdir(tmp_path)
    texts = [json.loads(line)["text"] for line in SAMPLE.read_text().splitlines()]
    files = {"train/a.jsonl": [(f"ta{i}", t) for i, t in enumerate(texts[:40])],
             "train/b.jsonl": [(f"tb{i}", t) for i, t in enumerate(texts[40:])],
             "evals/a.jsonl": [(f"ea{i}", t) for i, t in enumerate(texts[5:50:9])],
             "evals/b.jsonl": [("eb0", texts[60] + " and one more sentence at its end.")],
             "curated/base.jsonl": [(f"base{i}", t) for i, t in enumerate(texts[:30])],
             "new/batch.jsonl": [(f"new{i}", t) for i, t in enumerate(texts[20:45])]}
    for name, docs in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs))
    commands = _commands("## Checking against evaluation sets")
    assert [c[:2] for c in commands] == [["dedup-tui", "scan"], ["dedup-tui", "contamination"], ["dedup-tui", "export"],
                                         ["dedup-tui", "load"], ["dedup-tui", "scan"], ["dedup-tui", "export"]]
    for args in commands:
        result = CliRunner().invoke(main, args[1:])
        assert result.exit_code == 0, (args, result.output)

    def ids(name):
        return [json.loads(line)["id"] for line in (tmp_path / name).read_text().splitlines()]

    evals = {i for name in ("evals/a.jsonl", "evals/b.jsonl") for i, _ in files[name]}
    assert ids("train.curated.jsonl") and not evals & set(ids("train.curated.jsonl"))
    matched = [json.loads(line) for line in (tmp_path / "contamination.jsonl").read_text().splitlines()]
    assert {m["reference_id"] for m in matched} >= {i for i, _ in files["evals/a.jsonl"]}
    batch = set(ids("batch.curated.jsonl"))
    assert batch and all(i.startswith("new") for i in batch)
    removed = [json.loads(line) for line in (tmp_path / "batch.removed.jsonl").read_text().splitlines()]
    against_base = [r for r in removed if r.get("duplicate_of_source") == str((tmp_path / "curated/base.jsonl").resolve())]
    assert len(against_base) >= 10 and all(r["id"].startswith("new") for r in removed)
