"""Where spacy-delink keeps what it can compute again: derived tables and the LLM's answers.

One folder per user, as platformdirs places it: ``$XDG_CACHE_HOME/spacy-delink`` on Linux
(``~/.cache/spacy-delink`` when that is unset or empty), the platform's own cache folder
elsewhere. Read at each call, so a changed ``$XDG_CACHE_HOME`` is seen.
"""
from __future__ import annotations

from pathlib import Path

from platformdirs import user_cache_dir


def cache_dir(*parts: str) -> Path:
    """The cache folder, or ``parts`` below it (not created: the writer does that)."""
    return Path(user_cache_dir("spacy-delink", appauthor=False)).joinpath(*parts)
