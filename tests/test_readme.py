"""The README's examples run as written, on the shipped sample, in a fresh folder; the
user docs name every rule the code has.

Convention: a fenced ``bash`` or ``python`` block right after a line ``<!-- test -->`` is
an example that runs offline. The marked blocks run in README order in one temporary
folder holding a copy of the checkout without its outputs, caches, tests and package
source (so the installed package runs, and later blocks see what earlier ones built, as
a reader following the README would), bash blocks with
``set -euo pipefail``. Lines that install this package (``pip install ...``) are skipped:
the tests run inside the installed package already. Every relative link of the README
must name a file of the repository.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARKER = "<!-- test -->"
BLOCK = re.compile(r"^" + re.escape(MARKER) + r"\n```(bash|python)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def marked_blocks(text: str) -> list[tuple[str, str]]:
    return [(match.group(1), match.group(2)) for match in BLOCK.finditer(text)]


def test_marker_convention_is_found() -> None:
    """Every marker is followed by a runnable block, and the main paths are covered."""
    text = README.read_text(encoding="utf-8")
    blocks = marked_blocks(text)
    assert len(blocks) == text.count(MARKER), "a <!-- test --> marker not directly followed by a bash/python block"
    code = "\n".join(body for _, body in blocks)
    for needed in ("spacy project run all", "delink index", "delink assess", "delink protect", "delink_risk",
                   "delink_rewriter", "open_index", "assess_text", "detect("):
        assert needed in code, f"no tested README example uses {needed}"


def _run(language: str, body: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    if language == "bash":
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("pip install")]
        command = [shutil.which("bash") or "bash", "-c", "set -euo pipefail\n" + "\n".join(lines)]
    else:
        command = [sys.executable, "-c", body]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=600)


#: Top-level entries a reader's fresh clone does not have (outputs, caches) or that the
#: examples must not pick up instead of the installed package (its source, the tests).
_LEFT_OUT = {".git", ".ci", ".mypy_cache", ".hypothesis", ".benchmarks", ".pytest_cache", "build", "dist",
             "training", "metrics", "assets", "corpus", "spacy_delink", "spacy_delink.egg-info", "tests", "benchmarks"}


def _not_in_a_fresh_clone(directory: str, names: list[str]) -> set[str]:
    if Path(directory) == ROOT:
        return {name for name in names if name in _LEFT_OUT or name == "project.lock"}
    return {name for name in names if name == "__pycache__"}


def test_marked_examples_run_on_the_shipped_sample(tmp_path: Path) -> None:
    folder = tmp_path / "readme"
    shutil.copytree(ROOT, folder, ignore=_not_in_a_fresh_clone)
    env = dict(os.environ)
    # the console scripts (`delink`, `spacy`) of the Python running the tests come first
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("DELINK_KEY_FILE", None)
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    for number, (language, body) in enumerate(marked_blocks(README.read_text(encoding="utf-8")), 1):
        result = _run(language, body, folder, env)
        assert result.returncode == 0, f"README block {number} ({language}) failed:\n{body}\n--- stdout:\n{result.stdout[-2000:]}\n--- stderr:\n{result.stderr[-4000:]}"
        if "nlp.to_disk(" in body:  # saving warns only when something will break, and here nothing does
            assert "Warning" not in result.stderr, result.stderr
    # the saved pipeline processes a document loaded from another folder, by a relative and an absolute path
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for pipeline in (os.path.relpath(folder / "training" / "pipeline", elsewhere), str(folder / "training" / "pipeline")):
        loaded = _run("python", f"import spacy\nprint(spacy.load({pipeline!r})('The applicant restored an old watermill.')._.delink_risk)", elsewhere, env)
        assert loaded.returncode == 0 and 0.0 <= float(loaded.stdout.split()[-1]) <= 1.0, loaded.stderr[-4000:]  # a risk
    # what the examples promise: the workflow's outputs, a protected rewrite, a saved pipeline
    for produced in ("training/index", "training/index.key", "metrics/assess.jsonl", "metrics/report.html",
                     "metrics/protected.jsonl", "training/pipeline/config.cfg", "index", "protected.jsonl"):
        assert (folder / produced).exists(), f"the README examples did not produce {produced}"


def test_relative_links_name_existing_files() -> None:
    text = README.read_text(encoding="utf-8")
    targets = {target.split("#", 1)[0] for target in re.findall(r"\]\(([^)\s]+)\)", text)}
    local = sorted(t for t in targets if t and not re.match(r"[a-z]+://", t))
    assert local, "no relative links found"
    missing = [target for target in local if not (ROOT / target).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


@pytest.mark.parametrize("path", ["samples/corpus.jsonl", "samples/deidentified.jsonl", "samples/released.txt"])
def test_shipped_samples_are_named_in_the_readme(path: str) -> None:
    assert path in README.read_text(encoding="utf-8")


def test_linkage_rules_doc_names_every_configurable_rule() -> None:
    """docs/linkage-rules.md lists each field of ``LinkageRules`` (what an index records)."""
    from dataclasses import fields

    from spacy_delink import LinkageRules

    docs = (ROOT / "docs" / "linkage-rules.md").read_text(encoding="utf-8")
    missing = [field.name for field in fields(LinkageRules) if f"LinkageRules({field.name}=" not in docs]
    assert not missing, f"docs/linkage-rules.md does not document the rule(s) {missing}"


def _tables(text: str) -> list[list[str]]:
    """The markdown tables of a text, each as its lines (header, rule, rows)."""
    tables: list[list[str]] = []
    previous = ""
    for line in text.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                tables.append([])
            tables[-1].append(line)
        previous = line
    return tables


def test_the_readme_is_for_users() -> None:
    """Issue 25: what it is, the two commands, the pipeline, the guarantees and their limits, then links; no benchmark tables."""
    text = README.read_text(encoding="utf-8")
    sections = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert sections[0] == "Try it" and sections[-1] == "Documentation"
    intro = text.split("\n## ", 1)[0]
    assert "search-based linkage" in intro and "<!--" not in intro
    try_it = text.split("## Try it", 1)[1].split("\n## ", 1)[0]
    assert "spacy project run all" in try_it and 'pip install -e ".[test]" && python -m pytest -q' in try_it
    assert "In a spaCy pipeline" in sections
    limits = text.split('## What "protected" means, and what it does not', 1)[1].split("\n## ", 1)[0]
    assert "Semantic linkage is not prevented" in limits
    assert all(word in limits for word in ("index", "k = 2", "arity"))
    # one summary table of at most five rows, each figure of it in docs/benchmarks.md
    tables = _tables(text)
    assert len(tables) == 1 and len(tables[0]) - 2 <= 5
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    figures = set(re.findall(r"\d+(?:\.\d+)?(?:–\d+(?:\.\d+)?)?(?:%| s)", "\n".join(tables[0])))
    assert figures and not [figure for figure in figures if figure not in benchmarks]


def test_every_benchmark_table_comes_with_its_command() -> None:
    """docs/benchmarks.md: each table's section names the command that produced it."""
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    for section in text.split("\n## ")[1:]:
        for table in _tables(section):
            before = section.split(table[0], 1)[0]
            assert re.search(r"`(python benchmarks/\w+\.py|spacy project run \w+)[^`]*`", before), (
                f"no command before the table {table[0]!r} in its section {section.splitlines()[0]!r}"
            )
