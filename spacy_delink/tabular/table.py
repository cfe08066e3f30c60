"""Column-oriented tables from CSV files, lists of dicts, pandas or pyarrow, without hard dependencies.

Every entry point of :mod:`spacy_delink.tabular` accepts any of these sources, so the
measure and the anonymizer share one loader and one set of error messages.
"""
from __future__ import annotations

import csv
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from ..errors import InputError
from ..io.files import atomic_write

# A CSV needs at most this much text for the delimiter sniffer to decide.
_SNIFF_BYTES = 65536
_DELIMITERS = ",;\t|"

TableSource = Union[str, Path, "Table", Sequence[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Table:
    """Named columns of equal length; ``source`` names the table in error messages."""

    columns: dict[str, list[Hashable]]
    n_rows: int
    source: str

    def column(self, name: str) -> list[Hashable]:
        """One column, or an InputError naming the table and the columns it does have."""
        try:
            return self.columns[name]
        except KeyError:
            available = ", ".join(self.columns) or "none"
            raise InputError(
                f"{self.source}: no column {name!r} (columns: {available}); check the column names"
            ) from None

    def require(self, names: Iterable[str]) -> None:
        """Fail early, naming the first missing column."""
        for name in names:
            self.column(name)

    def take(self, order: Sequence[int]) -> "Table":
        """The rows in ``order`` (used to align two tables by an id column)."""
        return Table(
            {name: [values[i] for i in order] for name, values in self.columns.items()},
            len(order),
            self.source,
        )


def as_number(value: object) -> float | None:
    """A cell as the number it spells, or None (not a number, or NaN), so numeric cells compare as numbers."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _read_csv(path: Path) -> Table:
    """Read a CSV with a header row; the delimiter (, ; tab |) is detected from the first 64 KiB."""
    if not path.is_file():
        raise InputError(f"{path}: no such file; check the path")
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            sample = handle.read(_SNIFF_BYTES)
            try:
                dialect: Any = csv.Sniffer().sniff(sample, delimiters=_DELIMITERS)
            except csv.Error:
                dialect = csv.excel  # one column, or nothing to tell delimiters apart
            handle.seek(0)
            reader = csv.reader(handle, dialect)
            header = next(reader, None)
            if not header:
                raise InputError(f"{path}: empty file; a CSV table needs a header row")
            if len(set(header)) != len(header):
                duplicates = sorted({name for name in header if header.count(name) > 1})
                raise InputError(f"{path}:1: duplicate column names {duplicates}; rename them")
            columns: list[list[Hashable]] = [[] for _ in header]
            for row in reader:
                if not row:
                    continue
                if len(row) != len(header):
                    raise InputError(
                        f"{path}:{reader.line_num}: {len(row)} fields where the header has "
                        f"{len(header)}; fix the row or quote fields that contain the delimiter"
                    )
                for values, cell in zip(columns, row):
                    values.append(cell if cell != "" else None)
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not valid UTF-8 ({err.reason}); re-encode the file as UTF-8") from None
    n_rows = len(columns[0])
    return Table(dict(zip(header, columns)), n_rows, str(path))


def _from_records(records: Sequence[Mapping[str, Any]], name: str) -> Table:
    """Columns from a list of dicts; a key absent from a record is a missing value."""
    names: dict[str, None] = {}
    for position, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise InputError(f"{name}: row {position} is a {type(record).__name__}, not a dict")
        names.update(dict.fromkeys(record))
    columns = {column: [record.get(column) for record in records] for column in names}
    return Table(columns, len(records), name)


def _from_columns(columns: Mapping[str, Sequence[Any]], name: str) -> Table:
    lengths = {column: len(values) for column, values in columns.items()}
    if len(set(lengths.values())) > 1:
        raise InputError(f"{name}: columns have different lengths {lengths}")
    n_rows = next(iter(lengths.values()), 0)
    return Table({column: list(values) for column, values in columns.items()}, n_rows, name)


def load_table(source: TableSource, name: str = "table") -> Table:
    """Load a CSV path, a list of dicts, a pandas DataFrame or a pyarrow Table as a :class:`Table`.

    Empty CSV cells, ``None`` and NaN are all missing values. pandas and pyarrow are
    recognised by duck typing, so neither has to be installed.
    """
    if isinstance(source, Table):
        return source
    if isinstance(source, (str, Path)):
        return _read_csv(Path(source))
    if hasattr(source, "to_pydict"):  # pyarrow.Table / RecordBatch
        return _from_columns(source.to_pydict(), f"{name} (pyarrow)")
    if hasattr(source, "to_dict") and hasattr(source, "columns"):  # pandas.DataFrame
        return _from_columns(source.to_dict(orient="list"), f"{name} (pandas)")
    if isinstance(source, Sequence):
        return _from_records(source, name)  # type: ignore[arg-type]  # str was handled above
    raise InputError(
        f"{name}: unsupported table type {type(source).__name__}; "
        "pass a CSV path, a list of dicts, a pandas DataFrame or a pyarrow Table"
    )


def write_csv(table: Table, path: str | Path, delimiter: str = ",") -> None:
    """Write ``table`` atomically as CSV (missing values as empty cells)."""
    with atomic_write(path) as handle:
        writer = csv.writer(handle, delimiter=delimiter, lineterminator="\n")
        writer.writerow(table.columns)
        columns = list(table.columns.values())
        for row in range(table.n_rows):
            writer.writerow(["" if values[row] is None else values[row] for values in columns])
