"""The `delink index` / `delink assess` commands: happy path and every named bad input."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import srsly
from typer.testing import CliRunner

from spacy_delink.cli import app, main

CORPUS = [
    {"id": "a", "text": "The applicant's farm near the river Mura was sold."},
    {"id": "b", "text": "The applicant's farm was sold in 1994."},
    {"id": "c", "text": "The farm near the river was sold."},
]


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def delink(capsys: pytest.CaptureFixture[str]) -> Callable[..., Outcome]:
    """Run the console entry point (`main`) in-process, with its exit status and output."""

    def run(*args: str) -> Outcome:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    return run


def test_module_entry_point(tmp_path: Path) -> None:
    """`python -m spacy_delink` is the same program, exit status included."""
    ok = subprocess.run([sys.executable, "-m", "spacy_delink", "--help"], capture_output=True, text=True)
    assert ok.returncode == 0 and "assess" in ok.stdout and "index" in ok.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "spacy_delink", "assess", str(tmp_path / "none"), str(tmp_path / "x.jsonl"), "-o", "o"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and bad.stderr.strip().splitlines()[-1].startswith("error:")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    srsly.write_jsonl(path, CORPUS)
    return path


@pytest.fixture
def index(tmp_path: Path, corpus: Path) -> Path:
    out = tmp_path / "index"
    result = CliRunner().invoke(app, ["index", str(corpus), "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "indexed 3 documents" in result.output
    return out


def test_index_and_assess(tmp_path: Path, index: Path) -> None:
    inputs = tmp_path / "in.jsonl"
    srsly.write_jsonl(inputs, [{"id": 7, "text": "Her farm near the river Mura."}, {"id": "e", "text": ""}])
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["assess", str(index), str(inputs), "--k", "2", "--output", str(out), "--html", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    first, empty = srsly.read_jsonl(out)
    assert first == {
        "id": 7, "k": 2, "arity": 1, "linkage_risk": 1.0, "anonymity": 1,
        "ngrams": [{"start": 24, "end": 28, "text": "Mura", "support": 1}],
        "combinations": [], "combination_linkable": False,
    }
    assert empty["anonymity"] is None and empty["ngrams"] == [] and empty["linkage_risk"] == 0.0
    assert "Mura" in (tmp_path / "r.html").read_text()


def test_other_corpus_formats(tmp_path: Path) -> None:
    import spacy
    from spacy.tokens import DocBin

    folder = tmp_path / "txt"
    folder.mkdir()
    for row in CORPUS:
        (folder / f"{row['id']}.txt").write_text(row["text"], encoding="utf-8")
    gz = tmp_path / "c.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as handle:
        for row in CORPUS:
            handle.write(json.dumps({"body": row["text"], "key": row["id"]}) + "\n")
    nlp = spacy.blank("en")
    doc_bin = DocBin(store_user_data=True)
    for row in CORPUS:
        doc = nlp.make_doc(row["text"])
        doc.user_data["id"] = row["id"]
        doc_bin.add(doc)
    doc_bin.to_disk(tmp_path / "c.spacy")
    for args in (
        [str(folder)],
        [str(gz), "--text-field", "body", "--id-field", "key"],
        [str(tmp_path / "c.spacy")],
    ):
        out = tmp_path / f"idx-{len(list(tmp_path.iterdir()))}"
        result = CliRunner().invoke(app, ["index", *args, "--output", str(out)])
        assert result.exit_code == 0, result.output
        assert sorted(json.loads((out / "doc_ids.json").read_text())) in (["a", "b", "c"], ["a.txt", "b.txt", "c.txt"])


@pytest.mark.parametrize(
    "lines, message",
    [
        ([], "no documents"),
        (['{"id": 1, "text": ""}'], "contain no tokens"),
        (['{"id": 1, "body": "x"}'], "missing text field 'text'"),
        (['{"id": 1, "text": "ok"}', "{not json"], ":2: invalid JSON line"),
        (['{"id": 1, "text": "ok"}', '{"id": 1, "text": "again"}'], "duplicate document id"),
    ],
)
def test_bad_corpora_fail_with_one_line(tmp_path: Path, lines: list[str], message: str, delink: Callable[..., Outcome]) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = delink("index", str(path), "--output", str(tmp_path / "index"))
    assert result.returncode == 1
    assert message in result.stderr and result.stderr.strip().splitlines()[-1].startswith("error:")
    assert not (tmp_path / "index").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".index")], "partial build left behind"


def test_skip_invalid_counts_lines(tmp_path: Path, delink: Callable[..., Outcome]) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text('{"id": 1, "text": "one two"}\n{oops\n{"id": 2, "text": "two three"}\n', encoding="utf-8")
    result = delink("index", str(path), "--output", str(tmp_path / "index"), "--skip-invalid")
    assert result.returncode == 0, result.stderr
    assert "skipped 1 invalid line(s)" in result.stderr and "mixed.jsonl:2" in result.stderr


def test_non_utf8_is_refused_with_its_line(tmp_path: Path, delink: Callable[..., Outcome]) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"id": 1, "text": "ok"}\n{"id": 2, "text": "caf\xe9"}\n')
    result = delink("index", str(path), "--output", str(tmp_path / "index"))
    assert result.returncode == 1 and "latin1.jsonl:2: not valid UTF-8" in result.stderr


def test_ten_megabyte_document(tmp_path: Path, index: Path) -> None:
    words = "the farm near the river was sold in 1994 . ".split()
    big = " ".join(words[i % len(words)] for i in range(2_400_000)) + " Mura"
    assert len(big) > 10_000_000
    inputs = tmp_path / "big.jsonl"
    srsly.write_jsonl(inputs, [{"id": "big", "text": big}])
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["assess", str(index), str(inputs), "--output", str(out)])
    assert result.exit_code == 0, result.output
    [record] = srsly.read_jsonl(out)
    assert record["anonymity"] == 1 and record["ngrams"][-1]["text"] == "Mura"


def test_assess_bad_arguments_and_indexes(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    inputs = tmp_path / "in.jsonl"
    srsly.write_jsonl(inputs, [{"id": 1, "text": "farm"}])
    out = str(tmp_path / "out.jsonl")
    cases = [
        (["assess", str(index), str(inputs), "--k", "1", "--output", out], "k must be an integer >= 2"),
        (["assess", str(index), str(inputs), "--arity", "4", "--output", out], "arity must be 1 (single phrases), 2 or 3"),
        (["assess", str(tmp_path / "nope"), str(inputs), "--output", out], "not an index directory"),
        (["assess", str(index), str(tmp_path / "missing.jsonl"), "--output", out], "no such file"),
        (["assess", str(index), str(inputs), "--key-file", str(tmp_path / "no.key"), "--output", out], "key file"),
    ]
    for args, message in cases:
        result = delink(*args)
        assert result.returncode == 1, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
    assert not Path(out).exists(), "a failed assess must not leave an output"
    (index / "manifest.json").unlink()  # a half-written index
    result = delink("assess", str(index), str(inputs), "--output", out)
    assert result.returncode == 1 and "manifest.json" in result.stderr


def test_index_built_with_other_rules_is_refused(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    manifest = json.loads((index / "manifest.json").read_text())
    manifest["rules"]["stemming"] = True  # an option this version does not know
    (index / "manifest.json").write_text(json.dumps(manifest))
    inputs = tmp_path / "in.jsonl"
    srsly.write_jsonl(inputs, [{"id": 1, "text": "farm"}])
    result = delink("assess", str(index), str(inputs), "--output", str(tmp_path / "o.jsonl"))
    assert result.returncode == 1 and "unknown linkage rule option" in result.stderr


def test_existing_output_needs_overwrite(tmp_path: Path, corpus: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    result = delink("index", str(corpus), "--output", str(index))
    assert result.returncode == 1 and "--overwrite" in result.stderr
    assert delink("index", str(corpus), "--output", str(index), "--overwrite").returncode == 0
