"""Memory per document: the bound on a document's length, and giving freed memory back to the system.

Protecting a document holds its detection (every n-gram's key, support and postings at
every arity, the combinations of its rare phrases) and the detections of its mask passes.
It grows faster than the text: `delink protect` on one line of TAB's de-identified
judgments, against TAB's index, peaked +32 MB above a 2,000-character line at 20,000
characters, +140 MB at 50,000, +353 MB at 100,000 and +1.1 GB at 199,000
(``cli_memory`` of benchmarks/bench_serve.py, docs/serve.md#memory),
so a 10 MB line took `delink protect` past 6 GB. A document longer than
``max_document_chars()`` (200,000 characters, the server's default ``--max-chars``) is
refused before any work with one line that says where and how to go on.

glibc keeps freed memory in its per-thread arenas, so a server's resident size after a
long request stays at its peak for good; ``give_back`` returns it (``malloc_trim``).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from functools import lru_cache
from typing import Any, Optional

from .errors import InputError

MAX_CHARS_ENV = "DELINK_MAX_DOCUMENT_CHARS"
#: Longest document protected: about 1.1 GB of peak memory on TAB-like text (measured, module docstring).
MAX_DOCUMENT_CHARS = 200_000


def max_document_chars() -> int:
    """``$DELINK_MAX_DOCUMENT_CHARS``, else ``MAX_DOCUMENT_CHARS``."""
    given = os.environ.get(MAX_CHARS_ENV, "").strip()
    if not given:
        return MAX_DOCUMENT_CHARS
    if not given.isdigit() or int(given) < 1:
        raise InputError(f"${MAX_CHARS_ENV} must be a positive number of characters, got {given!r}")
    return int(given)


def check_document_size(text: str, where: str) -> None:
    """Refuse a text over ``max_document_chars()`` before any work is done on it."""
    limit = max_document_chars()
    if len(text) > limit:
        raise InputError(
            f"{where}: the text has {len(text):,} characters, over the {limit:,} a document may have (protecting "
            f"200,000 characters took 1.1 GB of memory, and it grows faster than the text); split it into several documents, "
            f"or raise ${MAX_CHARS_ENV} if this machine has the memory"
        )


@lru_cache(maxsize=1)
def _libc() -> Optional[Any]:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None  # glibc's; musl has none
    except OSError:
        return None


def give_back() -> None:
    """Return the memory glibc holds free in its arenas to the system (elsewhere: nothing to do)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
