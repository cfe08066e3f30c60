"""Issue 33's "Done when": no protected TAB text's source is singled out around a mask or across a paragraph end.

The TAB manual test documents are protected with the defaults (k = 2, arity 3) and searched
by ``gap_adversary``, an engine written without the package (SPEC oracle folding, its own
positional index): a sloppy phrase of 1-3 words each side of a mask, slop <= 16, alone or
ANDed with one of the text's phrases, and a phrase that runs across a paragraph end.
"""
from __future__ import annotations

import pytest
import srsly
from typer.testing import CliRunner

from conftest import shared_path
from gap_adversary import Adversary
from spacy_delink.cli import app
from tab_testbed import load_tab


def test_the_engine_reads_sloppy_phrases_in_order_with_one_to_max_gap_words_between() -> None:
    collection = [
        "He charged the first applicant.",
        "She charged first.",  # nothing between: not "charged _ first"
        "First he was charged.",  # wrong order
        "He charged [REDACTED] first applicant.",  # a mask takes no position: nothing between
        "charged " + "x " * 16 + "first",  # 16 words between
        "charged " + "x " * 17 + "first",  # 17: beyond the widest slop
    ]
    adversary = Adversary(collection)
    documents, gaps = adversary.collection.around(("charged",), ("first",))
    assert dict(zip(documents.tolist(), gaps.tolist())) == {0: 1, 4: 16}
    # a run never crosses a mask of the collection: "charged first" is not a phrase of document 3
    assert adversary.collection.documents(adversary.collection.phrase(["charged", "first"])).tolist() == [1]
    assert adversary.attack("He charged [REDACTED] first applicant", 0).around_mask == '"charged first"~1'  # document 4 needs slop 16
    assert adversary.attack("He charged [REDACTED] first applicant", 3).singled_out is False  # not found: no gap
    found = adversary.attack("charged [PERSON] [DATE] first", 4)
    assert found.around_mask is None and found.singled_out is False  # 0, 3 and 4 at slop 16


def test_the_engine_finds_phrases_across_paragraph_ends_and_ands() -> None:
    collection = ["The merits (Rule 59 § 1).\n\nTHE FACTS\n\nIn 1990", "The merits. Rule 59 1 the facts", "the facts in 1991"]
    adversary = Adversary(collection)
    found = adversary.attack("the merits (Rule 59 § 1).\n\nTHE FACTS\n\nIn [DATE]", 0)
    assert found.across_paragraph == '"the merits rule 59 1 the facts in"'  # document 1 lacks "in"
    found = adversary.attack("merits rule [REDACTED] 1 the facts", 1)
    assert found.across_paragraph is None  # no paragraph end in the text
    assert found.around_mask is None  # "rule 1"~1 and longer: documents 0 and 1
    assert found.around_mask_and_phrase is None  # every phrase is in both
    found = adversary.attack("[X] facts [X] the facts in", 0)
    assert found.around_mask_and_phrase is None and found.around_mask is None
    found = adversary.attack("(Rule [X] 1).\n\n[X] FACTS\n\nIn [X]", 0)
    assert found.around_mask == '"rule 1"~1' or found.around_mask_and_phrase is not None


@pytest.mark.slow
def test_no_protected_tab_text_is_singled_out_around_a_mask_or_across_a_paragraph_end(tmp_path) -> None:  # type: ignore[no-untyped-def]
    benchmark = load_tab(shared_path("tab"))
    srsly.write_jsonl(tmp_path / "corpus.jsonl", [{"id": i, "text": t} for i, t in benchmark.corpus])
    srsly.write_jsonl(tmp_path / "input.jsonl", [{"id": i, "text": t} for i, t in benchmark.inputs])
    runner = CliRunner()
    result = runner.invoke(app, ["index", str(tmp_path / "corpus.jsonl"), "--output", str(tmp_path / "index")])
    assert result.exit_code == 0, result.output
    out = tmp_path / "protected.jsonl"
    result = runner.invoke(app, ["protect", str(tmp_path / "index"), str(tmp_path / "input.jsonl"), "--k", "2", "--arity", "3", "--output", str(out)])
    assert result.exit_code == 0, result.output
    records = list(srsly.read_jsonl(out))
    assert [r["id"] for r in records] == [i for i, _ in benchmark.inputs] and all(r["protected"] for r in records)
    number = {doc_id: n for n, (doc_id, _) in enumerate(benchmark.corpus)}
    adversary = Adversary([text for _, text in benchmark.corpus])
    # The engine is not blind: around the manual masks it singles out nearly every source.
    before = [adversary.attack(text, number[doc_id]) for doc_id, text in benchmark.inputs[:20]]
    assert sum(found.around_mask is not None for found in before) >= 15
    singled_out = {}
    for record in records:
        found = adversary.attack(str(record["text"]), number[str(record["id"])])
        if found.singled_out:
            singled_out[record["id"]] = found
    examples = "; ".join(f"{doc_id}: {found}" for doc_id, found in list(singled_out.items())[:5])
    assert len(singled_out) == 0, f"{len(singled_out)} of {len(records)} protected texts singled out, e.g. {examples}"
