"""SPEC §8, the search reading: the search form, its tokens, the index's answers and the
detection under both readings, against the naive reading in ``spec_oracle`` and by hand.

The adversary's engine ignores punctuation inside a phrase and folds invisible and
look-alike characters, case and diacritics; the search reading models it. A text is
protected only when it is protected under both readings.
"""
from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import spec_oracle
from conftest import build_index, examples, require_module
from spacy_delink.errors import InputError
from spacy_delink.linkage import search_form
from spacy_delink.linkage.attack import assess_text, detect
from spacy_delink.linkage.combinations import analyze_combinations
from spacy_delink.linkage.index import CorpusIndex, ngram_keys
from spacy_delink.linkage.ngrams import analyze
from spacy_delink.linkage.readings import DEFAULT_READINGS, check_readings, describe
from spacy_delink.linkage.search_form import fold_char, fold_text
from spacy_delink.linkage.tokenize import SearchTokenizer, Tokenizer
from test_tokenization import assert_batch_is_one_by_one

#: Words with the characters an LLM answer or a hostile editor can hide a phrase with.
WORDS = [
    "the", "The", "farm", "Mura", "Ormož", "Ormoz", "ORMOŽ", "Sl\u00adovenia", "Slovenia", "S\u200bava", "Sava",
    "Сava",  # a Cyrillic С
    "Ѕava",  # a Cyrillic Ѕ
    "ℌave", "ﬁne", "fine", "Straße", "strasse", "x\u034fy", "xy", "tag\U000E0041s", "tags", "1997", "１９９７",
    "Drɐvɐ", "Drava", "þe", "⓳97", "١٩٩٧", "१९९७", "❶❾❾❼", "⑴",  # ASCII folding and Nd digits (issue 35)
    "pe", "Sl٥venia", "ẛava",  # read as the tables disagree: þe is pe, ٥ is o, ẛ is s to a reader (SPEC §8: either)
]
SEPARATORS = [" ", " ", ". ", ", ", "; ", " (", ") ", "\n", "\n\n", " [REDACTED] ", "***", "-", "'", " \u061c", "\ufe0f "]


@st.composite
def texts(draw: st.DrawFn) -> str:
    words = draw(st.lists(st.sampled_from(WORDS), min_size=0, max_size=10))
    return "".join(word + draw(st.sampled_from(SEPARATORS)) for word in words)


# -- the search form ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "character",
    ["\u00ad", "\u034f", "\ufe0f", "\u061c", "\u180e", "\u200b", "\u200d", "\u2060", "\ufeff", "\U000e0041", "\u3164", "\uffa0", "\U0001bca1"],
)
def test_invisible_characters_disappear(character: str) -> None:
    assert fold_char(character) == ""
    assert fold_text(f"Or{character}mož") == "ormoz"


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("Ormož", "ormoz"), ("ÉCOLE", "ecole"), ("cafe\u0301", "cafe"), ("Straße", "strasse"), ("ﬁne", "fine"),
        ("ＦＡＲＭ", "farm"), ("𝐅𝐚𝐫𝐦", "farm"), ("Łódź", "lodz"), ("Søren", "soren"), ("Đorđe", "dorde"),
        ("Сava", "cava"), ("Ѕava", "sava"), ("Іvan", "ivan"), ("Βοb", "bob"), ("ВОВ", "bob"), ("рaрa", "papa"),
        ("１９９７", "1997"), ("Ⅻ", "xii"), ("Thǝ", "the"), ("Þorn", "thorn"), ("ⓐ⓳", "a19"), ("١٩٩٤", "1994"),
        ("१९९४", "1994"), ("Ɛnd", "end"),
    ],
)
def test_look_alikes_case_and_diacritics_fold(written: str, read: str) -> None:
    assert fold_text(written) == read
    assert "".join(spec_oracle.search_form(c) for c in written) == read


def test_ascii_is_only_case_folded() -> None:
    """UTS #39 maps I→l, 1→l, 0→O and m→rn among ASCII characters; the search reading does not (§8's chosen reading)."""
    assert fold_text("Il10 modern") == "il10 modern"


def test_a_genuine_cyrillic_word_is_distinct_under_the_exact_reading() -> None:
    exact = Tokenizer()
    assert [exact.search_form(t) for t in exact.tokenize("Сava Sava").raw] == ["сava", "sava"]
    search = SearchTokenizer().tokenize("Сava Sava")
    assert [search.form(i) for i in range(len(search))] == ["cava", "sava"]


def test_the_fold_table_matches_every_code_point() -> None:
    """The compiled table (what the index and queries use) against ``fold_char`` for every assigned code point."""
    starts, chars = search_form.fold_table()
    mismatches = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or unicodedata.category(chr(cp)) == "Cn" and not search_form.is_default_ignorable(cp):
            continue
        folded = "".join(map(chr, chars[starts[cp] : starts[cp + 1]].tolist()))
        if folded != fold_char(chr(cp)):
            mismatches.append(hex(cp))
    assert mismatches == []


def test_prototypes_are_icus_skeletons() -> None:
    """The shipped UTS #39 data against ICU's own spoof checker (tools/confusables_table.py made it from ICU)."""
    icu = require_module("icu", "PyICU (pip install icukit-pyicu) checks the shipped look-alike data against ICU")
    checker = icu.SpoofChecker()
    for source, target in search_form.fold_tables().prototypes.items():
        assert checker.getSkeleton(0, source) == target, hex(ord(source))


# -- tokens -----------------------------------------------------------------------------------------------


@settings(max_examples=examples(300))
@given(texts())
def test_search_tokens_match_the_naive_reading(text: str) -> None:
    tokens = SearchTokenizer().tokenize(text)
    expected, breaks = spec_oracle.search_tokenize(text)
    assert [(t.start, t.end, t.form) for t in expected] == [
        (int(s), int(e), tokens.form(i)) for i, (s, e) in enumerate(zip(tokens.starts, tokens.ends))
    ]
    assert breaks[: len(expected)] == tokens.segment_start.tolist()


def test_punctuation_and_paragraph_ends_join_and_masks_break() -> None:
    """SPEC §8: an engine indexes a document as one field, so only a mask breaks a phrase."""
    tokens = SearchTokenizer().tokenize("intent to supply. He left (Sava).\n\nNext [PERSON] went")
    forms = [tokens.form(i) for i in range(len(tokens))]
    assert forms == ["intent", "to", "supply", "he", "left", "sava", "next", "went"]
    assert tokens.segment_start.tolist() == [True, False, False, False, False, False, False, True]


@settings(max_examples=examples(60))
@given(st.lists(texts(), min_size=1, max_size=5))
def test_batch_search_tokens_equal_one_by_one(batch: list[str]) -> None:
    assert_batch_is_one_by_one(SearchTokenizer(), batch)


# -- the index and detection, against the naive reading ------------------------------------------------


def reading_result(index: CorpusIndex, text: str, k: int, reading: str) -> dict[str, object]:
    analysis = analyze(index, text, k, reading=reading)
    return {"ngrams": sorted((o.start, o.end, o.support) for o in analysis.minimal()), "anonymity": analysis.anonymity()}


@settings(max_examples=examples(60), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=st.lists(texts(), min_size=1, max_size=5), query=texts(), max_n=st.integers(1, 4), data=st.data())
def test_both_readings_match_brute_force_for_every_k(
    tmp_path_factory: pytest.TempPathFactory, corpus: list[str], query: str, max_n: int, data: st.DataObject
) -> None:
    assume(any(spec_oracle.tokenize(t)[0] or spec_oracle.search_tokenize(t)[0] for t in corpus))  # something to index
    index = build_index(tmp_path_factory.mktemp("idx"), corpus, max_n=max_n)
    text = data.draw(st.sampled_from([query, *corpus, " ".join(corpus)]))
    for k in range(2, len(corpus) + 2):
        for reading in ("exact", "search"):
            assert reading_result(index, text, k, reading) == spec_oracle.assess(corpus, text, k, max_n, reading=reading), (k, reading)


@settings(max_examples=examples(40), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=st.lists(texts(), min_size=2, max_size=6), data=st.data())
def test_search_combinations_match_brute_force(tmp_path_factory: pytest.TempPathFactory, corpus: list[str], data: st.DataObject) -> None:
    assume(any(spec_oracle.search_tokenize(t)[0] for t in corpus))  # something to index
    index = build_index(tmp_path_factory.mktemp("idx"), corpus, max_n=3)
    text = data.draw(st.sampled_from([*corpus, " ".join(corpus[:3])]))
    k, arity = data.draw(st.integers(2, 4)), data.draw(st.sampled_from([2, 3]))
    result = analyze_combinations(index, analyze(index, text, k, reading="search"), arity)
    expected = spec_oracle.assess_combinations(corpus, text, k, 3, arity, reading="search")
    found = {
        (frozenset((result.candidates[i].start, result.candidates[i].end) for i in c.members), c.support) for c in result.head()
    }
    assert (found, result.combination_linkable, result.anonymity) == (
        expected["combinations"], expected["combination_linkable"], expected["anonymity"]
    )


@settings(max_examples=examples(40), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=st.lists(texts(), min_size=2, max_size=6), data=st.data())
def test_detection_is_linkable_under_either_reading(tmp_path_factory: pytest.TempPathFactory, corpus: list[str], data: st.DataObject) -> None:
    assume(any(spec_oracle.tokenize(t)[0] for t in corpus))  # something to index
    index = build_index(tmp_path_factory.mktemp("idx"), corpus, max_n=3, readings=DEFAULT_READINGS)
    text = data.draw(st.sampled_from([*corpus, " ".join(corpus[:3])]))
    k, arity = data.draw(st.integers(2, 4)), data.draw(st.sampled_from([1, 2, 3]))
    detection = detect(index, text, k, arity)
    assert detection.readings == ("exact", "search", "gap")
    assert detection.protected == spec_oracle.protected(corpus, text, k, 3, arity, readings=DEFAULT_READINGS)
    gap = spec_oracle.assess_gap(corpus, text, k, 3, arity)
    supports = [] if gap["anonymity"] is None else [gap["anonymity"]]
    for reading, alternate in spec_oracle.checked(("exact", "search")):
        expected = (
            spec_oracle.assess_combinations(corpus, text, k, 3, arity, reading, alternate)
            if arity >= 2
            else spec_oracle.assess(corpus, text, k, 3, reading=reading, alternate=alternate)
        )
        if expected["anonymity"] is not None:
            supports.append(expected["anonymity"])
    assert detection.anonymity == (min(supports) if supports else None)


# -- the cases the issue found ----------------------------------------------------------------------------

CORPUS = [
    "The applicant intended to supply. He was arrested in Ormož in 1997.",
    "The applicant intended to stay. She was arrested in Ljubljana.",
    "He intended to leave the country. He was arrested.",
    "Nobody intended to supply anything.",
]


def test_a_phrase_across_a_sentence_end_is_linkable(corpus_index: CorpusIndex) -> None:
    """The exact rules split "supply. He" and call the text protected; a search engine finds its source."""
    index = corpus_index
    text = "The [PERSON] intended to supply. He was arrested."
    assert detect(index, text, 2, 1, readings=("exact",)).protected
    detection = detect(index, text, 2, 1, readings=("exact", "search"))
    assert not detection.protected
    record = assess_text(index, "x", text, 2, 1, readings=("exact", "search"))
    assert {(r["text"], tuple(r["readings"])) for r in record["ngrams"]} == {("supply. He", ("search",))}
    assert record["readings"] == ["exact", "search"] and record["anonymity"] == 1


@pytest.mark.parametrize("hidden", ["Orm\u00adož", "Orm\u200bož", "Ormoz", "ORMOZ", "Оrmož", "Ormo\u017e\ufe0f", "Or\U000e0020mož"])
def test_invisible_and_look_alike_characters_do_not_hide_a_phrase(corpus_index: CorpusIndex, hidden: str) -> None:
    text = f"He was arrested in {hidden} on a Tuesday."
    detection = detect(corpus_index, text, 2, 1)
    assert not detection.protected
    assert any(fold_text(text[o.start : o.end]) == "ormoz" for o in detection.part("search").analysis.minimal())


def test_an_index_without_the_search_reading_refuses_it(tmp_path: Path) -> None:
    index = build_index(tmp_path, CORPUS, readings=("exact",))
    assert index.readings == ("exact",)
    with pytest.raises(InputError, match=r"holds the exact reading only, not the search and gap readings .* --overwrite"):
        detect(index, "He was arrested in Ormož.", 2)
    assert not detect(index, "He was arrested in Ormož.", 2, readings=("exact",)).protected


def test_a_search_form_of_another_version_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = build_index(tmp_path, CORPUS)
    monkeypatch.setattr("spacy_delink.linkage.index.reader.table_version", lambda: "unicode-99.0.0/uts39-0000000000000000")
    with pytest.raises(InputError, match=r"was built with search form .* \(another Unicode or spacy-delink version\)"):
        detect(index, "He was arrested in Ormož.", 2)


def test_readings_are_checked_and_named() -> None:
    assert check_readings("search, exact") == ("exact", "search")
    assert check_readings(["exact"]) == ("exact",)
    assert describe(["exact", "search"]) == "exact and search readings"
    assert describe(iter(["gap", "exact", "search"])) == "exact, search and gap readings"  # an iterator is read once
    with pytest.raises(InputError, match="unknown reading"):
        check_readings("exact,fuzzy")
    with pytest.raises(InputError, match="at least one reading"):
        check_readings([])


def test_a_search_row_with_its_twins_documents_is_stored_once(tmp_path: Path) -> None:
    """Keys of one string under both readings differ in the family bit alone; the search row is
    kept only where its documents differ from the exact twin's."""
    corpus = ["farm near. The river", "farm near the river", "the river farm"]
    index = build_index(tmp_path, corpus, max_n=2)
    _, exact_keys = index.tokenize("farm near. The river", "exact")
    _, search_keys = index.tokenize("farm near. The river", "search")
    assert ((exact_keys ^ search_keys) == ngram_keys.TWIN).all()  # the same four words, two families
    assert index.manifest["twins"] is True
    plain = CorpusIndex(build_index(tmp_path / "plain", corpus, max_n=2, readings=("exact",)).path)
    both = index.manifest["summary"]["ngrams_per_level"]
    exact_only = plain.manifest["summary"]["ngrams_per_level"]
    # the unigrams' and "farm near" / "the river" search rows equal their twins; "near the" differs
    # (doc 0 has it only across the full stop) and is stored on its own
    assert both["1"] == exact_only["1"] and both["2"] == exact_only["2"] + 1
    for reading in ("exact", "search"):
        for k in (2, 3, 4):
            assert reading_result(index, "near the", k, reading) == spec_oracle.assess(corpus, "near the", k, 2, reading=reading)
