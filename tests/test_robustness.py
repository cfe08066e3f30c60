"""Inputs never trusted (issue 24, point 5): k bounds, duplicate JSON keys, folder corpora that
stay in their folder, ssh-style owner and mode checks of the key and the id mapping, and the
right message for a gzip file with trailing data."""
from __future__ import annotations

import gzip
import json
import os
import warnings
from pathlib import Path
from typing import Any, Callable

import fsspec
import pytest
import spacy
import srsly
from hypothesis import given
from hypothesis import strategies as st

from spacy_delink.io import jsonl as delink_io
from spacy_delink.corpus.rows import read_jsonl_documents
from spacy_delink.corpus.rules import CorpusStats
from spacy_delink.corpus.source import read_documents
from spacy_delink.errors import InputError
from spacy_delink.io.jsonl import read_jsonl
from spacy_delink.linkage.attack import assess_text, detect
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder, KeyPermissionWarning
from spacy_delink.linkage.index.update import update_index
from spacy_delink.linkage.ngrams import MAX_K, check_k
from spacy_delink.linkage.tokenize import LinkageRules
from conftest import Outcome, write_files

CORPUS: list[tuple[Any, str]] = [
    ("a", "The applicant's farm near the river Mura was sold."),
    ("b", "The applicant's farm was sold in 1994."),
    ("c", "The farm near the river was sold."),
]
TEXT = "The farm near the river Mura was sold in 1994."
HUGE_K = 2**64 + 1  # the example: above every integer type of the kernels
K_MESSAGE = f"k must be an integer between 2 and {MAX_K:,}; got"


@pytest.fixture
def index_path(tmp_path: Path) -> Path:
    out = tmp_path / "index"
    IndexBuilder(LinkageRules(max_n=4), progress=False, updatable=True).build(CORPUS, out)
    return out


def one_error_line(result: Outcome, code: int, *needles: str) -> None:
    assert result.returncode == code, result.stderr
    assert len(result.stderr_lines) == 1 and result.stderr_lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)


# --- k bounds ---------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 0, -3, MAX_K + 1, 2**63, HUGE_K, 2.0, True, "2"])
def test_a_k_outside_the_kernels_range_is_refused_with_one_line(k: Any) -> None:
    with pytest.raises(InputError, match=f"^{K_MESSAGE} {k!r}"):
        check_k(k)


def test_every_python_entry_refuses_a_huge_k_before_any_kernel(index_path: Path) -> None:
    index = CorpusIndex(index_path)
    for entry in (
        lambda: detect(index, TEXT, HUGE_K),
        lambda: detect(index, TEXT, HUGE_K, arity=3),
        lambda: assess_text(index, 1, TEXT, HUGE_K, arity=2),
    ):
        with pytest.raises(InputError, match=K_MESSAGE):
            entry()
    for factory in ("delink_risk", "delink_combinations"):
        nlp = spacy.blank("en")
        with pytest.raises(InputError, match=K_MESSAGE):  # a config holds at most 64 bits (spaCy refuses more itself)
            nlp.add_pipe(factory, config={"index": str(index_path), "k": 2**63})


def test_the_largest_k_runs_through_every_kernel(index_path: Path) -> None:
    """At k = MAX_K every phrase found is linkable; the triple search's sums (df + k) stay exact."""
    index = CorpusIndex(index_path)
    with pytest.warns(UserWarning, match="larger than the collection"):
        index.warn_if_k_exceeds_collection(MAX_K)
    record = assess_text(index, 1, TEXT, MAX_K, arity=3)
    at_four = assess_text(index, 1, TEXT, 4, arity=3)  # k above the 3 documents: the same answers
    assert record["combinations"] == at_four["combinations"] and record["ngrams"] == at_four["ngrams"]
    assert record["anonymity"] == at_four["anonymity"] == 1
    assert {gram["text"] for gram in record["ngrams"]} >= {"farm", "river", "Mura"}


@pytest.mark.parametrize("command", ["assess", "protect", "evaluate", "evaluate --report-k"])
def test_the_command_line_refuses_a_huge_k_as_a_bad_argument(
    tmp_path: Path, index_path: Path, command: str, delink: Callable[..., Outcome]
) -> None:
    inputs = tmp_path / "in.jsonl"
    srsly.write_jsonl(inputs, [{"id": "a", "text": TEXT}])
    out = tmp_path / "out"
    args: list[Any] = {
        "assess": ["assess", index_path, inputs, "-o", out, "--k", HUGE_K],
        "protect": ["protect", index_path, inputs, "-o", out, "--k", HUGE_K],
        "evaluate": ["evaluate", index_path, "--original", inputs, "--deidentified", inputs, "-o", out, "--k", f"2,{HUGE_K}"],
        "evaluate --report-k": ["evaluate", index_path, "--original", inputs, "--deidentified", inputs, "-o", out, "--report-k", HUGE_K],
    }[command]
    one_error_line(delink(*args), 2, K_MESSAGE, str(HUGE_K), command.partition(" ")[2] or "--k")
    assert not out.exists()


# --- duplicate JSON keys ----------------------------------------------------------------

DUPLICATES = [
    ('{"id": 1, "text": "first", "text": "second"}', "text"),  # flat: orjson's fast path would keep "second"
    ('{"id": 1, "text": "he said \\"text\\": no", "text": "x"}', "text"),  # escaped quotes in a value
    ('{"id": 1, "text": "a", "\\u0074ext": "b"}', "text"),  # the same key, written with an escape
    ('{"id": 1, "id": 2, "text": "a"}', "id"),
    ('{"id": 1, "score": 1.5, "text": "a", "text": "b"}', "text"),  # a float: the standard parser's path
    ('{"id": 1, "text": "a", "meta": {"lang": "en", "lang": "sl"}}', "lang"),  # nested
    ('{"id": 1, "text": "C:\\\\dir\\\\", "text": "b"}', "text"),  # escaped backslashes before a quote
]


@pytest.mark.parametrize(("line", "key"), DUPLICATES)
def test_a_repeated_key_is_refused_naming_file_line_and_key(tmp_path: Path, line: str, key: str) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": 0, "text": "fine"}\n' + line + "\n")
    with pytest.raises(InputError, match=rf"in\.jsonl:2: .*key {key!r} appears twice.*--skip-invalid"):
        list(read_jsonl(path))


def test_lines_without_repeated_keys_still_read_exactly(tmp_path: Path) -> None:
    lines = [
        {"id": 1, "text": 'he said "text": "no", "id": 2'},
        {"id": 2, "text": "a \\ backslash, \"quoted\\\"\" and \u00e9"},
        {"id": 3, "text": "", "extra": None, "flag": True},
        {"id": 4, "text": "x", "meta": {"text": "y"}},
    ]
    path = tmp_path / "in.jsonl"
    srsly.write_jsonl(path, lines)
    assert list(read_jsonl(path)) == lines
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")  # ASCII escapes
    assert list(read_jsonl(path)) == lines


_VALUES = st.one_of(st.text(alphabet='ab"\\\u00e9 :,{}', max_size=6), st.integers(-(2**70), 2**70), st.booleans(), st.none())


@given(
    members=st.lists(st.tuples(st.text(alphabet='ab"\\\u00e9', max_size=3), _VALUES), max_size=5),
    ascii_escapes=st.lists(st.booleans(), min_size=10, max_size=10),
)
def test_the_fast_path_reads_a_line_only_when_the_standard_parser_reads_it_alike(
    members: list[tuple[str, Any]], ascii_escapes: list[bool]
) -> None:
    """orjson keeps a repeated key's last value: whatever the keys, quotes and escapes, a line
    the fast path reads must be one the standard parser reads to the same dict."""
    parts = [
        json.dumps(key, ensure_ascii=ascii_escapes[i % 10]) + ":" + json.dumps(value, ensure_ascii=ascii_escapes[(i + 5) % 10])
        for i, (key, value) in enumerate(members)
    ]
    raw = ("{" + ",".join(parts) + "}").encode()
    fast = delink_io._fast_record(raw)
    try:
        exact: Any = delink_io.parse_json_line(raw, raw.decode())
    except ValueError as err:
        exact = err
    repeated = len({key for key, _ in members}) < len(members)
    assert isinstance(exact, ValueError) == repeated
    assert fast is None or fast == exact


def test_skip_invalid_skips_a_line_with_a_repeated_key(tmp_path: Path, delink: Callable[..., Outcome]) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": 1, "text": "one"}\n{"id": 2, "text": "a", "text": "b"}\n{"id": 3, "text": "three"}\n')
    stats = CorpusStats()
    assert list(read_jsonl_documents(path, skip_invalid=True, stats=stats)) == [(1, "one"), (3, "three")]
    assert stats.skipped_lines == [f"{path}:2"]
    result = delink("index", path, "-o", tmp_path / "index")
    one_error_line(result, 1, f"{path}:2", "key 'text' appears twice")
    assert not (tmp_path / "index").exists()


# --- folder corpora stay in their folder ------------------------------------------------


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    write_files(tmp_path, {"texts/a.txt": "first document", "texts/sub/b.txt": "second document", "secret.txt": "a file outside the corpus"})
    return tmp_path / "texts"


def test_a_link_to_a_file_outside_the_folder_is_refused(folder: Path) -> None:
    (folder / "outside.txt").symlink_to(folder.parent / "secret.txt")
    with pytest.raises(InputError, match=r"outside\.txt: .*leads outside the folder .*texts"):
        list(read_documents([folder]))


def test_a_link_to_a_directory_outside_the_folder_is_refused(folder: Path) -> None:
    (folder.parent / "elsewhere").mkdir()
    (folder.parent / "elsewhere" / "c.txt").write_text("not part of the corpus")
    (folder / "sub" / "more").symlink_to(folder.parent / "elsewhere")
    with pytest.raises(InputError, match=r"more: .*leads outside the folder"):
        list(read_documents([folder]))


def test_skip_invalid_skips_and_lists_what_leaves_the_folder(folder: Path) -> None:
    (folder / "outside.txt").symlink_to(folder.parent / "secret.txt")
    (folder / "gone").symlink_to(folder.parent)
    stats = CorpusStats()
    documents = list(read_documents([folder], skip_invalid=True, stats=stats))
    assert documents == [("a.txt", "first document"), ("sub/b.txt", "second document")]
    assert stats.skipped_lines == [f"{folder / 'gone'} (leads outside the folder)", f"{folder / 'outside.txt'} (leads outside the folder)"]


def test_links_inside_the_folder_are_read_once_and_loops_end(folder: Path) -> None:
    (folder / "again.txt").symlink_to(folder / "a.txt")  # the same file twice would count its phrases twice
    (folder / "sub" / "loop").symlink_to(folder)  # a cycle
    (folder / "sub" / "self").symlink_to(folder / "sub")
    (folder / "x.txt").symlink_to(folder / "y.txt")  # a cycle of file links: no file at all
    (folder / "y.txt").symlink_to(folder / "x.txt")
    (folder / "linked.txt").symlink_to(folder / "sub" / "notes.text")
    (folder / "sub" / "notes.text").write_text("read through its link")
    assert list(read_documents([folder])) == [
        ("a.txt", "first document"),
        ("linked.txt", "read through its link"),
        ("sub/b.txt", "second document"),
    ]


def test_a_file_url_folder_stays_in_its_folder_too(folder: Path) -> None:
    (folder / "outside.txt").symlink_to(folder.parent / "secret.txt")
    with pytest.raises(InputError, match="leads outside the folder"):
        list(read_documents([f"file://{folder}"]))


# --- owner and mode of the key file and the id mapping ----------------------------------

needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file to another user needs root")
OTHER_UID = 65534  # nobody


@needs_root
@pytest.mark.parametrize("name", ["index.key", "index.ids.json"])
def test_a_file_another_user_owns_warns_or_is_refused(index_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = index_path.with_name(name)
    os.chown(path, OTHER_UID, -1)
    what = "key file" if name == "index.key" else "id mapping"
    with pytest.warns(KeyPermissionWarning, match=rf"{what} .*{name} is owned by uid {OTHER_UID}, not by you \(uid 0\)"):
        CorpusIndex(index_path).doc_ids
    with pytest.raises(InputError, match=rf"{what} .*owned by uid {OTHER_UID}.*refused: strict key permissions"):
        CorpusIndex(index_path, strict_key_permissions=True).doc_ids
    monkeypatch.setenv("DELINK_STRICT_KEY_PERMISSIONS", "1")
    with pytest.raises(InputError, match=f"owned by uid {OTHER_UID}"):
        CorpusIndex(index_path).doc_ids


def test_an_id_mapping_others_can_read_warns_or_is_refused(
    tmp_path: Path, index_path: Path, delink: Callable[..., Outcome]
) -> None:
    ids = index_path.with_name("index.ids.json")
    ids.chmod(0o644)
    with pytest.warns(KeyPermissionWarning, match=r"id mapping .*index\.ids\.json is accessible to group or others \(mode 0644\).*chmod 600"):
        assert CorpusIndex(index_path).doc_ids == ["a", "b", "c"]
    with pytest.raises(InputError, match="id mapping .*mode 0644.*refused: strict key permissions"):
        CorpusIndex(index_path, strict_key_permissions=True).doc_ids
    with pytest.raises(InputError, match="id mapping .*refused: strict key permissions"):
        update_index(index_path, [("d", "A new document.")], strict_key_permissions=True)
    srsly.write_jsonl(tmp_path / "new.jsonl", [{"id": "d", "text": "A new document."}])
    result = delink("index", tmp_path / "new.jsonl", "--update", index_path, "--strict-key-permissions")
    one_error_line(result, 1, "id mapping", "mode 0644")
    ids.chmod(0o600)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert CorpusIndex(index_path, strict_key_permissions=True).doc_ids == ["a", "b", "c"]


# --- gzip: trailing data is not truncation ----------------------------------------------

LINES = b'{"id": 1, "text": "one"}\n{"id": 2, "text": "two"}\n'


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            gzip.compress(LINES) + b"garbage after the stream",
            rf"has trailing data after the end of the gzip stream, from byte {len(gzip.compress(LINES))} of the file on; cut",
        ),
        (gzip.compress(LINES) + gzip.compress(LINES)[:10] + b"\x00", "damaged or truncated gzip data"),
        (gzip.compress(LINES)[:-6], "damaged or truncated gzip data"),
            (LINES, r"is not gzip data"),
        (b"no", r"is not gzip data"),
    ],
    ids=["trailing", "damaged second member", "truncated", "not gzip", "short"],
)
def test_gzip_problems_are_named_as_they_are(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "in.jsonl.gz"
    path.write_bytes(data)
    with pytest.raises(InputError, match=rf"^{path}: {message}"):
        list(read_jsonl(path))
    fsspec.filesystem("memory").pipe(f"/{tmp_path.name}/in.jsonl.gz", data)
    with pytest.raises(InputError, match=rf"^memory://{tmp_path.name}/in\.jsonl\.gz: {message}"):
        list(read_jsonl(f"memory://{tmp_path.name}/in.jsonl.gz"))


def test_zero_padding_and_several_members_still_read(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl.gz"
    path.write_bytes(gzip.compress(LINES) + gzip.compress(LINES) + b"\x00" * 100)
    assert [record["id"] for record in read_jsonl(path)] == [1, 2, 1, 2]
