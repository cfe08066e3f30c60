"""One line on stderr before numba compiles any of the package's kernels.

Every ``@nb.njit(cache=True)`` kernel is loaded from numba's cache when one fits: the
wheel ships the cache its build wrote (``setup.py``), in ``__pycache__`` beside each source
file, and numba keys it by the source's content, the signature and the CPU. Where nothing
fits (another CPU, a read-only install, a changed source, ``NUMBA_CACHE_DIR``), numba
compiles on first use, tens of seconds that would otherwise pass in silence: a listener
on numba's compile event says so before the first compile starts.

Once per cache, not once per command: the first compile for a cache (numba's cache folder
of the package, for this CPU, numba and Python) leaves a marker file there, and a later
process that compiles for the same cache stays silent (the commands after the first
compile what they alone use). Another CPU, numba version or cache folder is another cache;
removing the cache (``__pycache__/*.nb?``) removes the marker (``.nbm``) too.

Every module that defines a kernel imports this module (tests/test_kernel_cache.py checks
it); the listener is process-wide, so it covers every kernel of the package, old or new.
"""
from __future__ import annotations

import hashlib
import sys
import threading
from pathlib import Path
from typing import Any

import numba
from numba.core import event

NOTE = (
    "note: compiling spacy-delink's kernels for this machine's CPU: the first commands take "
    "10 to 60 s longer, then the kernels are cached (said once per cache: docs/install.md)"
)


def _cache_probe() -> None:
    """Never compiled: numba's cache locator for this file names the package's cache folder."""


def note_marker(dispatcher: Any) -> Path:
    """The marker file of the cache a compile of ``dispatcher`` writes to: numba's cache folder
    of the package root, named by the CPU, numba's and Python's versions."""
    probe: Any = numba.njit(cache=True)(_cache_probe)
    folder = Path(probe._cache.cache_path)
    machine = repr((dispatcher.targetctx.codegen().magic_tuple(), numba.__version__, sys.version_info[:2]))
    return folder / f"spacy-delink-compile-note-{hashlib.sha256(machine.encode()).hexdigest()[:16]}.nbm"


class _FirstCompileNote(event.Listener):
    """Prints :data:`NOTE` when the first kernel of this package starts compiling for a cache no process announced."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.announced = False

    def on_start(self, event: Any) -> None:
        dispatcher = event.data["dispatcher"]
        if not getattr(dispatcher.py_func, "__module__", "").startswith("spacy_delink."):
            return
        with self._lock:
            if self.announced:
                return
            self.announced = True
            marker = note_marker(dispatcher)
            if marker.exists():
                return
            try:
                marker.touch()
            except OSError:  # numba caches there, so this is rare; the note then shows each time
                pass
        print(NOTE, file=sys.stderr, flush=True)

    def on_end(self, event: Any) -> None:
        """Nothing: the note is printed before the work, not after."""


LISTENER = _FirstCompileNote()
event.register("numba:compile", LISTENER)
