"""One line on stderr before numba compiles any of the package's kernels.

Every ``@nb.njit(cache=True)`` kernel is loaded from numba's cache when one fits: the
wheel ships the cache its build wrote (``setup.py``), in ``__pycache__`` beside each source
file, and numba keys it by the source's content, the signature and the CPU. Where nothing
fits (another CPU, a read-only install, a changed source, ``NUMBA_CACHE_DIR``), numba
compiles on first use, tens of seconds that would otherwise pass in silence: a listener
on numba's compile event says so once per process, before the first compile starts.

Every module that defines a kernel imports this module (tests/test_kernel_cache.py checks
it); the listener is process-wide, so it covers every kernel of the package, old or new.
"""
from __future__ import annotations

import sys
import threading
from typing import Any

from numba.core import event

NOTE = (
    "note: compiling spacy-delink's kernels for this machine's CPU (first run only; "
    "10 to 60 s, then cached: docs/install.md)"
)


class _FirstCompileNote(event.Listener):
    """Prints :data:`NOTE` when the first kernel of this package starts compiling."""

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
        print(NOTE, file=sys.stderr, flush=True)

    def on_end(self, event: Any) -> None:
        """Nothing: the note is printed before the work, not after."""


LISTENER = _FirstCompileNote()
event.register("numba:compile", LISTENER)
