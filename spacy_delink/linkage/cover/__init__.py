"""What to rewrite: flagging strategies that leave no linkable n-gram and no linkable combination.

Detection (SPEC §4–5) says *what* links; a flagging strategy chooses *what to change* so that
every linkable n-gram occurrence and every linkable combination loses a member, at the
fewest tokens changed. One pass of the rewriter applies one choice; masking can turn the
pieces of a phrase into new candidates, so the rewriter detects again (incrementally) and
chooses again until the text is protected (SPEC §7), which it then verifies.

The instance of one pass (``instance``) says what must be hit, at the level where edits happen
(tokens): every minimal linkable n-gram, and a member of every linkable combination, a key
being removed when every occurrence of it is hit. A choice costs what the rewriter then
changes under the cost model of its granularity (``token`` or ``span``).

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

One concept per module: ``instance`` (the hitting problem and its costs), ``heuristics``
(``min_cover``'s covers and their compiled kernels), ``program`` (``optimal``'s integer program).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InputError
from ..strategies import check_strategy
from .heuristics import min_cover
from .instance import Detected, Instance, instance_of, joint_combinations
from .program import optimal

COSTS = ("token", "span")
#: Seconds the ``optimal`` integer program may take per pass before the best cover found is used.
OPTIMAL_TIME_LIMIT_S = 10.0


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


def choose(detection: Detected, strategy: str, cost_model: str = "token", time_limit: float | None = None) -> Cover:
    """The cover of one detection under ``strategy`` (module docstring); ``time_limit``
    (seconds, ``optimal`` only) defaults to ``OPTIMAL_TIME_LIMIT_S``."""
    check_strategy(strategy)
    if cost_model not in COSTS:
        raise InputError(f"cost model must be 'token' or 'span', got {cost_model!r}")
    instance = instance_of(detection, cost_model)
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
        return _cover(strategy, instance, min_cover(combos, instance, weight, free))
    removed, lower_bound, proven = optimal(combos, instance, weight, free, OPTIMAL_TIME_LIMIT_S if time_limit is None else time_limit)
    return _cover(strategy, instance, removed, lower_bound, proven)


def _cover(strategy: str, instance: Instance, removed: np.ndarray, lower_bound: int | None = None, proven: bool = False) -> Cover:
    return Cover(strategy, tuple(np.flatnonzero(removed).tolist()), instance.intervals(removed), instance.cost(removed), lower_bound, proven)
