"""Where and how ``delink protect`` writes: checked before anything is read, appended batch by batch.

The output may be a file (appended to and fsynced batch by batch, so a run resumes it) or,
as for any Unix tool, a stream: ``-`` (stdout), a FIFO or a character device is written to
batch by batch and never replaced, read back or resumed. A CSV, TSV or Parquet output is
journaled as JSONL beside it and written as a table once every document is in.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Optional

from ..corpus.source import InputSource, output_format
from ..errors import InputError
from ..io.files import check_output_path, is_stdio, is_stream, refuse_same_file
from ..io.jsonl import dumps_jsonl_line, parse_json_line
from ..io.streams import StdinCopy
from .resume import InputScan

def check_output(output: Path, input_path: Path | str | StdinCopy) -> None:
    """Refuse an output that cannot be written, before anything is read or created."""
    refuse_same_file([] if isinstance(input_path, StdinCopy) else [input_path], output)
    fmt = output_format(output)
    if fmt != "jsonl" and not resumable(output):
        raise InputError(f"--output {output}: a stream takes JSONL only; give a file named .{fmt}")
    file = resumable(output)  # not stdout, a FIFO or a device, which are written to as they are
    if file and output.is_dir():
        raise InputError(f"--output {output} is a directory; give a file path such as {output / 'protected.jsonl'}")
    check_output_path(output)
    if file and output.is_file() and not os.access(output, os.R_OK | os.W_OK):
        raise InputError(f"--output {output}: this user cannot read and append to it (a resumed run does both); choose another output")


def resumable(output: Path) -> bool:
    """Whether a run can resume ``output``: a file (or a symlink to one), not ``-``, a FIFO or a device."""
    return not is_stdio(output) and not is_stream(output)


@contextmanager
def appending(output: Path) -> Iterator[Callable[[list[dict[str, Any]]], None]]:
    """A writer of batches to ``output``, opened at the first batch (an early error leaves no file).

    A file is appended to (through its symlink: the link stays) and fsynced batch by batch;
    a stream is written to and flushed.
    """
    handle: Optional[IO[str]] = None
    to_stdout = is_stdio(output)
    durable = resumable(output)

    def write(records: list[dict[str, Any]]) -> None:
        nonlocal handle
        if handle is None:
            handle = sys.stdout if to_stdout else open(output, "a" if durable else "w", encoding="utf-8")
        for record in records:
            handle.write(dumps_jsonl_line(record))
        handle.flush()
        if durable:
            os.fsync(handle.fileno())

    try:
        yield write
    finally:
        if handle is not None and not to_stdout:
            handle.close()


def journal_path(output: Path) -> Path:
    """Where protect appends its records: the output itself (JSONL), or for a CSV, TSV or Parquet output a
    hidden JSONL file beside it, which resumes like one and becomes the table when the run completes."""
    if output_format(output) == "jsonl" or not resumable(output):
        return output
    return output.with_name(f".{output.name}.protect.jsonl")


def write_table_output(journal: Path, output: Path, source: InputSource, scan: InputScan) -> None:
    """The journal's records as the CSV, TSV or Parquet ``output``, in input order; then the journal goes."""
    from ..tables import output_table, write_table

    records = [parse_json_line(raw, raw.decode("utf-8")) for raw in journal.read_bytes().splitlines() if raw.strip()]
    records.sort(key=lambda record: scan.lines[record[source.id_field]])
    positions = [scan.lines[record[source.id_field]] for record in records]
    table = output_table(records, source.table() if source.is_table else None, positions, source.text_field)
    write_table(table, output, output_format(output))
    journal.unlink()
