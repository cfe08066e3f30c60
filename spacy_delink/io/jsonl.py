"""JSONL: every line one JSON object, read exactly (big integers, lone surrogates, repeated keys) and fast where orjson reads alike.

Inputs may also be URLs (``urls.py``) or stdin; gzip or zstd files are read as they stream
(``streams``). Every error names the file and the line.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import orjson

from ..errors import DelinkError, InputError
from ..urls import display_name, is_url
from .files import is_stdio
from .streams import GZIP_ERRORS, JsonlSource, StdinCopy, gzip_members_end, open_binary

#: A JSON ``\\uXXXX`` escape of a UTF-16 surrogate: the only way a JSON line can hold one.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_BOM = "\ufeff"


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
