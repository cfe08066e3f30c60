"""Loss-free file I/O shared by every command: atomic writes and line-precise JSONL reading."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

import srsly

from .errors import InputError


def _umask() -> int:
    """The process umask (reading it means setting it, so it is restored at once)."""
    current = os.umask(0)
    os.umask(current)
    return current


@contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Write to a temporary file beside ``path`` and rename it into place on success.

    A crash or exception leaves the previous file (or nothing) rather than a half-written one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would hide outputs from the user's group
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


@contextmanager
def atomic_directory(path: str | Path, overwrite: bool = False) -> Iterator[Path]:
    """Build a directory under a temporary name and rename it to ``path`` only when complete."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise InputError(f"{path} already exists; choose another output path or pass --overwrite")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent))
    tmp.chmod(0o777 & ~_umask())
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file: equal resolved paths, or (both existing) one inode."""
    a, b = Path(a), Path(b)
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def refuse_same_file(inputs: Iterable[str | Path], output: str | Path, option: str = "--output") -> None:
    """Refuse an output that is one of the inputs: writing it would destroy what is being read."""
    for source in inputs:
        if same_file(source, output):
            raise InputError(f"{option} {output} is the input {source}; write the output to another path")


def open_binary(path: str | Path) -> IO[bytes]:
    """Open a plain or gzip-compressed file for reading bytes (lines decode one by one)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]  # GzipFile is a binary IO
    return open(path, "rb")


@dataclass
class JsonlStats:
    """Counts from one pass over a JSONL file (the number of skipped invalid lines, for reports)."""

    lines: int = 0
    records: int = 0
    skipped: list[int] = field(default_factory=list)


def read_jsonl(
    path: str | Path, skip_invalid: bool = False, stats: JsonlStats | None = None
) -> Iterator[dict[str, Any]]:
    """Stream JSON objects from a (gzipped) JSONL file, naming file and line on any error.

    Blank lines are ignored. With ``skip_invalid`` a malformed line is counted in
    ``stats.skipped`` instead of stopping the run.
    """
    stats = stats if stats is not None else JsonlStats()
    path = Path(path)
    with open_binary(path) as handle:
        for line_no, raw in enumerate(handle, start=1):
            stats.lines = line_no
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise InputError(
                    f"{path}:{line_no}: not valid UTF-8 ({err.reason} at byte {err.start} of the line); "
                    "re-encode the file as UTF-8"
                ) from None
            if not line.strip():
                continue
            try:
                record = srsly.json_loads(line)
                if not isinstance(record, dict):
                    raise ValueError("expected a JSON object")
            except ValueError as err:
                if skip_invalid:
                    stats.skipped.append(line_no)
                    continue
                raise InputError(
                    f"{path}:{line_no}: invalid JSON line ({err}); fix it or pass --skip-invalid"
                ) from None
            stats.records += 1
            yield record


def dumps_jsonl_line(record: dict[str, Any]) -> str:
    """One JSONL line (compact, UTF-8 kept readable)."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
