"""Portable pipelines (issue 25, point 6): a saved pipeline finds its index relative to itself,
and every shipped config is a complete spaCy config."""
from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path
from typing import Iterator

import pytest
import spacy

from spacy_delink import IndexBuilder, LinkageRules

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted((REPO / "configs").glob("*.cfg")) + sorted((REPO / "spacy_delink" / "configs").glob("*.cfg"))
TEXT = "The applicant's farm near the river Mura was sold."


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder: ``training/index`` and ``pipelines/``, as `spacy project` lays them out."""
    IndexBuilder(LinkageRules(max_n=4), progress=False).build(
        [("a", TEXT), ("b", "The farm was sold in 1994."), ("c", "The farm near the river was sold.")],
        tmp_path / "training" / "index",
    )
    (tmp_path / "pipelines").mkdir()
    return tmp_path


@pytest.fixture
def elsewhere(tmp_path: Path) -> Iterator[Path]:
    """Another working directory, as a script run from somewhere else has."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield folder
    finally:
        os.chdir(before)


def test_a_relative_index_is_read_from_the_pipeline_folder(project: Path, elsewhere: Path) -> None:
    """Saved with `index = "../../training/index"`, the pipeline loads and runs from any working directory."""
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk", config={"index": str(project / "training" / "index")})
    pipeline = project / "pipelines" / "risk"
    nlp.to_disk(pipeline)
    config = spacy.util.load_config(pipeline / "config.cfg")
    config["components"]["delink_risk"]["index"] = "../../training/index"
    config.to_disk(pipeline / "config.cfg")
    loaded = spacy.load(pipeline)
    assert loaded(TEXT)._.delink_anonymity == 1
    moved = project / "moved" / "risk"  # the pipeline and the index move together: still found
    shutil.copytree(project / "training", project / "moved" / "x" / "training")
    shutil.copytree(pipeline, moved)
    config["components"]["delink_risk"]["index"] = "../x/training/index"
    config.to_disk(moved / "config.cfg")
    assert spacy.load(moved)(TEXT)._.delink_anonymity == 1


@pytest.mark.parametrize("reference", ["relative", "absolute", "copied"])
def test_a_saved_pipeline_processes_a_document_from_another_folder(
    reference: str, project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 36 item 3: built in code with the index as the README names it (relative to the working
    directory), absolute, or copied into the pipeline, the saved pipeline runs from anywhere, and saving
    warns about nothing (before: the relative one raised "training/pipeline/training/index not found")."""
    monkeypatch.chdir(project)
    index = {"relative": "training/index", "absolute": str(project / "training" / "index"), "copied": "training/index"}[reference]
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk", config={"index": index, "copy_index": reference == "copied"})
    nlp.add_pipe("delink_combinations", config={"index": index, "arity": 3})
    assert nlp(TEXT)._.delink_anonymity == 1  # built in code: read from the working directory
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nlp.to_disk("training/pipeline")
    saved = spacy.util.load_config(project / "training" / "pipeline" / "config.cfg")
    expected = {"relative": "../index", "absolute": index, "copied": "../index"}[reference]
    assert saved["components"]["delink_combinations"]["index"] == expected
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.chdir(other)
    pipeline = project / "training" / "pipeline"
    for path in (os.path.relpath(pipeline, other), str(pipeline)):  # loaded by a relative and an absolute path
        doc = spacy.load(path)(TEXT)
        assert doc._.delink_anonymity == 1 and doc._.delink_combination_linkable is not None


def test_a_saved_pipeline_moved_with_its_index_still_finds_it(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk", config={"index": "training/index"})
    nlp.to_disk("training/pipeline")
    shutil.move(project / "training", project / "moved")
    monkeypatch.chdir(project / "pipelines")
    assert spacy.load(project / "moved" / "pipeline")(TEXT)._.delink_anonymity == 1


def test_saving_warns_when_the_index_is_missing(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The one thing a save can foresee breaking: an index that is not there."""
    monkeypatch.chdir(project)
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk", config={"index": "training/no-such-index"})
    with pytest.warns(UserWarning, match=r"does not exist, so the saved pipeline .* will fail on its first document"):
        nlp.to_disk("pipelines/risk")
    assert spacy.util.load_config(project / "pipelines" / "risk" / "config.cfg")["components"]["delink_risk"]["index"] == "../../training/no-such-index"


def test_a_component_saved_alone_is_told_how_to_fix_its_config(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the pipeline's config.cfg beside its folder, nothing can be rewritten: the warning names the value."""
    monkeypatch.chdir(project)
    nlp = spacy.blank("en")
    risk = nlp.add_pipe("delink_risk", config={"index": "training/index"})
    (project / "pipelines" / "risk").mkdir()
    with pytest.warns(UserWarning, match=r"set components\.delink_risk\.index to '\.\./\.\./training/index'"):
        risk.to_disk(project / "pipelines" / "risk" / "delink_risk")


def test_no_warning_when_the_saved_pipeline_finds_its_index(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built inside the pipeline's own folder, the relative path names the index from both places."""
    pipeline = project / "pipelines" / "risk"
    pipeline.mkdir()
    monkeypatch.chdir(pipeline)
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk", config={"index": "../../training/index"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nlp.to_disk(pipeline)
    monkeypatch.chdir(project)
    assert spacy.load(pipeline)(TEXT)._.delink_anonymity == 1


def test_relative_key_file_is_read_from_the_pipeline_folder(project: Path, elsewhere: Path) -> None:
    key = project / "training" / "index.key"
    shutil.move(key, project / "pipelines" / "secret.key")
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk", config={"index": str(project / "training" / "index"), "key_file": str(project / "pipelines" / "secret.key")})
    pipeline = project / "pipelines" / "risk"
    nlp.to_disk(pipeline)
    config = spacy.util.load_config(pipeline / "config.cfg")
    config["components"]["delink_risk"]["key_file"] = "../secret.key"
    config.to_disk(pipeline / "config.cfg")
    assert spacy.load(pipeline)(TEXT)._.delink_anonymity == 1


def test_copy_index_still_travels_with_the_pipeline(project: Path, elsewhere: Path) -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk", config={"index": str(project / "training" / "index"), "copy_index": True})
    nlp.to_disk(project / "pipelines" / "risk")
    os.environ["DELINK_KEY_FILE"] = str(project / "training" / "index.key")
    try:
        shutil.move(project / "pipelines" / "risk", elsewhere / "risk")
        shutil.rmtree(project / "training" / "index")
        assert spacy.load(elsewhere / "risk")(TEXT)._.delink_anonymity == 1
    finally:
        del os.environ["DELINK_KEY_FILE"]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_shipped_configs_are_complete_and_pass_spacy_debug_config(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m spacy debug config <cfg>` passes, and `spacy init fill-config` has nothing to add."""
    from spacy.cli.debug_config import debug_config
    from spacy.cli.init_config import fill_config
    from thinc.api import Config

    debug_config(path)  # exits with status 1 on an invalid config
    assert "Config is valid" in capsys.readouterr().out
    filled = tmp_path / "filled.cfg"
    fill_config(filled, path, silent=True)
    assert Config().from_disk(filled, interpolate=False) == Config().from_disk(path, interpolate=False)
