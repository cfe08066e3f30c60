"""The independent engine of `delink evaluate` reads like a real one (SPEC §8): phrases across
punctuation and paragraph ends, folded text, breaks only at masks, checked against a brute-force
reference; and the sloppy phrases around masks, read on positions: inside the contract up to
max_gap (the gap reading), reported apart above it and for phrases longer than max_n."""
from __future__ import annotations

import re
from functools import lru_cache
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_delink.errors import InputError
from spacy_delink.evaluate.adversary import SearchEngineAdversary
from spacy_delink.evaluate.engine_reading import SENTINEL, Search
from spacy_delink.evaluate.metrics import _engine_counts
from spacy_delink.evaluate.settings import EvaluationSettings
from spacy_delink.linkage.search_form import fold_text
from spacy_delink.linkage.tokenize import LinkageRules

from conftest import examples
import spec_oracle


def search_engine(corpus: list[str], max_n: int = 8, slop: int | None = None) -> SearchEngineAdversary:
    return SearchEngineAdversary(corpus, LinkageRules(max_n=max_n), max_n, readings=["search"], proximity_slop=slop)


def test_a_phrase_runs_across_a_sentence_end() -> None:
    corpus = [
        "There was intent to supply. He appealed.",
        "There was intent to supply. It was. He appealed.",
        "He appealed. There was intent to supply.",
    ]
    adversary = SearchEngineAdversary(corpus, LinkageRules(), 8, proximity_slop=None)
    found = adversary.attack("intent to supply. He appealed", [2], [1, 3])
    search = found.readings["search"][(2, 1)]
    assert (search.linkable, search.anonymity, search.witness) == (True, 1, {"phrases": ["supply he"], "hits": 1, "reading": "search"})
    assert adversary.engines["search"].count(Search(("supply", "he"))) == 1  # tantivy's phrase query ignores the "."
    # The exact reading breaks at the ".": every phrase is in all three documents.
    assert not found.readings["exact"][(2, 3)].linkable
    assert found.verdict((2, 3)) == search  # linkable under either reading


@pytest.mark.parametrize(
    ("written", "exact_reads_it"),
    [("ORMOŽ", True), ("Ormoz", False), ("Or\u00admož", False), ("Orm\u200boz", False), ("Orm\u034foz", False),
     ("Ormo\ufe0fz", False), ("O\U000e0041rmoz", False), ("Оrmоz", False), ("Ｏｒｍｏｚ", False)],
    ids=["capitals", "accent dropped", "soft hyphen", "zero width space", "U+034F", "variation selector", "tag", "Cyrillic O", "full width"],
)
def test_the_engine_reads_the_search_form(written: str, exact_reads_it: bool) -> None:
    corpus = ["She was born in Ormož.", "He was born in Ptuj.", "Ormož is a town."]
    adversary = SearchEngineAdversary(corpus, LinkageRules(), 8, proximity_slop=None)
    found = adversary.attack(f"born in {written}", [2], [1])
    search = found.readings["search"][(2, 1)]
    assert (search.linkable, search.anonymity, search.witness["phrases"] if search.witness else None) == (True, 1, ["in ormoz"])
    assert found.readings["exact"][(2, 1)].linkable == exact_reads_it  # tantivy's lower-casing alone misses the rest


def test_no_phrase_across_a_mask_but_across_paragraph_ends() -> None:
    """SPEC §8: an engine indexes a document as one field, so only a mask breaks a phrase."""
    corpus = [
        "supply [NAME] he",
        "supply\n\nhe",
        "supply \t\r\n he",
        "supply\n\u200b\u00a0\nhe",
        "supply ***** he",
        "supply <PERSON> he",
    ]
    engine = search_engine(corpus).engines["search"]
    assert engine.count(Search(("supply", "he"))) == 3  # the paragraph ends join; the masks break
    assert engine.count(Search(("supply", "break"))) == engine.count(Search(("break",))) == 0  # the sentinel is no word
    for released in ("supply [X] he", "supply *** he"):
        assert engine.reading.segments(released, engine.analyzer).runs == [["supply"], ["he"]]
    for linked in ("supply; he", "supply \n he", "supply — he", "supply\n\nhe"):
        assert engine.reading.segments(linked, engine.analyzer).runs == [["supply", "he"]]


def test_the_sentinel_is_never_a_search_token() -> None:
    every = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000)
    assert fold_text(SENTINEL) != SENTINEL
    assert re.search("[A-Z]", fold_text(every)) is None  # case-folded: no capital survives


# -- against a brute-force reading of SPEC §8 ----------------------------------------------------

WORDS = [
    "court", "Court", "COURT", "Ormož", "ormoz", "Or\u00admoz", "Оrmоz", "river", "ri\u200bver", "ﬁle", "file", "he", "sava", "3",
    "rᴉʌǝr", "sɐvɐ", "þe", "the", "⓳94", "1994", "١٩٩٤", "१९९४", "❶❾❾❹",  # SPEC §8's ASCII folding and Nd digits
]
#: A masked character in the reference's folded text (not a letter or digit, not in any text).
MASKED = "\x00"
#: U+1F150 stays a symbol in the search form, but tantivy's tokenizer (Unicode's Alphabetic) takes it for a letter.
GAPS = [" ", " ", " ", ". ", ", ", "; ", " - ", "'", "", "_", "\U0001f150", " [NAME] ", "<PERSON>", " *** ", "\n\n", "\n \n", "\n\u200b\n", "\n"]


def reference_tokenize(text: str, reading: str = "search", alternate: bool = False) -> tuple[list[spec_oracle.OracleToken], list[bool]]:
    """SPEC §8 character by character: each character's search form (the oracle's, read from ICU and
    tantivy's ascii_fold, not the package's), masks found on the text as written, tokens = runs of
    letters and digits, a gap breaks at a mask only. Offsets are into the folded characters (only
    keys and supports are compared). ``alternate``: the other table's reading (``spec_oracle.text_form``)."""
    return _reference_tokens(text, alternate)


@lru_cache(maxsize=4096)
def _reference_tokens(text: str, alternate: bool) -> tuple[list[spec_oracle.OracleToken], list[bool]]:
    masked = spec_oracle.masked_chars(text)
    folded = "".join(MASKED if masked[i] else spec_oracle.text_form(ch, alternate) for i, ch in enumerate(text))
    tokens = [spec_oracle.OracleToken(m.start(), m.end(), m.group()) for m in re.finditer(r"[^\W_]+", folded)]
    gaps = [folded[left.end : right.start] for left, right in zip(tokens, tokens[1:])]
    return tokens, [True] + [MASKED in gap for gap in gaps]


def joined(words: list[str], gaps: list[str]) -> str:
    return "".join(word + gap for word, gap in zip(words, gaps))


word_lists = st.lists(st.sampled_from(WORDS), min_size=1, max_size=10)


@settings(max_examples=examples(30))
@given(data=st.data())
def test_the_search_reading_matches_a_brute_force_reference(data: st.DataObject) -> None:
    """Random corpora of a few words written many ways; the queries are some of the same word
    sequences with other gaps (so phrases across punctuation, masks and paragraphs meet)."""
    gaps = lambda size: st.lists(st.sampled_from(GAPS), min_size=size, max_size=size)  # noqa: E731
    sequences = data.draw(st.lists(word_lists, min_size=2, max_size=7))
    corpus = [joined(words, data.draw(gaps(len(words)))) for words in sequences]
    retyped = data.draw(st.lists(st.sampled_from(sequences), min_size=1, max_size=3)) + [data.draw(word_lists)]
    queries = [joined(words, data.draw(gaps(len(words)))) for words in retyped] + corpus[:1]
    max_n = 4
    adversary = search_engine(corpus, max_n)
    with mock.patch.object(spec_oracle, "tokenize", reference_tokenize):
        for text in queries:
            found = adversary.attack(text, [2, 3], [1, 2, 3]).readings["search"]
            for k in (2, 3):
                assert found[(k, 1)].anonymity == spec_oracle.assess(corpus, text, k, max_n)["anonymity"], (text, k)
                for arity in (2, 3):
                    expected = spec_oracle.assess_combinations(corpus, text, k, max_n, arity)["anonymity"]
                    assert found[(k, arity)].anonymity == expected, (text, k, arity)
                    assert found[(k, arity)].linkable == (expected is not None)


# -- proximity searches: the gap reading (inside the contract) and what is still outside -----------

PROXIMITY_CORPUS = [
    "The applicant John Smith lived in Ljubljana. The court dismissed the appeal.",
    "The applicant was a nurse. Later she lived in Kranj.",
    "The applicant complained that the police, who lived in fear, did nothing.",
    "The applicant Ana lived in Celje. The court allowed the appeal.",
    "The court dismissed the appeal. The applicant, a nurse from Kranj, had lived in fear.",
]


def test_a_sloppy_phrase_around_a_mask_is_the_gap_reading() -> None:
    adversary = SearchEngineAdversary(PROXIMITY_CORPUS, LinkageRules(), 8)
    text = "the applicant [PERSON] lived in [CITY]. The court dismissed the appeal."
    found = adversary.attack(text, [2], [1, 2, 3], source=0)
    for arity in (1, 2, 3):  # every phrase and every AND of phrases finds >= 2 documents ...
        assert not found.verdict((2, arity)).linkable
    # ... "applicant * lived"~2 reaches the source (two hidden words) and Ana's document (one), but
    # "in * the court dismissed"~1 finds the source alone: inside the contract (SPEC §9)
    assert (found.gap[(2, 1)].linkable, found.gap[(2, 1)].anonymity) == (True, 1)
    assert found.gap[(2, 1)].witness["phrases"] == ['"in * the court dismissed"~1']  # type: ignore[index]
    counts = _engine_counts([found], (2, 1))
    assert counts["engine_linkable"] == 0
    assert counts["proximity"] == {
        "gap_reading": {"linkable": 1, "singled_out": 1, "beyond_phrases": 1, "beyond_phrases_singled_out": 1},
        "linkable": 1, "singled_out": 1, "not_linkable_in_contract": 0, "beyond_contract": 0,
        "beyond_contract_singled_out": 0, "beyond_contract_share": None,
    }
    # ANDed with a phrase: "applicant * lived"~2 (documents 0 and 3) AND "the court dismissed the appeal" (0 and 4)
    found = adversary.attack("the applicant [PERSON] lived in [CITY] and the court dismissed the appeal.", [2], [1, 2], source=0)
    assert not found.gap[(2, 1)].linkable and not found.verdict((2, 2)).linkable
    assert (found.gap[(2, 2)].linkable, found.gap[(2, 2)].anonymity) == (True, 1)
    # an unknown source: each search at the smallest slop that finds any document ("~1": Ana's alone)
    found = adversary.attack("the applicant [PERSON] lived", [2], [1])
    assert found.gap[(2, 1)].witness["phrases"] == ['"applicant * lived"~1']  # type: ignore[index]


def test_what_is_still_outside_the_contract_is_measured_apart() -> None:
    corpus = ["the appeal was x x x x x dismissed today", "the appeal was dismissed today", "the appeal was heard and dismissed"]
    text = "the appeal was [X] dismissed today"
    inside = SearchEngineAdversary(corpus, LinkageRules(), 8).attack(text, [2], [1, 2], source=0)
    assert (inside.gap[(2, 1)].anonymity, inside.gap[(2, 1)].witness["phrases"]) == (1, ['"appeal was * dismissed today"~5'])  # type: ignore[index]
    narrow = SearchEngineAdversary(corpus, LinkageRules(), 8, proximity_slop=10, max_gap=4).attack(text, [2], [1, 2], source=0)
    assert not narrow.verdict((2, 2)).linkable and not narrow.gap[(2, 2)].linkable  # slop 5 > max_gap 4: outside
    assert (narrow.proximity[(2, 1)].linkable, narrow.proximity[(2, 1)].anonymity) == (True, 1)
    counts = _engine_counts([narrow], (2, 1))["proximity"]
    assert (counts["gap_reading"]["linkable"], counts["beyond_contract"], counts["beyond_contract_share"]) == (0, 1, 1.0)
    # a phrase longer than max_n: no mask separates its words
    long = SearchEngineAdversary(["a b c", "a b x", "x b c"], LinkageRules(max_n=2), 2).attack("a b c", [2], [1, 2], source=0)
    assert not long.gap[(2, 1)].linkable and long.verdict((2, 2)).linkable  # "a b" AND "b c"
    assert long.proximity[(2, 1)].witness["phrases"] == ["a b c"]  # type: ignore[index]


@settings(max_examples=examples(60))
@given(
    st.lists(st.lists(st.sampled_from(["a", "b", "c", "[X]"]), max_size=14), min_size=1, max_size=5),
    st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=2),
    st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=2),
    st.integers(1, 6),
)
def test_sloppy_phrases_are_read_exactly_on_positions(documents: list[list[str]], left: list[str], right: list[str], widest: int) -> None:
    """Every document whose words hold ``left``, then 1..widest words, then ``right`` (each run
    between masks), with its smallest gap: against a brute force over the words."""
    from spacy_delink.evaluate.proximity import Bridge, PositionalIndex

    runs = [[list(piece.split()) for piece in " ".join(words).split("[X]") if piece.split()] for words in documents]
    index = PositionalIndex(runs, widest)
    docs, slops = index.around(Bridge(tuple(left), tuple(right)))
    expected = {}
    for number, pieces in enumerate(runs):
        words = [w for piece in pieces for w in piece]
        run = [i for i, piece in enumerate(pieces) for _ in piece]
        def holds(at: int, phrase: list[str]) -> bool:
            return words[at : at + len(phrase)] == phrase and len(set(run[at : at + len(phrase)])) == 1
        gaps = [
            j - (i + len(left))
            for i in range(len(words)) if holds(i, left)
            for j in range(i + len(left) + 1, min(i + len(left) + widest, len(words) - 1) + 1) if holds(j, right)
        ]
        if gaps:
            expected[number] = min(gaps)
    assert dict(zip(docs.tolist(), slops.tolist())) == expected


def test_proximity_settings_are_checked() -> None:
    with pytest.raises(InputError, match="max_gap <= slop"):
        EvaluationSettings(ks=[2], arities=[1], proximity_slop=0)
    with pytest.raises(InputError, match="max_gap <= slop"):
        EvaluationSettings(ks=[2], arities=[1], proximity_slop=8, max_gap=16)  # the gap reading would be cut short
    # proximity searches run under the search reading: without it, they are not run
    assert EvaluationSettings(ks=[2], arities=[1], readings=["exact"]).proximity_slop is None
    with pytest.raises(InputError, match="search reading"):
        SearchEngineAdversary([], LinkageRules(), 8, readings=["exact"], proximity_slop=50)
    with pytest.raises(InputError, match="reads exact or search"):
        SearchEngineAdversary([], LinkageRules(), 8, readings=["fuzzy"])
