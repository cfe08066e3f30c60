"""The hitting problem of one flagging pass (``linkage.cover``), in the positions a cover chooses among.

* every minimal linkable n-gram occurrence must be hit (a token inside it changed);
* a candidate key is *removed* when every maximal occurrence of it in the text is hit — the
  adversary's search for a key matches every occurrence, so removing only the first one
  (the SPEC's reported offsets) would leave the key, and one pass per repetition;
* every linkable combination (all of them, whatever the report cap) needs a removed member.

The cost model follows the rewriter's granularity: ``token`` masks one token per hit phrase,
and overlapping phrases share it (the cost of a set of phrases is its minimum stabbing, exact
by ``rewrite.masking.stab``); ``span`` rewrites every token of each phrase not already broken.
The combinations of every reading checked are one set of candidates and edges (``Joint``),
and a choice costs what the rewriter then changes under the cost model (``Instance.cost``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np

from ..combinations import CombinationAnalysis
from ..gap import GapAnalysis
from ..ngrams import LinkageAnalysis, occurrence_keys
from ..stabbing import stab  # the rewriter's own mask choice: a cover's cost is what it masks
from ..units import Units


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


@dataclass
class Instance:
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
                self._costs[key] = int(covered_tokens(intervals, self.tokens).sum())
        return self._costs[key]

    def base_hits(self) -> np.ndarray:
        """Whether each occurrence is hit by what the n-grams alone change."""
        if not len(self.occurrences):
            return np.zeros(0, dtype=bool)
        changed = np.zeros(self.tokens + 1, dtype=np.int64)
        if self.cost_model == "token":
            changed[np.asarray(stab(self.required, self.rarity), dtype=np.int64) + 1] = 1
        else:
            changed[1:] = covered_tokens(self.required, self.tokens)
        prefix = np.cumsum(changed)
        return prefix[self.occurrences[:, 1] + 1] > prefix[self.occurrences[:, 0]]

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        """Each candidate's additive weight beyond the n-grams' own edits, and which are free (weight 0)."""
        hit = self.base_hits()
        unhit = ~hit
        if self.cost_model == "token":
            per_occurrence = np.ones(len(self.owner), dtype=np.int64)
        else:
            covered = np.concatenate([[0], np.cumsum(covered_tokens(self.required, self.tokens))])
            length = self.occurrences[:, 1] - self.occurrences[:, 0] + 1
            per_occurrence = length - (covered[self.occurrences[:, 1] + 1] - covered[self.occurrences[:, 0]])
        weight = np.bincount(self.owner[unhit], weights=per_occurrence[unhit], minlength=self.candidates).astype(np.int64)
        return weight, weight == 0


def covered_tokens(intervals: np.ndarray, tokens: int) -> np.ndarray:
    """Bool per token: inside at least one inclusive interval."""
    delta = np.zeros(tokens + 1, dtype=np.int64)
    if len(intervals):
        np.add.at(delta, intervals[:, 0], 1)
        np.add.at(delta, intervals[:, 1] + 1, -1)
    return np.cumsum(delta)[:tokens] > 0


class Joint:
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


def joint_combinations(detection: Detected) -> Joint | None:
    """The joint combinations of a detection's readings (None at arity 1)."""
    parts = [part.combinations for part in detection.parts if part.combinations is not None]
    return Joint(parts) if parts else None


def cover_rarity(detection: Detected) -> np.ndarray:
    """Each unit's df: the smallest level-1 df of its tokens under any reading (a stab's ties go to the rarest)."""
    rarity = np.full(len(detection.units), np.iinfo(np.int64).max, dtype=np.int64)
    for part, unit_of in zip(detection.parts, detection.units.of_token):
        if part.analysis.levels:
            np.minimum.at(rarity, unit_of, part.analysis.levels[0].df)
    return rarity


def instance_of(detection: Detected, cost_model: str) -> Instance:
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
    return Instance(
        len(units),
        np.concatenate(required).reshape(-1, 2).astype(np.int64) if required else np.zeros((0, 2), dtype=np.int64),
        np.concatenate(occurrences).astype(np.int64) if occurrences else np.zeros((0, 2), dtype=np.int64),
        np.concatenate(owner).astype(np.int64) if owner else np.zeros(0, dtype=np.int64),
        count,
        cover_rarity(detection),
        cost_model,
    )
