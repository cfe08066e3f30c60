"""The corpus index: keyed-hash N-gram document frequencies and posting lists (SPEC §3).

Modules, in the order data flows: ``hashing`` (keyed digests, MAC), ``keys`` (the key
file), ``format`` (the on-disk layout and its manifest), ``builder`` (corpus → arrays)
running the tasks of ``shards`` (partitions → shards, level by level; ``kernels`` and
``codec`` are their compiled inner loops and the Elias–Fano code; ``distributed`` runs
them on Dask), ``commit`` (putting a build in place with its key and id mapping),
``reader`` (lookups). docs/index.md describes the format, what an index reveals and how
keys are handled; docs/scale.md the sharded build, Dask and the figures.
"""
from __future__ import annotations

import threading
from pathlib import Path

from .builder import BuildSummary, CorpusFiles, IndexBuilder
from .keys import KEY_ENV, STRICT_PERMISSIONS_ENV, KeyPermissionWarning, default_key_path, resolve_key_path
from .reader import CorpusIndex, LargeKWarning, Level

_OPEN: dict[tuple[str, str, bool], CorpusIndex] = {}
_OPEN_LOCK = threading.Lock()


def open_index(path: str | Path, key_file: str | Path | None = None, verify: bool = True) -> CorpusIndex:
    """Open an index once per process, so components in one pipeline share it."""
    cache_key = (str(Path(path).resolve()), str(resolve_key_path(path, key_file).resolve()), verify)
    with _OPEN_LOCK:
        index = _OPEN.get(cache_key)
        if index is None:
            index = _OPEN[cache_key] = CorpusIndex(path, key_file=key_file, verify=verify)
        return index


__all__ = [
    "BuildSummary",
    "CorpusFiles",
    "CorpusIndex",
    "IndexBuilder",
    "KEY_ENV",
    "KeyPermissionWarning",
    "LargeKWarning",
    "Level",
    "STRICT_PERMISSIONS_ENV",
    "default_key_path",
    "open_index",
    "resolve_key_path",
]
