"""The cache folder: one place computes it, and ``$XDG_CACHE_HOME`` moves it on Linux."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from spacy_delink.cachedir import cache_dir


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG_CACHE_HOME is the Linux convention")
def test_xdg_cache_home_is_honoured_and_home_is_the_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "spacy-delink"
    assert cache_dir("llm") == tmp_path / "spacy-delink" / "llm"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "spacy-delink"
