"""SPEC §1–2 rule by rule, with expectations worked out by hand."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import examples
import spec_oracle
from spacy_delink.errors import InputError
from spacy_delink.linkage.tokenize import LinkageRules, SearchTokenizer, Tokenizer


def segments(text: str, rules: LinkageRules | None = None) -> list[list[str]]:
    """Tokens grouped into join-runs, as raw strings."""
    tokens = Tokenizer(rules).tokenize(text)
    groups: list[list[str]] = []
    for raw, starts in zip(tokens.raw, tokens.segment_start):
        if starts:
            groups.append([])
        groups[-1].append(raw)
    return groups


def test_word_characters_and_offsets() -> None:
    text = "Mr O'Brien, née Müller_x 42"
    tokens = Tokenizer().tokenize(text)
    assert tokens.raw == ["Mr", "O", "Brien", "née", "Müller", "x", "42"]
    assert [text[s:e] for s, e in zip(tokens.starts, tokens.ends)] == tokens.raw


def test_combining_marks_are_word_characters() -> None:
    text = "cafe\u0301 au lait"
    assert Tokenizer().tokenize(text).raw == ["cafe\u0301", "au", "lait"]


def test_lone_surrogates_are_gap_characters() -> None:
    """A text with unpaired surrogates (valid Python, invalid UTF-8) tokenizes as the SPEC reads it."""
    text = "ab\ud800cd ef \udfff"
    tokens = Tokenizer().tokenize(text)
    expected, breaks = spec_oracle.tokenize(text)
    assert tokens.raw == ["ab", "cd", "ef"]
    assert [(t.start, t.end) for t in expected] == list(zip(tokens.starts.tolist(), tokens.ends.tolist()))
    assert tokens.codes[2] == 0xD800 and breaks[: len(expected)] == tokens.segment_start.tolist()


def test_search_form_is_nfkc_casefold() -> None:
    tokenizer = Tokenizer()
    assert tokenizer.search_form("STRASSE") == "strasse"
    assert tokenizer.search_form("Straße") == "strasse"
    assert tokenizer.search_form("ﬁne") == "fine"  # the fi ligature folds under NFKC
    assert tokenizer.search_form("Ｋ") == "k"  # full-width


@pytest.mark.parametrize(
    "text, expected",
    [
        ("the farm near the river", [["the", "farm", "near", "the", "river"]]),
        ("farm. River", [["farm"], ["River"]]),
        ("3.5 and 1,234 in the U.S", [["3", "5", "and", "1", "234", "in", "the", "U", "S"]]),
        ("a , b", [["a"], ["b"]]),
        ("a.. b", [["a"], ["b"]]),
        ("a;b:c!d?e", [["a"], ["b"], ["c"], ["d"], ["e"]]),
        ("a (b) c", [["a"], ["b"], ["c"]]),
        ("he said “yes” then", [["he", "said"], ["yes"], ["then"]]),
        ("one\ntwo", [["one", "two"]]),
        ("one\n \t\r\ntwo", [["one"], ["two"]]),
        ("one\n\ntwo", [["one"], ["two"]]),
        ("rock-and-roll / jazz & blues § 3", [["rock", "and", "roll", "jazz", "blues", "3"]]),
        ("\ufeffthe applicant", [["the", "applicant"]]),
        ("wait… what", [["wait"], ["what"]]),
    ],
)
def test_breaking_gaps(text: str, expected: list[list[str]]) -> None:
    assert segments(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("the [REDACTED] farm", [["the"], ["farm"]]),
        ("the [PERSON_1] farm", [["the"], ["farm"]]),
        ("the <PERSON> farm", [["the"], ["farm"]]),
        ("the *** farm", [["the"], ["farm"]]),
        ("the ** farm", [["the", "farm"]]),
        ("x[REDACTED]y", [["x"], ["y"]]),
        ("the [gc] farm", [["the"], ["gc"], ["farm"]]),  # lowercase: not a mask, but [ ] break
        ("[GC]", []),
        ("a <b> c", [["a", "b", "c"]]),  # lowercase tag is no mask; < > join
    ],
)
def test_masks(text: str, expected: list[list[str]]) -> None:
    assert segments(text) == expected


def test_mask_patterns_are_a_union() -> None:
    rules = LinkageRules(mask_patterns=(r"XX", r"X+Y"))
    # "XXY" matches both patterns in overlapping ways; the union masks all three letters.
    assert segments("aXXYb cXX d", rules) == [["a"], ["b", "c"], ["d"]]


def test_custom_rules_and_bad_rules() -> None:
    assert segments("a. b", LinkageRules(break_chars=";")) == [["a", "b"]]
    assert segments("a\n\nb", LinkageRules(paragraph_breaks=False)) == [["a", "b"]]
    with pytest.raises(InputError, match="max_n"):
        LinkageRules(max_n=0)
    with pytest.raises(InputError, match="mask pattern"):
        LinkageRules(mask_patterns=("[",))
    with pytest.raises(InputError, match="word character"):
        Tokenizer(LinkageRules(break_chars="a"))


WORDS = ["the", "The", "farm", "Mura", "river", "Straße", "STRASSE", "café", "cafe\u0301", "3", "5", "ﬁne", "U"]
SEPARATORS = [" ", " ", "  ", ". ", ".", ",", ", ", "\n", "\n\n", "-", "'", " [REDACTED] ", "***", " (", ") ", "_", "“"]


@st.composite
def texts(draw: st.DrawFn) -> str:
    words = draw(st.lists(st.sampled_from(WORDS), min_size=0, max_size=12))
    parts = []
    for word in words:
        parts.append(word)
        parts.append(draw(st.sampled_from(SEPARATORS)))
    return draw(st.sampled_from(["", " ", "."])) + "".join(parts)


@settings(max_examples=examples(300))
@given(texts())
def test_tokenizer_matches_the_naive_reading(text: str) -> None:
    tokens = Tokenizer().tokenize(text)
    expected, breaks = spec_oracle.tokenize(text)
    assert [(t.start, t.end) for t in expected] == list(zip(tokens.starts.tolist(), tokens.ends.tolist()))
    assert breaks[: len(expected)] == tokens.segment_start.tolist()
    room = [next((j for j in range(i + 1, len(expected)) if breaks[j]), len(expected)) - i for i in range(len(expected))]
    assert tokens.remaining.tolist() == room
    tokenizer = Tokenizer()
    assert [tokenizer.search_form(r) for r in tokens.raw] == [t.form for t in expected]


@settings(max_examples=examples(100))
@given(st.lists(texts(), min_size=1, max_size=5))
def test_batch_tokenization_equals_one_by_one(batch: list[str]) -> None:
    assert_batch_is_one_by_one(Tokenizer(), batch)


def assert_batch_is_one_by_one(tokenizer: Tokenizer | SearchTokenizer, batch: list[str]) -> None:
    """``tokenize_batch`` gives what tokenizing each text alone gives, in order: the counts, each
    token as written and as its key reads it, and where segments start."""
    joined, counts = tokenizer.tokenize_batch(batch)
    singles = [tokenizer.tokenize(text) for text in batch]
    assert counts.tolist() == [len(t) for t in singles]
    assert joined.raw == [raw for t in singles for raw in t.raw]
    assert [joined.form(i) for i in range(len(joined))] == [t.form(i) for t in singles for i in range(len(t))]
    assert joined.segment_start.tolist() == [flag for t in singles for flag in t.segment_start.tolist()]
