"""The package's shape, read from its source with `ast`: the engine imports no UI, no module
imports another's underscore names or reads them through the module, and the modules import
each other without cycles (function-level imports included: a cycle hidden in a function is
still a cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "dedup_tui"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


MODULES = _modules()


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names (relative ones resolved against `module`)."""
    if not node.level:
        return node.module or ""
    package = module.split(".")
    if MODULES[module].name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str):
    """(imported module, names imported from it or None, line) of every import in `module`,
    at any depth of its code; `from pkg import mod` counts as importing pkg.mod."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(module, node)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in MODULES:
                    yield sub, None, node.lineno
                else:
                    yield target, alias.name, node.lineno


def _internal_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for target, _, _ in _imports(module):
            if target in MODULES and target != module and not module.startswith(target + "."):
                edges[module].add(target)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert _cycles(_internal_edges()) == []


def test_the_engine_imports_no_ui():
    for module in MODULES:
        if module.startswith("dedup_tui.engine"):
            for target, _, line in _imports(module):
                assert not target.startswith(("dedup_tui.ui", "dedup_tui.review", "textual", "rich")), (
                    f"{module}:{line} imports {target}"
                )


def test_no_module_uses_another_modules_private_names():
    offences = []
    for module, path in MODULES.items():
        imported_as: dict[str, str] = {}  # local name -> our module it names
        for target, name, line in _imports(module):
            if (
                name is not None
                and name.startswith("_")
                and not name.startswith("__")
                and target in MODULES
                and target != module
            ):
                offences.append(f"{module}:{line} imports {target}.{name}")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _absolute(module, node)
                for alias in node.names:
                    if f"{target}.{alias.name}" in MODULES:
                        imported_as[alias.asname or alias.name] = f"{target}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in MODULES and alias.asname:
                        imported_as[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in imported_as
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and imported_as[node.value.id] != module
            ):
                offences.append(f"{module}:{node.lineno} reads {imported_as[node.value.id]}.{node.attr}")
    assert offences == []


# The app's entry points: what the CLI may import from the UI (to open the app, or serve it).
APP_ENTRIES = ("dedup_tui.ui.run", "dedup_tui.ui.serve")


def test_the_cli_reaches_the_ui_only_through_the_apps_entry_points():
    """The CLI runs the engine itself (one load-and-scan orchestration, the project opening in
    engine.opening); from the UI it only launches the app."""
    offences = [
        f"dedup_tui.cli:{line} imports {target}"
        for target, _, line in _imports("dedup_tui.cli")
        if target.startswith(("dedup_tui.ui", "textual")) and target not in APP_ENTRIES
    ]
    assert offences == []
    assert {target for target, _, _ in _imports("dedup_tui.cli") if target.startswith("dedup_tui.ui")} <= set(
        APP_ENTRIES
    )


def test_the_review_model_imports_no_ui():
    for module in MODULES:
        if module.startswith("dedup_tui.review"):
            for target, _, line in _imports(module):
                assert not target.startswith(("dedup_tui.ui", "textual", "rich")), f"{module}:{line} imports {target}"


def test_the_engine_is_grouped_by_concern():
    """At most 15 modules directly in engine/, each subpackage with a docstring, and no module
    over 900 lines nor class over 600 (issue 42)."""
    engine = PACKAGE / "engine"
    direct = list(engine.glob("*.py"))
    assert len(direct) <= 15, sorted(p.name for p in direct)
    for init in engine.rglob("__init__.py"):
        assert ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))), f"{init} has no docstring"
    for module, path in MODULES.items():
        if not module.startswith("dedup_tui.engine"):
            continue
        source = path.read_text(encoding="utf-8")
        assert source.count("\n") <= 900, f"{module}: {source.count(chr(10))} lines"
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                assert node.end_lineno - node.lineno + 1 <= 600, f"{module}.{node.name}"
