"""CI's DELINK_REQUIRE_* variables turn a missing ../shared/data, oracle engine or model into a failure, never a silent skip."""
from __future__ import annotations

import pytest

import conftest


def test_missing_data_skips_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DELINK_REQUIRE_DATA", raising=False)
    with pytest.raises(pytest.skip.Exception, match="shared data not available"):
        conftest.shared_path("no-such-folder-for-this-test")


def test_missing_data_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DELINK_REQUIRE_DATA", "1")
    with pytest.raises(pytest.fail.Exception, match="DELINK_REQUIRE_DATA=1 requires it"):
        conftest.shared_path("no-such-folder-for-this-test")


@pytest.mark.parametrize("setting", ["", "0"])
def test_a_missing_oracle_engine_skips_by_default(monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setenv("DELINK_REQUIRE_ORACLE", setting)
    with pytest.raises(pytest.skip.Exception, match="no_such_module_for_this_test is not importable"):
        conftest.require_module("no_such_module_for_this_test", "the test extra installs it")


def test_a_missing_oracle_engine_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DELINK_REQUIRE_ORACLE", "1")
    with pytest.raises(pytest.fail.Exception, match="DELINK_REQUIRE_ORACLE=1 requires it"):
        conftest.require_module("no_such_module_for_this_test", "the test extra installs it")
    assert conftest.require_module("json", "the standard library").__name__ == "json"
