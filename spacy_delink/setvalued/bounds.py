"""Yardsticks for the set-valued solvers: a provable lower bound, an exact solver and two baselines."""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Hashable, Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from .core import SetAnonymization, check_k, encode, publish, release_of
from .search import group_cost

EXACT_LIMIT = 14
# Rare records compared with every frequent set at once, in chunks of this many.
_NEAREST_CHUNK = 2048


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

    Write d for Hamming distance and m(r) for the number of copies of r's set. Call r
    *solid* if m(r) >= k, else *loose*. Weigh each ordered pair: w(r, s) = 1 if r is loose
    and s solid, 0 if r is solid and s loose, 1/2 otherwise, so w(r, s) + w(s, r) = 1. Let
    E(r) be the sum of the k-1 smallest values w(r, s) d(r, s) over the records s != r;
    E(r) = 0 for a solid r (k-1 copies at distance 0).

    *Neighbour bound*: OPT >= ceil(sum_r E(r) / (k-1)). Proof: take an optimal release;
    a group G of n >= k records published as C costs cost(G) = sum_{s in G} d(s, C). By the
    triangle inequality d(r, s) <= d(r, C) + d(s, C); summing over ordered pairs r != s of G
    gives sum_{r != s} d(r, s) <= 2(n-1) cost(G). The left side is twice the sum over
    unordered pairs, and each unordered pair's d(r, s) equals (w(r, s) + w(s, r)) d(r, s),
    so sum_{r in G} sum_{s in G, s != r} w(r, s) d(r, s) <= (n-1) cost(G). For a fixed r,
    the n-1 >= k-1 values w(r, s) d(r, s) of the other members average no less than the
    k-1 smallest over all records, so the inner sum is >= (n-1) E(r) / (k-1). Together
    cost(G) >= sum_{r in G} E(r) / (k-1); summing over the groups and rounding up (costs
    are integers) proves the bound. With w = 1/2 throughout this is the plain bound
    sum_r D(r) / (2(k-1)) (D: distances to the k-1 nearest); shifting the solid records'
    share, which they never use, to the loose ones credits a loose {a, b} next to k or
    more copies of {a} with its whole deletion instead of half of it.

    *Item-support bound*: OPT >= sum over items with support f < k of min(f, k-f). Proof:
    the cost splits over items; a group of size n >= k holding item i c times pays
    min(c, n-c) >= min(c, k-c) for it. Every c <= f < k and phi(c) = min(c, k-c) is concave
    on [0, k] with phi(0) = 0, hence subadditive, so the groups together pay at least phi(f)
    for item i.
    """
    return lower_bounds(records, [k])[k]


def lower_bounds(records: Sequence[Iterable[Hashable]], ks: Sequence[int]) -> dict[int, LowerBound]:
    """:func:`lower_bound` for several k at once, sharing the encoding."""
    for k in ks:
        check_k(k, len(records))
    rows, _ = encode(records)
    support = np.bincount(rows.indices, minlength=rows.shape[1])
    keys = [rows.indices[rows.indptr[i] : rows.indptr[i + 1]].tobytes() for i in range(rows.shape[0])]
    count = Counter(keys)
    multiplicity = np.array([count[key] for key in keys], dtype=np.int64)
    first: dict[bytes, int] = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
    first_copy = np.fromiter(first.values(), dtype=np.int64, count=len(first))
    points = rows.astype(np.float32)
    bounds = {}
    for k in ks:
        rare = support[support < k]
        bounds[k] = LowerBound(
            neighbour=math.ceil(_twice_neighbour_sum(points, multiplicity, first_copy, k) / (2 * (k - 1))),
            item_support=int(np.minimum(rare, k - rare).sum()),
        )
    return bounds


def _twice_neighbour_sum(points: sp.csr_matrix, multiplicity: np.ndarray, first_copy: np.ndarray, k: int) -> int:
    """2 sum_r E(r) of the neighbour bound: each loose record's k-1 smallest of d/2 (loose) and d (solid).

    The k-1 nearest solid records are all at the distance t of the nearest solid set (each
    has >= k copies), so 2 E(r) = sum of min(L_j, 2t) over r's k-1 nearest loose others L_j.
    """
    from sklearn.neighbors import NearestNeighbors  # imported here: slow, and only bounds need it

    loose = np.flatnonzero(multiplicity < k)
    if loose.size == 0:
        return 0
    solid_sets = first_copy[multiplicity[first_copy] >= k]
    # squared Euclidean distance between 0/1 rows is their Hamming distance
    twice_solid = np.full(loose.size, np.iinfo(np.int64).max // k, dtype=np.int64)
    if solid_sets.size:
        search = NearestNeighbors(n_neighbors=1, algorithm="brute", metric="euclidean").fit(points[solid_sets])
        twice_solid = 2 * np.rint(search.kneighbors(points[loose])[0][:, 0] ** 2).astype(np.int64)
    # each loose record is in the fitted set, so its nearest is itself (or a copy, both at 0)
    n_neighbors = min(k, loose.size)
    search = NearestNeighbors(n_neighbors=n_neighbors, algorithm="brute", metric="euclidean").fit(points[loose])
    nearest = np.rint(search.kneighbors(points[loose])[0][:, 1:] ** 2).astype(np.int64)
    nearest = np.minimum(nearest, twice_solid[:, None]).sum(axis=1) + (k - n_neighbors) * twice_solid
    return int(nearest.sum())


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


def nearest_frequent_sets(records: Sequence[Iterable[Hashable]], k: int) -> SetAnonymization:
    """The baseline a reviewer would pick: leave every set that has k copies, move every other record to the nearest one.

    A record whose set occurs at least k times is published unchanged; any other record is
    published as the nearest (Hamming) of those sets, or as the empty set when that is
    nearer (ties: the frequent set met first, else the empty set). Every target already
    has k copies, so joining it keeps it k-anonymous; if fewer than k records end up
    empty and the empty set has no k copies of its own, they go to their nearest frequent
    set instead (and with no frequent set at all, every record is published empty).
    """
    n = len(records)
    check_k(k, n)
    rows, vocabulary = encode(records)
    keys = [rows.indices[rows.indptr[i] : rows.indptr[i + 1]].tobytes() for i in range(n)]
    copies = Counter(keys)
    first: dict[bytes, int] = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
    frequent = np.array([first[key] for key, count in copies.items() if count >= k], dtype=np.int64)
    published = [frozenset(records[i]) if copies[keys[i]] >= k else frozenset() for i in range(n)]
    if frequent.size == 0:
        return release_of(records, [frozenset()] * n, k)
    lengths = np.diff(rows.indptr).astype(np.int64)
    targets = rows[frequent].astype(np.int64)
    rare = np.array([i for i in range(n) if copies[keys[i]] < k], dtype=np.int64)
    nearest = np.empty(rare.size, dtype=np.int64)
    empty = np.zeros(rare.size, dtype=bool)
    for start in range(0, rare.size, _NEAREST_CHUNK):
        chunk = rare[start : start + _NEAREST_CHUNK]
        overlap = (rows[chunk].astype(np.int64) @ targets.T).toarray()
        distance = lengths[chunk, None] + lengths[frequent][None, :] - 2 * overlap
        nearest[start : start + chunk.size] = np.argmin(distance, axis=1)
        empty[start : start + chunk.size] = lengths[chunk] < distance.min(axis=1)
    empty_is_frequent = copies.get(b"", 0) >= k
    if not empty_is_frequent and 0 < int(empty.sum()) < k:
        empty[:] = False
    for record, target, to_empty in zip(rare, nearest, empty):
        if not to_empty:
            published[record] = frozenset(records[frequent[target]])
    return release_of(records, published, k)
