"""SPEC §8: "where two tables disagree on a character, the text is linkable if it is linkable under either".

ASCII folding and the Nd digits (the engine tables, what the index reads) and UTS #39 (a
reader's eyes, ICU's normalizer) read 68 characters as different ASCII letters or digits:
``þ`` is ``th`` or ``p``, ``١`` is ``1`` or ``l``, ``ẛ`` is ``f`` or ``s``. A text holding one is
also looked up with them read the other way (``ngrams.alternate_analysis``), against the
collection as indexed, and compared with the naive reading in ``spec_oracle`` in both
directions: a phrase found only as the engines read it, and one found only as a reader does.
"""
from __future__ import annotations

import unicodedata
from collections import Counter

import numpy as np
import pytest
import spacy

import spec_oracle
from conftest import build_index, require_module
from spacy_delink.linkage import search_form
from spacy_delink.linkage.attack import Detection, assess_text, detect
from spacy_delink.linkage.index import CorpusIndex
from spacy_delink.linkage.ngrams import minimal_across
from spacy_delink.linkage.tokenize import SearchTokenizer
from spacy_delink.llm.tasks.rewrite import make_rewrite_task
from spacy_delink.rewrite.loop import RewriteLoop
from test_incremental_detection import same_covers, same_detection

require_module("tantivy", "the oracle's ASCII folding is tantivy's own filter (the test extra)")
require_module("icu", "the oracle's UTS #39 skeletons and Nd digits come from ICU (the test extra)")

MAX_N = 4
CORPUS = [
    "The village of Thorp lies on the river.",
    "Doctor Pellow lived on the river.",
    "The river Sava runs through Slovenia and Croatia.",
    "The village lies on the river in Croatia.",
]
#: Pellow and Leeds are each in two documents, together in one: a pair only a reader's ``þ`` finds.
PAIRS = ["Pellow lived in Leeds.", "Pellow lived in York.", "Smith lived in Leeds.", "Smith lived in York."]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> CorpusIndex:
    return build_index(tmp_path_factory.mktemp("either"), CORPUS, MAX_N)


@pytest.fixture(scope="module")
def pairs_index(tmp_path_factory: pytest.TempPathFactory) -> CorpusIndex:
    return build_index(tmp_path_factory.mktemp("pairs"), PAIRS, MAX_N)


def oracle_minimal(corpus: list[str], text: str, k: int) -> tuple[list[tuple[int, int, int]], int | None]:
    """The minimal linkable ranges of every reading and table, merged by range (smallest support), and the anonymity."""
    merged: dict[tuple[int, int], int] = {}
    anonymity = []
    for reading, alternate in spec_oracle.checked(("exact", "search")):
        found = spec_oracle.assess(corpus, text, k, MAX_N, reading=reading, alternate=alternate)
        for start, end, support in found["ngrams"]:  # type: ignore[attr-defined]
            merged[(start, end)] = min(support, merged.get((start, end), support))
        if found["anonymity"] is not None:
            anonymity.append(found["anonymity"])
    return sorted((start, end, support) for (start, end), support in merged.items()), min(anonymity) if anonymity else None


def package_minimal(detection: Detection) -> list[tuple[int, int, int]]:
    found = minimal_across([part.analysis for part in detection.parts])
    return list(zip(found["start"].tolist(), found["end"].tolist(), found["support"].tolist()))


# -- the table ------------------------------------------------------------------------------------------


def test_the_other_readings_are_the_oracles() -> None:
    """Every assigned code point whose engine and UTS #39 readings are different ASCII letters or digits, by ICU and tantivy."""
    expected = {}
    for cp in range(0x80, 0x110000):
        ch = chr(cp)
        if unicodedata.category(ch) in ("Cn", "Co", "Cs"):
            continue
        other = spec_oracle.other_reading(ch)
        if other is not None:
            expected[ch] = other
    assert search_form.alternate_readings() == expected
    assert {"þ": "p", "Þ": "p", "ɛ": "c", "١": "l", "٥": "o", "ẛ": "s"}.items() <= expected.items()


def test_the_other_table_keeps_the_tokens() -> None:
    """Each character read the other way is a run of word characters too: the same tokens, other keys."""
    others = sorted(search_form.alternate_readings())
    text = " ".join(f"a{ch}b, {ch}{ch}. x{ch}" for ch in others) + " [NAME] " + "".join(others)
    engine, other = SearchTokenizer().tokenize(text), SearchTokenizer(alternate=True).tokenize(text)
    for name in ("starts", "ends", "segment_start", "spaceless"):
        assert np.array_equal(getattr(engine, name), getattr(other, name)), name
    differ = [i for i in range(len(engine)) if engine.form(i) != other.form(i)]
    assert len(differ) == len(engine)  # every token holds such a character
    assert [other.form(i) for i in range(3)] == [f"a{search_form.alternate_readings()[others[0]]}b"] + [
        search_form.alternate_readings()[others[0]] * 2, f"x{search_form.alternate_readings()[others[0]]}"
    ]


# -- linkable under either table, against the oracle -------------------------------------------------------


@pytest.mark.parametrize(
    "text, table",
    [
        ("On the river, Þorp.", "engine"),  # thorp: the village's own name, as the engines read it
        ("On the river, Þellow.", "uts39"),  # pellow: the doctor's name, as a reader reads it
        ("On the river, Sl٥venia.", "uts39"),  # slovenia, with an Arabic-Indic five for the o
        ("On the river, ẛava.", "uts39"),  # sava: a long s with a dot, which ASCII folding reads as f
        ("On the river, Þomas.", None),  # thomas and pomas: in no document
    ],
)
def test_a_text_is_linkable_under_either_table(index: CorpusIndex, text: str, table: str | None) -> None:
    detection = detect(index, text, 2)
    ngrams, anonymity = oracle_minimal(CORPUS, text, 2)
    assert (package_minimal(detection), detection.anonymity) == (ngrams, anonymity)
    assert detection.protected == spec_oracle.protected(CORPUS, text, 2, MAX_N, 1) == (table is None)
    engine_only = detect(index, text, 2).parts[:2]
    assert [part.reading for part in engine_only] == ["exact", "search"]
    assert all(part.protected for part in engine_only) == (table != "engine")
    record = assess_text(index, "x", text, 2)
    assert record["readings"] == ["exact", "search", "gap"]
    if table is not None:
        (found,) = record["ngrams"]
        assert (found["text"], found["readings"]) == (text[len("On the river, ") : -1], ["search"])


def test_a_pair_found_only_by_a_readers_eyes_is_linkable(pairs_index: CorpusIndex) -> None:
    text = "Þellow, Leeds."
    detection = detect(pairs_index, text, 2, arity=2, max_combinations=10)
    assert detection.protected is spec_oracle.protected(PAIRS, text, 2, MAX_N, 2) is False
    assert all(part.protected for part in detection.parts[:2]) and detection.combination_linkable
    expected = spec_oracle.assess_combinations(PAIRS, text, 2, MAX_N, 2, "search", alternate=True)
    other = detection.parts[-1].combinations  # the search reading under the other table, after the gap reading
    assert other is not None
    found = {(frozenset((other.candidates[i].start, other.candidates[i].end) for i in c.members), c.support) for c in other.head()}
    assert found == expected["combinations"] and detection.anonymity == expected["anonymity"] == 1
    (combination,) = assess_text(pairs_index, "x", text, 2, arity=2)["combinations"]
    assert combination["readings"] == ["search"] and combination["support"] == 1


def test_the_components_find_it_and_name_the_search_reading_once(index: CorpusIndex, pairs_index: CorpusIndex) -> None:
    risk = spacy.blank("en")
    risk.add_pipe("delink_risk", config={"index": str(index.path), "k": 2})
    doc = risk("On the river, Þellow.")
    assert [(span.text, span._.delink_readings) for span in doc.spans["linkable"]] == [("Þellow", ["search"])]
    combinations = spacy.blank("en")
    combinations.add_pipe("delink_combinations", config={"index": str(pairs_index.path), "k": 2, "arity": 2})
    doc = combinations("Þellow, Leeds. Þellow, Leeds.")
    assert doc._.delink_combination_linkable
    assert [record["readings"] for record in doc._.delink_combinations] == [["search"]]
    assert [span.text for span in doc.spans["linkable_combinations"]] == ["Þellow", "Leeds"]


# -- the rewrite ----------------------------------------------------------------------------------------


def test_a_mask_redetects_the_other_table_as_a_full_detection(pairs_index: CorpusIndex) -> None:
    text = "Þellow, Leeds. Smith, York, Þellow."
    detection = detect(pairs_index, text, 2, arity=2)
    assert len(detection.parts) == 4  # exact, search, gap, and the search reading under the other table
    for granularity in ("token", None):
        ranges = [(0, len("Þellow"))]
        after = "[REDACTED]" + text[len("Þellow") :]
        incremental, full = detection.after_mask(ranges, after, granularity=granularity), detect(pairs_index, after, 2, arity=2, carried=detection.known_sources)
        assert len(incremental.parts) == len(full.parts) == 4
        same_detection(incremental, full)
        same_covers(incremental, full)


@pytest.mark.parametrize("incremental", [True, False])
def test_the_rewriter_never_writes_a_text_linkable_under_the_other_table_as_protected(
    index: CorpusIndex, pairs_index: CorpusIndex, incremental: bool
) -> None:
    for corpus, idx, arity, text in [
        (CORPUS, index, 1, "On the river, Þellow lived, near Sl٥venia."),
        (PAIRS, pairs_index, 2, "Þellow, Leeds."),
    ]:
        (result,) = RewriteLoop(
            name="test", detect=lambda t, carried=(), idx=idx, arity=arity: detect(idx, t, 2, arity, carried=carried), task=make_rewrite_task(),
            vocab=spacy.blank("en").vocab, llm=None, max_passes=0, mask="[REDACTED]", granularity="token", stats=Counter(),
            incremental=incremental,
        ).run([text])
        assert result.text != text and result.protected
        assert spec_oracle.protected(corpus, result.text, 2, MAX_N, arity)
