"""`delink protect --workers` (issue 14): the output of a run on Dask workers is the single-process output.

Two worker processes, a small corpus, the offline Mask model (deterministic, so "the
same output" is a byte comparison); a resumed run on workers completes a cut-off output
to the same bytes, and one against an updated index refuses the old records.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from conftest import Outcome
from spacy_delink.errors import InputError
from spacy_delink.linkage.index import IndexBuilder
from spacy_delink.linkage.index.update import update_index
from spacy_delink.linkage.tokenize import LinkageRules
from spacy_delink.rewrite.config import RewriterSpec, load_rewriter
from spacy_delink.rewrite.protect import protect_file

distributed = pytest.importorskip("dask.distributed")


def _corpus(documents: int, seed: int) -> list[tuple[str, str]]:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(40)] + ["the farm", "near the river", "was sold."]
    return [(f"d{i}", " ".join(rng.choice(vocab, size=25))) for i in range(documents)]


def _jsonl(path: Path, documents: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in documents), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def runner() -> Any:
    from spacy_delink.linkage.index.distributed import DaskRunner

    started = DaskRunner(workers=2)
    yield started
    started.close()


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    corpus = _corpus(30, seed=4)
    IndexBuilder(LinkageRules(max_n=4), progress=False, updatable=True).build(corpus, tmp_path / "index")
    queries = corpus[:10] + _corpus(13, seed=5)
    queries = [(f"q{i}", text) for i, (_, text) in enumerate(queries)]
    return tmp_path / "index", _jsonl(tmp_path / "queries.jsonl", queries)


def _protect(index: Path, queries: Path, out: Path, runner: Any = None, arity: int = 2) -> Any:
    rewriter = load_rewriter(index, 3, arity, None, None)
    spec = RewriterSpec.of(index, 3, arity, None, None, False, None, {}) if runner is not None else None
    return protect_file(rewriter, queries, out, batch_size=4, progress=False, runner=runner, spec=spec)


def test_protect_on_workers_writes_the_single_process_output(setup: tuple[Path, Path], tmp_path: Path, runner: Any) -> None:
    index, queries = setup
    alone = _protect(index, queries, tmp_path / "alone.jsonl")
    spread = _protect(index, queries, tmp_path / "spread.jsonl", runner)
    assert (tmp_path / "spread.jsonl").read_bytes() == (tmp_path / "alone.jsonl").read_bytes()
    assert (spread.documents, spread.outcomes) == (alone.documents, alone.outcomes)
    assert alone.documents == 23
    assert alone.outcomes["with_mask"] > 0  # something was linkable, so the comparison means something


def test_a_cut_off_output_is_resumed_on_workers_to_the_same_bytes(setup: tuple[Path, Path], tmp_path: Path, runner: Any) -> None:
    index, queries = setup
    _protect(index, queries, tmp_path / "alone.jsonl")
    full = (tmp_path / "alone.jsonl").read_bytes()
    lines = full.splitlines(keepends=True)
    (tmp_path / "resumed.jsonl").write_bytes(b"".join(lines[:9]) + lines[9][:20])  # a crash mid-line
    summary = _protect(index, queries, tmp_path / "resumed.jsonl", runner)
    assert summary.already_done == 9 and summary.repaired_last_line and summary.documents == 14
    assert (tmp_path / "resumed.jsonl").read_bytes() == full


def test_records_protected_before_an_update_are_not_taken_as_protected_after(
    setup: tuple[Path, Path], tmp_path: Path, runner: Any
) -> None:
    index, queries = setup
    _protect(index, queries, tmp_path / "out.jsonl", runner)
    update_index(index, [("new", "w1 w2 w3 the farm")])
    with pytest.raises(InputError, match="protected under .*documents=30.* but this run protects under .*documents=31"):
        _protect(index, queries, tmp_path / "out.jsonl", runner)


def test_delink_protect_workers_on_the_command_line(setup: tuple[Path, Path], tmp_path: Path, delink: Callable[..., Outcome]) -> None:
    index, queries = setup
    assert delink("protect", index, queries, "-o", tmp_path / "alone.jsonl", "--k", 3, "--arity", 2, "--batch-size", 4).returncode == 0
    result = delink("protect", index, queries, "-o", tmp_path / "spread.jsonl", "--k", 3, "--arity", 2, "--batch-size", 4, "--workers", 2)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "spread.jsonl").read_bytes() == (tmp_path / "alone.jsonl").read_bytes()
