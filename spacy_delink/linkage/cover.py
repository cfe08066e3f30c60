"""What to rewrite: flagging strategies that leave no linkable n-gram and no linkable combination.

Detection (SPEC §4–5) says *what* links; a flagging strategy chooses *what to change* so that
every linkable n-gram occurrence and every linkable combination loses a member, at the
fewest tokens changed. One pass of the rewriter applies one choice; masking can turn the
pieces of a phrase into new candidates, so the rewriter detects again (incrementally) and
chooses again until the text is protected (SPEC §7), which it then verifies.

The instance of one pass, at the level where edits happen (tokens):

* every minimal linkable n-gram occurrence must be hit (a token inside it changed);
* a candidate key is *removed* when every maximal occurrence of it in the text is hit — the
  adversary's search for a key matches every occurrence, so removing only the first one
  (the SPEC's reported offsets) would leave the key, and one pass per repetition;
* every linkable combination (all of them, whatever the report cap) needs a removed member.

The cost model follows the rewriter's granularity: ``token`` masks one token per hit phrase,
and overlapping phrases share it (the cost of a set of phrases is its minimum stabbing, exact
by ``rewrite.masking.stab``); ``span`` rewrites every token of each phrase not already broken.

Strategies
----------
``shortest``
    The paper's rule (SPEC §5): each minimal linkable combination flags its shortest member.
``min_cover``
    Weighted hitting set over the candidate keys, a key's weight being the tokens it costs
    beyond what the n-grams already change (0 when they already break every occurrence).
    Three feasible covers are built — the weighted greedy (ratio of newly hit combinations to
    weight; an H(d)-approximation, d the largest number of combinations one key is in), the
    local-ratio cover of Bar-Yehuda and Even (an f-approximation, f = the combination size,
    2 at arity 2 and 3 at arity 3), and the paper's flags — each is improved (drop picks
    whose combinations are all hit by other picks, then swap a pick for a cheaper key that
    alone hits every combination only it hits, until nothing changes), and the one with the
    fewest tokens changed wins. So ``min_cover`` is never worse than ``shortest`` in a pass,
    and within min(f, H(d)) of the best key cover under additive weights; shared tokens only
    lower its real cost. Triples are covered lazily: the pairs first, then the linkable
    triples of the keys that survive, repeated until the survivors hold none.
``optimal``
    The exact integer program of the pass (HiGHS through ``highspy``), with triples added as
    rows while the survivors still hold one. A time limit bounds it: then the best cover found
    is used (``min_cover`` when the solver found none) and ``Cover.lower_bound`` keeps the
    solver's bound, so the gap is known.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numba as nb
import numpy as np

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
from ..errors import InputError
from .combinations import CombinationAnalysis
from .gap import GapAnalysis
from .ngrams import LinkageAnalysis, occurrence_keys
from .stabbing import stab  # the rewriter's own mask choice: a cover's cost is what it masks
from .strategies import DEFAULT_STRATEGY, STRATEGIES, check_strategy  # noqa: F401  (re-exported: callers import them from here)
from .units import Units



class _ReadingPart(Protocol):
    """What a cover reads of one reading's detection (``attack.ReadingDetection``)."""

    @property
    def analysis(self) -> LinkageAnalysis | GapAnalysis: ...

    @property
    def combinations(self) -> CombinationAnalysis | None: ...


class Detected(Protocol):
    """What a cover reads of a detection (``attack.Detection``): its readings' parts and their units."""

    @property
    def parts(self) -> Sequence[_ReadingPart]: ...

    @property
    def units(self) -> Units: ...

COSTS = ("token", "span")
#: Seconds the ``optimal`` integer program may take per pass before the best cover found is used.
OPTIMAL_TIME_LIMIT_S = 10.0
#: Rounds of the improvement step (each drops redundant picks, then tries the swaps).
_IMPROVEMENT_ROUNDS = 8


@dataclass(frozen=True)
class Cover:
    """One pass's choice: what to rewrite and what it costs under the cost model.

    ``intervals`` are inclusive token ranges (the minimal linkable n-grams plus every
    maximal occurrence of each removed candidate) in text order; ``cost`` is the number of
    tokens the pass changes; ``lower_bound`` is a proven lower bound on the cheapest pass
    (``optimal`` only), equal to ``cost`` when ``proven_optimal``.
    """

    strategy: str
    removed: tuple[int, ...]
    intervals: np.ndarray
    cost: int
    lower_bound: int | None = None
    proven_optimal: bool = False


@dataclass
class _Instance:
    """The hitting problem of one pass (module docstring), in token positions."""

    tokens: int
    required: np.ndarray  # R×2 inclusive token ranges that must be hit
    occurrences: np.ndarray  # O×2 inclusive token ranges of the candidates' maximal occurrences
    owner: np.ndarray  # O: the candidate each occurrence belongs to
    candidates: int
    rarity: np.ndarray  # df of each token (stab ties go to the rarest)
    cost_model: str
    _costs: dict[bytes, int] = field(default_factory=dict)  # a cover compares the same choices more than once

    def intervals(self, removed: np.ndarray) -> np.ndarray:
        """The ranges to rewrite when ``removed`` (bool per candidate) is the cover.

        Under the span cost, an occurrence that overlaps a rewritten n-gram is broken
        already and is left out, so that only what must change is rewritten.
        """
        picked = removed[self.owner] if len(self.owner) else np.zeros(0, dtype=bool)
        if self.cost_model == "span":
            picked &= ~self.base_hits()
        both = np.concatenate([self.required, self.occurrences[picked]]).reshape(-1, 2)
        return both[np.lexsort((both[:, 1], both[:, 0]))]

    def cost(self, removed: np.ndarray) -> int:
        """Exact tokens changed by rewriting ``intervals(removed)`` under the cost model."""
        key = np.packbits(removed).tobytes()
        if key not in self._costs:
            intervals = self.intervals(removed)
            if self.cost_model == "token":
                self._costs[key] = len(stab(intervals, self.rarity))
            else:
                self._costs[key] = int(_covered(intervals, self.tokens).sum())
        return self._costs[key]

    def base_hits(self) -> np.ndarray:
        """Whether each occurrence is hit by what the n-grams alone change."""
        if not len(self.occurrences):
            return np.zeros(0, dtype=bool)
        changed = np.zeros(self.tokens + 1, dtype=np.int64)
        if self.cost_model == "token":
            changed[np.asarray(stab(self.required, self.rarity), dtype=np.int64) + 1] = 1
        else:
            changed[1:] = _covered(self.required, self.tokens)
        prefix = np.cumsum(changed)
        return prefix[self.occurrences[:, 1] + 1] > prefix[self.occurrences[:, 0]]

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        """Each candidate's additive weight beyond the n-grams' own edits, and which are free (weight 0)."""
        hit = self.base_hits()
        unhit = ~hit
        if self.cost_model == "token":
            per_occurrence = np.ones(len(self.owner), dtype=np.int64)
        else:
            covered = np.concatenate([[0], np.cumsum(_covered(self.required, self.tokens))])
            length = self.occurrences[:, 1] - self.occurrences[:, 0] + 1
            per_occurrence = length - (covered[self.occurrences[:, 1] + 1] - covered[self.occurrences[:, 0]])
        weight = np.bincount(self.owner[unhit], weights=per_occurrence[unhit], minlength=self.candidates).astype(np.int64)
        return weight, weight == 0


def _covered(intervals: np.ndarray, tokens: int) -> np.ndarray:
    """Bool per token: inside at least one inclusive interval."""
    delta = np.zeros(tokens + 1, dtype=np.int64)
    if len(intervals):
        np.add.at(delta, intervals[:, 0], 1)
        np.add.at(delta, intervals[:, 1] + 1, -1)
    return np.cumsum(delta)[:tokens] > 0


class _Joint:
    """The combinations of every reading checked, as one set of candidates and edges.

    Reading i's candidate c is candidate ``offsets[i] + c``; an edge (a linkable
    combination) never mixes readings (SPEC §8: each reading is a search of its own), so a
    cover over the joint candidates hits every reading's combinations at once.
    """

    def __init__(self, parts: list[CombinationAnalysis]) -> None:
        self.parts = parts
        self.offsets = np.cumsum([0, *(part.count for part in parts)]).astype(np.int64)
        self._all_pairs: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def count(self) -> int:
        return int(self.offsets[-1])

    @property
    def combination_linkable(self) -> bool:
        return any(part.combination_linkable for part in self.parts)

    def _joined(self, arrays: list[tuple[np.ndarray, np.ndarray]], width: int) -> tuple[np.ndarray, np.ndarray]:
        members = [m.astype(np.int64) + offset for (m, _), offset in zip(arrays, self.offsets)]
        return (
            np.concatenate(members).reshape(-1, width) if members else np.zeros((0, width), dtype=np.int64),
            np.concatenate([support for _, support in arrays]) if arrays else np.zeros(0, dtype=np.int64),
        )

    def flagged(self) -> list[int]:
        """SPEC §5's ``shortest`` flags of every reading."""
        return [int(offset) + c for part, offset in zip(self.parts, self.offsets) for c in part.flagged()]

    def all_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Every reading's linkable pairs (computed once)."""
        if self._all_pairs is None:
            self._all_pairs = self._joined([part.all_pairs() for part in self.parts], 2)
        return self._all_pairs

    def triples_among(self, kept: np.ndarray, through: np.ndarray | None = None, ordered: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """``CombinationAnalysis.triples_among`` of every reading, over the joint candidates."""
        bounds = list(zip(self.offsets[:-1].tolist(), self.offsets[1:].tolist()))
        return self._joined(
            [
                part.triples_among(kept[a:b], None if through is None else through[a:b], ordered)
                for part, (a, b) in zip(self.parts, bounds)
            ],
            3,
        )

    def flagged_members(self, members: np.ndarray) -> np.ndarray:
        """The paper's flagged member of each edge (rows of joint candidates of one reading each)."""
        flagged = np.empty(len(members), dtype=np.int64)
        reading = np.searchsorted(self.offsets, members[:, 0], side="right") - 1
        for i, (part, offset) in enumerate(zip(self.parts, self.offsets)):
            rows = reading == i
            if rows.any():
                flagged[rows] = part.flagged_members(members[rows] - offset) + offset
        return flagged


def joint_combinations(detection: Detected) -> _Joint | None:
    """The joint combinations of a detection's readings (None at arity 1)."""
    parts = [part.combinations for part in detection.parts if part.combinations is not None]
    return _Joint(parts) if parts else None


def cover_rarity(detection: Detected) -> np.ndarray:
    """Each unit's df: the smallest level-1 df of its tokens under any reading (a stab's ties go to the rarest)."""
    rarity = np.full(len(detection.units), np.iinfo(np.int64).max, dtype=np.int64)
    for part, unit_of in zip(detection.parts, detection.units.of_token):
        if part.analysis.levels:
            np.minimum.at(rarity, unit_of, part.analysis.levels[0].df)
    return rarity


def _instance(detection: Detected, cost_model: str) -> _Instance:
    """The pass's hitting problem over the detection's units (``linkage.units``), all readings at once."""
    units = detection.units
    required, occurrences, owner = [], [], []
    count = 0
    for part, unit_of in zip(detection.parts, units.of_token):
        analysis = part.analysis
        minimal = analysis.minimal_arrays()
        required.append(np.stack([unit_of[minimal["token"]], unit_of[minimal["token"] + minimal["n"] - 1]], axis=1))
        combos = part.combinations
        if combos is not None and combos.count:
            maximal = analysis.maximal_columns()
            keys = occurrence_keys(maximal["n"], maximal["row"])
            order = np.argsort(combos.keys)
            owner.append(order[np.searchsorted(combos.keys, keys, sorter=order)] + count)
            occurrences.append(np.stack([unit_of[maximal["token"]], unit_of[maximal["token"] + maximal["n"] - 1]], axis=1))
            count += combos.count
    return _Instance(
        len(units),
        np.concatenate(required).reshape(-1, 2).astype(np.int64) if required else np.zeros((0, 2), dtype=np.int64),
        np.concatenate(occurrences).astype(np.int64) if occurrences else np.zeros((0, 2), dtype=np.int64),
        np.concatenate(owner).astype(np.int64) if owner else np.zeros(0, dtype=np.int64),
        count,
        cover_rarity(detection),
        cost_model,
    )


# -- hitting sets over candidate keys ------------------------------------------------------------


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


# -- the strategies -------------------------------------------------------------------------------


def choose(detection: Detected, strategy: str, cost_model: str = "token", time_limit: float | None = None) -> Cover:
    """The cover of one detection under ``strategy`` (module docstring); ``time_limit``
    (seconds, ``optimal`` only) defaults to ``OPTIMAL_TIME_LIMIT_S``."""
    check_strategy(strategy)
    if cost_model not in COSTS:
        raise InputError(f"cost model must be 'token' or 'span', got {cost_model!r}")
    instance = _instance(detection, cost_model)
    combos = joint_combinations(detection)
    removed = np.zeros(instance.candidates, dtype=bool)
    if combos is None or not combos.combination_linkable:  # n-grams only: the stabbing is optimal
        cover = _cover(strategy, instance, removed)
        return _cover(strategy, instance, removed, cover.cost, True) if strategy == "optimal" else cover
    if strategy == "shortest":
        removed[combos.flagged()] = True
        return _cover(strategy, instance, removed)
    weight, free = instance.weights()
    if strategy == "min_cover":
        return _cover(strategy, instance, _min_cover(combos, instance, weight, free))
    return _optimal(combos, instance, weight, free, OPTIMAL_TIME_LIMIT_S if time_limit is None else time_limit)


def _cover(strategy: str, instance: _Instance, removed: np.ndarray, lower_bound: int | None = None, proven: bool = False) -> Cover:
    return Cover(strategy, tuple(np.flatnonzero(removed).tolist()), instance.intervals(removed), instance.cost(removed), lower_bound, proven)


def _lazy_triples(
    combos: _Joint, removed: np.ndarray, solve: Callable[[list[np.ndarray], np.ndarray], np.ndarray]
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


def _min_cover(combos: _Joint, instance: _Instance, weight: np.ndarray, free: np.ndarray) -> np.ndarray:
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


def _paper_pair_flags(combos: _Joint, pairs: np.ndarray) -> np.ndarray:
    """The paper's flags of the linkable pairs alone."""
    flagged = np.zeros(combos.count, dtype=bool)
    if len(pairs):
        flagged[combos.flagged_members(pairs)] = True
    return flagged


def _paper_flags(combos: _Joint, edges: list[np.ndarray], removed: np.ndarray) -> np.ndarray:
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


def _optimal(combos: _Joint, instance: _Instance, weight: np.ndarray, free: np.ndarray, time_limit: float) -> Cover:
    """The pass's exact integer program, triples added as rows while survivors hold one."""
    deadline = time.monotonic() + time_limit
    program = _Program(instance)
    pairs, _ = combos.all_pairs()
    program.add_edges(pairs)
    proven = True
    bound = 0
    checked: np.ndarray | None = None
    while True:
        proven &= program.solve(max(deadline - time.monotonic(), 0.01))
        removed = program.removed()
        bound = max(bound, program.bound())
        if removed is None or time.monotonic() >= deadline:
            proven = False
            break
        anchors = None if checked is None else ~removed & ~checked
        if anchors is not None and not anchors.any():
            break
        triples, _ = combos.triples_among(~removed, anchors)
        checked = ~removed
        if not len(triples):
            break
        program.add_edges(triples)
    if removed is None or not _hits_all(combos, removed):
        removed = _min_cover(combos, instance, weight, free)
        proven = False
    cost = instance.cost(removed)
    return _cover("optimal", instance, removed, lower_bound=cost if proven else min(bound, cost), proven=proven)


def _hits_all(combos: _Joint, removed: np.ndarray) -> bool:
    """Every linkable pair and every survivors' triple has a removed member."""
    pairs, _ = combos.all_pairs()
    if len(pairs) and not removed[pairs].any(axis=1).all():
        return False
    triples, _ = combos.triples_among(~removed, ordered=False)
    return not len(triples)


class _Program:
    """min Σ x_t  s.t.  Σ_{t∈r} x_t ≥ 1 (n-grams),  Σ_{t∈o} x_t ≥ y_c (occurrences of c),  Σ_{c∈e} y_c ≥ 1 (edges).

    Token cost: x_t = 1 when token t is masked. Span cost: an occurrence is rewritten whole,
    so y_c ≤ x_t for every token of c's occurrences, and the n-grams' tokens are fixed to 1.
    """

    def __init__(self, instance: _Instance) -> None:
        import highspy  # only ``optimal`` needs the solver: not loaded for every command

        self.instance = instance
        self.highs = _quiet(highspy.Highs)
        self.highs.setOptionValue("output_flag", False)
        self.highs.setOptionValue("threads", 1)
        self.highs.setOptionValue("random_seed", 0)
        tokens, count = instance.tokens, instance.candidates
        self.y0 = tokens
        lower = np.zeros(tokens + count)
        if instance.cost_model == "span":
            lower[:tokens][_covered(instance.required, tokens)] = 1
        cost = np.concatenate([np.ones(tokens), np.zeros(count)])
        self.highs.addCols(tokens + count, cost, lower, np.ones(tokens + count), 0, np.zeros(tokens + count, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0))
        self.highs.changeColsIntegrality(tokens + count, np.arange(tokens + count, dtype=np.int32), np.ones(tokens + count, dtype=np.uint8))
        rows: list[tuple[list[int], list[float], float]] = []
        if instance.cost_model == "token":
            rows += [(list(range(a, b + 1)), [1.0] * (b - a + 1), 1.0) for a, b in instance.required.tolist()]
            rows += [
                (list(range(a, b + 1)) + [self.y0 + c], [1.0] * (b - a + 1) + [-1.0], 0.0)
                for (a, b), c in zip(instance.occurrences.tolist(), instance.owner.tolist())
            ]
        else:  # occurrences that a rewritten n-gram breaks already need nothing
            open_ = ~instance.base_hits()
            spans = zip(instance.occurrences[open_].tolist(), instance.owner[open_].tolist())
            pairs = {(t, c) for (a, b), c in spans for t in range(a, b + 1)}
            rows += [([t, self.y0 + c], [1.0, -1.0], 0.0) for t, c in sorted(pairs)]
        self._add_rows(rows)

    def _add_rows(self, rows: list[tuple[list[int], list[float], float]]) -> None:
        if not rows:
            return
        starts = np.cumsum([0] + [len(r[0]) for r in rows[:-1]]).astype(np.int32)
        index = np.concatenate([np.asarray(r[0], dtype=np.int32) for r in rows])
        value = np.concatenate([np.asarray(r[1], dtype=np.float64) for r in rows])
        lower = np.array([r[2] for r in rows], dtype=np.float64)
        self.highs.addRows(len(rows), lower, np.full(len(rows), np.inf), len(index), starts, index, value)

    def add_edges(self, edges: np.ndarray) -> None:
        self._add_rows([([self.y0 + int(c) for c in edge], [1.0] * len(edge), 1.0) for edge in np.asarray(edges).tolist()])

    def solve(self, seconds: float) -> bool:
        """True when the solver proved its answer optimal within ``seconds``."""
        import highspy

        self.highs.setOptionValue("time_limit", float(seconds))
        self.highs.run()
        return self.highs.getModelStatus() == highspy.HighsModelStatus.kOptimal

    def removed(self) -> np.ndarray | None:
        """The candidates the incumbent removes, or None when the solver has no feasible answer."""
        info = self.highs.getInfo()
        if info.primal_solution_status != 2:  # kSolutionStatusFeasible
            return None
        values = np.asarray(self.highs.getSolution().col_value)
        return values[self.y0 :] > 0.5

    def bound(self) -> int:
        info = self.highs.getInfo()
        value = info.mip_dual_bound
        return int(np.ceil(value - 1e-6)) if np.isfinite(value) else 0


_banner_shown = False


def _quiet(factory: Callable[[], Any]) -> Any:
    """Build a solver; the first time with stdout silenced, as HiGHS prints a banner then."""
    global _banner_shown
    if _banner_shown:
        return factory()
    _banner_shown = True
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            return factory()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
