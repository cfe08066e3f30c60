"""Flagging strategies (linkage.cover): hand-made covers, brute force, the order of the strategies, protection."""
from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest
import spacy
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import spec_oracle
from conftest import assert_protected, build_index, examples
from spacy_delink.errors import InputError
from spacy_delink.linkage.attack import Detection
from spacy_delink.linkage.attack import detect as detect_readings
from spacy_delink.linkage.cover import heuristics as cover
from spacy_delink.linkage.strategies import STRATEGIES, check_strategy
from spacy_delink.linkage.index import CorpusIndex
from spacy_delink.linkage.readings import DEFAULT_READINGS
from spacy_delink.llm.tasks.rewrite import make_rewrite_task
from spacy_delink.rewrite.loop import RewriteLoop, RewriteResult
from spacy_delink.rewrite.masking import mask_ranges
from test_combinations import phrase_texts

MASK = "[REDACTED]"
#: The reading the hand-made covers below are worked out in.
EXACT = ("exact",)


def detect(*args: Any, **kwargs: Any) -> Detection:
    """The strategies under the exact reading, where the hand-made covers below are worked out
    (one phrase per "."-separated piece); the joint cover of both readings is tested in
    tests/test_search_reading.py."""
    return detect_readings(*args, readings=EXACT, **kwargs)


def protect(
    index: CorpusIndex, text: str, k: int, arity: int, strategy: str, granularity: str = "token", mask: str = MASK,
    readings: Sequence[str] = EXACT,
) -> RewriteResult:
    """The rewriter's own loop, masks only (what ``delink protect`` runs with the Mask model), under ``readings``."""
    loop = RewriteLoop(
        name="test", task=make_rewrite_task(),
        detect=lambda t, carried=(): detect_readings(index, t, k, arity, flagging=strategy, carried=carried, readings=readings),
        vocab=spacy.blank("en").vocab, llm=None, max_passes=0, mask=mask, granularity=granularity, stats=Counter(),
    )
    return loop.run([text])[0]


def assert_loops_protect(corpus: list[str], index: CorpusIndex, text: str, k: int, arity: int, strategy: str, exact: RewriteResult) -> None:
    """``exact`` (the loop's output under the exact reading) protected under that reading, and the
    loop under every reading the product checks by default protecting under each of them."""
    assert_protected(corpus, exact.text, k, arity, readings=EXACT, index=index)
    assert_protected(corpus, protect(index, text, k, arity, strategy, readings=DEFAULT_READINGS).text, k, arity, index=index)


def phrases(detection: Detection) -> set[str]:
    return {detection.text[o.start : o.end] for o in detection.to_rephrase()}


# -- hand-made documents where the best cover is known ---------------------------------------------

# "alpha beta gamma" (df 2) pairs linkably with each of red, green and blue (df 3), which
# pairwise co-occur in three documents; "alpha beta" alone is common (df 4).
ONE_HUB = [
    "alpha beta gamma. red. green. blue.",
    "alpha beta gamma.",
    "alpha beta. red. green. blue.",
    "alpha beta. red. green. blue.",
]
# Two such hubs whose clusters do not link across: X1 with red and green, X2 with cyan and blue.
TWO_HUBS = [
    "alpha beta gamma. delta eps zeta. red. green. cyan. blue.",
    "alpha beta gamma. cyan. blue.",
    "delta eps zeta. red. green.",
    "alpha beta gamma. delta eps zeta.",
    "alpha beta. delta eps. red. green. cyan. blue.",
    "alpha beta. delta eps. red. green. cyan. blue.",
]


@pytest.mark.parametrize("arity", [2, 3])
def test_one_phrase_shared_by_every_linkable_pair(tmp_path: Path, arity: int) -> None:
    index = build_index(tmp_path, ONE_HUB)
    text = ONE_HUB[0]
    first = detect(index, text, 2, arity, flagging="min_cover")
    assert phrases(first) == {"alpha beta gamma"}
    assert first.cover().cost == 1
    assert detect(index, text, 2, arity, flagging="optimal").cover().cost == 1
    assert phrases(detect(index, text, 2, arity, flagging="shortest")) == {"red", "green", "blue"}
    results = {s: protect(index, text, 2, arity, s) for s in STRATEGIES}
    assert results["min_cover"].text == "alpha beta [REDACTED]. red. green. blue."
    assert results["optimal"].text == results["min_cover"].text
    assert results["shortest"].text == "alpha beta gamma. [REDACTED]."  # red, green, blue: one hidden stretch
    for strategy, result in results.items():
        assert_loops_protect(ONE_HUB, index, text, 2, arity, strategy, result)


def test_two_disjoint_pair_clusters(tmp_path: Path) -> None:
    index = build_index(tmp_path, TWO_HUBS)
    text = TWO_HUBS[0]
    for arity in (2, 3):
        cover = detect(index, text, 2, arity, flagging="min_cover")
        assert phrases(cover) == {"alpha beta gamma", "delta eps zeta"}
        assert cover.cover().cost == 2 == detect(index, text, 2, arity, flagging="optimal").cover().cost
        assert phrases(detect(index, text, 2, arity, flagging="shortest")) == {"red", "green", "cyan", "blue"}
        result = protect(index, text, 2, arity, "min_cover")
        assert result.text == "alpha beta [REDACTED]. delta eps [REDACTED]. red. green. cyan. blue."
        assert_loops_protect(TWO_HUBS, index, text, 2, arity, "min_cover", result)


def test_a_one_token_mask_creates_a_new_linkable_candidate(tmp_path: Path) -> None:
    """Masking "gamma" leaves "alpha beta", rare enough to link with "red": detection runs again."""
    corpus = ["alpha beta gamma. red.", "alpha beta gamma.", "alpha beta.", "red.", "red."]
    index = build_index(tmp_path, corpus)
    text = "alpha beta gamma. red. red."  # red twice: removing it costs two tokens, the phrase one
    first = detect(index, text, 2, 2)
    assert phrases(first) == {"alpha beta gamma"}
    masked = "alpha beta [REDACTED]. red. red."
    assert spec_oracle.assess_combinations(corpus, masked, 2, 8, 2)["combinations"] == {
        (frozenset({(0, 10), (23, 26)}), 1)
    }  # the piece is a new candidate, linkable with "red"
    result = protect(index, text, 2, 2, "min_cover")
    # one pass per new piece, each new mask merged with the one beside it (one mask per hidden stretch)
    assert [e["original"] for e in result.edits] == ["gamma", "beta [REDACTED]", "alpha [REDACTED]"]
    assert result.passes == 3 and result.text == "[REDACTED]. red. red."
    assert_loops_protect(corpus, index, text, 2, 2, "min_cover", result)


def test_every_occurrence_of_a_removed_key_is_rewritten(tmp_path: Path) -> None:
    """The adversary's search for a key matches every repetition: one pass masks them all."""
    corpus = ["farm. mill. river sava.", "farm. mill.", "farm. river sava.", "mill. river sava."]
    index = build_index(tmp_path, corpus)
    text = ". ".join(["farm", "mill", "river sava"] * 5) + "."
    for strategy in STRATEGIES:
        result = protect(index, text, 2, 3, strategy)
        assert result.passes == 1, strategy
        assert_loops_protect(corpus, index, text, 2, 3, strategy, result)


def test_bad_strategy() -> None:
    with pytest.raises(InputError, match="flagging must be one of shortest, min_cover, optimal"):
        check_strategy("greedy")


# -- random small corpora ---------------------------------------------------------------------------

#: Texts up to this many tokens get their minimum cover by enumeration (2^14 token sets at most).
BRUTE_FORCE_TOKENS = 14


def brute_force_minimum(tokens: int, required: list[list[int]], occurrences: dict[Any, list[tuple[int, int]]], combinations: list[Any]) -> int:
    """The fewest masked tokens that hit every minimal linkable n-gram and remove a member of every
    linkable combination (a key is removed when each of its maximal occurrences holds a masked
    token), by trying every token set, smallest first: the optimum the ``optimal`` strategy claims."""
    for size in range(tokens + 1):
        for chosen in itertools.combinations(range(tokens), size):
            masked = set(chosen)
            if not all(masked.intersection(tokens_of) for tokens_of in required):
                continue
            removed = {key for key, spans in occurrences.items() if all(masked.intersection(range(a, b + 1)) for a, b in spans)}
            if all(set(combo) & removed for combo in combinations):
                return size
    raise AssertionError("masking every token must protect the text")


#: Sentences of one to three words from a small vocabulary: each word is in many documents, each
#: pair in fewer, so linkable combinations are common (a fifth of the examples), not only n-grams.
COVER_WORDS = ["sava", "farm", "mill", "river", "1994", "north", "bank"]
sentences = st.lists(
    st.lists(st.sampled_from(COVER_WORDS), min_size=1, max_size=3, unique=True).map(" ".join), min_size=1, max_size=5, unique=True
).map(lambda pieces: ". ".join(pieces) + ".")


@settings(max_examples=examples(40), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=st.lists(sentences, min_size=3, max_size=8), text=sentences, k=st.integers(2, 4), arity=st.sampled_from([2, 3]))
def test_the_optimal_cover_is_a_brute_force_minimum(
    tmp_path_factory: pytest.TempPathFactory, corpus: list[str], text: str, k: int, arity: int
) -> None:
    """HiGHS's cover against every token set, smallest first: not only the solver's own ``proven_optimal``."""
    max_n = 3
    oracle_tokens, _ = spec_oracle.tokenize(text)
    assume(len(oracle_tokens) <= BRUTE_FORCE_TOKENS)
    minimal = spec_oracle.assess(corpus, text, k, max_n)["ngrams"]
    required = [[i for i, t in enumerate(oracle_tokens) if start <= t.start and t.end <= end] for start, end, _ in minimal]
    linkable = [combo for combo, _ in spec_oracle.linkable_combinations(corpus, text, k, max_n, arity)]
    smallest = brute_force_minimum(len(oracle_tokens), required, spec_oracle.maximal_occurrences(corpus, text, k, max_n), linkable)
    index = build_index(tmp_path_factory.mktemp("f"), corpus, max_n=max_n)
    cover = detect(index, text, k, arity, max_combinations=1, flagging="optimal").cover()
    assert (cover.cost, cover.lower_bound, cover.proven_optimal) == (smallest, smallest, True)


@settings(max_examples=examples(30), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    corpus=st.lists(phrase_texts(1, 6), min_size=2, max_size=7),
    text=phrase_texts(1, 8),
    k=st.integers(2, 4),
    arity=st.sampled_from([2, 3]),
    granularity=st.sampled_from(["token", "span"]),
)
def test_covers_hit_every_linkable_combination_and_order_as_expected(
    tmp_path_factory: pytest.TempPathFactory, corpus: list[str], text: str, k: int, arity: int, granularity: str
) -> None:
    max_n = 3
    index = build_index(tmp_path_factory.mktemp("f"), corpus, max_n=max_n)
    linkable = spec_oracle.linkable_combinations(corpus, text, k, max_n, arity)
    occurrences = spec_oracle.maximal_occurrences(corpus, text, k, max_n)
    oracle_tokens, _ = spec_oracle.tokenize(text)
    minimal = spec_oracle.assess(corpus, text, k, max_n)["ngrams"]
    costs = {}
    for strategy in STRATEGIES:
        detection = detect(index, text, k, arity, max_combinations=1, flagging=strategy)
        ranges = mask_ranges(detection, granularity)
        masked = [any(s <= t.start and t.end <= e for s, e in ranges) for t in oracle_tokens]
        assert sum(masked) == detection.cover(granularity).cost, strategy  # the cover's cost is what gets masked
        removed = {key for key, spans in occurrences.items() if all(any(masked[a : b + 1]) for a, b in spans)}
        assert all(combo & removed for combo, _ in linkable), strategy  # every linkable combination loses a member
        for start, end, _ in minimal:  # and every minimal linkable n-gram a token
            assert any(m and start <= t.start and t.end <= end for m, t in zip(masked, oracle_tokens)), strategy
        cover = detection.cover(granularity)
        costs[strategy] = cover.cost
        if strategy == "optimal":  # its cost against a brute-force minimum: test_the_optimal_cover_is_a_brute_force_minimum
            assert cover.proven_optimal and cover.lower_bound == cover.cost
    assert costs["optimal"] <= costs["min_cover"] <= costs["shortest"]
    for strategy in STRATEGIES:  # the loop under every reading the product checks by default
        result = protect(index, text, k, arity, strategy, granularity, readings=DEFAULT_READINGS)
        assert_protected(corpus, result.text, k, arity, max_n=max_n, index=index)


def test_covers_hit_every_minimal_triple_on_tab(tmp_path: Path) -> None:
    """On real documents the lazy triple rounds put keys back (the improvement step drops them):
    the cover must still hit every minimal triple, enumerated here in full."""
    from conftest import shared_path
    from spacy_delink.linkage.combinations import analyze_combinations
    from spacy_delink.linkage.index import IndexBuilder
    from spacy_delink.linkage.ngrams import analyze
    from tab_testbed import load_tab

    tab = load_tab(shared_path("tab"))
    IndexBuilder(progress=False).build(tab.corpus, tmp_path / "index")
    index = CorpusIndex(tmp_path / "index")
    for _, text in tab.inputs[:8]:
        for strategy in ("min_cover", "optimal"):
            detection = detect(index, text, 5, 3, flagging=strategy)
            removed = set(detection.cover().removed)
            full = analyze_combinations(index, analyze(index, text, 5), 3, max_combinations=None)
            assert all(set(members) & removed for members in full.triples.tolist()), strategy
            assert all(set(members) & removed for members in full.pairs.tolist()), strategy


@pytest.mark.parametrize("seed", range(20))
def test_leaving_out_the_edges_of_fixed_keys_changes_no_choice(seed: int) -> None:
    """``_Hypergraph`` drops the edges a fixed (free) key hits: greedy, local ratio and the
    improvement step then choose exactly what they choose on every edge."""
    rng = np.random.default_rng(seed)
    keys = int(rng.integers(3, 30))
    pairs = np.sort(rng.choice(keys, size=(int(rng.integers(1, 120)), 2)), axis=1)
    pairs = np.unique(pairs[pairs[:, 0] != pairs[:, 1]], axis=0)
    triples = np.sort(rng.choice(keys, size=(int(rng.integers(0, 60)), 3)), axis=1)
    triples = np.unique(triples[(triples[:, 0] != triples[:, 1]) & (triples[:, 1] != triples[:, 2])], axis=0)
    weight = rng.integers(0, 5, size=keys).astype(np.int64)
    fixed = weight == 0
    members = np.full((len(pairs) + len(triples), 3), -1, dtype=np.int64)
    members[: len(pairs), :2] = pairs
    members[len(pairs) :] = triples
    every = cover._incidence(members, keys)
    graph = cover._Hypergraph([pairs, triples], weight, fixed)
    assert len(graph.members) == int((~fixed[np.where(members >= 0, members, 0)] | (members < 0)).all(axis=1).sum())
    weights = weight.astype(np.float64)
    for start in (cover._greedy(members, weights, fixed.copy(), *every), cover._local_ratio(members, weights, fixed.copy())):
        expected = cover._improve(members, weights, start.copy(), fixed, *every, cover._IMPROVEMENT_ROUNDS)
        assert np.array_equal(graph.improve(start), expected)
    assert np.array_equal(graph.greedy(fixed), cover._greedy(members, weights, fixed.copy(), *every))
    assert np.array_equal(graph.local_ratio(fixed), cover._local_ratio(members, weights, fixed.copy()))
