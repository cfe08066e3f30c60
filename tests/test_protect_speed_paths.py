"""The compiled paths of protection give exactly what the plain readings give.

Protection at arity 3 spends its time in the covers (the triple search among a cover's
survivors, the improvement step, the mask pricing) and in re-detection (the membership
bits, the posting lists lent by the previous pass). Each rewritten kernel is checked here
against a straightforward reference on random inputs; the end-to-end guard is that the
127 TAB outputs did not change (docs/flagging.md), and the cover and combination tests
compare the whole search with brute force.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from spacy_delink.linkage import candidate_matrix as combinations
from spacy_delink.linkage.cover import heuristics as cover
from spacy_delink.linkage.stabbing import stab


def _random_bits(rng: np.random.Generator, rows: int, documents: int, density: float) -> np.ndarray:
    dense = rng.random((rows, documents)) < density
    packed = np.zeros((rows, (documents + 63) // 64), dtype=np.uint64)
    for row, column in zip(*np.nonzero(dense)):
        packed[row, column >> 6] |= np.uint64(1) << np.uint64(column & 63)
    return packed


def _documents_of(bits: np.ndarray, row: int) -> list[int]:
    return [w * 64 + b for w in range(bits.shape[1]) for b in range(64) if (int(bits[row, w]) >> b) & 1]


@pytest.mark.parametrize("seed", range(12))
def test_local_bits_place_each_shared_document_at_its_rank_among_a_s(seed: int) -> None:
    """Bit ``i`` of a row is set exactly when the row holds ``a``'s ``i``-th document, for
    narrow and wide ``a`` (one word or several) and rows that share nothing."""
    rng = np.random.default_rng(seed)
    documents = int(rng.integers(1, 400))
    bits = _random_bits(rng, int(rng.integers(2, 30)), documents, float(rng.choice([0.02, 0.2, 0.6])))
    a = int(rng.integers(0, len(bits)))
    rows = rng.permutation(len(bits))[: int(rng.integers(1, len(bits) + 1))].astype(np.int64)
    mine = _documents_of(bits, a)
    words_expected = (len(mine) + 63) // 64
    out = np.full(len(rows) * max(words_expected, 1) + 3, np.uint64(0xFFFF), dtype=np.uint64)  # dirty: must be cleared
    words = combinations._local_bits(bits, a, rows, np.empty(bits.shape[1], dtype=np.int64), out)
    assert words == words_expected
    for at, row in enumerate(rows.tolist()):
        theirs = set(_documents_of(bits, row))
        for i, document in enumerate(mine):
            got = (int(out[at * words + (i >> 6)]) >> (i & 63)) & 1
            assert got == (document in theirs)
        for i in range(len(mine), words * 64):
            assert not (int(out[at * words + (i >> 6)]) >> (i & 63)) & 1


@pytest.mark.parametrize("seed", range(8))
def test_membership_bits_equal_a_boolean_matrix_of_the_shared_documents(seed: int) -> None:
    rng = np.random.default_rng(seed)
    collection = int(rng.integers(1, 300))
    lists = [np.sort(rng.choice(collection, size=int(rng.integers(0, collection + 1)), replace=False)) for _ in range(int(rng.integers(0, 12)))]
    documents = np.concatenate(lists).astype(np.int64) if lists else np.zeros(0, dtype=np.int64)
    df = np.array([len(x) for x in lists], dtype=np.int64)
    bits = combinations._pack_rows(documents, df, collection)
    holders = np.bincount(documents, minlength=collection)
    shared = np.flatnonzero(holders >= 2)
    assert bits.shape == (len(lists), (len(shared) + 63) // 64)
    for row, postings in enumerate(lists):
        expected = [int(np.searchsorted(shared, d)) for d in postings if holders[d] >= 2]
        assert _documents_of(bits, row) == expected


@pytest.mark.parametrize("seed", range(8))
def test_posting_lists_are_gathered_from_the_lent_and_the_decoded(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lent = rng.integers(0, 1000, size=int(rng.integers(0, 80))).astype(np.int64)
    decoded = rng.integers(0, 1000, size=int(rng.integers(0, 80))).astype(np.int64)
    count = int(rng.integers(0, 15))
    from_lent = rng.random(count) < 0.5 if len(lent) else np.zeros(count, dtype=bool)
    if not len(decoded):
        from_lent[:] = bool(len(lent))
        if not len(lent):
            count, from_lent = 0, np.zeros(0, dtype=bool)
    lengths, starts, expected = [], [], []
    for own in from_lent.tolist():
        source = lent if own else decoded
        start = int(rng.integers(0, len(source)))
        length = int(rng.integers(0, len(source) - start + 1))
        starts.append(start)
        lengths.append(length)
        expected.append(source[start : start + length])
    got = combinations._gather_ranges(
        lent, decoded, from_lent, np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64)
    )
    assert got.dtype == np.int64
    assert np.array_equal(got, np.concatenate(expected) if expected else np.zeros(0, dtype=np.int64))


def _stab_reference(intervals: np.ndarray, rarity: np.ndarray) -> list[int]:
    """``stab`` as the docstring reads: drop intervals containing another, then the greedy by right end."""
    unique = sorted({(int(a), int(b)) for a, b in intervals}, key=lambda ab: (ab[0], -ab[1]))
    inner = [(a, b) for a, b in unique if not any((c, d) != (a, b) and a <= c and d <= b for c, d in unique)]
    points, i = [], 0
    while i < len(inner):
        right = inner[i][1]
        j = i
        while j < len(inner) and inner[j][0] <= right:
            j += 1
        window = range(inner[j - 1][0], right + 1)
        points.append(min(window, key=lambda p: (rarity[p], -p)))
        i = j
    return points


@pytest.mark.parametrize("seed", range(200))
def test_stab_is_the_documented_greedy_and_a_minimum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    tokens = int(rng.integers(1, 40))
    count = int(rng.integers(1, 25))
    starts = rng.integers(0, tokens, size=count)
    ends = np.minimum(starts + rng.integers(0, 6, size=count), tokens - 1)
    intervals = np.stack([starts, ends], axis=1).astype(np.int64)
    rarity = rng.integers(0, 4, size=tokens).astype(np.int64)
    points = stab(intervals, rarity)
    assert points == _stab_reference(intervals, rarity)
    assert all(any(a <= p <= b for p in points) for a, b in intervals.tolist())
    if tokens <= 12:  # no smaller set hits them all
        assert not any(
            all(any(a <= p <= b for p in chosen) for a, b in intervals.tolist())
            for chosen in itertools.combinations(range(tokens), len(points) - 1)
        )


def _improve_reference(members: np.ndarray, weight: np.ndarray, picked: np.ndarray, fixed: np.ndarray, rounds: int) -> np.ndarray:
    """The improvement step as documented, edge lists recomputed at every step."""
    picked = picked.copy()
    edges = [[c for c in row if c >= 0] for row in members.tolist()]
    by_weight = np.argsort(-weight, kind="mergesort").tolist()

    def picks(edge: list[int]) -> int:
        return sum(picked[c] for c in edge)

    for _ in range(rounds):
        changed = False
        for key in by_weight:
            if picked[key] and not fixed[key] and all(picks(e) >= 2 for e in edges if key in e):
                picked[key] = False
                changed = True
        for key in by_weight:
            if not picked[key] or fixed[key]:
                continue
            private = [e for e in edges if key in e and picks(e) == 1]
            if not private:
                continue
            options = [c for c in range(len(weight)) if c != key and all(c in e for e in private) and weight[c] < weight[key]]
            if options:
                best = min(options, key=lambda c: (weight[c], c))
                picked[key], picked[best] = False, True
                changed = True
        if not changed:
            break
    return picked


@pytest.mark.parametrize("seed", range(40))
def test_improvement_step_equals_its_documented_reading(seed: int) -> None:
    rng = np.random.default_rng(seed)
    keys = int(rng.integers(3, 25))
    width = int(rng.choice([2, 3]))
    rows = rng.choice(keys, size=(int(rng.integers(1, 90)), width))
    rows = np.unique(np.sort(rows, axis=1), axis=0)
    rows = rows[(np.diff(rows, axis=1) > 0).all(axis=1)]
    rows = np.unique(np.vstack([rows, np.arange(width)]), axis=0)  # at least one combination: never vacuous
    members = np.full((len(rows), 3), -1, dtype=np.int64)
    members[:, :width] = rows
    weight = rng.integers(0, 5, size=keys).astype(np.float64)
    fixed = weight == 0
    start, incident = cover._incidence(members, keys)
    picked = cover._greedy(members, weight, fixed.copy(), start, incident)
    picked |= rng.random(keys) < 0.3  # extra picks: something to drop
    got = cover._improve(members, weight, picked.copy(), fixed, start, incident, cover._IMPROVEMENT_ROUNDS)
    assert np.array_equal(got, _improve_reference(members, weight, picked, fixed, cover._IMPROVEMENT_ROUNDS))
    assert all(got[row[row >= 0]].any() for row in members)


@pytest.mark.parametrize("seed", range(8))
def test_pair_supports_lent_by_the_last_pass_equal_counted_ones(seed: int) -> None:
    """Supports copied from the previous pass's matrix (its rows in another order, some
    candidates new) equal the supports counted from the rows."""
    rng = np.random.default_rng(seed)
    bits = _random_bits(rng, int(rng.integers(1, 25)), int(rng.integers(1, 300)), 0.2)
    count = len(bits)
    counted = np.array([[sum(bin(int(x) & int(y)).count("1") for x, y in zip(bits[a], bits[b])) for b in range(count)] for a in range(count)])
    assert np.array_equal(combinations._pair_supports(bits, np.full(count, -1, dtype=np.int64), None), counted)
    previous_order = rng.permutation(count)  # the previous pass had these candidates at other rows, plus two it lost
    previous = np.zeros((count + 2, count + 2), dtype=np.int16)
    previous[np.ix_(previous_order, previous_order)] = counted
    known = np.where(rng.random(count) < 0.6, previous_order, -1).astype(np.int64)
    assert np.array_equal(combinations._pair_supports(bits, known, previous), counted)
