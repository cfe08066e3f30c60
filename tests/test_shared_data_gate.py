"""CI's DELINK_REQUIRE_DATA=1 turns a missing ../shared/data into a failure, never a silent skip."""
from __future__ import annotations

import pytest

import conftest


def test_missing_data_skips_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "REQUIRE_DATA", False)
    with pytest.raises(pytest.skip.Exception, match="shared data not available"):
        conftest.shared_path("no-such-folder-for-this-test")


def test_missing_data_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "REQUIRE_DATA", True)
    with pytest.raises(pytest.fail.Exception, match="DELINK_REQUIRE_DATA=1 requires it"):
        conftest.shared_path("no-such-folder-for-this-test")
