"""The package's modules import one another without a cycle, function-level imports included.

A cycle is an order of initialisation that works by accident: it breaks the day an import
moves to the top of a module or a name is read at import time, and it hides which layer
depends on which. Imports inside functions count (they run, later, in the same process);
``if TYPE_CHECKING:`` blocks do not (they never run). Importing ``a.b.c`` also runs the
``__init__`` of ``a.b`` unless the importer lives inside it (then it has run already).
"""
from __future__ import annotations

import ast
from pathlib import Path

from conftest import write_files

PACKAGE = Path(__file__).resolve().parents[1] / "spacy_delink"


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: all of them but those under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(node, ast.If) and _is_type_checking(node.test) and child in node.body:
                continue
            stack.append(child)
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules that importing it (or calling its functions) runs."""
    paths = {module_name(path, package): path for path in sorted(package.rglob("*.py"))}
    packages = {name for name, path in paths.items() if path.name == "__init__.py"}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        here = name if name in packages else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            base = here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
            source = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                targets.add(submodule if submodule in paths else source)
        for target in targets:
            parts = target.split(".")
            for end in range(1, len(parts) + 1):
                step = ".".join(parts[:end])
                ancestor = name == step or name.startswith(step + ".")
                if step in paths and step != name and not (ancestor and step in packages):
                    graph[name].add(step)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected group of modules (Tarjan), as the modules in import order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_in(graph, group) for group in groups]


def _cycle_in(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest cycle through the group's first module (breadth-first, inside the group)."""
    start = min(group)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & group):
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if target not in previous:
                    previous[target] = node
                    following.append(target)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {sorted(group)}")


def test_the_package_imports_without_a_cycle() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in found)


def test_the_graph_sees_function_level_relative_and_package_imports(tmp_path: Path) -> None:
    package = tmp_path / "spacy_delink"
    write_files(package, {
        "__init__.py": "",
        "sub/__init__.py": "from .b import thing\n",
        "a.py": "def f():\n    from .sub import b\n",
        "sub/b.py": "from ..a import f\nthing = 1\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n",
        "d.py": "import spacy_delink.sub.b\n",
    })
    graph = import_graph(package)
    assert graph["spacy_delink.a"] == {"spacy_delink.sub", "spacy_delink.sub.b"}
    assert graph["spacy_delink.sub.b"] == {"spacy_delink.a"}  # its own package has run already
    assert graph["spacy_delink.c"] == set()
    assert graph["spacy_delink.d"] == {"spacy_delink.sub", "spacy_delink.sub.b"}
    assert cycles(graph) == [["spacy_delink.a", "spacy_delink.sub.b", "spacy_delink.a"]]
