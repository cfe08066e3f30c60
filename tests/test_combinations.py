"""SPEC §5–6: combinations against the enumerating oracle, by hand, and bad input."""
from __future__ import annotations

import itertools
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import build_index, examples
import spec_oracle
from spacy_delink.linkage import combination_search as combinations
from spacy_delink.linkage.attack import DEFAULT_MAX_COMBINATIONS, assess_text, detect
from spacy_delink.linkage.combinations import CombinationAnalysis, analyze_combinations, check_arity
from spacy_delink.linkage.ngrams import analyze
from spacy_delink.errors import InputError
from spacy_delink.linkage.index import CorpusIndex


def run(index: CorpusIndex, text: str, k: int, arity: int) -> dict[str, object]:
    result = analyze_combinations(index, analyze(index, text, k), arity)
    return {
        "combinations": {
            (frozenset((result.candidates[i].start, result.candidates[i].end) for i in c.members), c.support)
            for c in result.head()
        },
        "combination_linkable": result.combination_linkable,
        "anonymity": result.anonymity,
    }


def oracle(corpus: list[str], text: str, k: int, max_n: int, arity: int) -> dict[str, object]:
    """The oracle's decision, anonymity and (unordered) combinations, as ``run`` returns them."""
    expected = spec_oracle.assess_combinations(corpus, text, k, max_n, arity)
    return {key: expected[key] for key in ("combinations", "combination_linkable", "anonymity")}


# Four documents over "slovenian", "farm", "1994", "river", each phrase in three of them.
CORPUS = [
    "Slovenian. Farm. 1994.",
    "Slovenian. Farm. River.",
    "Slovenian. 1994. River.",
    "Farm. 1994. River.",
]


def test_hand_worked_pairs_and_triples(corpus_index: CorpusIndex) -> None:
    index = corpus_index
    text = "Slovenian. Farm. 1994."
    # Every word has df 3 and every pair df 2 ({S,F}: d0,d1; {S,1994}: d0,d2; {F,1994}: d0,d3).
    # k=3: each pair (support 2) is linkable and minimal; the triple is not minimal.
    result = run(index, text, 3, 3)
    assert {support for _, support in result["combinations"]} == {2}
    assert len(result["combinations"]) == 3
    assert result["anonymity"] == 1  # the triple {S, F, 1994} has support 1 (d0 only)
    # k=2: no pair is linkable; the triple (support 1) is minimal.
    result = run(index, text, 2, 3)
    spans = {(0, 9), (11, 15), (17, 21)}
    assert result == {"combinations": {(frozenset(spans), 1)}, "combination_linkable": True, "anonymity": 1}
    # Arity 2 at k=2: nothing linkable at all.
    assert run(index, text, 2, 2) == {"combinations": set(), "combination_linkable": False, "anonymity": None}


def test_flagged_member_is_shortest_then_earliest(tmp_path: Path) -> None:
    corpus = ["the old farm. near mura", "the old farm. elsewhere", "near mura. elsewhere"]
    index = build_index(tmp_path, corpus)
    text = "The old farm. Near Mura."
    result = analyze_combinations(index, analyze(index, text, 2), 2)
    [combination] = result.head()
    flagged = result.candidates[result.flagged_member(combination)]
    assert text[flagged.start : flagged.end] == "Near Mura"  # 2 tokens beat 3 tokens
    assert result.flagged() == [result.flagged_member(combination)]


@settings(max_examples=examples(150), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    corpus=st.lists(st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f b", "a c"]), min_size=1, max_size=6), min_size=2, max_size=7),
    query=st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f b", "a c", "g"]), min_size=0, max_size=7),
    arity=st.sampled_from([2, 3]),
    max_n=st.sampled_from([1, 2, 3]),
    separator=st.sampled_from([". ", " "]),
)
def test_matches_enumeration(
    tmp_path_factory: pytest.TempPathFactory,
    corpus: list[list[str]],
    query: list[str],
    arity: int,
    max_n: int,
    separator: str,
) -> None:
    # With ". " every item is its own segment; with " " phrases overlap and nest.
    texts = [separator.join(doc) for doc in corpus]
    text = separator.join(query)
    index = build_index(tmp_path_factory.mktemp("c"), texts, max_n=max_n)
    for k in range(2, len(texts) + 2):
        expected = oracle(texts, text, k, max_n, arity)
        assert run(index, text, k, arity) == expected, f"k={k}"
        # A report cap (here: none at all) may skip triples, never the decision, scores or flags.
        analysis = analyze(index, text, k)
        full = analyze_combinations(index, analysis, arity)
        capped = analyze_combinations(index, analysis, arity, max_combinations=0)
        assert (capped.anonymity, capped.combination_linkable) == (full.anonymity, full.combination_linkable)
        assert capped.flagged() == full.flagged()
        assert capped.head(0) == []


def test_bad_input(corpus_index: CorpusIndex) -> None:
    index = corpus_index
    for bad in (1, 4, "3"):
        with pytest.raises(InputError, match="arity"):
            check_arity(bad)  # type: ignore[arg-type]
    empty = run(index, "", 2, 3)
    assert empty == {"combinations": set(), "combination_linkable": False, "anonymity": None}
    masked = run(index, "[REDACTED] *** <PERSON>", 2, 3)
    assert masked == empty


def test_component_spans_and_attributes(tmp_path: Path) -> None:
    import spacy

    build_index(tmp_path, CORPUS)
    nlp = spacy.blank("en")
    exact = {"index": str(tmp_path / "index"), "k": 2, "readings": ["exact"]}
    nlp.add_pipe("delink_risk", config=exact)
    nlp.add_pipe("delink_combinations", config={**exact, "arity": 3})
    assert nlp.get_pipe("delink_risk").index is nlp.get_pipe("delink_combinations").index  # opened once
    doc = nlp("Slovenian. Farm. 1994.")
    members = doc.spans["linkable_combinations"]
    assert [(s.text, s.label_, s._.delink_combinations) for s in members] == [
        ("Slovenian", "COMBO", [0]),
        ("Farm", "COMBO", [0]),
        ("1994", "COMBO", [0]),
    ]
    assert doc._.delink_combinations == [{"members": [0, 1, 2], "support": 1, "readings": ["exact"]}]
    assert doc._.delink_combination_linkable is True
    assert doc._.delink_anonymity == 1 and doc._.delink_risk == 1.0
    # All three members have one token; the earliest is flagged for rephrasing.
    assert [s.text for s in doc.spans["to_rephrase"]] == ["Slovenian"]

    out = tmp_path / "pipeline"
    nlp.to_disk(out)
    loaded = spacy.load(out)
    again = loaded("Slovenian. Farm. 1994.")
    assert again._.delink_combinations == doc._.delink_combinations
    assert loaded.get_pipe("delink_combinations").arity == 3

    # Both readings (the default): a search engine reads "Slovenian Farm 1994" as one phrase, in one document.
    both = spacy.blank("en")
    both.add_pipe("delink_risk", config={"index": str(tmp_path / "index"), "k": 2})
    doc = both("Slovenian. Farm. 1994.")
    assert [(s.text, s._.delink_support, s._.delink_readings) for s in doc.spans["linkable"]] == [
        ("Slovenian. Farm. 1994", 1, ["search"])
    ]


def test_component_bad_config(tmp_path: Path) -> None:
    import spacy

    build_index(tmp_path, CORPUS)
    nlp = spacy.blank("en")
    with pytest.raises(InputError, match="arity"):
        nlp.add_pipe("delink_combinations", config={"index": str(tmp_path / "index"), "arity": 4})
    with pytest.raises(InputError, match="max_combinations"):
        nlp.add_pipe("delink_combinations", config={"index": str(tmp_path / "index"), "max_combinations": -1})
    with pytest.raises(InputError, match="k must be"):
        nlp.add_pipe("delink_combinations", config={"index": str(tmp_path / "index"), "k": 1})


def test_index_without_posting_lists_is_refused(tmp_path: Path) -> None:
    """The combination search reads posting lists: an index whose level-1 lists are gone is refused up front."""
    from spacy_delink.errors import IndexFormatError

    build_index(tmp_path, CORPUS)
    [level_one] = (tmp_path / "index").glob("*level-1.ef")  # the posting lists (Elias–Fano)
    level_one.unlink()
    with pytest.raises(IndexFormatError, match="level-1"):
        CorpusIndex(tmp_path / "index")


# -- No text may crash: every cap, k and arity against the oracle (issue 10 §2) -------------------

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "corpus.jsonl"
ISSUE_TEXT = "The applicant restored an old watermill near the river Sava."

#: Block sizes small enough that tiny corpora cross every block boundary of the blockwise paths.
#: Smallest block sizes; a narrow limit of 0 sends every triple through the bounded, wide path of the scan.
SMALL_BLOCKS = {"_SCAN_BLOCK_ROWS": 1, "_SCAN_SLACK": 0, "_NARROW_DOCUMENTS": 0}
CAPS = (1, 3, DEFAULT_MAX_COMBINATIONS, None)
PIECES = ["sava", "farm", "old mill", "river", "1994", "the farm", "mill river", "near the river"]


def _report(result: CombinationAnalysis, cap: int | None) -> list[tuple[list[tuple[int, int]], int]]:
    """The head of the SPEC order, each combination as its members' (start, end) in text order."""
    spans = [(c.start, c.end) for c in result.candidates]
    return [([spans[i] for i in c.members], c.support) for c in result.head(cap)]


@st.composite
def phrase_texts(draw: st.DrawFn, min_size: int, max_size: int) -> str:
    """Phrases from a small vocabulary (so documents share them), joined by joining or breaking gaps."""
    pieces = draw(st.lists(st.sampled_from(PIECES), min_size=min_size, max_size=max_size))
    gaps = draw(st.lists(st.sampled_from([" ", ". ", ", "]), min_size=len(pieces), max_size=len(pieces)))
    return "".join(piece + gap for piece, gap in zip(pieces, gaps)).strip()


@pytest.mark.parametrize("blocks", ["default", "small", "small, packed keys overflow"])
@settings(max_examples=examples(40), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=st.lists(phrase_texts(1, 6), min_size=2, max_size=7), text=phrase_texts(0, 8))
def test_every_cap_k_and_arity_matches_the_oracle(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, blocks: str, corpus: list[str], text: str
) -> None:
    """Decision, anonymity, report head and flags equal the oracle's whatever the cap or block sizes."""
    if blocks != "default":
        for name, value in SMALL_BLOCKS.items():
            monkeypatch.setattr(combinations, name, value)
    if blocks == "small, packed keys overflow":
        monkeypatch.setattr(combinations, "_spec_keys", lambda members, support: None)
    max_n = 3
    index = build_index(tmp_path_factory.mktemp("c"), corpus, max_n=max_n)
    for k in range(2, 6):
        analysis = analyze(index, text, k)
        for arity in (2, 3):
            expected = spec_oracle.assess_combinations(corpus, text, k, max_n, arity)
            for cap in CAPS:
                result = analyze_combinations(index, analysis, arity, max_combinations=cap)
                where = f"k={k} arity={arity} cap={cap}"
                assert result.combination_linkable == expected["combination_linkable"], where
                assert result.anonymity == expected["anonymity"], where
                assert _report(result, cap) == expected["report"][:cap], where
                flagged = {(result.candidates[i].start, result.candidates[i].end) for i in result.flagged()}
                assert flagged == expected["flagged"], where
            # What the command and the rewriter run: assess_text (capped report) and detect (flags).
            record = assess_text(index, "q", text, k, arity, readings=("exact",))
            assert record["anonymity"] == expected["anonymity"]
            assert record["combination_linkable"] == expected["combination_linkable"]
            reported = [([(m["start"], m["end"]) for m in c["members"]], c["support"]) for c in record["combinations"]]
            assert reported == expected["report"][:DEFAULT_MAX_COMBINATIONS]
            linkable_ngrams = spec_oracle.assess(corpus, text, k, max_n)["ngrams"]
            exact_only = detect(index, text, k, arity, readings=("exact",))
            assert exact_only.protected == (not expected["combination_linkable"] and not linkable_ngrams)
            assert detect(index, text, k, arity).protected == spec_oracle.protected(corpus, text, k, max_n, arity)  # both readings


def test_two_candidates_at_arity_3_do_not_crash(tmp_path: Path) -> None:
    """The issue's text has exactly two candidates: no triple exists, so the report is complete."""
    import json

    import spacy

    corpus = [json.loads(line)["text"] for line in SAMPLES.read_text(encoding="utf-8").splitlines() if line.strip()]
    index = build_index(tmp_path, corpus)
    record = assess_text(index, "one", ISSUE_TEXT, 2, 3)
    expected = spec_oracle.assess_combinations(corpus, ISSUE_TEXT, 2, 8, 3)
    assert len(analyze_combinations(index, analyze(index, ISSUE_TEXT, 2), 3).candidates) == 2
    assert (record["anonymity"], record["combination_linkable"], record["combinations"]) == (
        expected["anonymity"], expected["combination_linkable"], []
    )
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_combinations", config={"index": str(tmp_path / "index"), "k": 2, "arity": 3})
    doc = nlp(ISSUE_TEXT)
    assert doc._.delink_combination_linkable is False and doc._.delink_combinations == []


@pytest.mark.parametrize("narrow_limit", [64, 0])
def test_candidates_in_more_documents_than_a_word_holds_match_the_oracle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, narrow_limit: int
) -> None:
    """150 documents: packed rows span three words, and many rarest members hold more than 64
    documents, so the triple scan takes its wide path beside the narrow one (all of it with a limit of 0)."""
    monkeypatch.setattr(combinations, "_NARROW_DOCUMENTS", narrow_limit)
    rng = random.Random(12)
    corpus = [". ".join(rng.sample(PIECES, rng.randint(2, 7))) for _ in range(150)]
    text = ". ".join(PIECES)
    index = build_index(tmp_path, corpus, max_n=3)
    for k in (2, 15, 40, 90):
        analysis = analyze(index, text, k)
        for arity in (2, 3):
            expected = spec_oracle.assess_combinations(corpus, text, k, 3, arity)
            where = f"k={k} arity={arity}"
            full = analyze_combinations(index, analysis, arity)
            assert (full.anonymity, full.combination_linkable) == (expected["anonymity"], expected["combination_linkable"]), where
            assert _report(full, None) == expected["report"], where
            capped = analyze_combinations(index, analysis, arity, max_combinations=0)  # flags search the triples themselves
            assert (capped.anonymity, capped.combination_linkable) == (expected["anonymity"], expected["combination_linkable"]), where
            assert {(capped.candidates[i].start, capped.candidates[i].end) for i in capped.flagged()} == expected["flagged"], where
    assert max(len(p) for p in full.postings) > 64


@pytest.mark.parametrize("narrow_limit", [64, 0])
def test_triples_among_any_subset_and_anchors_equal_brute_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, narrow_limit: int
) -> None:
    """``triples_among`` (a cover's question) against every triple counted from the posting
    lists: the same rows for random survivors and anchors, in the full scan's order when
    ``ordered`` and as the same set when not (the scan then visits only anchored partners)."""
    monkeypatch.setattr(combinations, "_NARROW_DOCUMENTS", narrow_limit)
    rng = random.Random(7)
    corpus = [". ".join(rng.sample(PIECES, rng.randint(2, 7))) for _ in range(150)]
    index = build_index(tmp_path, corpus, max_n=3)
    k = 40  # here 23 of the 56 triples of the 8 candidates are linkable, none of their pairs
    found = analyze_combinations(index, analyze(index, ". ".join(PIECES), k), 3, max_combinations=0)
    assert found.triples_complete  # no linkable pair: the decision enumerated them; a cover usually finds them unlisted
    listed = found.triples
    found.triples_complete = False  # so triples_among searches, as after a mask
    postings = [set(p.tolist()) for p in found.postings]
    count = len(postings)
    assert count >= 8 and max(map(len, postings)) > 64  # the wide path too, at the limit of 0
    anchored_hits = 0
    for trial in range(24):
        kept = np.array([rng.random() < 0.8 for _ in range(count)])
        through = None if trial % 4 == 0 else np.array([rng.random() < 0.25 for _ in range(count)])
        expected = {
            (a, b, c)
            for a, b, c in itertools.combinations(range(count), 3)
            if kept[[a, b, c]].all()
            and (through is None or through[[a, b, c]].any())
            and min(len(postings[a] & postings[b]), len(postings[a] & postings[c]), len(postings[b] & postings[c])) >= k
            and 1 <= len(postings[a] & postings[b] & postings[c]) < k
        }
        ordered, ordered_support = found.triples_among(kept, through)
        loose, loose_support = found.triples_among(kept, through, ordered=False)
        assert {tuple(t) for t in ordered.tolist()} == expected, trial
        assert sorted(zip(map(tuple, loose.tolist()), loose_support.tolist())) == sorted(zip(map(tuple, ordered.tolist()), ordered_support.tolist()))
        everything, _ = found.triples_among(kept)  # the order of a scan of every pair, filtered
        assert [tuple(t) for t in everything.tolist()] == [tuple(t) for t in listed.tolist() if kept[t].all()], trial
        in_scan_order = [t for t in map(tuple, everything.tolist()) if through is None or through[list(t)].any()]
        assert [tuple(t) for t in ordered.tolist()] == in_scan_order, trial
        anchored_hits += len(expected) if through is not None else 0
    assert anchored_hits > 0
