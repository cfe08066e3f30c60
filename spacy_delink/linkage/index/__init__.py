"""The corpus index: keyed-hash N-gram document frequencies and posting lists (SPEC §3).

Modules, in the order data flows: ``hashing`` (keyed digests, MAC), ``keys`` (the key
file), ``format`` (the on-disk layout and its manifest), ``builder`` (corpus → arrays)
running the tasks of ``partitions`` (corpus → token digests) and ``shards`` (pairs →
shards, level by level) over a ``workstore`` with a ``runners`` runner (``distributed`` runs
them on Dask); their compiled inner loops are ``vocabulary``, ``blake2b``, ``ngram_keys``
and ``grouping``, and what they write is coded by ``eliasfano``, ``packing`` and
``lookup`` (the posting classes, and the searches over a level's shards); ``commit`` (putting a build in place with its key and id mapping),
``levels`` and ``reader`` (lookups: a level's shards; the opened index), ``forward`` and ``update`` (the forward store, ``delink index
--update`` and ``delink compact``). docs/index.md describes the format, what an index reveals and how
keys are handled; docs/scale.md the sharded build, Dask and the figures.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

from .builder import BuildSummary, CorpusFiles, IndexBuilder
from .format import MANIFEST
from .keys import KEY_ENV, default_key_path, resolve_key_path
from .reader import CorpusIndex, LargeKWarning, Level
from .store import STRICT_PERMISSIONS_ENV, KeyPermissionWarning

_OPEN: dict[tuple[str, str, bool], tuple[tuple[int, int, int], CorpusIndex]] = {}
#: The resolved cache key of each way of naming an index (``open_index`` runs once per document).
_RESOLVED: dict[tuple[str, str, str | None, str | None, bool], tuple[str, str, bool]] = {}
_OPEN_LOCK = threading.Lock()


def _manifest_stamp(path: str | Path) -> tuple[int, int, int]:
    """Which manifest is in place: an update or a compaction replaces the file (a new inode)."""
    try:
        stat = (Path(path) / MANIFEST).stat()
    except OSError:
        return (-1, -1, -1)  # opening reports what is missing
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def open_index(path: str | Path, key_file: str | Path | None = None, verify: bool = True) -> CorpusIndex:
    """Open an index once per process, so components in one pipeline (or the tasks of one
    worker) share it; reopened when an update or compaction has replaced its manifest since."""
    named = (os.getcwd(), str(path), None if key_file is None else str(key_file), os.environ.get(KEY_ENV), verify)
    cache_key = _RESOLVED.get(named)
    if cache_key is None:
        cache_key = _RESOLVED.setdefault(named, (str(Path(path).resolve()), str(resolve_key_path(path, key_file).resolve()), verify))
    stamp = _manifest_stamp(path)
    with _OPEN_LOCK:
        cached = _OPEN.get(cache_key)
        if cached is None or cached[0] != stamp:
            cached = _OPEN[cache_key] = (stamp, CorpusIndex(path, key_file=key_file, verify=verify))
        return cached[1]


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
