"""CSV, TSV and Parquet inputs and outputs, read and written by pyarrow (the ``tables`` extra).

A table input is read whole into an Arrow table (a CSV's cells all as text, so ``007`` stays
``007`` and nothing is guessed), its rows handed out as plain values one at a time; a table
output is that same table, its rows and columns untouched, with the command's own columns
added (``with_columns``), written atomically. Only pyarrow parses and writes the formats.
"""
from __future__ import annotations

import datetime
import decimal
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from .errors import InputError
from .extras import require_extra
from .io.files import atomic_write

if TYPE_CHECKING:
    import pyarrow as pa

#: The formats this module reads and writes.
TABLE_FORMATS = ("csv", "tsv", "parquet")
_DELIMITERS = {"csv": ",", "tsv": "\t"}
#: Rows converted to Python values at a time.
_BATCH_ROWS = 1024


def _require(fmt: str) -> None:
    require_extra("tables", f"reading and writing {fmt.upper()}")


def _refuse_repeated_columns(names: Sequence[str], where: str) -> None:
    """A column named twice is refused, as a JSON line with a repeated key is: which one holds the text?"""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InputError(f"{where}: column {name!r} appears twice; rename one of them")
        seen.add(name)


def read_table(data: bytes | Path, fmt: str, where: str, skip_invalid: bool, skipped: list[str]) -> "pa.Table":
    """The whole table of a CSV, TSV or Parquet input (a file or its bytes).

    A CSV/TSV row with the wrong number of fields is refused, or with ``skip_invalid``
    left out and listed in ``skipped``; every cell is read as text. Quoted cells may hold
    newlines; a leading byte-order mark is dropped; compressed files (``.gz``, ``.zst``,
    ``.bz2``) are read by their name.
    """
    _require(fmt)
    import pyarrow as pa
    from pyarrow import parquet

    try:
        if fmt == "parquet":
            table = parquet.read_table(pa.BufferReader(data) if isinstance(data, bytes) else str(data))
        else:
            with pa.BufferReader(data) if isinstance(data, bytes) else pa.input_stream(str(data), compression="detect") as source:
                table = _read_csv(source, _DELIMITERS[fmt], where, skip_invalid, skipped)
    except (pa.ArrowInvalid, OSError) as err:  # pyarrow's messages name the problem, never a row's text (rows go to the handler)
        what = (str(err).splitlines() or [type(err).__name__])[0]
        raise InputError(
            f"{where}: cannot be read as {fmt.upper()} ({what}); check the file (a cut or damaged one: fetch or write it again), "
            f"or pass --format if it is not {fmt.upper()}"
        ) from None
    _refuse_repeated_columns(table.column_names, where)
    return table


def _read_csv(source: Any, delimiter: str, where: str, skip_invalid: bool, skipped: list[str]) -> "pa.Table":
    """Two passes over the bytes: the header's names, then every column as text (no type is guessed)."""
    import pyarrow as pa
    from pyarrow import csv

    data = source.read()
    if not data.strip():
        return pa.table({})
    bad: list[tuple[int, int]] = []

    def invalid_row(row: Any) -> str:  # the row's text is never shown: it is the very data being protected
        bad.append((row.actual_columns, row.expected_columns))
        return "skip"

    parse = csv.ParseOptions(delimiter=delimiter, newlines_in_values=True, invalid_row_handler=invalid_row)
    names = csv.open_csv(pa.BufferReader(data), parse_options=parse).schema.names
    bad.clear()
    _refuse_repeated_columns(names, where)
    convert = csv.ConvertOptions(column_types={name: pa.string() for name in names}, strings_can_be_null=False)
    table = csv.read_csv(pa.BufferReader(data), parse_options=parse, convert_options=convert)
    for number, (got, expected) in enumerate(bad, start=1):
        reason = f"{where}: a row with {got} field(s) where the header has {expected} (malformed row {number})"
        if not skip_invalid:
            raise InputError(f"{reason}; fix the row (a cell holding the delimiter or a newline must be quoted) or pass --skip-invalid")
        skipped.append(reason.removeprefix(f"{where}: "))
    return table


def json_value(value: Any, where: str, column: str) -> Any:
    """A table cell as a JSON value: dates and times as ISO 8601 text, decimals as text, NaN as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, datetime.timedelta)):
        return str(value)
    if isinstance(value, bytes):
        raise InputError(f"{where}: column {column!r} holds bytes, which a JSON output cannot hold; write the output as .parquet")
    if isinstance(value, list):
        return [json_value(item, where, column) for item in value]
    if isinstance(value, dict):
        return {str(key): json_value(item, where, column) for key, item in value.items()}
    return value


def table_rows(table: "pa.Table") -> Iterator[dict[str, Any]]:
    """The rows of ``table`` as dicts of Python values, a batch at a time."""
    for batch in table.to_batches(max_chunksize=_BATCH_ROWS):
        yield from batch.to_pylist()


def _column(values: list[Any]) -> "pa.Array":
    """A column of the command's values: lists and objects as JSON text, the rest as pyarrow types them."""
    import pyarrow as pa

    if any(isinstance(value, (list, dict)) for value in values):
        values = [None if value is None else json.dumps(value, ensure_ascii=False) for value in values]
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed types (ids of text and integers): all as text, JSON for the others
        return pa.array([value if value is None or isinstance(value, str) else json.dumps(value) for value in values])


def records_table(records: list[dict[str, Any]]) -> "pa.Table":
    """A table of JSON records (a JSONL or folder input written as a table): one column per key, in order of appearance."""
    import pyarrow as pa

    names: dict[str, None] = {}
    for record in records:
        names.update(dict.fromkeys(record))
    return pa.table({name: _column([record.get(name) for record in records]) for name in names})


def output_table(
    records: list[dict[str, Any]], input_table: "pa.Table | None" = None, positions: Sequence[int] = (), text_field: str = "text"
) -> "pa.Table":
    """The output records (``InputRow.with_results``) as a table.

    From a table input, its rows at ``positions`` with every column untouched (types
    included), the text column given the records' texts (``protect``) or dropped when they
    hold none (``assess``), and the command's columns added after them; from any other
    input, one column per field of the records.
    """
    import pyarrow as pa

    if input_table is None:
        return records_table(records)
    table = input_table.take(pa.array(list(positions), type=pa.int64()))
    if text_field in table.column_names:
        if any(text_field in record for record in records):
            table = table.set_column(
                table.column_names.index(text_field), text_field, pa.array([record[text_field] for record in records], type=pa.string())
            )
        else:
            table = table.drop_columns([text_field])
    added: dict[str, None] = {}
    for record in records:
        added.update((name, None) for name in record if name not in input_table.column_names)
    for name in added:
        table = table.append_column(name, _column([record.get(name) for record in records]))
    return table


def write_table(table: "pa.Table", path: Path, fmt: str) -> None:
    """Write ``table`` as CSV, TSV or Parquet, atomically (a temporary file renamed into place)."""
    _require(fmt)
    from pyarrow import csv, parquet

    with atomic_write(path, "wb", encoding=None) as handle:
        if fmt == "parquet":
            parquet.write_table(table, handle)
        else:
            csv.write_csv(table, handle, csv.WriteOptions(delimiter=_DELIMITERS[fmt]))
