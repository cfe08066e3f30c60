"""The corpus index: keyed-hash N-gram document frequencies and posting lists (SPEC §3)."""
from __future__ import annotations

import threading
from pathlib import Path

from .builder import BuildSummary, IndexBuilder
from .hashing import KEY_ENV, default_key_path
from .reader import CorpusIndex, Level

_OPEN: dict[tuple[str, str, bool], CorpusIndex] = {}
_OPEN_LOCK = threading.Lock()


def open_index(path: str | Path, key_file: str | Path | None = None, verify: bool = True) -> CorpusIndex:
    """Open an index once per process, so components in one pipeline share it."""
    from .hashing import resolve_key_path

    cache_key = (str(Path(path).resolve()), str(resolve_key_path(path, key_file).resolve()), verify)
    with _OPEN_LOCK:
        index = _OPEN.get(cache_key)
        if index is None:
            index = _OPEN[cache_key] = CorpusIndex(path, key_file=key_file, verify=verify)
        return index


__all__ = ["BuildSummary", "CorpusIndex", "IndexBuilder", "KEY_ENV", "Level", "default_key_path", "open_index"]
