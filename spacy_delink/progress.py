"""Progress of the long commands on stderr, one way for all of them (docs/cli.md, "Streams").

On a terminal: a bar, with a total whenever the work is countable. Elsewhere (a log file,
a pipe, CI): a plain line every ``LOG_SECONDS``, never the carriage returns a bar redraws
with. ``$DELINK_PROGRESS`` chooses otherwise: ``none`` shows nothing, a number of seconds
gives a line that often (also on a terminal). Results never go here: stdout carries data
only, and only when asked (``-o -``).
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Iterable, Iterator, Optional, TypeVar

from .errors import InputError
from .io.files import is_stdio
from .io.streams import GZIP_ERRORS
from .urls import is_url

#: The environment variable that chooses how progress is shown.
PROGRESS_ENV = "DELINK_PROGRESS"
#: Seconds between two progress lines when stderr is not a terminal.
LOG_SECONDS = 10.0
_CHUNK = 1 << 20

T = TypeVar("T")


def _line_seconds(stream: IO[str]) -> Optional[float]:
    """Seconds between progress lines; None for a redrawn bar; ``inf`` for nothing at all."""
    setting = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if setting == "none":
        return float("inf")
    if setting in ("", "auto"):
        return None if stream.isatty() else LOG_SECONDS
    try:
        seconds = float(setting)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise InputError(f"${PROGRESS_ENV}={setting!r}: expected none, auto or a number of seconds between progress lines; fix or unset it")
    return seconds


class Progress:
    """Counts done work and shows it on stderr as ``$DELINK_PROGRESS`` says (a bar, lines or nothing)."""

    def __init__(self, desc: str, unit: str, total: Optional[int] = None, enabled: bool = True) -> None:
        self.desc = desc
        self.unit = unit
        self.total = total
        self.done = 0
        self._stream = sys.stderr
        seconds = _line_seconds(self._stream) if enabled else float("inf")
        self._started = self._last = time.monotonic()
        self._bar: Any = None
        if seconds is None:
            from tqdm import tqdm

            self._bar = tqdm(desc=desc, unit=unit, total=total, file=self._stream, leave=False, dynamic_ncols=True)
        self._seconds = float("inf") if seconds is None else seconds

    def update(self, count: int = 1) -> None:
        self.done += count
        if self._bar is not None:
            self._bar.update(count)
            return
        now = time.monotonic()
        if now - self._last >= self._seconds:
            self._last = now
            self._stream.write(self._line(now) + "\n")
            self._stream.flush()

    def _line(self, now: float) -> str:
        if self.total:
            done = f"{self.done:,}/{self.total:,} {self.unit} ({100 * self.done / self.total:.0f}%)"
        else:
            done = f"{self.done:,} {self.unit}"
        return f"{self.desc}: {done}, {now - self._started:.0f} s"

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()


def track(items: Iterable[T], desc: str, unit: str, total: Optional[int] = None, enabled: bool = True) -> Iterator[T]:
    """``items``, counted on a :class:`Progress` as they are consumed (the total from ``len`` when it has one)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with Progress(desc, unit, total, enabled) as progress:
        for item in items:
            yield item
            progress.update()


def count_lines(sources: Iterable[str | Path], suffixes: tuple[str, ...] = (".jsonl", ".jsonl.gz")) -> Optional[int]:
    """The lines of local (gzipped) JSONL files, a cheap total for a bar: one pass in large chunks.

    None when a source is anything else (stdin, a URL, a folder, a DocBin), whose count
    would cost a second read of the data. Blank lines count too, so the total may run
    a little over the documents.
    """
    total = 0
    for source in sources:
        if is_stdio(source) or is_url(source) or not str(source).endswith(suffixes) or not Path(source).is_file():
            return None
        try:
            total += _lines_in(Path(source))
        except (OSError, *GZIP_ERRORS):  # unreadable or damaged: no total; the reader reports it with its line
            return None
    return total


def _lines_in(path: Path) -> int:
    if path.name.endswith(".gz"):
        from isal import igzip

        handle: IO[bytes] = igzip.open(path, "rb")
    else:
        handle = open(path, "rb")
    lines, last = 0, b"\n"
    with handle:
        while chunk := handle.read(_CHUNK):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return lines + (last != b"\n")
