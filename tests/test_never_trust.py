"""Nothing read back is trusted: resumed outputs, indexes that changed on disk (issue #24, point 4).

An output record is kept by a resumed ``delink protect`` only when its text is detected
protected again under the settings it claims and its input digest matches the input;
a pipeline that keeps running across ``delink index --update`` answers from the index
as it is now; ``delink evaluate`` counts a protected text it cannot verify as linkable
(tests/test_evaluate.py).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import spacy
import srsly

from conftest import Outcome
from spacy_delink.linkage.index import IndexBuilder
from spacy_delink.linkage.index.update import update_index
from test_rewriter import CORPUS, write_input  # noqa: F401  (CORPUS: what the shared index_path fixture indexes)


def protect(delink: Callable[..., Outcome], index_path: Path, source: Path, out: Path, *extra: str) -> Outcome:
    outcome = delink("protect", str(index_path), str(source), "-o", str(out), "--k", "2", *extra)
    assert outcome.returncode == 0, outcome.stderr
    return outcome


def rewrite(out: Path, change: Callable[[dict], None], number: int = 0) -> None:
    """Edit record ``number`` of an output in place, as a careless or hostile hand would."""
    records = list(srsly.read_jsonl(out))
    change(records[number])
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def test_a_record_edited_back_to_its_input_is_redone(delink: Callable[..., Outcome], index_path: Path, tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_input(source, 4)
    protect(delink, index_path, source, out)
    inputs = {r["id"]: r["text"] for r in srsly.read_jsonl(source)}
    first = next(iter(srsly.read_jsonl(out)))
    assert first["text"] != inputs[first["id"]]  # the input was linkable: something changed
    rewrite(out, lambda record: record.update(text=inputs[record["id"]]))  # back to the linkable input, still "protected"
    again = protect(delink, index_path, source, out)
    assert "3 already done, 1 redone" in again.stderr and "1 not protected" in again.stderr
    records = {r["id"]: r for r in srsly.read_jsonl(out)}
    assert len(records) == 4 and records[first["id"]]["text"] == first["text"]  # protected afresh, once


def test_a_record_claiming_a_higher_arity_is_checked_at_that_arity(
    delink: Callable[..., Outcome], index_path: Path, tmp_path: Path
) -> None:
    """The issue's edit: protected_under says arity 3 of a text protected at arity 1; a run at arity 3 redoes what links."""
    from spacy_delink.linkage.attack import detect
    from spacy_delink.linkage.index import CorpusIndex

    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    # Expectation updated for the gap reading (SPEC §9): arity 1 now masks write_input's texts so
    # far that they are protected at arity 3 too. Even records AND two frequent phrases, linkable at
    # arity 2 only ("applicant's farm" and "near the river" meet in one document); odd ones do not.
    combined, plain = "the applicant's farm. It was near the river.", "the river."
    srsly.write_jsonl(source, [{"id": f"doc{i}", "text": f"Person{i} saw {plain if i % 2 else combined}"} for i in range(4)])
    protect(delink, index_path, source, out, "--arity", "1")
    protect(delink, index_path, source, tmp_path / "arity3.jsonl", "--arity", "3")
    settings = next(iter(srsly.read_jsonl(tmp_path / "arity3.jsonl")))["protected_under"]
    for number in range(4):
        rewrite(out, lambda record: record.update(protected_under=settings), number)
    index = CorpusIndex(index_path)
    linkable = {r["id"]: r["text"] for r in srsly.read_jsonl(out) if not detect(index, r["text"], 2, 3).protected}
    assert linkable  # the fixture's texts hold combinations that arity 1 leaves
    again = protect(delink, index_path, source, out, "--arity", "3")
    assert f"{4 - len(linkable)} already done, {len(linkable)} redone" in again.stderr
    records = {r["id"]: r for r in srsly.read_jsonl(out)}
    assert len(records) == 4 and all(detect(index, r["text"], 2, 3).protected for r in records.values())
    assert all(records[doc_id]["text"] != text for doc_id, text in linkable.items())


def test_a_changed_input_text_is_redone(delink: Callable[..., Outcome], index_path: Path, tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_input(source, 3)
    protect(delink, index_path, source, out)
    inputs = list(srsly.read_jsonl(source))
    inputs[1]["text"] = inputs[1]["text"] + " The mill near the river Sava was sold in 1994."
    srsly.write_jsonl(source, inputs)
    again = protect(delink, index_path, source, out)
    assert "1 input changed" in again.stderr
    records = {r["id"]: r for r in srsly.read_jsonl(out)}
    assert len(records) == 3 and "was sold" in records[inputs[1]["id"]]["text"]


def test_a_pipeline_answers_from_the_index_as_it_is_now(tmp_path: Path) -> None:
    """A long-running pipeline across `delink index --update`: a text the new document makes linkable is no longer protected."""
    path = tmp_path / "index"
    corpus = [("a", "The farm near the river was sold."), ("b", "The quiet street in the town.")]
    IndexBuilder(progress=False, updatable=True).build(corpus, path)
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_rewriter", config={"index": str(path), "k": 2, "arity": 1, "cache_dir": None})
    text = "The orchard by the old mill burned down."
    before = nlp(text)
    assert before._.delink_protected and before.text == text  # nothing of it is in the collection
    update_index(path, [("c", "The orchard by the old mill burned down in May.")])
    after = nlp(text)
    assert after._.delink_protected and after.text != text  # rewritten against the updated index, and checked there
    assert nlp.get_pipe("delink_rewriter").index.documents == 3
