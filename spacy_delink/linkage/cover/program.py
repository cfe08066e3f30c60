"""The ``optimal`` strategy (``linkage.cover``): the pass's exact integer program, solved by HiGHS (``highspy``)."""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable

import numpy as np

from .heuristics import min_cover
from .instance import Instance, Joint, covered_tokens


def optimal(combos: Joint, instance: Instance, weight: np.ndarray, free: np.ndarray, time_limit: float) -> tuple[np.ndarray, int, bool]:
    """The pass's exact integer program, triples added as rows while survivors hold one: the
    candidates removed, a lower bound on the cheapest pass, and whether the cover is proven optimal."""
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
        removed = min_cover(combos, instance, weight, free)
        proven = False
    cost = instance.cost(removed)
    return removed, cost if proven else min(bound, cost), proven


def _hits_all(combos: Joint, removed: np.ndarray) -> bool:
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

    def __init__(self, instance: Instance) -> None:
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
            lower[:tokens][covered_tokens(instance.required, tokens)] = 1
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
