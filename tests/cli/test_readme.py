"""The examples of the README and of the documentation pages (docs/*.md) run as written, on the
bundled sample, and do what their comments say; each is found by its section's heading wherever
that section now lives (tests/docs_text.py)."""

from __future__ import annotations

import json
import math
import re
import shlex

from ..docs_text import README, ROOT, code_blocks, pages, section

SAMPLE = ROOT / "dedup_tui" / "samples" / "notes.jsonl"


def _library_example() -> str:
    return code_blocks(section("The engine as a library"), "python")[0]


def _review_example() -> str:
    return code_blocks(section("The review model"), "python")[0]


def test_the_library_example_loads_scans_clusters_and_exports(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.jsonl").write_bytes(SAMPLE.read_bytes())
    exec(compile(_library_example(), "docs/library.md", "exec"), {"__name__": "readme_example"})
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


def test_every_name_in_the_engine_table_exists():
    import importlib

    rows = [
        line
        for line in section("The engine as a library").split("```")[0].splitlines()
        if line.startswith("| `engine.")
    ]
    assert len(rows) >= 8
    for row in rows:
        modules_cell, names_cell = row.strip("|").split("|")[:2]
        modules = [importlib.import_module(f"dedup_tui.{m}") for m in re.findall(r"`(engine\.[\w.]+)`", modules_cell)]
        for name in re.findall(r"`(?:[\w.]+\.)?(\w+)[(`]", names_cell):
            if name[0].isupper() or name.islower():
                owners = modules + [
                    importlib.import_module(f"dedup_tui.{m}")
                    for m in re.findall(r"`(engine\.[\w.]+)\.\w+\(", names_cell)
                ]
                assert any(hasattr(m, name) for m in owners), f"{name} is in no module of: {row}"


def _commands(heading: str) -> list[list[str]]:
    """The section's first bash block as argument lists (comments dropped, globs expanded as a
    shell would, from the current folder)."""
    import glob

    block = code_blocks(section(heading), "bash")[0]
    commands = []
    for line in block.splitlines():
        args = shlex.split(line, comments=True)
        if args:
            commands.append([m for a in args for m in (sorted(glob.glob(a)) if "*" in a else [a])])
    return commands


def test_the_evaluation_set_commands_run_and_never_write_a_reference(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from dedup_tui.cli import main

    monkeypatch.chdir(tmp_path)
    texts = [json.loads(line)["text"] for line in SAMPLE.read_text().splitlines()]
    files = {
        "train/a.jsonl": [(f"ta{i}", t) for i, t in enumerate(texts[:40])],
        "train/b.jsonl": [(f"tb{i}", t) for i, t in enumerate(texts[40:])],
        "evals/a.jsonl": [(f"ea{i}", t) for i, t in enumerate(texts[5:50:9])],
        "evals/b.jsonl": [("eb0", texts[60] + " and one more sentence at its end.")],
        "curated/base.jsonl": [(f"base{i}", t) for i, t in enumerate(texts[:30])],
        "new/batch.jsonl": [(f"new{i}", t) for i, t in enumerate(texts[20:45])],
    }
    for name, docs in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs))
    commands = _commands("Checking against evaluation sets")
    assert [c[:2] for c in commands] == [
        ["dedup-tui", "scan"],
        ["dedup-tui", "contamination"],
        ["dedup-tui", "export"],
        ["dedup-tui", "load"],
        ["dedup-tui", "scan"],
        ["dedup-tui", "export"],
    ]
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
    against_base = [
        r for r in removed if r.get("duplicate_of_source") == str((tmp_path / "curated/base.jsonl").resolve())
    ]
    assert len(against_base) >= 10 and all(r["id"].startswith("new") for r in removed)


def test_the_review_example_decides_undoes_and_leaves_the_cursor_for_the_app(tmp_path, monkeypatch, capsys):
    """The review model's example, on the sample the library example scanned: each decision it
    prints is saved, the undo takes back the last one, and the project reopens on that member."""
    from dedup_tui.review import Review

    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.jsonl").write_bytes(SAMPLE.read_bytes())
    exec(compile(_library_example(), "docs/library.md", "exec"), {"__name__": "readme_example"})
    capsys.readouterr()
    exec(compile(_review_example(), "docs/library.md", "exec"), {"__name__": "readme_example"})
    lines = capsys.readouterr().out.splitlines()

    decided = [re.match(r"Saved: (?:remove|split off) ([\w-]+)", line).group(1) for line in lines[:-1]]
    assert len(decided) == 20 and lines[-1].startswith("Undone: ")
    reopened = Review.open("notes.db")
    try:
        ords = reopened.project.ords_for_ids(decided)
        assert reopened.project.ids_for([reopened.cursor.doc]) == [decided[-1]]
        assert reopened.to_review(ords[decided[-1]])
        assert not any(reopened.to_review(ords[doc]) for doc in decided[:-1])
    finally:
        reopened.close()


def test_the_quick_start_is_the_readmes_and_the_sites_home_shows_the_same():
    """The quick start's two commands are the README's (CI runs them: .ci/run), and the site's
    home page repeats them word for word."""
    readme_block = code_blocks(section("Quick start", README), "bash")[0]
    app_line, test_line = [line for line in readme_block.splitlines() if line.strip()]
    assert "pip install -e . && dedup-tui " in app_line and "[test]" not in app_line
    assert 'pip install -e ".[test]" && python -m pytest' in test_line
    assert code_blocks(section("Quick start", ROOT / "docs" / "index.md"), "bash")[0] == readme_block


def _command_lines():
    """Every `dedup-tui` command line of every bash block in the README and docs/*.md, as
    (page, words): continuation lines joined, comments and `$(...)` values dropped, each command
    of an `&&` chain apart, environment assignments before it left out."""
    for path in pages():
        for block in code_blocks(path.read_text(encoding="utf-8"), "bash"):
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"\$\([^)]*\)", "VALUE", line)
                words = shlex.split(line, comments=True)
                while words:
                    command = words[: words.index("&&")] if "&&" in words else words
                    words = words[len(command) + 1 :]
                    while command and re.match(r"\w+=", command[0]):
                        command = command[1:]
                    if command and command[0] == "dedup-tui":
                        yield path.relative_to(ROOT), command


def test_every_command_line_in_the_readme_and_the_docs_is_one_the_cli_accepts():
    """Parsed, not run, in the spelling shown. A usage line (`tune PROJECT.db [--threshold T]`)
    names only options its command has."""
    from dedup_tui.cli import main

    lines = list(_command_lines())
    assert len(lines) >= 40 and {str(page) for page, _ in lines} >= {"README.md", "docs/cli.md", "docs/browser.md"}
    for page, words in lines:
        args = words[1:]
        name = args.pop(0) if args and args[0] in main.commands else "open"
        command = main.commands[name]
        if any(word.startswith("[") for word in args):
            options = {opt for param in command.params for opt in param.opts}
            named = [word.strip("[]") for word in args if word.lstrip("[").startswith("--")]
            assert named and set(named) <= options, (page, words)
            continue
        with command.make_context(name, list(args)):
            pass


def test_every_relative_link_and_image_of_the_readme_and_the_docs_names_a_file_that_exists():
    """The README's screenshots and links into docs/ (GitHub shows it; the site's strict build
    checks the pages, this checks them without the docs extra too)."""
    checked = 0
    for path in pages():
        text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"\w+://|#|mailto:", target):
                continue
            assert (path.parent / target.split("#")[0]).exists(), f"{path.relative_to(ROOT)}: {target}"
            checked += 1
    assert checked >= 30
