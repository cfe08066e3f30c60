"""Loss-free file I/O shared by every command: atomic writes, output checks, locks, JSONL reading.

Inputs may also be URLs (``urls.py``): the readers below take either.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import tempfile
import zlib
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, cast

import orjson
from isal import igzip, isal_zlib

from .errors import InputError
from .urls import display_name, is_url, local_path, open_url

#: A JSON ``\\uXXXX`` escape of a UTF-16 surrogate: the only way a JSON line can hold one.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_BOM = "\ufeff"
#: What damaged or truncated gzip data raises while it is read (ISA-L's and the standard module's decompressors).
_GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error, cast("type[Exception]", isal_zlib.error))  # its stub calls it an instance


def _umask() -> int:
    """The process umask (reading it means setting it, so it is restored at once)."""
    current = os.umask(0)
    os.umask(current)
    return current


def fsync_dir(path: str | Path) -> None:
    """Flush a directory's entries, so a rename in it survives a power loss in the order made."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_output_path(path: str | Path, option: str = "--output", directory: bool = False) -> None:
    """Refuse, before any work, an output that cannot be written where it goes.

    A file output must not be a directory; either kind needs a place where files can be
    created. That is probed by creating (and removing) a file in the nearest existing
    folder, so read-only mounts and permissions are caught whoever runs the command.
    """
    path = Path(path)
    if not directory and path.is_dir():
        raise InputError(f"{option} {path} is a directory; give the path of a file to write")
    if directory and path.exists() and not path.is_dir():
        raise InputError(f"{option} {path} is a file; give the path of a directory to create")
    folder = _nearest_existing(path.parent)
    if not folder.is_dir():
        raise InputError(f"{option} {path}: {folder} is not a directory; choose another path")
    try:
        with tempfile.TemporaryFile(dir=folder):  # unnamed (O_TMPFILE) where supported: a kill leaves nothing
            pass
    except OSError as err:
        raise InputError(f"{option} {path}: cannot create files in {folder} ({err.strerror}); choose a writable location") from None


@contextmanager
def atomic_write(
    path: str | Path, mode: str = "w", encoding: str | None = "utf-8", private: bool = False
) -> Iterator[IO[Any]]:
    """Write to a temporary file beside ``path`` and rename it into place on success.

    A crash or exception leaves the previous file (or nothing) rather than a half-written
    one. The temporary file is created by ``mkstemp`` (``O_CREAT | O_EXCL | O_NOFOLLOW``,
    mode 0600, a random name), so a planted file or symlink is never written through;
    ``private`` keeps the final file owner-only (secrets), else it gets the umask's mode.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"cannot write {path}: it is a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise InputError(f"cannot write {path}: {err.strerror} ({err.filename}); choose a writable location") from None
    if not private:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would hide outputs from the user's group
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
        fsync_dir(path.parent)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def remove_stale_temporaries(path: str | Path) -> None:
    """Remove what killed ``atomic_write``s of ``path`` left (their random ``mkstemp`` names).

    Only safe while holding a lock that keeps every other writer of ``path`` away.
    """
    path = Path(path)
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[a-z0-9_]{{8}}\.tmp")
    if path.parent.is_dir():
        for leftover in path.parent.iterdir():
            if pattern.fullmatch(leftover.name) and leftover.is_file():
                leftover.unlink()


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


@contextmanager
def file_lock(path: str | Path, wait: bool, busy_message: str) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if needed, removed on release), on every OS.

    Without ``wait``, a lock held by another process (or another holder in this one) raises
    ``InputError(busy_message)``. ``filelock`` takes an ``flock`` on POSIX and a ``LockFileEx``
    lock on Windows, opens without following a symlink, and retries when the inode it locked
    was unlinked meanwhile: the file is removed while still held, so a waiter that then wins
    the stale inode locks the path afresh and two holders never overlap. It is imported here,
    when a lock is taken, not by every command that imports this module.
    """
    from filelock import FileLock, Timeout

    path = Path(path)
    lock = FileLock(path, mode=0o600, blocking=wait)
    try:
        lock.acquire()
    except Timeout:
        raise InputError(busy_message) from None
    try:
        yield
    finally:
        with suppress(OSError):  # Windows cannot remove an open file; filelock removes it there on release
            path.unlink()
        lock.release()


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
    """Refuse an output that is one of the inputs: writing it would destroy what is being read.

    An input URL counts where it names a local file (``file://``); other URLs cannot be the output.
    """
    for source in inputs:
        path = local_path(source)
        if path is not None and same_file(path, output):
            raise InputError(f"{option} {output} is the input {display_name(source)}; write the output to another path")


def open_binary(path: str | Path) -> IO[bytes]:
    """Open a plain or gzip-compressed file (by its name, ``.gz``), or URL, for reading bytes."""
    if is_url(path):
        return open_url(path)
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.suffix == ".gz":
        # ISA-L's gzip: the same bytes as the standard module, ~3x faster (read_jsonl words its errors alike)
        return igzip.open(path, "rb")
    return open(path, "rb")


@dataclass
class JsonlStats:
    """Counts from one pass over a JSONL file (the number of skipped invalid lines, for reports)."""

    lines: int = 0
    records: int = 0
    skipped: list[int] = field(default_factory=list)


def _parse_json_line(raw: bytes, line: str) -> dict[str, Any]:
    """One JSON object; integers of any size are kept exact and lone surrogates refused.

    The standard library parser, not srsly's ujson: ujson refuses integers beyond 64 bits
    and silently reads some (e.g. -2**64) as 0, and it is no faster on long text lines.
    A lone surrogate (``"\\ud800"``) parses but is not Unicode: no output could encode
    it, so the line is invalid.
    """
    record = json.loads(line)
    if not isinstance(record, dict):
        raise ValueError("expected a JSON object")
    if _SURROGATE_ESCAPE.search(raw):
        try:
            json.dumps(record, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as err:
            bad = err.object[err.start : err.end].encode("unicode_escape").decode("ascii")
            raise ValueError(f"it holds a lone UTF-16 surrogate {bad}, which is not a character") from None
    return record


#: Value types for which orjson reads a line exactly as ``_parse_json_line`` does (a float may
#: be an integer beyond 64 bits that orjson rounded; a list or object may hold one).
_EXACT_TYPES = frozenset((str, int, bool, type(None)))


def _fast_record(raw: bytes) -> dict[str, Any] | None:
    """The object on ``raw`` when orjson reads it exactly as ``_parse_json_line`` would, else None.

    orjson refuses what the exact path refuses or reports itself (invalid UTF-8, a lone
    surrogate, a byte-order mark, blank lines), and reads a JSON object with flat string,
    integer, boolean or null values to the same dict; it is ~2x faster than decoding the line
    and ``json.loads``. Anything else (None) takes the exact path, errors and all.
    """
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(record) is not dict or not _EXACT_TYPES.issuperset(map(type, record.values())):
        return None
    return record


@contextmanager
def _readable_gzip(where: str, stats: JsonlStats) -> Iterator[None]:
    """Damaged gzip data as one line naming the file (each decompressor raises its own exceptions)."""
    try:
        yield
    except _GZIP_ERRORS as err:
        raise InputError(
            f"{where}: damaged or truncated gzip data after line {stats.lines} ({err}); fetch or compress the file again"
        ) from None


def read_jsonl(
    path: str | Path, skip_invalid: bool = False, stats: JsonlStats | None = None
) -> Iterator[dict[str, Any]]:
    """Stream JSON objects from a (gzipped) JSONL file or URL, naming file and line on any error.

    Blank lines are ignored and a UTF-8 byte-order mark at the start of the file is
    dropped. With ``skip_invalid`` a malformed line is counted in ``stats.skipped``
    instead of stopping the run.
    """
    stats = stats if stats is not None else JsonlStats()
    where = display_name(path)
    with open_binary(path if is_url(path) else Path(path)) as handle, _readable_gzip(where, stats):
        for line_no, raw in enumerate(handle, start=1):
            stats.lines = line_no
            fast = _fast_record(raw)
            if fast is not None:
                stats.records += 1
                yield fast
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise InputError(
                    f"{where}:{line_no}: not valid UTF-8 ({err.reason} at byte {err.start} of the line); "
                    "re-encode the file as UTF-8"
                ) from None
            if line_no == 1 and line.startswith(_BOM):
                line = line[1:]
            if not line.strip():
                continue
            try:
                record = _parse_json_line(raw, line)
            except ValueError as err:
                if skip_invalid:
                    stats.skipped.append(line_no)
                    continue
                raise InputError(
                    f"{where}:{line_no}: invalid JSON line ({err}); fix it or pass --skip-invalid"
                ) from None
            stats.records += 1
            yield record


def dumps_jsonl_line(record: dict[str, Any]) -> str:
    """One JSONL line (compact, UTF-8 kept readable)."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
