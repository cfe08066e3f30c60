"""Shared fixtures: the location of ../shared/data (skip cleanly without it) and the in-process CLI."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import settings

from spacy_delink.cli import main

# Property tests draw the same examples on every machine and run (no example database, no
# deadline): a verdict must not depend on the machine, its load or an earlier run.
settings.register_profile("delink", derandomize=True, database=None, deadline=None)
settings.load_profile("delink")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_path(*parts: str) -> Path:
    """Path under ../shared/data, skipping the calling test when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not available: {path} (tests read ../shared/data beside the checkout)")
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


# The TAB test-bed loader is shared with the benchmarks and lives beside them.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
