"""Shared fixtures: the location of ../shared/data (skip cleanly without it) and the in-process CLI."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
import srsly
from hypothesis import settings

from spacy_delink.cli import main

# Property tests draw the same examples on every machine and run (no example database, no
# deadline): a verdict must not depend on the machine, its load or an earlier run.
settings.register_profile("delink", derandomize=True, database=None, deadline=None)
settings.load_profile("delink")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


#: CI sets DELINK_REQUIRE_DATA=1: there a missing ../shared/data fails the tests that need it
#: instead of skipping them (the independent checks on real documents live there).
REQUIRE_DATA = os.environ.get("DELINK_REQUIRE_DATA", "") not in ("", "0")


def shared_path(*parts: str) -> Path:
    """Path under ../shared/data, skipping the calling test when it is absent (failing it under DELINK_REQUIRE_DATA=1)."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        reason = f"shared data not available: {path} (tests read ../shared/data beside the checkout)"
        if REQUIRE_DATA:
            pytest.fail(f"{reason}; DELINK_REQUIRE_DATA=1 requires it", pytrace=False)
        pytest.skip(reason)
    return path


@pytest.fixture
def shared_data() -> Path:
    return shared_path()


@dataclass
class Outcome:
    """What one run of the console entry point gave: exit status and both streams."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


@pytest.fixture
def delink(capsys: pytest.CaptureFixture[str]) -> Callable[..., Outcome]:
    """Run the console entry point (`main`) in-process, with its exit status and output."""

    def run(*args: Any) -> Outcome:
        capsys.readouterr()
        try:
            main([str(arg) for arg in args])
            code: Any = 0
        except SystemExit as exit_:
            code = exit_.code
        captured = capsys.readouterr()
        return Outcome(code if isinstance(code, int) else 1, captured.out, captured.err)

    return run


#: A small collection for the command-line tests, and two documents to check against it.
SAMPLE_CORPUS = [
    {"id": "a", "text": "The applicant's farm near the river Mura was sold."},
    {"id": "b", "text": "The applicant's farm was sold in 1994."},
    {"id": "c", "text": "The farm near the river was sold."},
]
SAMPLE_INPUTS = [{"id": 1, "text": "Her farm near the river Mura."}, {"id": 2, "text": "The farm was sold."}]


@pytest.fixture
def index(tmp_path: Path, delink: Callable[..., Outcome]) -> Path:
    """The index of ``SAMPLE_CORPUS`` (written to ``corpus.jsonl``), built by `delink index`."""
    corpus = tmp_path / "corpus.jsonl"
    srsly.write_jsonl(corpus, SAMPLE_CORPUS)
    result = delink("index", corpus, "-o", tmp_path / "index")
    assert result.returncode == 0, result.stderr
    return tmp_path / "index"


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """``SAMPLE_INPUTS`` as ``in.jsonl``."""
    path = tmp_path / "in.jsonl"
    srsly.write_jsonl(path, SAMPLE_INPUTS)
    return path


# The TAB test-bed loader is shared with the benchmarks and lives beside them.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.fixture(autouse=True)
def _no_progress_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off a terminal a long command writes a progress line every 10 s: no stderr check may depend on a command's speed.

    A test of the progress lines sets ``DELINK_PROGRESS`` itself.
    """
    monkeypatch.setenv("DELINK_PROGRESS", "none")
