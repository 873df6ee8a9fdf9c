"""The engine's public names (`from dedup_tui.engine import Project, scan, ...`): each resolves,
has exactly one defining module in the engine, and loads only when used."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import dedup_tui.engine as engine

ENGINE = Path(engine.__file__).resolve().parent


def _definitions() -> dict[str, list[str]]:
    """name -> the engine modules that define it at their top level (a def, a class or an
    assignment; an import is not a definition)."""
    found: dict[str, list[str]] = {}
    for path in sorted(ENGINE.rglob("*.py")):
        module = ".".join(path.relative_to(ENGINE).with_suffix("").parts)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            else:
                continue
            for name in names:
                found.setdefault(name, []).append(module)
    return found


def test_every_public_name_resolves_to_its_one_home():
    definitions = _definitions()
    assert engine.PUBLIC, "the facade names something"
    for name, home in engine.PUBLIC.items():
        assert definitions.get(name) == [home], f"{name}: defined in {definitions.get(name)}, listed in {home}"
        value = getattr(engine, name)
        assert value is getattr(sys.modules[f"dedup_tui.engine.{home}"], name)
        if hasattr(value, "__module__") and not isinstance(value, type(engine)) and name != "Policy":
            assert value.__module__ == f"dedup_tui.engine.{home}", name
    assert sorted(engine.__all__) == sorted(engine.PUBLIC)


def test_an_unknown_name_is_an_attribute_error_and_submodules_still_import():
    try:
        engine.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")
    from dedup_tui.engine import store  # a subpackage, not a facade name

    assert store.__name__ == "dedup_tui.engine.store"


def test_importing_the_engine_loads_nothing_heavy():
    """The warm-up is spawned, and small commands run, right after `import dedup_tui.engine`:
    listing the facade, or taking a light name from it, imports neither numpy nor numba."""
    code = (
        "import json, sys\n"
        "import dedup_tui.engine\n"
        "dir(dedup_tui.engine)\n"
        "from dedup_tui.engine import Control, DedupError\n"
        "print(json.dumps(sorted(m for m in ('numpy', 'numba', 'pyarrow', 'sqlite_utils', 'textual')"
        " if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ENGINE.parent.parent
    )
    assert json.loads(done.stdout) == []


def test_the_facades_names_are_the_same_objects_a_caller_gets_from_their_modules():
    from dedup_tui.engine import ScanSettings, load_corpus, scan
    from dedup_tui.engine.ingest import load_corpus as from_ingest
    from dedup_tui.engine.scanning.local import scan as from_local
    from dedup_tui.engine.scanning.settings import ScanSettings as from_settings

    assert (ScanSettings, load_corpus, scan) == (from_settings, from_ingest, from_local)
