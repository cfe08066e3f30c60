"""Writing without loss, as a Unix tool writes: output checks, atomic writes and folders, locks, stdio and streams.

Every command checks its output before any work (``check_output_path``), writes it whole or
not at all (``atomic_write``, ``atomic_directory``), keeps a second run away from it
(``output_lock``) and refuses to write over one of its inputs (``refuse_same_file``).
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import sys
import tempfile
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

from ..errors import InputError
from ..urls import display_name, local_path

#: The path that names stdin as an input and stdout as an output, as Unix tools read it.
STDIO = "-"


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
