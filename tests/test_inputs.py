"""Your own data, honestly (issue 36 items 1 and 2; issue 35 item 6): one reader for every command and
the API, outputs that keep every other field in the input's format, and no all-clear about nothing.

Each test of a row of issue 36's table failed before the change (named in its docstring).
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Callable

import pytest
import srsly

from spacy_delink.errors import InputError

from conftest import SAMPLE_INPUTS, Outcome

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")
from pyarrow import csv as pacsv, parquet  # noqa: E402

#: The released documents as a team holds them: other names for the id and the text, and more columns.
ROWS = [
    {"doc": "007", "body": "Her farm near the river Mura.", "author": "clerk", "year": 1994},
    {"doc": "008", "body": "The applicant's farm.", "author": "judge", "year": 1995},
]


def _records(path: Path) -> list[dict]:
    return list(srsly.read_jsonl(path))


def _csv(path: Path, rows: list[dict] = ROWS, delimiter: str = ",") -> Path:
    pd.DataFrame(rows).to_csv(path, index=False, sep=delimiter)
    return path


def test_assess_reads_a_csv_and_writes_it_back_with_every_column(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    """Table row 1: `delink assess idx released.csv` said "invalid JSON line"; now CSV in, CSV out, columns untouched."""
    released = _csv(tmp_path / "released.csv")
    result = delink("assess", index, released, "-o", tmp_path / "a.csv", "--id-field", "doc", "--text-field", "body")
    assert result.returncode == 0, result.stderr
    table = pacsv.read_csv(tmp_path / "a.csv", convert_options=pacsv.ConvertOptions(column_types={"doc": pa.string(), "year": pa.string()}))
    assert table.column_names[:3] == ["doc", "author", "year"] and "body" not in table.column_names  # the text is not copied
    assert table.column("doc").to_pylist() == ["007", "008"]  # read as text: "007" stays "007"
    assert table.column("year").to_pylist() == ["1994", "1995"]
    assert table.column("anonymity").to_pylist() == [1, None]
    assert "assessed 2 documents (0 skipped)" in result.stderr


def test_assess_a_csv_to_jsonl_keeps_the_other_fields(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    released = _csv(tmp_path / "released.csv")
    result = delink("assess", index, released, "-o", tmp_path / "a.jsonl", "--id-field", "doc", "--text-field", "body")
    assert result.returncode == 0, result.stderr
    records = _records(tmp_path / "a.jsonl")
    assert [(r["doc"], r["author"], r["year"], r["anonymity"]) for r in records] == [("007", "clerk", "1994", 1), ("008", "judge", "1995", None)]


def test_a_parquet_input_keeps_its_column_types(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    parquet.write_table(pa.Table.from_pylist(ROWS), tmp_path / "released.parquet")
    result = delink("assess", index, tmp_path / "released.parquet", "-o", tmp_path / "a.parquet", "--id-field", "doc", "--text-field", "body")
    assert result.returncode == 0, result.stderr
    table = parquet.read_table(tmp_path / "a.parquet")
    assert table.schema.field("year").type == pa.int64() and table.column("year").to_pylist() == [1994, 1995]
    assert table.column("anonymity").to_pylist() == [1, None]


def test_a_tsv_and_stdin_with_format(tmp_path: Path, index: Path, delink: Callable[..., Outcome], monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    released = _csv(tmp_path / "released.tsv", delimiter="\t")
    assert delink("assess", index, released, "-o", tmp_path / "a.jsonl", "--id-field", "doc", "--text-field", "body").returncode == 0
    expected = _records(tmp_path / "a.jsonl")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(released.read_bytes())))
    result = delink("assess", index, "-", "-o", tmp_path / "b.jsonl", "--format", "tsv", "--id-field", "doc", "--text-field", "body")
    assert result.returncode == 0, result.stderr
    assert _records(tmp_path / "b.jsonl") == expected


def test_assess_reads_a_folder_of_text_files(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    """Table row 4: assess on a folder (which index reads) said "Is a directory"; ids are the relative paths."""
    folder = tmp_path / "released_txt"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text(SAMPLE_INPUTS[0]["text"], encoding="utf-8")
    (folder / "sub" / "b.md").write_text(ROWS[1]["body"], encoding="utf-8")
    result = delink("assess", index, folder, "-o", tmp_path / "a.jsonl")
    assert result.returncode == 0, result.stderr
    assert [(r["id"], r["anonymity"]) for r in _records(tmp_path / "a.jsonl")] == [("a.txt", 1), ("sub/b.md", None)]


@pytest.mark.parametrize("command", ["assess", "protect"])
def test_id_and_text_fields_exist_where_the_message_names_them(
    command: str, tmp_path: Path, index: Path, delink: Callable[..., Outcome]
) -> None:
    """Table row 5: records whose id is not in `id` were told "pass --id-field", an option assess and protect lacked (exit 2)."""
    released = tmp_path / "released.jsonl"
    srsly.write_jsonl(released, ROWS)
    told = delink(command, index, released, "-o", tmp_path / "out.jsonl")
    assert told.returncode == 1 and "pass --id-field" in told.stderr_lines[-1]
    result = delink(command, index, released, "-o", tmp_path / "out.jsonl", "--id-field", "doc", "--text-field", "body")
    assert result.returncode == 0, result.stderr
    records = _records(tmp_path / "out.jsonl")
    assert [r["doc"] for r in records] == ["007", "008"] and [r["author"] for r in records] == ["clerk", "judge"]


def test_a_table_without_the_columns_names_them_and_the_option(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    result = delink("assess", index, _csv(tmp_path / "released.csv"), "-o", tmp_path / "a.csv")
    assert result.returncode == 1
    released = tmp_path / "released.csv"
    assert result.stderr_lines == [
        f"error: {released}: no column 'id' (its columns: 'doc', 'body', 'author', 'year'); pass --id-field to name the field holding it"
    ]


def test_all_inputs_skipped_is_not_an_all_clear(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    """Table row 2: with --skip-invalid, a file of 101 bad lines gave exit 0 and "0 linkable"; now exit 1, one line why."""
    released = tmp_path / "released.jsonl"
    released.write_text("id,text\n" * 101, encoding="utf-8")
    result = delink("assess", index, released, "-o", tmp_path / "a.jsonl", "--skip-invalid")
    assert result.returncode == 1
    assert len(result.stderr_lines) == 1 and "all 101 input(s) were skipped as invalid" in result.stderr_lines[0]
    assert "--allow-empty" in result.stderr_lines[0]
    assert not (tmp_path / "a.jsonl").exists()  # no empty output stands for an all-clear
    protected = delink("protect", index, released, "-o", tmp_path / "p.jsonl", "--skip-invalid")
    assert protected.returncode == 1 and "no document to protect: all 101 input(s)" in protected.stderr_lines[-1]
    allowed = delink("assess", index, released, "-o", tmp_path / "a.jsonl", "--skip-invalid", "--allow-empty")
    assert allowed.returncode == 0 and "assessed 0 documents (101 skipped)" in allowed.stderr
    assert allowed.stderr_lines[-1] == (
        f"warning: 101 input(s) skipped as invalid and not assessed: {released}:1; {released}:2; {released}:3; {released}:4; "
        f"{released}:5 and 96 more"
    )


@pytest.mark.parametrize("command", ["assess", "protect"])
def test_an_empty_input_is_not_an_all_clear(command: str, tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    """Table row 3: an empty .jsonl gave exit 0, "assessed 0 documents", no warning."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    result = delink(command, index, empty, "-o", tmp_path / "out.jsonl")
    assert result.returncode == 1 and result.stderr_lines == [
        f"error: {empty}: no document to {command}: the input is empty; check the file, or pass --allow-empty"
    ]
    assert delink(command, index, empty, "-o", tmp_path / "out.jsonl", "--allow-empty").returncode == 0


@pytest.mark.parametrize("command", ["assess", "protect"])
def test_skipped_inputs_are_counted_and_said_last(command: str, tmp_path: Path, index: Path, inputs: Path, delink: Callable[..., Outcome]) -> None:
    clean = delink(command, index, inputs, "-o", tmp_path / "clean.jsonl")
    assert clean.returncode == 0 and "0 skipped" in clean.stderr and not clean.stderr_lines[-1].startswith("warning:")
    with inputs.open("a", encoding="utf-8") as handle:
        handle.write("not json\n")
    result = delink(command, index, inputs, "-o", tmp_path / "out.jsonl", "--skip-invalid")
    assert result.returncode == 0, result.stderr
    assert "1 skipped)" in result.stderr  # in the summary line
    verb = {"assess": "assessed", "protect": "protected"}[command]
    assert result.stderr_lines[-1] == f"warning: 1 input(s) skipped as invalid and not {verb}: {inputs}:3"


def test_skipped_count_reaches_the_report(tmp_path: Path, index: Path, inputs: Path, delink: Callable[..., Outcome]) -> None:
    with inputs.open("a", encoding="utf-8") as handle:
        handle.write("not json\n")
    result = delink("assess", index, inputs, "-o", tmp_path / "a.jsonl", "--skip-invalid", "--html", tmp_path / "r.html")
    assert result.returncode == 0, result.stderr
    assert "1 input(s) were skipped as invalid and not assessed" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_protect_a_csv_into_a_csv_keeps_columns_and_resumes(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    released = _csv(tmp_path / "released.csv")
    out = tmp_path / "p.csv"
    args = ("protect", index, released, "-o", out, "--id-field", "doc", "--text-field", "body", "--arity", "1")
    result = delink(*args)
    assert result.returncode == 0, result.stderr
    assert "2 other field(s) of the input copied as they are, not checked: author, year" in result.stderr
    table = pacsv.read_csv(out, convert_options=pacsv.ConvertOptions(column_types={"doc": pa.string(), "year": pa.string()}))
    assert table.column_names[:4] == ["doc", "body", "author", "year"]
    assert table.column("doc").to_pylist() == ["007", "008"] and table.column("protected").to_pylist() == [True, True]
    assert table.column("body").to_pylist() != [row["body"] for row in ROWS]  # the linkable text was rewritten
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".p.csv")) == []  # the journal is gone
    # an interrupted run left its journal: the rerun keeps what it verifies and writes the same table
    journal = tmp_path / ".p.csv.protect.jsonl"
    first = delink("protect", index, _csv(tmp_path / "one.csv", ROWS[:1]), "-o", tmp_path / "x.jsonl", "--id-field", "doc", "--text-field", "body", "--arity", "1")
    assert first.returncode == 0
    journal.write_bytes((tmp_path / "x.jsonl").read_bytes())
    resumed = delink(*args)
    assert resumed.returncode == 0 and "(1 already done" in resumed.stderr
    assert pacsv.read_csv(out, convert_options=pacsv.ConvertOptions(column_types={"doc": pa.string(), "year": pa.string()})).equals(table)


def test_a_resumed_record_whose_copied_fields_changed_is_redone(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    released = tmp_path / "released.jsonl"
    srsly.write_jsonl(released, ROWS)
    args = ("protect", index, released, "-o", tmp_path / "p.jsonl", "--id-field", "doc", "--text-field", "body")
    assert delink(*args).returncode == 0
    srsly.write_jsonl(released, [{**ROWS[0], "author": "someone else"}, ROWS[1]])
    result = delink(*args)
    assert result.returncode == 0 and "1 input changed" in result.stderr
    assert [r["author"] for r in _records(tmp_path / "p.jsonl")] == ["judge", "someone else"]


def test_index_reads_a_csv_and_a_zstd_jsonl(tmp_path: Path, delink: Callable[..., Outcome]) -> None:
    import zstandard

    from conftest import SAMPLE_CORPUS

    _csv(tmp_path / "corpus.csv", [{"key": row["id"], "content": row["text"]} for row in SAMPLE_CORPUS])
    built = delink("index", tmp_path / "corpus.csv", "-o", tmp_path / "index", "--id-field", "key", "--text-field", "content")
    assert built.returncode == 0, built.stderr and "indexed 3 documents (0 empty, 0 skipped)" in built.stderr
    lines = "".join(json.dumps(row) + "\n" for row in SAMPLE_INPUTS).encode("utf-8")
    (tmp_path / "in.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
    assert delink("assess", tmp_path / "index", tmp_path / "in.jsonl.zst", "-o", tmp_path / "a.jsonl").returncode == 0
    assert [r["id"] for r in _records(tmp_path / "a.jsonl")] == [1, 2]
    (tmp_path / "cut.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines)[:-4])
    cut = delink("assess", tmp_path / "index", tmp_path / "cut.jsonl.zst", "-o", tmp_path / "b.jsonl")
    assert cut.returncode == 1 and "truncated zstd data" in cut.stderr_lines[-1]
    with gzip.open(tmp_path / "in.jsonl.gz", "wb") as handle:
        handle.write(lines)
    assert delink("assess", tmp_path / "index", tmp_path / "in.jsonl.gz", "-o", tmp_path / "c.jsonl").returncode == 0


def test_bad_tables_are_one_line(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    repeated = tmp_path / "repeated.csv"
    repeated.write_text("id,text,text\n1,a,b\n", encoding="utf-8")
    result = delink("assess", index, repeated, "-o", tmp_path / "a.jsonl")
    assert result.returncode == 1 and result.stderr_lines == [f"error: {repeated}: column 'text' appears twice; rename one of them"]
    ragged = tmp_path / "ragged.csv"
    ragged.write_text('id,text\n1,"Her farm near the river Mura."\n2,secret text,extra\n', encoding="utf-8")
    result = delink("assess", index, ragged, "-o", tmp_path / "a.jsonl")
    assert result.returncode == 1 and "a row with 3 field(s) where the header has 2" in result.stderr_lines[-1]
    assert "secret" not in result.stderr  # the row's text is never echoed
    skipped = delink("assess", index, ragged, "-o", tmp_path / "a.jsonl", "--skip-invalid")
    assert skipped.returncode == 0 and "assessed 1 documents (1 skipped)" in skipped.stderr
    unnamed = tmp_path / "released"
    unnamed.write_text("{}", encoding="utf-8")
    result = delink("assess", index, unnamed, "-o", tmp_path / "a.jsonl")
    assert result.returncode == 1 and "pass --format" in result.stderr_lines[-1]


def test_an_input_field_the_output_would_overwrite_is_refused(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    released = tmp_path / "released.jsonl"
    srsly.write_jsonl(released, [{"id": 1, "text": "The farm was sold.", "anonymity": "high"}])
    result = delink("assess", index, released, "-o", tmp_path / "a.jsonl")
    assert result.returncode == 1 and "has a field 'anonymity', which is also a field of the output" in result.stderr_lines[-1]


def test_frames_in_and_out(index: Path) -> None:
    """Table row 6: no function read a DataFrame; assess_frame / protect_frame take one and return it with the results."""
    from spacy_delink import assess_frame, protect_frame

    frame = pd.DataFrame(ROWS)
    assessed = assess_frame(index, frame, id_field="doc", text_field="body")
    assert list(assessed.columns[:4]) == ["doc", "body", "author", "year"]
    assert assessed["anonymity"][0] == 1 and pd.isna(assessed["anonymity"][1])  # pandas holds a missing number as NaN
    assert list(frame.columns) == ["doc", "body", "author", "year"]  # the caller's frame is not changed
    by_index = assess_frame(index, frame.set_index("doc"), text_field="body")
    assert by_index["anonymity"].iloc[0] == 1 and pd.isna(by_index["anonymity"].iloc[1])
    protected = protect_frame(index, frame, id_field="doc", text_field="body", arity=1)
    assert list(protected["protected"]) == [True, True] and protected["body"][0] != ROWS[0]["body"]
    assert list(protected["author"]) == ["clerk", "judge"]
    with pytest.raises(InputError, match="no column 'text'.*pass text_field="):
        assess_frame(index, frame)


@pytest.mark.parametrize("command", ["assess", "protect", "index"])
def test_a_deeply_nested_line_is_one_line_or_skipped(command: str, tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    """Issue 35 item 6: a line nested 3,000 levels deep raised RecursionError (a traceback), even with --skip-invalid."""
    deep = tmp_path / "deep.jsonl"
    nested = "[" * 3000 + "]" * 3000
    deep.write_text(f'{{"id": 9, "text": "The farm.", "x": {nested}}}\n' + json.dumps(SAMPLE_INPUTS[0]) + "\n", encoding="utf-8")
    args = (command, deep, "-o", tmp_path / "out") if command == "index" else (command, index, deep, "-o", tmp_path / "out.jsonl")
    result = delink(*args)
    assert result.returncode == 1
    assert result.stderr_lines == [f"error: {deep}:1: invalid JSON line (arrays or objects nested more than 512 levels deep); fix it or pass --skip-invalid"]
    skipped = delink(*args, "--skip-invalid")
    assert skipped.returncode == 0, skipped.stderr
    assert skipped.stderr_lines[-1].startswith("warning: 1 input(s) skipped as invalid")


def test_evaluate_reads_tables_with_their_own_fields(tmp_path: Path, delink: Callable[..., Outcome]) -> None:
    """evaluate had no --id-field/--text-field and read JSONL only; now the three inputs are read as every command reads."""
    from conftest import SAMPLE_CORPUS

    corpus = _csv(tmp_path / "corpus.csv", [{"doc": row["id"], "body": row["text"]} for row in SAMPLE_CORPUS])
    fields = ("--id-field", "doc", "--text-field", "body")
    assert delink("index", corpus, "-o", tmp_path / "index", *fields).returncode == 0
    released = _csv(tmp_path / "released.csv", [{"doc": "a", "body": "Her farm near the river Mura.", "note": "x"}])
    assert delink("protect", tmp_path / "index", released, "-o", tmp_path / "p.parquet", *fields).returncode == 0
    result = delink(
        "evaluate", tmp_path / "index", "--original", corpus, "--deidentified", released, "--protected", tmp_path / "p.parquet",
        "-o", tmp_path / "evaluation", "--no-engine", "--no-semantic", "--k", "2", "--arity", "3", *fields,
    )
    assert result.returncode == 0, result.stderr
    assert "k=2, arity 3, exact, search and gap readings, index" in result.stderr and "linkable 1/1 → 0/1 after protection" in result.stderr


@pytest.mark.parametrize("command", ["index", "assess", "protect", "evaluate"])
def test_the_options_the_messages_name_exist(command: str, delink: Callable[..., Outcome]) -> None:
    """The id rule's message says "pass --id-field"; every command that reads documents has it, and the others named."""
    shown = delink(command, "--help").stdout
    for option in ("--id-field", "--text-field", "--format") + (("--allow-empty",) if command in ("assess", "protect") else ()):
        assert option in shown, f"`delink {command}` has no {option}"


def test_the_api_is_told_its_own_argument_names(index: Path) -> None:
    from spacy_delink import assess_texts

    with pytest.raises(InputError, match=r"give every text a string or integer id in ids=") as raised:
        assess_texts(index, ["The farm."], ids=[None])
    assert "--id-field" not in str(raised.value)


def test_index_reads_stdin_in_any_format(tmp_path: Path, delink: Callable[..., Outcome], monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    from conftest import SAMPLE_CORPUS

    corpus = _csv(tmp_path / "corpus.csv", [{"doc": row["id"], "body": row["text"]} for row in SAMPLE_CORPUS])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(corpus.read_bytes())))
    result = delink("index", "-", "-o", tmp_path / "index", "--format", "csv", "--id-field", "doc", "--text-field", "body")
    assert result.returncode == 0 and "indexed 3 documents (0 empty, 0 skipped)" in result.stderr, result.stderr


def test_a_cut_compressed_table_is_refused(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    data = gzip.compress(_csv(tmp_path / "released.csv").read_bytes() * 50)
    (tmp_path / "cut.csv.gz").write_bytes(data[: len(data) // 2])
    result = delink("assess", index, tmp_path / "cut.csv.gz", "-o", tmp_path / "a.jsonl", "--id-field", "doc", "--text-field", "body")
    assert result.returncode == 1 and "cannot be read as CSV (Truncated compressed stream)" in result.stderr_lines[-1]


def test_protect_refuses_a_document_over_the_memory_bound_in_any_format(
    tmp_path: Path, index: Path, delink: Callable[..., Outcome], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35 item 5: a document longer than the bound is refused in one line before any work, or
    skipped and counted with --skip-invalid, whatever the input's format (CSV here)."""
    monkeypatch.setenv("DELINK_MAX_DOCUMENT_CHARS", "25")  # "Her farm near the river Mura." has 29 characters
    released = _csv(tmp_path / "released.csv")
    refused = delink("protect", index, released, "-o", tmp_path / "p.csv", "--id-field", "doc", "--text-field", "body")
    assert refused.returncode == 1 and len(refused.stderr_lines) == 1
    assert "row 1: the text has 29 characters, over the 25 a document may have" in refused.stderr_lines[0]
    assert not (tmp_path / "p.csv").exists()
    skipped = delink("protect", index, released, "-o", tmp_path / "p.csv", "--id-field", "doc", "--text-field", "body", "--skip-invalid")
    assert skipped.returncode == 0, skipped.stderr
    assert "1 documents protected" in skipped.stderr and "1 skipped" in skipped.stderr
    assert pd.read_csv(tmp_path / "p.csv", dtype=str)["doc"].tolist() == ["008"]
