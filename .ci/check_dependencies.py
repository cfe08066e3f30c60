"""Declared dependencies match the imports: every import declared, every declaration imported.

Reads pyproject.toml and the import statements of spacy_delink/ (the runtime dependencies
and extras), tests/ and benchmarks/ (the test extra). A third-party module imported by the
package must be a runtime dependency or in an extra; every runtime dependency and every
package of an extra must be imported somewhere; a test dependency must be imported by the
tests or the benchmarks. A package that only an extra installs may be imported at the top
of a module only where that module (or its package's ``__init__``) first calls
``require_extra``; everywhere else, inside the function that needs it, so the core imports
without it. Needs no installed package: import names map to distribution names by PEP 503
normalization plus the aliases below. Exits 1 with one line per problem.
"""
from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: import name -> distribution name, where they differ beyond case and - / _ / .
ALIASES = {
    "sklearn": "scikit-learn", "yaml": "pyyaml", "PIL": "pillow", "swagger_ui_bundle": "swagger-ui-bundle-v2",
    "llama_cpp": "llama-cpp-python", "icu": "icukit-pyicu", "hironsan": "hironsancorpus",
}
#: distributions used without an import statement of their own name
USED_WITHOUT_IMPORT = {"mypy", "ruff"}  # run as tools by .ci/run


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    if match is None:
        raise SystemExit(f"check_dependencies: cannot read requirement {requirement!r} in pyproject.toml")
    return normalize(match.group(0))


def _dynamic_import(node: ast.AST) -> str | None:
    """The module a call such as ``pytest.importorskip("pandas")`` imports, if it is one."""
    if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
        return None
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    module = node.args[0].value
    if name in ("importorskip", "import_module") and isinstance(module, str) and not module.startswith("."):
        return module
    return None


def imported_distributions(folder: Path) -> dict[str, set[str]]:
    """Distribution name -> the files importing it (absolute imports of non-stdlib modules)."""
    found: dict[str, set[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            elif dynamic := _dynamic_import(node):  # pytest.importorskip("pandas"), importlib.import_module("x")
                modules = [dynamic]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top == "__future__":
                    continue
                found.setdefault(normalize(ALIASES.get(top, top)), set()).add(str(path.relative_to(ROOT)))
    return found


def _module_level_imports(tree: ast.Module) -> list[str]:
    """Absolute imports a module runs when it is imported (not those in functions or under TYPE_CHECKING)."""
    found: list[str] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
        elif isinstance(node, ast.If) and not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            pending += node.body + node.orelse
        elif isinstance(node, (ast.Try, ast.With)):
            pending += node.body + [s for h in getattr(node, "handlers", []) for s in h.body]
    return found


def _guarded(package: Path) -> list[Path]:
    """Modules, and packages by their ``__init__``, that call ``require_extra`` at the top (one line naming the extra)."""
    guarded = []
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = [n for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
        if any(getattr(call.value.func, "id", "") == "require_extra" for call in calls):  # type: ignore[attr-defined]
            guarded.append(path.parent if path.name == "__init__.py" else path)
    return guarded


def eager_optional_imports(package: Path, optional_only: set[str]) -> list[str]:
    """Problems: optional packages imported at the top of a module the core may import."""
    guarded = _guarded(package)
    problems = []
    for path in sorted(package.rglob("*.py")):
        if any(place == path or place in path.parents for place in guarded):
            continue
        for module in _module_level_imports(ast.parse(path.read_text(encoding="utf-8"))):
            name = normalize(ALIASES.get(module.split(".")[0], module.split(".")[0]))
            if name in optional_only:
                problems.append(
                    f"{name} (an extra) is imported at the top of {path.relative_to(ROOT)}, which the core imports "
                    "without it; import it inside the function that needs it"
                )
    return problems


def main() -> int:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = {requirement_name(r) for r in project["dependencies"]}
    extras = {name: {requirement_name(r) for r in reqs} for name, reqs in project.get("optional-dependencies", {}).items()}
    optional = set().union(*(reqs for name, reqs in extras.items() if name != "test")) - {"spacy-delink"}
    test_only = extras.get("test", set()) - {"spacy-delink"}

    package_imports = imported_distributions(ROOT / "spacy_delink")
    package_imports.pop("spacy-delink", None)
    test_imports: dict[str, set[str]] = {}
    for folder in ("tests", "benchmarks"):
        for name, files in imported_distributions(ROOT / folder).items():
            test_imports.setdefault(name, set()).update(files)

    problems = []
    for name, files in sorted(package_imports.items()):
        if name not in runtime | optional:
            problems.append(f"{name} is imported ({', '.join(sorted(files)[:3])}) but not declared in pyproject.toml")
    for name in sorted((runtime | optional) - set(package_imports) - USED_WITHOUT_IMPORT):
        problems.append(f"{name} is declared in pyproject.toml but spacy_delink never imports it; remove it")
    for name in sorted(test_only - set(test_imports) - set(package_imports) - runtime - optional - USED_WITHOUT_IMPORT):
        problems.append(f"{name} is a test dependency that no test or benchmark imports; remove it")
    problems += eager_optional_imports(ROOT / "spacy_delink", optional - runtime)
    for line in problems:
        print(f"check_dependencies: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
