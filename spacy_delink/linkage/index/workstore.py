"""The named arrays a build's tasks pass to each other, and the durable write of an index file.

The sharded build (``shards.py``) is a sequence of tasks that read and write named arrays,
so that the same tasks run in this process or on Dask workers (``distributed.py``). A
``WorkStore`` keeps those arrays in memory up to a budget and in files beyond it; every
write replaces an array whole, so a task that runs again (Dask's retries) leaves no trace
of its earlier try. ``write_durable`` is the write of a finished index file, fsynced
before the commit renames the build into place.
"""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np


class WorkStore:
    """Named arrays of one build: in memory up to ``memory_bytes``, else files in ``folder``.

    Files are written under a temporary name and renamed, so a re-run task replaces them
    whole. A store that keeps arrays in memory serves threads of one process only; with
    ``memory_bytes=0`` it is plain files and can be sent to Dask workers (which then need
    ``folder`` on a file system they all see).
    """

    def __init__(self, folder: Path, memory_bytes: int = 0) -> None:
        self.folder = Path(folder)
        self.memory_bytes = memory_bytes
        self._memory: dict[str, np.ndarray] = {}
        self._used = 0
        self._lock = threading.Lock()
        self.folder.mkdir(parents=True, exist_ok=True)

    def __getstate__(self) -> dict[str, Any]:
        if self.memory_bytes:
            raise TypeError("a WorkStore that keeps arrays in memory cannot be sent to another process")
        return {"folder": self.folder}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["folder"])  # type: ignore[misc]

    def put(self, name: str, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        with self._lock:
            self._drop_locked(name)
            if self.memory_bytes and self._used + array.nbytes <= self.memory_bytes:
                self._memory[name] = array
                self._used += array.nbytes
                return
        path = self.folder / name
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        with open(tmp, "wb") as handle:
            handle.write(array.data)
        os.replace(tmp, path)

    def get(self, name: str, dtype: "np.typing.DTypeLike") -> np.ndarray:
        with self._lock:
            if name in self._memory:
                return self._memory[name]
        return np.fromfile(self.folder / name, dtype=dtype)

    def _drop_locked(self, name: str) -> None:
        array = self._memory.pop(name, None)
        if array is not None:
            self._used -= array.nbytes

    def drop(self, name: str) -> None:
        with self._lock:
            self._drop_locked(name)
        (self.folder / name).unlink(missing_ok=True)


def write_durable(path: Path, words: np.ndarray) -> str:
    """Write an index file and fsync it (the commit renames the build into place); its SHA-256."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(words.data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return hashlib.sha256(words.data).hexdigest()
