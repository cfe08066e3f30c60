"""Loss-free file I/O shared by every command: atomic writes, output checks, locks, JSONL reading.

Inputs may also be URLs (``urls.py``): the readers below take either.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import zlib
from collections import Counter
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
import io
from io import BytesIO
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, cast

import orjson
import zstandard
from isal import igzip, isal_zlib

from .errors import DelinkError, InputError
from .urls import display_name, is_url, local_path, open_url

#: The path that names stdin as an input and stdout as an output, as Unix tools read it.
STDIO = "-"
#: A JSON ``\\uXXXX`` escape of a UTF-16 surrogate: the only way a JSON line can hold one.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_BOM = "\ufeff"
#: The first bytes of every gzip member (RFC 1952).
_GZIP_MAGIC = b"\x1f\x8b"
#: What damaged or truncated gzip data raises while it is read (ISA-L's and the standard module's decompressors).
GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error, cast("type[Exception]", isal_zlib.error))  # its stub calls it an instance


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


def is_stdio(path: str | Path) -> bool:
    """Whether a path is ``-``: stdin as an input, stdout as an output (where a command says it reads or writes them)."""
    return str(path) == STDIO


def is_stream(path: str | Path) -> bool:
    """Whether an existing output (symlinks followed) is a FIFO or a character device: written to, never replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def _write_target(path: Path, option: str = "--output") -> Path:
    """The file an atomic write of ``path`` replaces: ``path``, or the final target of a symlink.

    Replacing the symlink itself would cut it from what it names (``/dev/stdout`` made a
    regular file); a chain whose links loop is refused.
    """
    if not path.is_symlink():
        return path
    try:
        return Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:  # a dangling link: its target is created
        return Path(os.path.realpath(path))
    except OSError as err:
        raise InputError(f"{option} {path}: a symlink that cannot be followed ({err.strerror}); give the path of a file") from None


def check_output_path(path: str | Path, option: str = "--output", directory: bool = False) -> None:
    """Refuse, before any work, an output that cannot be written where it goes.

    ``-`` (stdout) and streams (a FIFO, a character device) need nothing; a folder output
    can be neither, nor a symlink (it would be replaced). A file output must not be a
    directory, may be a symlink (written through to its target), and needs a place where
    files can be created. That is probed by creating (and removing) an unnamed file in the
    nearest existing folder, so read-only mounts and permissions are caught whoever runs
    the command.
    """
    path = Path(path)
    if directory and (is_stdio(path) or is_stream(path)):
        raise InputError(f"{option} {path}: this output is a folder, which a stream cannot be; give the path of a folder")
    if is_stdio(path):
        return
    if is_stream(path):
        if not os.access(path, os.W_OK):
            raise InputError(f"{option} {path}: not writable by this user; choose another output")
        return
    if directory and path.is_symlink():
        raise InputError(f"{option} {path} is a symlink, which a new folder would replace; give the folder's own path ({path.resolve()})")
    target = _write_target(path, option)
    if not directory and target.is_dir():
        raise InputError(f"{option} {path} is a directory; give the path of a file to write")
    if directory and target.exists() and not target.is_dir():
        raise InputError(f"{option} {path} is a file; give the path of a directory to create")
    if not directory and target.exists() and not target.is_file():
        raise InputError(f"{option} {path} is neither a file, a FIFO nor a character device; choose another output")
    if target is not path and not target.parent.is_dir():
        raise InputError(f"{option} {path}: the folder of its symlink's target {target} does not exist; create it or give another path")
    folder = _nearest_existing(target.parent)
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
    As a Unix tool writes an output, a ``path`` that is a symlink is written through (the
    temporary file goes beside its target and replaces the target; the link stays) and a
    FIFO or character device is written to as it is (streamed, nothing renamed).
    """
    path = Path(path)
    if is_stream(path):
        with open(path, mode, encoding=None if "b" in mode else encoding) as stream:
            yield stream
        return
    target = _write_target(path)
    if target.is_dir():
        raise InputError(f"cannot write {path}: it is a directory")
    try:
        if target is path:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as err:
        raise InputError(f"cannot write {path}: {err.strerror} ({err.filename}); choose a writable location") from None
    if not private:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would hide outputs from the user's group
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
        fsync_dir(target.parent)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


@contextmanager
def write_output(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """A command's output as Unix tools write one: ``-`` streams to stdout, anything else is ``atomic_write``'s."""
    if is_stdio(path):
        stream: IO[Any] = sys.stdout.buffer if "b" in mode else sys.stdout
        yield stream
        stream.flush()
        return
    with atomic_write(path, mode, encoding) as handle:
        yield handle


@contextmanager
def output_lock(path: str | Path, command: str) -> Iterator[None]:
    """Keep a second run away from a file or folder output while this one writes it (one line, exit 1).

    The lock is ``.<name>.lock`` beside the output (its symlink's target), there only while
    the run holds it. Streams (``-``, a FIFO, a device) are not locked: nothing of them is
    replaced, read back or resumed.
    """
    path = Path(path)
    if is_stdio(path) or is_stream(path):
        yield
        return
    target = _write_target(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    busy = f"another {command} is writing {path}; wait for it to finish, or write to another output"
    with file_lock(target.with_name(f".{target.name}.lock"), wait=False, busy_message=busy):
        yield


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
    if is_stdio(output):  # stdout is never an input file
        return
    for source in inputs:
        path = None if is_stdio(source) else local_path(source)
        if path is not None and same_file(path, output):
            raise InputError(f"{option} {output} is the input {display_name(source)}; write the output to another path")


@dataclass(frozen=True)
class StdinCopy:
    """All of stdin, read once, for a command that reads its input twice (``delink protect`` checks
    every line before it writes anything): it is held in memory, never spilled to a file."""

    data: bytes

    @classmethod
    def read(cls) -> "StdinCopy":
        return cls(sys.stdin.buffer.read())

    def __str__(self) -> str:
        return display_name(STDIO)


#: An input the JSONL reader opens: a path, a URL, ``-`` (stdin, streamed) or stdin read into memory.
JsonlSource = str | Path | StdinCopy


def open_binary(path: JsonlSource, decompress: bool = True) -> IO[bytes]:
    """Open a plain or gzip-compressed file (by its name, ``.gz``; ``decompress=False``: its raw
    bytes), a URL or stdin (``-``) for reading bytes."""
    if isinstance(path, StdinCopy):
        return BytesIO(path.data)
    if is_stdio(path):
        return sys.stdin.buffer
    if is_url(path):
        return open_url(path, decompress)
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.suffix == ".gz" and decompress:
        # ISA-L's gzip: the same bytes as the standard module, ~3x faster (read_jsonl words its errors alike)
        return igzip.open(path, "rb")
    if path.suffix == ".zst" and decompress:
        return io.BufferedReader(_ZstdStream(open(path, "rb"), str(path)), 1 << 16)
    return open(path, "rb")


class _ZstdStream(io.RawIOBase):
    """The frames of a zstd file decompressed as they are read; a file that ends inside a frame, or
    damaged data, is one ``InputError`` (a truncated file must never read as a shorter corpus)."""

    def __init__(self, raw: IO[bytes], name: str) -> None:
        self._raw, self._name = raw, name
        self._frame: Any = None
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = self._raw.read(1 << 16)
            if not chunk:
                if self._frame is not None:
                    raise InputError(f"{self._name}: truncated zstd data (the file ends inside a frame); fetch or compress it again")
                return 0
            while chunk:
                self._frame = self._frame or zstandard.ZstdDecompressor().decompressobj()
                try:
                    self._pending += self._frame.decompress(chunk)
                except zstandard.ZstdError as err:
                    raise InputError(f"{self._name}: damaged zstd data ({err}); fetch or compress it again") from None
                chunk = self._frame.unused_data if self._frame.eof else b""
                if self._frame.eof:
                    self._frame = None
        size = min(len(buffer), len(self._pending))
        buffer[:size], self._pending = self._pending[:size], self._pending[size:]
        return size

    def close(self) -> None:
        self._raw.close()
        super().close()


@dataclass
class JsonlStats:
    """Counts from one pass over a JSONL file (the number of skipped invalid lines, for reports)."""

    lines: int = 0
    records: int = 0
    skipped: list[int] = field(default_factory=list)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members as a dict, refusing a key given twice (JSON parsers keep the last
    value and drop the others silently: two "text" fields would index a text nobody saw)."""
    record = dict(pairs)
    if len(record) < len(pairs):
        counts = Counter(key for key, _ in pairs)
        repeated = next(key for key, _ in pairs if counts[key] > 1)
        raise ValueError(f"key {repeated!r} appears twice")
    return record


#: The deepest nesting of arrays and objects a JSON line may have. Python's parser recurses once
#: per level, so a line nested thousands deep would end in a RecursionError (a traceback) at a depth
#: that depends on the stack; a fixed bound refuses it the same way everywhere, and keeps writing
#: such a record back (outputs keep every field) well inside the recursion limit.
MAX_JSON_DEPTH = 512
#: A JSON string (its escapes included), cut out before brackets are counted.
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _nesting_depth(raw: bytes) -> int:
    """How deep a JSON line's arrays and objects nest (brackets inside strings do not count)."""
    structure = _JSON_STRING.sub(b"", raw)
    depth = deepest = 0
    for byte in structure.translate(None, bytes(set(range(256)) - set(b"[]{}"))):
        depth += 1 if byte in b"[{" else -1
        deepest = max(deepest, depth)
    return deepest


def parse_json_line(raw: bytes, line: str) -> dict[str, Any]:
    """One JSON object; integers of any size are kept exact, lone surrogates and repeated keys refused.

    The standard library parser, not srsly's ujson: ujson refuses integers beyond 64 bits
    and silently reads some (e.g. -2**64) as 0, and it is no faster on long text lines.
    A lone surrogate (``"\\ud800"``) parses but is not Unicode: no output could encode
    it, so the line is invalid. A repeated key, in the object or one nested in it, is refused,
    and so is a line nested deeper than the parser's recursion reaches (a ``ValueError``, never
    a ``RecursionError`` that would escape ``--skip-invalid``).
    """
    if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH and _nesting_depth(raw) > MAX_JSON_DEPTH:
        raise ValueError(f"arrays or objects nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        record = json.loads(line, object_pairs_hook=_unique_keys)
    except RecursionError:  # never at MAX_JSON_DEPTH; kept so that no stack could turn a bad line into a traceback
        raise ValueError("arrays or objects nested too deeply to read") from None
    if not isinstance(record, dict):
        raise ValueError("expected a JSON object")
    if _SURROGATE_ESCAPE.search(raw):
        try:
            json.dumps(record, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as err:
            bad = err.object[err.start : err.end].encode("unicode_escape").decode("ascii")
            raise ValueError(f"it holds a lone UTF-16 surrogate {bad}, which is not a character") from None
    return record


#: Value types for which orjson reads a line exactly as ``parse_json_line`` does (a float may
#: be an integer beyond 64 bits that orjson rounded; a list or object may hold one).
_EXACT_TYPES = frozenset((str, int, bool, type(None)))


def _fast_record(raw: bytes) -> dict[str, Any] | None:
    """The object on ``raw`` when orjson reads it exactly as ``parse_json_line`` would, else None.

    orjson refuses what the exact path refuses or reports itself (invalid UTF-8, a lone
    surrogate, a byte-order mark, blank lines), and reads a JSON object with flat string,
    integer, boolean or null values to the same dict; it is ~2x faster than decoding the line
    and ``json.loads``. Anything else (None) takes the exact path, errors and all; so does
    a line that may repeat a key, which orjson would read as its last value (``_no_repeated_key``).
    """
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(record) is not dict or not _EXACT_TYPES.issuperset(map(type, record.values())):
        return None
    return record if _no_repeated_key(raw, record) else None


def _no_repeated_key(raw: bytes, record: dict[str, Any]) -> bool:
    """Whether the flat JSON object on ``raw`` (read as ``record``) gives every key once; False when unsure.

    Every string of a flat object is a key or a string value, so it gives each key once
    exactly when its strings number ``len(record)`` plus the record's string values: a
    repeated key adds strings the dict does not keep (the value kept for it is one of the
    line's). Its strings are half its unescaped quotes: all its quotes less the escaped
    ones (``\\"``), which counts exactly unless an escaped backslash may end a string
    (``\\\\`` in the line: False, the exact parser decides). Byte counts run at memory speed.
    """
    if b"\\\\" in raw:
        return False
    strings = (raw.count(b'"') - raw.count(b'\\"')) // 2
    return strings == len(record) + sum(type(value) is str for value in record.values())


def gzip_members_end(raw: IO[bytes]) -> int | None:
    """Where gzip data stops being gzip members, if it does: the offset of the first byte that
    is neither a member nor zero padding after one (0: no gzip data at all); None when it is
    cut or damaged inside a member instead.

    ISA-L reports bytes after the last member as an early end of the stream, as it reports
    truncation, so a failed read walks the data again to tell them apart. Each member is
    decompressed and its output dropped, 64 KiB of input at a time.
    """
    offset, members, data = 0, 0, b""
    member: Any = None
    while True:
        if not data:
            data = raw.read(1 << 16)
            if not data:
                return None
        if member is None:
            if members:
                padded, data = len(data), data.lstrip(b"\0")
                offset += padded - len(data)
                if not data:
                    continue
            if len(data) < len(_GZIP_MAGIC):
                data += raw.read(len(_GZIP_MAGIC) - len(data))
            if not data.startswith(_GZIP_MAGIC):
                return offset
            member = isal_zlib.decompressobj(wbits=31)  # one gzip member, header and trailer checked
        try:
            member.decompress(data)
        except GZIP_ERRORS:  # damage inside the member
            return None
        if member.eof:
            offset += len(data) - len(member.unused_data)
            data, member, members = member.unused_data, None, members + 1
        else:
            offset, data = offset + len(data), b""


def _gzip_message(source: JsonlSource, where: str, stats: JsonlStats, err: Exception) -> str:
    """The one line for gzip data that failed to decompress: trailing data, no gzip at all, or damage."""
    try:
        if isinstance(source, StdinCopy) or is_stdio(source):
            raise OSError("stdin cannot be read twice")
        with open_binary(source, decompress=False) as raw:
            end = gzip_members_end(raw)
    except (OSError, DelinkError):  # the source is gone, unreachable or a stream now: say what the reader said
        end = None
    if end == 0:
        return f"{where}: is not gzip data, though its name ends in .gz; compress it with gzip, or rename it without .gz"
    if end is not None:
        return (
            f"{where}: has trailing data after the end of the gzip stream, from byte {end:,} of the file on; "
            "cut the file there, or fetch or compress it again"
        )
    return f"{where}: damaged or truncated gzip data after line {stats.lines} ({err}); fetch or compress the file again"


@contextmanager
def _readable_gzip(source: JsonlSource, where: str, stats: JsonlStats) -> Iterator[None]:
    """Gzip data that fails to decompress as one line naming the file (each decompressor raises its own exceptions)."""
    try:
        yield
    except GZIP_ERRORS as err:
        raise InputError(_gzip_message(source, where, stats, err)) from None


def read_jsonl(
    path: JsonlSource, skip_invalid: bool = False, stats: JsonlStats | None = None
) -> Iterator[dict[str, Any]]:
    """Stream JSON objects from a (gzipped) JSONL file, URL or stdin, naming file and line on any error.

    Blank lines are ignored and a UTF-8 byte-order mark at the start of the file is
    dropped. With ``skip_invalid`` a malformed line is counted in ``stats.skipped``
    instead of stopping the run.
    """
    stats = stats if stats is not None else JsonlStats()
    where = display_name(str(path))
    source = path if isinstance(path, StdinCopy) or is_url(path) or is_stdio(path) else Path(path)
    with open_binary(source) as handle, _readable_gzip(source, where, stats):
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
                record = parse_json_line(raw, line)
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
