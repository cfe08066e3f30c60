"""Solving one bucket: initial groups of >= k records, then local search on the exact cost.

Adding record r to a group of size n changes the group's cost by ``|r \\ W| + |S \\ r|``
and removing a member changes it by ``-(|r \\ S| + |W \\ r|)``, where S holds the items
with 2c > n (the published center) and W those with 2c >= n. Keeping S and W as dense
0/1 rows per group prices a whole round of moves with two sparse-dense products and a
single record's options with a column gather.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import scipy.sparse as sp


def group_cost(counts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Cost of each group (rows of ``counts``) published as its majority center."""
    return np.minimum(counts, sizes[:, None] - counts).sum(axis=1)


class Groups:
    """Mutable partition of one bucket's loose records, plus fixed solid groups (listed first)."""

    def __init__(self, rows: sp.csr_matrix, solid_counts: np.ndarray, solid_sizes: np.ndarray, k: int) -> None:
        self.rows = rows
        self.dense = rows.toarray().astype(np.int8)
        self.k = k
        self.lengths = np.diff(rows.indptr).astype(np.int64)
        self.items = [rows.indices[rows.indptr[r] : rows.indptr[r + 1]] for r in range(rows.shape[0])]
        self.counts = solid_counts.astype(np.int64)
        self.sizes = solid_sizes.astype(np.int64)
        self.n_solid = solid_sizes.size
        self.labels = np.full(rows.shape[0], -1, dtype=np.int64)
        self.versions = np.zeros(self.sizes.size, dtype=np.int64)
        self.close_failed: dict[int, int] = {}
        self.swap_failed: dict[int, tuple[int, int, int]] = {}
        self._refresh()

    def _refresh(self, group: int | slice = slice(None)) -> None:
        if isinstance(group, slice):
            self.strict = 2 * self.counts > self.sizes[:, None]
            self.weak = 2 * self.counts >= self.sizes[:, None]
            self.strict_sizes = self.strict.sum(axis=1)
            self.weak_sizes = self.weak.sum(axis=1)
            return
        self.strict[group] = 2 * self.counts[group] > self.sizes[group]
        self.weak[group] = 2 * self.counts[group] >= self.sizes[group]
        self.strict_sizes[group] = self.strict[group].sum()
        self.weak_sizes[group] = self.weak[group].sum()

    def open(self, groups: list[np.ndarray]) -> None:
        """Append groups of loose records."""
        if not groups:
            return
        first = self.sizes.size
        new_counts = np.zeros((len(groups), self.counts.shape[1]), dtype=np.int64)
        for offset, members in enumerate(groups):
            new_counts[offset] = np.asarray(self.rows[members].sum(axis=0)).ravel()
            self.labels[members] = first + offset
        self.counts = np.vstack((self.counts, new_counts))
        self.sizes = np.concatenate((self.sizes, [members.size for members in groups]))
        self.versions = np.concatenate((self.versions, np.zeros(len(groups), dtype=np.int64)))
        self._refresh()

    def move(self, record: int, target: int) -> None:
        source = int(self.labels[record])
        items = self.items[record]
        if source >= 0:
            self.counts[source, items] -= 1
            self.sizes[source] -= 1
            self.versions[source] += 1
            self._refresh(source)
        self.counts[target, items] += 1
        self.sizes[target] += 1
        self.versions[target] += 1
        self.labels[record] = target
        self._refresh(target)

    def addition_costs(self) -> np.ndarray:
        """Cost increase of adding each record (rows) to each group (columns; inf for empty groups)."""
        shared_weak = np.asarray(self.rows @ self.weak.T.astype(np.int64))
        shared_strict = np.asarray(self.rows @ self.strict.T.astype(np.int64))
        costs = (self.lengths[:, None] - shared_weak + self.strict_sizes[None, :] - shared_strict).astype(float)
        costs[:, self.sizes == 0] = np.inf
        return costs

    def record_addition_costs(self, record: int) -> np.ndarray:
        """One record's row of :meth:`addition_costs`, by gathering its item columns."""
        items = self.items[record]
        costs = (
            self.lengths[record]
            - self.weak[:, items].sum(axis=1)
            + self.strict_sizes
            - self.strict[:, items].sum(axis=1)
        ).astype(float)
        costs[self.sizes == 0] = np.inf
        return costs

    def move_deltas(self) -> np.ndarray:
        """Exact cost change of moving each record (rows) to each group (columns; inf for its own)."""
        own = self.labels
        row_of_entry = np.repeat(np.arange(own.size), self.lengths)
        group_of_entry = own[row_of_entry]
        inside_strict = np.bincount(row_of_entry, self.strict[group_of_entry, self.rows.indices], own.size)
        inside_weak = np.bincount(row_of_entry, self.weak[group_of_entry, self.rows.indices], own.size)
        gains = self.lengths - inside_strict + self.weak_sizes[own] - inside_weak
        deltas = self.addition_costs() - gains[:, None]
        deltas[np.arange(own.size), own] = np.inf
        return deltas

    def costs(self) -> np.ndarray:
        return group_cost(self.counts, self.sizes)

    def members(self, group: int) -> np.ndarray:
        return np.flatnonzero(self.labels == group)


def _distances(groups: Groups) -> np.ndarray:
    overlap = (groups.rows @ groups.rows.T).toarray()
    return groups.lengths[:, None] + groups.lengths[None, :] - 2 * overlap


def _isolation_order(distance: np.ndarray, k: int) -> np.ndarray:
    """Records by decreasing distance to their (k-1)-th nearest neighbour (ties: by index)."""
    n = distance.shape[0]
    isolation = np.partition(distance, k - 1, axis=1)[:, k - 1]
    return np.lexsort((np.arange(n), -isolation))


def _join_cheapest(groups: Groups, records: np.ndarray) -> None:
    for record in records:
        groups.move(int(record), int(np.argmin(groups.record_addition_costs(int(record)))))


def _seeded_groups(groups: Groups, grower: Callable[[np.ndarray], Callable[[int, np.ndarray], list[int]]]) -> np.ndarray:
    """Open groups of k, each grown from a free seed (most isolated first) while k records are free,
    by ``grower(distance)(seed, free)``; the records left free (fewer than k), for the caller to place."""
    k = groups.k
    n = groups.rows.shape[0]
    free = np.ones(n, dtype=bool)
    new_groups: list[np.ndarray] = []
    if n >= k:
        distance = _distances(groups)
        grow = grower(distance)
        remaining = n
        for seed in _isolation_order(distance, k):
            if remaining < k:
                break
            if not free[seed]:
                continue
            free[seed] = False
            new_groups.append(np.array(grow(int(seed), free)))
            remaining -= k
    groups.open(new_groups)
    return np.flatnonzero(free)


def greedy_groups(groups: Groups) -> None:
    """Initial partition: the most isolated free record seeds a group that grows to k members.

    Each step adds the free record that raises the group's cost least (the first one is the
    seed's nearest record; ties go to the record nearer the seed). Isolated records choose
    first so that they are not left to form a group of outliers; the fewer than k records
    left over join the group where they cost least.
    """
    k = groups.k
    rows = groups.rows

    def grower(distance: np.ndarray) -> Callable[[int, np.ndarray], list[int]]:
        scale = distance.max() + 1

        def grow(seed: int, free: np.ndarray) -> list[int]:
            counts = np.zeros(rows.shape[1], dtype=np.int64)
            counts[groups.items[seed]] = 1
            chosen = [seed]
            for size in range(1, k):
                strict = 2 * counts > size
                weak = 2 * counts >= size
                added = groups.lengths - rows @ weak.astype(np.int64) + strict.sum() - rows @ strict.astype(np.int64)
                priority = np.where(free, added * scale + distance[seed], np.iinfo(np.int64).max)
                pick = int(np.argmin(priority))
                free[pick] = False
                chosen.append(pick)
                counts[groups.items[pick]] += 1
            return chosen

        return grow

    _join_cheapest(groups, _seeded_groups(groups, grower))


def local_search(groups: Groups, max_rounds: int) -> None:
    """Moves, swaps and group closings until no single step lowers the cost (or max_rounds)."""
    if groups.rows.shape[0] == 0 or groups.sizes.size < 2:
        return
    for _ in range(max_rounds):
        changed = _move_round(groups)
        changed += _swap_round(groups)
        changed += _close_round(groups)
        if not changed:
            return


def _best_moves(groups: Groups) -> tuple[np.ndarray, np.ndarray]:
    deltas = groups.move_deltas()
    best = np.argmin(deltas, axis=1)
    return best, deltas[np.arange(best.size), best]


def _move_round(groups: Groups) -> int:
    """Apply improving single-record moves, at most one per group so every delta stays exact."""
    best, delta = _best_moves(groups)
    candidates = np.flatnonzero((delta < 0) & (groups.sizes[groups.labels] > groups.k))
    touched: set[int] = set()
    for record in candidates[np.argsort(delta[candidates], kind="stable")]:
        source, target = int(groups.labels[record]), int(best[record])
        if source in touched or target in touched:
            continue
        groups.move(int(record), target)
        touched.update((source, target))
    return len(touched) // 2


def _swap_round(groups: Groups) -> int:
    """Exchange a record held back by its group's size k with the best member of the group it prefers.

    A failed exchange is not retried until one of the two groups changes.
    """
    best, delta = _best_moves(groups)
    candidates = np.flatnonzero((delta < 0) & (groups.sizes[groups.labels] <= groups.k))
    touched: set[int] = set()
    costs = groups.costs()
    for record in candidates[np.argsort(delta[candidates], kind="stable")]:
        source, target = int(groups.labels[record]), int(best[record])
        if source in touched or target in touched:
            continue
        attempt = (target, int(groups.versions[source]), int(groups.versions[target]))
        if groups.swap_failed.get(int(record)) == attempt:
            continue
        groups.swap_failed[int(record)] = attempt
        partners = groups.members(target)
        if partners.size == 0:
            continue
        columns = np.flatnonzero(groups.counts[source] + groups.counts[target])
        mine = groups.dense[record, columns]
        theirs = groups.dense[np.ix_(partners, columns)]
        source_counts = groups.counts[source, columns] - mine + theirs
        target_counts = groups.counts[target, columns] + mine - theirs
        change = (
            np.minimum(source_counts, groups.sizes[source] - source_counts).sum(axis=1)
            + np.minimum(target_counts, groups.sizes[target] - target_counts).sum(axis=1)
            - costs[source]
            - costs[target]
        )
        choice = int(np.argmin(change))
        if change[choice] >= 0:
            continue
        groups.move(int(record), target)
        groups.move(int(partners[choice]), source)
        pair = [source, target]
        costs[pair] = group_cost(groups.counts[pair], groups.sizes[pair])
        touched.update((source, target))
    return len(touched) // 2


def _close_round(groups: Groups) -> int:
    """Close a group of loose records whose members are cheaper inside other groups.

    The trigger (each member's cheapest other group, priced independently) is optimistic;
    the members are then moved one at a time at exact prices and moved back if the total
    does not beat the group's cost. A failed group is not retried until it changes.
    """
    additions = groups.addition_costs()
    closed = 0
    for group in range(groups.n_solid, groups.sizes.size):
        if groups.sizes[group] == 0 or groups.close_failed.get(group) == groups.versions[group]:
            continue
        members = groups.members(group)
        cost = int(group_cost(groups.counts[group : group + 1], groups.sizes[group : group + 1])[0])
        others = np.delete(additions[members], group, axis=1)
        if others.size == 0 or others.min(axis=1).sum() >= cost:
            continue
        total = 0.0
        for record in members:
            row = groups.record_addition_costs(int(record))
            row[group] = np.inf
            target = int(np.argmin(row))
            total += row[target]
            groups.move(int(record), target)
        if total < cost:
            closed += 1
            continue
        for record in members:
            groups.move(int(record), group)
        groups.close_failed[group] = int(groups.versions[group])
    return closed


def suppression_groups(groups: Groups) -> None:
    """Partition by the suppression objective: stars = group size x columns the group disagrees on.

    This is the partition step of the reduction to suppression-based k-anonymity: each seed
    (most isolated first) grows by the free record that least enlarges union minus
    intersection; leftovers join the group whose star count grows least.
    """
    k = groups.k
    rows = groups.rows

    def grow(seed: int, free: np.ndarray) -> list[int]:
        union = np.zeros(rows.shape[1], dtype=np.int64)
        union[groups.items[seed]] = 1
        common = union.copy()
        chosen = [seed]
        for _ in range(k - 1):
            candidates = np.flatnonzero(free)
            stars = union.sum() + groups.lengths - rows @ union - rows @ common
            pick = int(candidates[np.argmin(stars[candidates])])
            free[pick] = False
            chosen.append(pick)
            union[groups.items[pick]] = 1
            common[np.setdiff1d(np.flatnonzero(common), groups.items[pick])] = 0
        return chosen

    for record in _seeded_groups(groups, lambda _distance: grow):
        present = groups.counts > 0
        everywhere = groups.counts == groups.sizes[:, None]
        items = groups.items[record]
        disagree_after = present.sum(axis=1) + len(items) - present[:, items].sum(axis=1) - everywhere[:, items].sum(axis=1)
        disagree_before = present.sum(axis=1) - everywhere.sum(axis=1)
        groups.move(int(record), int(np.argmin((groups.sizes + 1) * disagree_after - groups.sizes * disagree_before)))
