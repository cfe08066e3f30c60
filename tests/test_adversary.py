"""The independent engine of `delink evaluate` reads like a real one (SPEC §8): phrases across
punctuation and paragraph ends, folded text, breaks only at masks, checked against a brute-force
reference; and the proximity searches around masks, reported as outside the rules."""
from __future__ import annotations

import re
from functools import lru_cache
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_delink.errors import InputError
from spacy_delink.evaluate.adversary import SENTINEL, Search, SearchEngineAdversary
from spacy_delink.evaluate.metrics import EvaluationSettings, _engine_counts
from spacy_delink.linkage.search_form import fold_text
from spacy_delink.linkage.tokenize import LinkageRules

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


@settings(max_examples=30, deadline=None)
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


# -- proximity searches around masks: outside the rules, measured ---------------------------------

PROXIMITY_CORPUS = [
    "The applicant John Smith lived in Ljubljana. The court dismissed the appeal.",
    "The applicant was a nurse. Later she lived in Kranj.",
    "The applicant complained that the police, who lived in fear, did nothing.",
    "The applicant Ana lived in Celje. The court allowed the appeal.",
    "The court dismissed the appeal. The applicant, a nurse from Kranj, had lived in fear.",
]


def test_a_proximity_search_bridges_a_masked_name() -> None:
    adversary = SearchEngineAdversary(PROXIMITY_CORPUS, LinkageRules(), 8, proximity_slop=3)
    engine = adversary.engines["search"]
    assert engine.count(Search(("applicant", "lived"), 3)) == 2  # documents 0 and 3: two words hidden, one
    assert engine.count(Search(("applicant", "lived"))) == 0
    found = adversary.attack("the applicant [PERSON] lived in Ljubljana", [2], [1])
    assert found.readings["search"][(2, 1)].linkable  # "ljubljana" is in one document: a phrase singles it out
    found = adversary.attack("the applicant [PERSON] lived in [CITY]. The court dismissed the appeal.", [2], [1, 2, 3])
    for arity in (1, 2, 3):  # every phrase and every AND of phrases finds >= 2 documents ...
        assert not found.verdict((2, arity)).linkable
    assert not found.proximity[(2, 1)].linkable  # ... the proximity search alone finds 2 ...
    near = found.proximity[(2, 2)]  # ... and ANDed with a phrase, 1: the source
    assert (near.linkable, near.anonymity) == (True, 1)
    assert set(near.witness["phrases"]) & {'"applicant lived"~3', '"the applicant lived"~3', '"applicant lived in"~3', '"the applicant lived in"~3'}
    assert "the court dismissed the appeal" in near.witness["phrases"]
    counts = _engine_counts([found], (2, 2))
    assert counts["engine_linkable"] == 0
    assert counts["proximity"] == {
        "linkable": 1, "singled_out": 1, "not_linkable_in_contract": 1, "beyond_contract": 1,
        "beyond_contract_singled_out": 1, "beyond_contract_share": 1.0,
    }


def test_a_proximity_search_alone_and_its_limits() -> None:
    adversary = SearchEngineAdversary(PROXIMITY_CORPUS, LinkageRules(), 8, proximity_slop=3)
    found = adversary.attack("the applicant [PERSON] [SURNAME] lived in", [3], [1])  # masks in a row: one stretch
    assert not found.verdict((3, 1)).linkable  # "the applicant" and "lived in" are in all five documents
    assert (found.proximity[(3, 1)].linkable, found.proximity[(3, 1)].anonymity) == (True, 2)  # "~3" finds 0 and 3
    narrow = SearchEngineAdversary(PROXIMITY_CORPUS, LinkageRules(), 8, proximity_slop=1).engines["search"]
    assert narrow.count(Search(("applicant", "lived"), 1)) == 1  # "Ana" is one word; "John Smith" two
    across = SearchEngineAdversary(["the applicant\n\nlived in", "the applicant lived in x", "the applicant and lived in y"], LinkageRules(), 8, proximity_slop=3)
    engine = across.engines["search"]
    assert engine.count(Search(("applicant", "lived"), 3)) == 3  # across the original's paragraph end too (SPEC §8)
    assert not across.attack("the applicant [X]\n\nlived in", [2], [1]).proximity[(2, 1)].linkable  # all three hold it
    assert engine.reading.proximity_searches(engine.reading.segments("the applicant [X]\n\nlived in", engine.analyzer))


def test_proximity_settings_are_checked() -> None:
    with pytest.raises(InputError, match="between 1 and 16"):
        EvaluationSettings(ks=[2], arities=[1], proximity_slop=0)
    # proximity searches run under the search reading: without it, they are not run
    assert EvaluationSettings(ks=[2], arities=[1], readings=["exact"]).proximity_slop is None
    with pytest.raises(InputError, match="search reading"):
        SearchEngineAdversary([], LinkageRules(), 8, readings=["exact"], proximity_slop=3)
    with pytest.raises(InputError, match="reads exact or search"):
        SearchEngineAdversary([], LinkageRules(), 8, readings=["fuzzy"])
