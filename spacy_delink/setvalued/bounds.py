"""Yardsticks for the set-valued solvers: a provable lower bound, an exact solver, a naive baseline."""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Hashable, Iterable, Sequence

import numpy as np

from ..errors import InputError
from .core import SetAnonymization, check_k, encode, publish
from .search import group_cost

EXACT_LIMIT = 14


@dataclass(frozen=True)
class LowerBound:
    """Two valid lower bounds on the optimal cost; ``value`` is the larger."""

    neighbour: int
    item_support: int

    @property
    def value(self) -> int:
        return max(self.neighbour, self.item_support)


def lower_bound(records: Sequence[Iterable[Hashable]], k: int) -> LowerBound:
    """Lower bounds on the optimal additions + deletions of any k-anonymous release.

    Write d for Hamming distance and D(r) for the sum of d(r, s) over the k-1 records s
    nearest to r (copies of r count, at distance 0).

    *Neighbour bound*: OPT >= ceil(sum_r D(r) / (2(k-1))). Proof: take an optimal release;
    a group G of n >= k records published as C costs cost(G) = sum_{s in G} d(s, C). By the
    triangle inequality d(r, s) <= d(r, C) + d(s, C); summing over ordered pairs r != s of G
    gives sum_{r != s} d(r, s) <= 2(n-1) cost(G). For a fixed r, the n-1 >= k-1 other members
    are on average no closer than r's k-1 nearest records, so sum_{s in G, s != r} d(r, s)
    >= (n-1) D(r) / (k-1). Together cost(G) >= sum_{r in G} D(r) / (2(k-1)); summing over
    the groups and rounding up (costs are integers) proves the bound. It loses up to a
    factor 2 on hub-and-spoke data: k or more copies of {a} plus one {a, b} cost 1 (b is
    deleted), but the copies' nearest records are other copies, so only {a, b} is credited,
    with 1/2.

    *Item-support bound*: OPT >= sum over items with support f < k of min(f, k-f). Proof:
    the cost splits over items; a group of size n >= k holding item i c times pays
    min(c, n-c) >= min(c, k-c) for it. Every c <= f < k and phi(c) = min(c, k-c) is concave
    on [0, k] with phi(0) = 0, hence subadditive, so the groups together pay at least phi(f)
    for item i.
    """
    return lower_bounds(records, [k])[k]


def lower_bounds(records: Sequence[Iterable[Hashable]], ks: Sequence[int]) -> dict[int, LowerBound]:
    """:func:`lower_bound` for several k at once, sharing one nearest-neighbour search."""
    for k in ks:
        check_k(k, len(records))
    from sklearn.neighbors import NearestNeighbors  # imported here: slow, and only bounds need it

    rows, _ = encode(records)
    support = np.bincount(rows.indices, minlength=rows.shape[1])
    keys = [rows.indices[rows.indptr[i] : rows.indptr[i + 1]].tobytes() for i in range(rows.shape[0])]
    multiplicity = Counter(keys)
    # a record with >= k copies has k records (itself included) at distance 0 and adds
    # nothing, so only records with fewer than max(ks) copies are searched
    largest = max(ks)
    queries = np.array([i for i, key in enumerate(keys) if multiplicity[key] < largest], dtype=np.int64)
    nearest = np.zeros((0, largest), dtype=np.int64)
    if queries.size:
        # squared Euclidean distance between 0/1 rows is their Hamming distance; each query
        # row is in the fitted set, so its nearest are itself (or a copy, both at 0) and the
        # k-1 nearest others
        search = NearestNeighbors(n_neighbors=largest, algorithm="brute", metric="euclidean")
        distances, _ = search.fit(rows.astype(np.float32)).kneighbors(rows[queries].astype(np.float32))
        nearest = np.rint(distances**2).astype(np.int64)
    bounds = {}
    for k in ks:
        rare = support[support < k]
        bounds[k] = LowerBound(
            neighbour=math.ceil(int(nearest[:, :k].sum()) / (2 * (k - 1))),
            item_support=int(np.minimum(rare, k - rare).sum()),
        )
    return bounds


def exact_anonymization(records: Sequence[Iterable[Hashable]], k: int) -> SetAnonymization:
    """The optimal release, by dynamic programming over subsets (tiny inputs only: <= 14 records).

    OPT(S) = min over blocks B containing the lowest record of S, |B| >= k, with S \\ B
    empty or of size >= k, of cost(B) + OPT(S \\ B); O(3^n) time.
    """
    n = len(records)
    check_k(k, n)
    if n > EXACT_LIMIT:
        raise InputError(f"the exact solver takes at most {EXACT_LIMIT} records (got {n}); use anonymize_sets")
    dense = encode(records)[0].toarray().astype(np.int64)
    full = (1 << n) - 1
    block_cost = np.zeros(full + 1, dtype=np.int64)
    for mask in range(1, full + 1):
        members = [i for i in range(n) if mask >> i & 1]
        block_cost[mask] = int(group_cost(dense[members].sum(axis=0, keepdims=True), np.array([len(members)]))[0])

    @lru_cache(maxsize=None)
    def best(mask: int) -> tuple[float, int]:
        """(optimal cost, first block) for the records in ``mask``."""
        lowest = mask & -mask
        rest = mask ^ lowest
        answer: tuple[float, int] = (math.inf, 0)
        sub = rest
        while True:
            block = sub | lowest
            left = mask ^ block
            if block.bit_count() >= k and (left == 0 or left.bit_count() >= k):
                cost = block_cost[block] + (best(left)[0] if left else 0)
                if cost < answer[0]:
                    answer = (int(cost), block)
            if sub == 0:
                break
            sub = (sub - 1) & rest
        return answer

    labels = np.zeros(n, dtype=np.int64)
    mask, label = full, 0
    while mask:
        block = best(mask)[1]
        for i in range(n):
            if block >> i & 1:
                labels[i] = label
        mask ^= block
        label += 1
    return publish(records, labels, k)


def random_groups(records: Sequence[Iterable[Hashable]], k: int, seed: int = 0) -> SetAnonymization:
    """Naive baseline: shuffle, cut into groups of k, the last < k records join the last group."""
    n = len(records)
    check_k(k, n)
    order = np.random.default_rng(seed).permutation(n)
    labels = np.empty(n, dtype=np.int64)
    labels[order] = np.minimum(np.arange(n) // k, n // k - 1)
    return publish(records, labels, k)
