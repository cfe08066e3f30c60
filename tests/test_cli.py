"""The `delink index` / `delink assess` commands: happy path and every named bad input."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
import srsly
from typer.testing import CliRunner

from conftest import Outcome
from spacy_delink.cli import app
from spacy_delink.linkage.index import CorpusIndex

CORPUS = [
    {"id": "a", "text": "The applicant's farm near the river Mura was sold."},
    {"id": "b", "text": "The applicant's farm was sold in 1994."},
    {"id": "c", "text": "The farm near the river was sold."},
]


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
        "id": 7, "k": 2, "arity": 3, "readings": ["exact", "search", "gap"], "linkage_risk": 1.0, "anonymity": 1,  # the threat model's, by default
        "ngrams": [{"start": 24, "end": 28, "text": "Mura", "support": 1, "readings": ["exact", "search"]}],
        "combinations": [], "combination_linkable": False,
        "combination_count": 0, "combination_groups": 0, "combinations_capped": False, "unread_scripts": [],
        "gap": {"max_gap": 16, "source": "unknown"},  # no mask: no bridge, nothing to find a source by
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
        assert sorted(CorpusIndex(out).doc_ids) in (["a", "b", "c"], ["a.txt", "b.txt", "c.txt"])


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
    assert result.stderr_lines[-1] == f"warning: 1 input(s) skipped as invalid and not indexed: {path}:2"


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
        (["assess", str(index), str(inputs), "--arity", "4", "--output", out], "arity must be 1 (single phrases), 2 or 3"),
        (["assess", str(tmp_path / "nope"), str(inputs), "--output", out], "not an index directory"),
        (["assess", str(index), str(tmp_path / "missing.jsonl"), "--output", out], "no such file"),
        (["assess", str(index), str(inputs), "--key-file", str(tmp_path / "no.key"), "--output", out], "key file"),
    ]
    for args, message in cases:
        result = delink(*args)
        assert result.returncode == 1, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
    result = delink("assess", str(index), str(inputs), "--k", "1", "--output", out)
    assert result.returncode == 2 and "invalid value for '--k': k must be an integer between 2 and" in result.stderr
    assert not Path(out).exists(), "a failed assess must not leave an output"
    (index / "manifest.json").unlink()  # a half-written index
    result = delink("assess", str(index), str(inputs), "--output", out)
    assert result.returncode == 1 and "manifest.json" in result.stderr


def test_index_with_edited_rules_is_refused(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    manifest = json.loads((index / "manifest.json").read_text())
    manifest["rules"]["stemming"] = True  # an option this version does not know
    (index / "manifest.json").write_text(json.dumps(manifest))
    inputs = tmp_path / "in.jsonl"
    srsly.write_jsonl(inputs, [{"id": 1, "text": "farm"}])
    result = delink("assess", str(index), str(inputs), "--output", str(tmp_path / "o.jsonl"))
    assert result.returncode == 1 and "manifest.json fails authentication" in result.stderr


def test_existing_output_needs_overwrite(tmp_path: Path, corpus: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    result = delink("index", str(corpus), "--output", str(index))
    assert result.returncode == 1 and "--overwrite" in result.stderr
    assert delink("index", str(corpus), "--output", str(index), "--overwrite").returncode == 0


def one_error_line(result: Outcome, *needles: str) -> None:
    """Exit status 1 and exactly one stderr line, an ``error:`` naming every needle."""
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)


def test_an_input_is_never_an_output(tmp_path: Path, corpus: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    before = corpus.read_bytes()
    one_error_line(delink("index", str(corpus), "-o", str(corpus), "--overwrite"), "--output", "is the input")
    one_error_line(delink("index", str(corpus), "-o", str(tmp_path / "x"), "--key-file", str(corpus)), "--key-file", "is the input")
    one_error_line(delink("index", str(corpus), "-o", str(tmp_path / "x"), "--ids-file", str(corpus)), "--ids-file", "is the input")
    one_error_line(delink("assess", str(index), str(corpus), "-o", str(corpus)), "--output", "is the input")
    out = str(tmp_path / "out.jsonl")
    one_error_line(delink("assess", str(index), str(corpus), "-o", out, "--html", str(corpus)), "--html", "is the input")
    one_error_line(delink("assess", str(index), str(corpus), "-o", out, "--html", out), "--html", "is the input")
    assert corpus.read_bytes() == before and not Path(out).exists() and not (tmp_path / "x").exists()


@pytest.fixture
def unwritable(tmp_path: Path) -> Path:
    """A directory this process cannot create files in, whoever runs the tests."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        (folder / "probe").touch()
    except PermissionError:
        return folder
    (folder / "probe").unlink()  # root ignores modes: sysfs refuses new files even to root
    if Path("/sys/kernel").is_dir():
        return Path("/sys/kernel")
    pytest.skip("no directory here refuses new files to this user")


def test_outputs_that_cannot_be_written_fail_before_the_work(
    tmp_path: Path, corpus: Path, index: Path, unwritable: Path, delink: Callable[..., Outcome]
) -> None:
    # A broken corpus line would be the error if the outputs were checked only after reading it.
    bad_corpus = tmp_path / "bad.jsonl"
    bad_corpus.write_text('{"id": 1, "text": "farm"}\n{oops\n', encoding="utf-8")
    new = str(tmp_path / "new-index")
    one_error_line(delink("index", str(bad_corpus), "-o", new, "--key-file", str(unwritable / "k.key")), "--key-file", "cannot create files")
    one_error_line(delink("index", str(bad_corpus), "-o", new, "--ids-file", str(unwritable / "i.json")), "--ids-file", "cannot create files")
    one_error_line(delink("index", str(bad_corpus), "-o", str(unwritable / "idx")), "--output", "cannot create files")
    one_error_line(delink("index", str(bad_corpus), "-o", new, "--key-file", str(tmp_path)), "--key-file", "is a directory")
    assert not Path(new).exists()
    bad_input = tmp_path / "bad-input.jsonl"
    bad_input.write_text('{"id": 1, "text": "farm"}\n{oops\n', encoding="utf-8")
    args = ["assess", str(index), str(bad_input)]
    one_error_line(delink(*args, "-o", str(tmp_path)), "--output", "is a directory")
    one_error_line(delink(*args, "-o", str(tmp_path / "o.jsonl"), "--html", str(tmp_path)), "--html", "is a directory")
    one_error_line(delink(*args, "-o", str(unwritable / "o.jsonl")), "--output", "cannot create files")
    one_error_line(delink(*args, "-o", str(tmp_path / "o.jsonl"), "--html", str(unwritable / "r.html")), "--html", "cannot create files")
    assert not (tmp_path / "o.jsonl").exists()


def test_a_lone_surrogate_is_refused_with_its_line(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    in_id = tmp_path / "id.jsonl"
    in_id.write_text('{"id": "a", "text": "farm"}\n{"id": "b\\ud800", "text": "river"}\n', encoding="utf-8")
    one_error_line(delink("index", str(in_id), "-o", str(tmp_path / "idx")), "id.jsonl:2", "lone UTF-16 surrogate \\ud800")
    assert not (tmp_path / "idx").exists()
    in_text = tmp_path / "text.jsonl"
    in_text.write_text('{"id": "a", "text": "farm"}\n{"id": "b", "text": "the river \\udfff Mura"}\n', encoding="utf-8")
    out, html = tmp_path / "o.jsonl", tmp_path / "r.html"
    one_error_line(delink("assess", str(index), str(in_text), "-o", str(out), "--html", str(html)), "text.jsonl:2", "\\udfff")
    assert not out.exists() and not html.exists()
    assert delink("assess", str(index), str(in_text), "-o", str(out), "--html", str(html), "--skip-invalid").returncode == 0
    assert [r["id"] for r in srsly.read_jsonl(out)] == ["a"] and html.exists()
    pair = tmp_path / "pair.jsonl"  # an escaped pair is one character, not a lone surrogate
    pair.write_text('{"id": "a", "text": "farm \\ud83d\\ude00 Mura"}\n', encoding="utf-8")
    assert delink("assess", str(index), str(pair), "-o", str(out), "--html", str(html)).returncode == 0


def test_a_byte_order_mark_is_accepted(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(json.dumps(row) for row in CORPUS).encode() + b"\n")
    assert delink("index", str(path), "-o", str(tmp_path / "idx")).returncode == 0
    assert CorpusIndex(tmp_path / "idx").doc_ids == ["a", "b", "c"]
    out = tmp_path / "o.jsonl"
    assert delink("assess", str(index), str(path), "-o", str(out)).returncode == 0
    assert [r["id"] for r in srsly.read_jsonl(out)] == ["a", "b", "c"]


def test_integer_ids_beyond_64_bits_are_kept_exact(tmp_path: Path, delink: Callable[..., Outcome]) -> None:
    big, negative = 2**70 + 1, -(2**65)
    path = tmp_path / "big.jsonl"
    path.write_text(f'{{"id": {big}, "text": "farm near the river"}}\n{{"id": {negative}, "text": "farm"}}\n', encoding="utf-8")
    assert delink("index", str(path), "-o", str(tmp_path / "idx")).returncode == 0
    assert CorpusIndex(tmp_path / "idx").doc_ids == [big, negative]
    out = tmp_path / "o.jsonl"
    assert delink("assess", str(tmp_path / "idx"), str(path), "-o", str(out)).returncode == 0
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [big, negative]


def test_k_above_the_collection_size_warns(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    inputs = tmp_path / "in.jsonl"
    srsly.write_jsonl(inputs, [{"id": 1, "text": "farm"}])
    result = delink("assess", str(index), str(inputs), "-o", str(tmp_path / "o.jsonl"), "--k", "4")
    assert result.returncode == 0
    assert result.stderr.startswith("warning: k=4 is larger than the collection") and "(3 documents)" in result.stderr
    assert "warning" not in delink("assess", str(index), str(inputs), "-o", str(tmp_path / "o.jsonl"), "--k", "3").stderr


def test_one_id_rule_for_index_and_assess(tmp_path: Path, index: Path, delink: Callable[..., Outcome]) -> None:
    path = tmp_path / "no-id.jsonl"
    path.write_text('{"id": "a", "text": "farm"}\n{"text": "river"}\n{"id": "", "text": "Mura"}\n', encoding="utf-8")
    out = str(tmp_path / "o.jsonl")
    for args in (["index", str(path), "-o", str(tmp_path / "idx")], ["assess", str(index), str(path), "-o", out]):
        one_error_line(delink(*args), "no-id.jsonl:2: no id (field 'id')", "--id-field")
        result = delink(*args, "--skip-invalid")
        assert result.returncode == 0 and "2 input(s) skipped as invalid and not " in result.stderr_lines[-1], result.stderr
        assert result.stderr_lines[-1].endswith(f"{path}:2; {path}:3")
    assert CorpusIndex(tmp_path / "idx").doc_ids == ["a"]
    twice = tmp_path / "twice.jsonl"
    twice.write_text('{"id": 1, "text": "farm"}\n{"id": 1, "text": "river"}\n', encoding="utf-8")
    one_error_line(delink("assess", str(index), str(twice), "-o", out), "duplicate document id 1")


def test_progress_bars_never_reach_a_stream_that_is_not_a_terminal(tmp_path: Path, corpus: Path, delink: Callable[..., Outcome]) -> None:
    """The verdict of every stderr check must not depend on when a progress bar refreshes."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "text": "ok"}\n{"id": 1, "text": "again"}\n', encoding="utf-8")
    one_error_line(delink("index", str(bad), "-o", str(tmp_path / "bad-index")), "duplicate document id 1")
    result = delink("index", str(corpus), "-o", str(tmp_path / "idx"))
    assert result.returncode == 0 and "\r" not in result.stderr and result.stderr.startswith("indexed 3 documents")
    inputs = tmp_path / "in.jsonl"
    srsly.write_jsonl(inputs, CORPUS)
    result = delink("assess", str(tmp_path / "idx"), str(inputs), "-o", str(tmp_path / "o.jsonl"))
    assert result.returncode == 0 and "\r" not in result.stderr and result.stderr.startswith("assessed 3 documents")
