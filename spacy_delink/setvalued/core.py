"""Set-valued k-anonymity (Motwani & Nabar 2008): cost model, bucketing and the two routes.

Every record is a set of items; a release publishes, for each record, a set shared by at
least k-1 other records. The cost is the number of item additions plus deletions. A group
of records published together is best published as its *majority center* (an item is kept
iff more than half of the group has it), so the cost of a group is
``sum_i min(c_i, n - c_i)`` over its item counts ``c_i`` and size ``n``; both routes only
choose the partition.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Hashable, Iterable, Literal, Sequence

import numpy as np
import scipy.sparse as sp
from tqdm import tqdm

from ..errors import DelinkError, InputError
from .search import Groups, greedy_groups, local_search, suppression_groups

Method = Literal["cluster", "suppress"]


@dataclass(frozen=True)
class SetAnonymization:
    """A k-anonymous release: each record's group, its published set and what it cost."""

    k: int
    labels: np.ndarray
    published: list[frozenset[Hashable]]
    additions: np.ndarray
    deletions: np.ndarray

    @property
    def cost(self) -> int:
        """Total additions plus deletions (the objective every solver minimises)."""
        return int(self.additions.sum() + self.deletions.sum())

    @property
    def n_groups(self) -> int:
        return int(np.unique(self.labels).size)


def check_k_value(k: int) -> None:
    """Refuse k < 2 (k = 1 would publish the records unchanged)."""
    if k < 2:
        raise InputError(f"k must be at least 2 (got {k}); k=1 publishes the records unchanged")


def check_k(k: int, n_records: int) -> None:
    """Refuse a k that makes no sense for ``n_records`` records, saying how to fix it."""
    check_k_value(k)
    if k > n_records:
        raise InputError(
            f"k={k} exceeds the number of records ({n_records}); lower --k or add records"
        )


def check_method(method: str) -> None:
    """Refuse an unknown solver name."""
    if method not in ("cluster", "suppress"):
        raise InputError(f"unknown method {method!r}; use 'cluster' or 'suppress'")


def encode(records: Sequence[Iterable[Hashable]]) -> tuple[sp.csr_matrix, list[Hashable]]:
    """The records as a 0/1 CSR matrix (rows sorted) plus the item of each column."""
    index: dict[Hashable, int] = {}
    indptr = [0]
    indices: list[int] = []
    for record in records:
        columns = sorted({index.setdefault(item, len(index)) for item in record})
        indices.extend(columns)
        indptr.append(len(indices))
    data = np.ones(len(indices), dtype=np.int32)
    matrix = sp.csr_matrix(
        (data, np.asarray(indices, dtype=np.int64), np.asarray(indptr, dtype=np.int64)),
        shape=(len(records), len(index)),
    )
    return matrix, list(index)


def majority_centers(rows: sp.csr_matrix, labels: np.ndarray, deletions_only: bool = False) -> sp.csr_matrix:
    """One 0/1 row per group label (0..max): items held by more than half of the group.

    With ``deletions_only`` the items held by every member instead (the intersection), so
    that publishing the center only deletes items.
    """
    n_groups = int(labels.max()) + 1
    membership = sp.csr_matrix(
        (np.ones(labels.size, dtype=np.int32), (labels, np.arange(labels.size))),
        shape=(n_groups, labels.size),
    )
    counts = (membership @ rows).tocsr()
    sizes = np.bincount(labels, minlength=n_groups)
    group_sizes = np.repeat(sizes, np.diff(counts.indptr))
    keep = counts.data == group_sizes if deletions_only else counts.data * 2 > group_sizes
    counts.data = keep.astype(np.int32)
    counts.eliminate_zeros()
    return counts


def publish(
    records: Sequence[Iterable[Hashable]], labels: np.ndarray, k: int, deletions_only: bool = False
) -> SetAnonymization:
    """Publish each group of ``labels`` as its majority center (or intersection) and verify k-anonymity."""
    rows, vocabulary = encode(records)
    return _publish_encoded(rows, vocabulary, np.asarray(labels, dtype=np.int64), k, deletions_only)


def _publish_encoded(
    rows: sp.csr_matrix, vocabulary: list[Hashable], labels: np.ndarray, k: int, deletions_only: bool = False
) -> SetAnonymization:
    _, labels = np.unique(labels, return_inverse=True)
    centers = majority_centers(rows, labels, deletions_only)
    shared = np.asarray(rows.multiply(centers[labels]).sum(axis=1)).ravel()
    lengths = np.diff(rows.indptr)
    center_lengths = np.diff(centers.indptr)
    center_sets = [
        frozenset(vocabulary[c] for c in centers.indices[centers.indptr[g] : centers.indptr[g + 1]])
        for g in range(centers.shape[0])
    ]
    published = [center_sets[g] for g in labels]
    verify_k_anonymous(published, k)
    return SetAnonymization(
        k=k,
        labels=labels,
        published=published,
        additions=center_lengths[labels] - shared,
        deletions=lengths - shared,
    )


def release_of(
    records: Sequence[Iterable[Hashable]], published: Sequence[frozenset[Hashable]], k: int, verify: bool = True
) -> SetAnonymization:
    """The release that publishes record i as ``published[i]``, verified k-anonymous unless ``verify`` is off.

    For solvers that choose the published sets themselves rather than a partition (whose
    callers check their own guarantee when it is not whole-set k-anonymity of these sets
    alone); the label of a record is the index of its published set in order of first appearance.
    """
    if verify:
        verify_k_anonymous(published, k)
    index: dict[frozenset[Hashable], int] = {}
    labels = np.array([index.setdefault(items, len(index)) for items in published], dtype=np.int64)
    originals = [frozenset(items) for items in records]
    return SetAnonymization(
        k=k,
        labels=labels,
        published=list(published),
        additions=np.array([len(p - o) for p, o in zip(published, originals)], dtype=np.int64),
        deletions=np.array([len(o - p) for p, o in zip(published, originals)], dtype=np.int64),
    )


def verify_k_anonymous(published: Sequence[frozenset[Hashable]], k: int) -> None:
    """Raise unless every distinct published set occurs at least k times."""
    too_rare = [(items, n) for items, n in Counter(published).items() if n < k]
    if too_rare:
        items, n = too_rare[0]
        raise DelinkError(
            f"not {k}-anonymous: {len(too_rare)} published set(s) occur fewer than k={k} times "
            f"(e.g. {sorted(map(str, items))[:5]} x{n}); every group must hold at least k records"
        )


@dataclass(frozen=True)
class SolidGroup:
    """Records published as one set that is already k-anonymous on its own.

    Either at least k identical records (``fixed`` = -1, ``weight`` = their number) or a set
    an earlier release published (``fixed`` = its index); the latter is priced with a weight
    larger than any number of joiners, so its majority center can never change.
    """

    records: np.ndarray
    center: int
    weight: int
    fixed: int = -1


@dataclass(frozen=True)
class Bucket:
    """Records solved together: loose records plus solid groups they may join."""

    loose: np.ndarray
    solid: list[SolidGroup]


def make_buckets(rows: sp.csr_matrix, k: int, bucket_size: int, n_fixed: int = 0) -> list[Bucket]:
    """Split the records into buckets of similar records, the way the paper scales to AOL.

    The last ``n_fixed`` rows are sets an earlier release published. Identical records
    with at least k copies, and every published set, form a *solid* group (one unit). The
    distinct sets are sorted by their items, most frequent item first, so that sets sharing
    their common items are adjacent (a trie order); each bucket is cut where neighbours
    share the shortest prefix within a size window. Only the last bucket can end up
    infeasible (fewer than k loose records and no solid group): it merges with its
    neighbour, the nearest bucket in that order.
    """
    n_records = rows.shape[0] - n_fixed
    by_set: dict[bytes, list[int]] = {}
    for row in range(rows.shape[0]):
        by_set.setdefault(rows.indices[rows.indptr[row] : rows.indptr[row + 1]].tobytes(), []).append(row)
    frequency = np.bincount(rows.indices, minlength=rows.shape[1])
    rank = np.empty(rows.shape[1], dtype=np.int64)
    rank[np.lexsort((np.arange(rows.shape[1]), -frequency))] = np.arange(rows.shape[1])
    members = list(by_set.values())
    signatures = [tuple(sorted(rank[rows.indices[rows.indptr[m[0]] : rows.indptr[m[0] + 1]]])) for m in members]
    order = sorted(range(len(members)), key=signatures.__getitem__)
    units = [_unit(members[i], k, n_records) for i in order]
    weights = np.array([1 if isinstance(unit, SolidGroup) else unit.size for unit in units], dtype=np.int64)
    common = np.array([_common_prefix(signatures[a], signatures[b]) for a, b in zip(order, order[1:])] + [-1])
    cumulative = np.concatenate(([0], np.cumsum(weights)))
    low = max(bucket_size // 2, k)
    high = max(bucket_size, low + k)
    cuts = [0]
    while cumulative[-1] - cumulative[cuts[-1]] > high:
        start = cuts[-1]
        first = int(np.searchsorted(cumulative, cumulative[start] + low, side="left"))
        last = int(np.searchsorted(cumulative, cumulative[start] + high, side="right")) - 1
        window = common[first - 1 : last]
        cuts.append(first + int(np.flatnonzero(window == window.min())[-1]))
    cuts.append(len(order))
    buckets = [_bucket(units[a:b]) for a, b in zip(cuts, cuts[1:])]
    if len(buckets) > 1 and not buckets[-1].solid and buckets[-1].loose.size < k:
        tail = buckets.pop()
        buckets[-1] = Bucket(np.concatenate((buckets[-1].loose, tail.loose)), buckets[-1].solid)
    return buckets


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    length = 0
    for x, y in zip(a, b):
        if x != y:
            break
        length += 1
    return length


def _unit(rows_with_set: list[int], k: int, n_records: int) -> SolidGroup | np.ndarray:
    """A distinct set's records: a solid group, or a plain array of loose records."""
    records = np.array([row for row in rows_with_set if row < n_records], dtype=np.int64)
    fixed = [row - n_records for row in rows_with_set if row >= n_records]
    if fixed:
        return SolidGroup(records, n_records + fixed[0], n_records + k, fixed[0])
    if records.size >= k:
        return SolidGroup(records, int(records[0]), int(records.size))
    return records


def _bucket(units: list[SolidGroup | np.ndarray]) -> Bucket:
    loose = [unit for unit in units if not isinstance(unit, SolidGroup)]
    return Bucket(
        np.concatenate(loose) if loose else np.zeros(0, dtype=np.int64),
        [unit for unit in units if isinstance(unit, SolidGroup)],
    )


def partition(
    rows: sp.csr_matrix,
    k: int,
    *,
    n_fixed: int = 0,
    method: Method = "cluster",
    bucket_size: int = 400,
    max_rounds: int = 30,
    progress: bool = False,
) -> np.ndarray:
    """Group label per record row: >= 0 for groups of records, -1-f for published set f.

    The last ``n_fixed`` rows are sets an earlier release published (see :func:`make_buckets`).
    """
    check_method(method)
    labels = np.full(rows.shape[0] - n_fixed, -1, dtype=np.int64)
    next_label = 0
    buckets = make_buckets(rows, k, bucket_size, n_fixed)
    for bucket in tqdm(buckets, desc=f"k={k} buckets", unit="bucket", disable=not progress):
        solid_labels = []
        for solid in bucket.solid:
            solid_labels.append(-1 - solid.fixed if solid.fixed >= 0 else next_label)
            next_label += solid.fixed < 0
            labels[solid.records] = solid_labels[-1]
        if bucket.loose.size == 0:
            continue
        groups = _bucket_groups(rows, bucket, k)
        if method == "cluster":
            greedy_groups(groups)
            local_search(groups, max_rounds)
        else:
            suppression_groups(groups)
        _, compact = np.unique(groups.labels, return_inverse=True)
        joined_solid = groups.labels < groups.n_solid
        labels[bucket.loose[joined_solid]] = np.asarray(solid_labels, dtype=np.int64)[groups.labels[joined_solid]]
        labels[bucket.loose[~joined_solid]] = next_label + compact[~joined_solid]
        next_label += int(compact.max()) + 1
    return labels


def _bucket_groups(rows: sp.csr_matrix, bucket: Bucket, k: int) -> Groups:
    """The search state of one bucket, restricted to the items its records and solid sets use."""
    centers = [solid.center for solid in bucket.solid]
    columns = np.unique(np.concatenate((rows[bucket.loose].indices, rows[centers].indices)))
    weights = np.array([solid.weight for solid in bucket.solid], dtype=np.int64)
    solid_counts = rows[centers][:, columns].toarray() * weights[:, None]
    return Groups(rows[bucket.loose][:, columns].tocsr(), solid_counts, weights, k)


def anonymize_sets(
    records: Sequence[Iterable[Hashable]],
    k: int,
    *,
    method: Method = "cluster",
    deletions_only: bool = False,
    bucket_size: int = 400,
    max_rounds: int = 30,
    progress: bool = False,
) -> SetAnonymization:
    """Make every record identical to at least k-1 others with few item additions/deletions.

    ``method="cluster"`` is the clustering route (greedy groups of >= k improved by local
    search: moves, swaps and closing groups); ``method="suppress"`` partitions by the
    suppression objective instead, to compare. Both solve bucket by bucket (see
    :func:`make_buckets`) and publish each group's majority center. With
    ``deletions_only`` each group publishes the items all its members hold instead, so no
    record shows an item it did not have (the partition is the same). Deterministic.
    """
    check_k(k, len(records))
    rows, vocabulary = encode(records)
    labels = partition(rows, k, method=method, bucket_size=bucket_size, max_rounds=max_rounds, progress=progress)
    return _publish_encoded(rows, vocabulary, labels, k, deletions_only)
