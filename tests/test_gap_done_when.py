"""Issue 33's "Done when" engine: ``gap_adversary``, written without the package (SPEC oracle
folding, its own positional index), reads a sloppy phrase of 1-3 words each side of a mask,
slop <= 16, alone or ANDed with one of the text's phrases, and a phrase that runs across a
paragraph end. These tests pin it by hand; tests/test_tab_end_to_end.py runs it on the TAB
manual test documents protected with the defaults (k = 2, arity 3).
"""
from __future__ import annotations

from gap_adversary import Adversary


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


# The TAB run itself (issue 33's "Done when") is in tests/test_tab_end_to_end.py, on the same protect
# run as the search-engine check: one protect of the 127 texts instead of two.
