"""An installed plugin costs a spaCy user nothing until it is used, on every OS.

spaCy imports the module behind every installed ``spacy_factories`` entry point whenever it
builds a ``Language`` (``spacy.blank``, ``spacy.load``), so those modules must not pull in
numba, our kernels or what only some commands need: scikit-learn alone took a second of
every ``spacy.blank``, numba and the kernels 0.6-1 s more. The subprocesses below see this
checkout's entry points (``bench_plugin_import.checkout_metadata``), not an installed
version's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from bench_plugin_import import CHILD, FORBIDDEN, checkout_metadata, offending

import spacy_delink
import spacy_delink.redaction as redaction

ROOT = Path(__file__).resolve().parents[1]
FACTORIES = ["delink_risk", "delink_combinations", "delink_rewriter", "delink_redactor", "delink_semantic_risk"]


def _python(tmp_path: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh interpreter that sees this checkout and its entry points."""
    metadata = checkout_metadata(tmp_path / "metadata")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(metadata), str(ROOT)])}
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)


def _blank_modules(tmp_path: Path, case: str) -> set[str]:
    result = _python(tmp_path, CHILD, case)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.strip().splitlines()[-1])["modules"])


def test_every_entry_point_names_the_light_plugin_module() -> None:
    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    for group in ("spacy_factories", "spacy_scorers", "thinc_llm_tasks"):
        assert {target.split(":")[0] for target in entry_points[group].values()} == {"spacy_delink.plugin"}, group
    assert sorted(entry_points["spacy_factories"]) == sorted(FACTORIES)


def test_building_a_pipeline_imports_nothing_heavy_of_ours(tmp_path: Path) -> None:
    added = _blank_modules(tmp_path, "plugin") - _blank_modules(tmp_path, "plain")
    assert "spacy_delink.plugin" in added  # the checkout's entry points were seen
    assert offending(sorted(added)) == []
    assert not [m for m in added if not m.startswith("spacy_delink")]  # nothing third-party beyond spaCy's own


def test_the_factories_still_build_validate_and_reload(tmp_path: Path) -> None:
    script = (
        "import json, sys, spacy\n"
        "from spacy.language import Language\n"
        "nlp = spacy.blank('en')\n"
        f"has = [Language.has_factory(f) for f in {FACTORIES!r}]\n"
        "nlp.add_pipe('delink_risk', config={'index': 'idx', 'k': 3})\n"
        "nlp.add_pipe('delink_combinations', config={'index': 'idx', 'arity': 2})\n"
        "nlp.add_pipe('delink_rewriter', config={'index': 'idx', 'arity': 3})\n"
        "nlp.to_disk('saved')\n"
        "loaded = spacy.load('saved')\n"
        "rejected = []\n"
        "for config in ({'k': 'two'}, {'key_file': 5}):\n"
        "    try:\n"
        "        spacy.blank('en').add_pipe('delink_risk', config=config)\n"
        "    except Exception as err:\n"
        "        rejected.append(type(err).__name__)\n"
        "print(json.dumps({'has': has, 'pipes': loaded.pipe_names, 'k': loaded.get_pipe('delink_risk').k,"
        " 'arity': loaded.get_pipe('delink_combinations').arity, 'rejected': rejected}))\n"
    )
    result = _python(tmp_path, script)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["has"] == [True] * len(FACTORIES)
    assert seen["pipes"] == ["delink_risk", "delink_combinations", "delink_rewriter"]
    assert (seen["k"], seen["arity"]) == (3, 2)
    assert seen["rejected"] == ["ConfigValidationError", "ConfigValidationError"]  # settings are still validated


def test_every_module_imports_where_fcntl_does_not_exist(tmp_path: Path) -> None:
    """Windows has no fcntl (nor termios, resource): no module of ours may need them to import."""
    script = (
        "import sys\n"
        "for name in ('fcntl', 'termios', 'resource'):\n"
        "    sys.modules[name] = None  # `import fcntl` now raises ImportError, as on Windows\n"
        "import importlib, pkgutil, spacy_delink\n"
        "names = [m.name for m in pkgutil.walk_packages(spacy_delink.__path__, 'spacy_delink.')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "from spacy_delink.io.files import file_lock\n"
        "with file_lock('held.lock', wait=False, busy_message='busy'):\n"
        "    pass\n"
        "print(len(names))\n"
    )
    result = _python(tmp_path, script)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip().splitlines()[-1]) > 90
    assert not (tmp_path / "held.lock").exists()  # removed on release


@pytest.mark.parametrize("package", [spacy_delink, redaction], ids=["spacy_delink", "redaction"])
def test_every_public_name_loads_on_first_access(package: object) -> None:
    names = list(package.__all__)  # type: ignore[attr-defined]
    assert names == sorted(names) and dir(package) == names
    for name in names:
        assert getattr(package, name) is not None, name
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        getattr(package, "no_such_name")


def test_lazy_names_are_the_submodules_objects() -> None:
    from spacy_delink.plugin import make_redactor
    from spacy_delink.redaction.baselines import logreg_word_weights
    from spacy_delink.redaction.component import DelinkRedactor

    assert redaction.logreg_word_weights is logreg_word_weights
    assert redaction.DelinkRedactor is DelinkRedactor
    assert redaction.make_redactor is make_redactor


def test_the_forbidden_list_names_what_the_plugin_must_never_load() -> None:
    assert offending(["numba.core", "spacy_delink.plugin", "spacy_delink.linkage.tokenize"]) == [
        "numba.core", "spacy_delink.linkage.tokenize"]
    assert "fcntl" in FORBIDDEN
