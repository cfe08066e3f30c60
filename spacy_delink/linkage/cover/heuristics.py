"""The heuristic covers of ``min_cover`` (``linkage.cover``): weighted hitting sets over the candidate keys.

Three feasible covers are built — the weighted greedy, the local-ratio cover of Bar-Yehuda
and Even, and the paper's flags — each is improved, and the one with the fewest tokens
changed wins; triples are covered lazily, as the survivors of the pairs' cover still hold one.
"""
from __future__ import annotations

from typing import Callable

import numba as nb
import numpy as np

from ... import _kernels  # noqa: F401  (announces a compile of these kernels)
from .instance import Instance, Joint

#: Rounds of the improvement step (each drops redundant picks, then tries the swaps).
_IMPROVEMENT_ROUNDS = 8


class _Hypergraph:
    """Combinations (edges: rows of member keys, padded with -1) over weighted candidate keys.

    Every cover built on it holds the ``fixed`` keys (the free ones), so an edge with a
    fixed member is hit whatever else is picked and is never another pick's only hit: it
    can change none of the choices below and is left out (about half the pairs of a pass).
    """

    def __init__(self, edges: list[np.ndarray], weight: np.ndarray, fixed: np.ndarray, opened: int = 0) -> None:
        """``edges[:opened]`` are open already (``_open_edges``): a cover that grows its edges filters each array once."""
        self.fixed = fixed
        self.edges = edges = edges[:opened] + [_open_edges(e, fixed) for e in edges[opened:]]
        width = max((e.shape[1] for e in edges), default=2)
        self.members = np.full((sum(len(e) for e in edges), width), -1, dtype=np.int64)
        row = 0
        for e in edges:
            self.members[row : row + len(e), : e.shape[1]] = e
            row += len(e)
        self.weight = weight.astype(np.float64)
        self.incident_start, self.incident_edges = _incidence(self.members, len(weight))

    def greedy(self, picked: np.ndarray) -> np.ndarray:
        """Weighted greedy from ``picked`` (which holds the fixed keys): most newly hit edges per unit of weight (an H(d)-approximation)."""
        assert picked[self.fixed].all()
        return _greedy(self.members, self.weight, picked.copy(), self.incident_start, self.incident_edges)

    def local_ratio(self, picked: np.ndarray) -> np.ndarray:
        """Bar-Yehuda–Even from ``picked`` (which holds the fixed keys): each unhit edge pays its cheapest residual weight (an f-approximation)."""
        assert picked[self.fixed].all()
        return _local_ratio(self.members, self.weight, picked.copy())

    def improve(self, picked: np.ndarray) -> np.ndarray:
        """Drop picks whose edges all hold another pick; swap a pick for a cheaper key that alone hits its private edges (never a fixed one)."""
        assert picked[self.fixed].all()
        return _improve(self.members, self.weight, picked.copy(), self.fixed, self.incident_start, self.incident_edges, _IMPROVEMENT_ROUNDS)


@nb.njit(cache=True, nogil=True)
def _open_edges(members: np.ndarray, fixed: np.ndarray) -> np.ndarray:
    """The rows of ``members`` (unpadded) without a ``fixed`` key."""
    kept = np.empty(len(members), dtype=np.bool_)
    for e in range(len(members)):
        kept[e] = True
        for c in members[e]:
            if fixed[c]:
                kept[e] = False
                break
    return members[kept]


@nb.njit(cache=True, nogil=True)
def _incidence(members: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Each key's edges in ascending order (CSR: ``incident[start[c]:start[c + 1]]``), by a counting sort."""
    start = np.zeros(count + 1, dtype=np.int64)
    for e in range(len(members)):
        for c in members[e]:
            if c >= 0:
                start[c + 1] += 1
    for c in range(count):
        start[c + 1] += start[c]
    fill = start[:-1].copy()
    incident = np.empty(start[count], dtype=np.int64)
    for e in range(len(members)):
        for c in members[e]:
            if c >= 0:
                incident[fill[c]] = e
                fill[c] += 1
    return start, incident


@nb.njit(cache=True, nogil=True)
def _greedy(members: np.ndarray, weight: np.ndarray, picked: np.ndarray, start: np.ndarray, incident: np.ndarray) -> np.ndarray:
    hit = np.zeros(len(members), dtype=np.bool_)
    degree = np.zeros(len(weight), dtype=np.float64)
    left = 0
    for e in range(len(members)):
        for c in members[e]:
            if c >= 0 and picked[c]:
                hit[e] = True
        if not hit[e]:
            left += 1
            for c in members[e]:
                if c >= 0:
                    degree[c] += 1
    while left:
        best, best_ratio = -1, -1.0
        for c in range(len(weight)):
            if degree[c] > 0:
                ratio = degree[c] / max(weight[c], 1e-9)
                if ratio > best_ratio:
                    best, best_ratio = c, ratio
        picked[best] = True
        for i in range(start[best], start[best + 1]):
            e = incident[i]
            if not hit[e]:
                hit[e] = True
                left -= 1
                for c in members[e]:
                    if c >= 0:
                        degree[c] -= 1
    return picked


@nb.njit(cache=True, nogil=True)
def _local_ratio(members: np.ndarray, weight: np.ndarray, picked: np.ndarray) -> np.ndarray:
    residual = weight.copy()
    for e in range(len(members)):
        pay = np.inf
        for c in members[e]:
            if c >= 0:
                if picked[c]:
                    pay = -1.0
                    break
                pay = min(pay, residual[c])
        if pay < 0:
            continue
        for c in members[e]:
            if c >= 0:
                residual[c] -= pay
                if residual[c] <= 1e-9:
                    picked[c] = True
    return picked


@nb.njit(cache=True, nogil=True)
def _improve(
    members: np.ndarray, weight: np.ndarray, picked: np.ndarray, fixed: np.ndarray, start: np.ndarray, incident: np.ndarray, rounds: int
) -> np.ndarray:
    per_edge = np.zeros(len(members), dtype=np.int64)
    for e in range(len(members)):
        for c in members[e]:
            if c >= 0 and picked[c]:
                per_edge[e] += 1
    by_weight = np.argsort(-weight, kind="mergesort")
    shared = np.zeros(len(weight), dtype=np.int64)
    private = np.empty(len(members), dtype=np.int64)  # the edges only the key being swapped hits
    for _ in range(rounds):
        changed = False
        for key in by_weight:  # drop a pick all of whose edges hold another pick
            if not picked[key] or fixed[key]:
                continue
            redundant = True
            for i in range(start[key], start[key + 1]):
                if per_edge[incident[i]] < 2:
                    redundant = False
                    break
            if redundant:
                picked[key] = False
                for i in range(start[key], start[key + 1]):
                    per_edge[incident[i]] -= 1
                changed = True
        for key in by_weight:  # swap a pick for a cheaper key that hits every edge only it hits
            if not picked[key] or fixed[key]:
                continue
            count = 0  # its private edges, gathered once: the steps below read only them
            for i in range(start[key], start[key + 1]):
                if per_edge[incident[i]] == 1:
                    private[count] = incident[i]
                    count += 1
            if not count:
                continue
            for p in range(count):
                for c in members[private[p]]:
                    if c >= 0 and c != key:
                        shared[c] += 1
            best = -1
            for p in range(count):
                for c in members[private[p]]:
                    if c >= 0 and c != key and shared[c] == count and weight[c] < weight[key]:
                        if best < 0 or weight[c] < weight[best] or (weight[c] == weight[best] and c < best):
                            best = c
            for p in range(count):
                for c in members[private[p]]:
                    if c >= 0:
                        shared[c] = 0
            if best >= 0:
                picked[key] = False
                picked[best] = True
                for i in range(start[key], start[key + 1]):
                    per_edge[incident[i]] -= 1
                for i in range(start[best], start[best + 1]):
                    per_edge[incident[i]] += 1
                changed = True
        if not changed:
            break
    return picked


def _lazy_triples(
    combos: Joint, removed: np.ndarray, solve: Callable[[list[np.ndarray], np.ndarray], np.ndarray]
) -> np.ndarray:
    """Extend a cover of the pairs to the triples the survivors still hold, until they hold none.

    ``solve(edges, removed)`` returns a cover of ``edges`` (pairs first) built from
    ``removed``. A triple with a removed member is hit, so only the survivors' triples are
    enumerated, and after the first round only those through a key the solver put back.
    """
    pairs, _ = combos.all_pairs()
    edges = [pairs.astype(np.int64)] if len(pairs) else []
    checked: np.ndarray | None = None  # the last survivors: every triple among them is known
    while True:
        anchors = None if checked is None else ~removed & ~checked
        if anchors is not None and not anchors.any():
            return removed
        triples, _ = combos.triples_among(~removed, anchors, ordered=False)  # edges of a set cover: any order
        checked = ~removed  # those within the last survivors were known, the rest were just found
        if not len(triples):
            return removed
        edges.append(triples.astype(np.int64))
        removed = solve(edges, removed)


def min_cover(combos: Joint, instance: Instance, weight: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Best of greedy and local ratio on the pairs (each improved), extended to the triples; or the paper's flags."""
    pairs, _ = combos.all_pairs()
    graph = _Hypergraph([pairs.astype(np.int64)] if len(pairs) else [], weight, free)
    starts = [graph.improve(graph.greedy(free)), graph.improve(graph.local_ratio(free))]
    removed = min(starts, key=instance.cost)
    opened = graph.edges  # the open edges so far: _lazy_triples only appends to its list

    def solve(edges: list[np.ndarray], removed: np.ndarray) -> np.ndarray:
        nonlocal opened
        grown = _Hypergraph(opened + edges[len(opened) :], weight, free, opened=len(opened))
        opened = grown.edges
        return grown.improve(grown.greedy(removed))

    removed = _lazy_triples(combos, removed, solve)
    paper = free | _paper_pair_flags(combos, pairs)
    cost = instance.cost(removed)
    if cost <= instance.cost(paper):  # the paper's triples only add to its cost (a superset costs no less)
        return removed
    paper = _lazy_triples(combos, paper, lambda edges, removed: _paper_flags(combos, edges, removed))
    return removed if cost <= instance.cost(paper) else paper


def _paper_pair_flags(combos: Joint, pairs: np.ndarray) -> np.ndarray:
    """The paper's flags of the linkable pairs alone."""
    flagged = np.zeros(combos.count, dtype=bool)
    if len(pairs):
        flagged[combos.flagged_members(pairs)] = True
    return flagged


def _paper_flags(combos: Joint, edges: list[np.ndarray], removed: np.ndarray) -> np.ndarray:
    """``removed`` plus the paper's flag of every edge it does not hit yet.

    Flagging only the triples of the survivors gives a subset of the paper's flags that
    still hits every combination, so its cost is at most the paper's: ``min_cover`` keeps
    whichever of it and its own cover is cheaper, and is never worse than ``shortest``.
    """
    removed = removed.copy()
    for members in edges:
        open_ = ~removed[members].any(axis=1)
        if open_.any():
            removed[combos.flagged_members(members[open_])] = True
    return removed
