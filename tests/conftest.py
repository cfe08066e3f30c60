"""Shared fixtures: the location of ../shared/data and helpers to skip cleanly without it."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

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


# The TAB test-bed loader is shared with the benchmarks and lives beside them.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
