"""Opening an input for its bytes: a plain, gzip or zstd file, a URL, stdin, or stdin read into memory.

Compressed data is read as it streams, and data that is damaged or ends early is one
``InputError`` (a truncated file must never read as a shorter corpus); ``gzip_members_end``
tells trailing bytes after the last gzip member from damage inside one.
"""
from __future__ import annotations

import gzip
import io
import sys
import zlib
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import IO, Any, cast

import zstandard
from isal import igzip, isal_zlib

from ..errors import InputError
from ..urls import display_name, is_url, open_url
from .files import STDIO, is_stdio

#: The first bytes of every gzip member (RFC 1952).
_GZIP_MAGIC = b"\x1f\x8b"
#: What damaged or truncated gzip data raises while it is read (ISA-L's and the standard module's decompressors).
GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error, cast("type[Exception]", isal_zlib.error))  # its stub calls it an instance


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
