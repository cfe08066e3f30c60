"""The attack on one text: everything the adversary finds at (k, arity), with the SPEC scores.

``detect`` runs the n-gram lookups (SPEC §4) and, at arity 2–3, the combination search
(SPEC §5); ``Detection`` answers the questions the components, the rewriter and
``delink assess`` ask of it (anonymity, the §7 decision, what to rephrase under a flagging
strategy, see ``linkage.cover``), and ``Detection.after_mask`` detects again after a mask
without looking anything up twice.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numba as nb
import numpy as np

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
from .combinations import CombinationAnalysis, analyze_combinations, check_arity, combination_records
from .cover import DEFAULT_STRATEGY, Cover, check_strategy, choose
from .index import CorpusIndex
from .ngrams import LinkageAnalysis, Occurrence, analyze, ngram_records
from .scores import risk_from_anonymity

DEFAULT_MAX_COMBINATIONS = 1000


@dataclass
class Detection:
    """Everything the attack finds in one text at (k, arity): what the rewriter must change."""

    text: str
    analysis: LinkageAnalysis
    combinations: CombinationAnalysis | None
    index: CorpusIndex
    arity: int = 1
    max_combinations: int | None = 0
    flagging: str = DEFAULT_STRATEGY
    _covers: dict[str, Cover] = field(default_factory=dict, repr=False)

    @property
    def k(self) -> int:
        return self.analysis.k

    @property
    def anonymity(self) -> int | None:
        """SPEC §6 over both arities (exact whatever the report cap)."""
        if self.combinations is not None:
            return self.combinations.anonymity
        return self.analysis.anonymity()

    @property
    def linkage_risk(self) -> float:
        return risk_from_anonymity(self.anonymity)

    @property
    def combination_linkable(self) -> bool:
        return self.combinations is not None and self.combinations.combination_linkable

    @property
    def protected(self) -> bool:
        """SPEC §7: no linkable n-gram and not combination-linkable at (k, arity)."""
        return not self.analysis.minimal_columns()["start"] and not self.combination_linkable

    def cover(self, granularity: str = "token") -> Cover:
        """What this pass rewrites under the detection's flagging strategy (computed once per cost model)."""
        if granularity not in self._covers:
            self._covers[granularity] = choose(self, self.flagging, granularity)
        return self._covers[granularity]

    def to_rephrase(self, granularity: str = "token") -> list[Occurrence]:
        """The phrases the flagging strategy rewrites: minimal linkable n-grams and every
        occurrence of each removed candidate, in text order (one object per range)."""
        tokens = self.analysis.tokens
        phrases = []
        for a, b in np.unique(self.cover(granularity).intervals, axis=0).tolist():
            n = b - a + 1
            level = self.analysis.levels[n - 1]
            at = int(np.searchsorted(level.positions, a))
            phrases.append(
                Occurrence(a, n, int(tokens.starts[a]), int(tokens.ends[b]), int(level.df[at]), int(level.rows[at]))
            )
        return sorted(phrases, key=lambda o: (o.start, o.end))

    def after_mask(self, ranges: list[tuple[int, int]], text: str, granularity: str | None = "token") -> "Detection":
        """The detection of ``text``: this text with the character ``ranges`` (whole tokens) masked,
        equal to ``detect(text)`` but computing only what the mask can change.

        A mask breaks n-grams and creates none, so the n-gram lookups are this detection's,
        less what crosses a masked token, and the combination search reuses every posting
        list and pair support it can. With ``granularity``, the ranges are ``mask_ranges`` of
        this detection's cover at that cost model: the candidates the cover kept hold no
        linkable combination (a cover hits them all), so the triple search skips those made
        of them alone; with None they may be any whole tokens. When ``text`` does not
        tokenize as that (another mask string, rules that read it otherwise, a range that
        cuts a token), it is detected from scratch.
        """
        tokens = self.analysis.tokens
        bounds = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
        first = np.searchsorted(tokens.starts, bounds[:, 0])  # first token starting in each range
        last = np.searchsorted(tokens.ends, bounds[:, 1], side="right")  # past the last one ending in it
        change = np.zeros(len(tokens) + 1, dtype=np.int64)
        np.add.at(change, first, 1)
        np.add.at(change, np.maximum(last, first), -1)
        removed = np.cumsum(change)[: len(tokens)] > 0
        new_tokens = self.index.tokenizer.tokenize(text)
        kept = np.flatnonzero(~removed)
        expected_start = tokens.segment_start[kept].astype(bool)
        expected_start[1:] |= np.diff(kept) > 1  # a mask in the gap breaks it
        if (
            len(new_tokens) != len(kept)
            or not np.array_equal(np.asarray(new_tokens.segment_start, dtype=bool), expected_start)
            or not _same_tokens(tokens.codes, tokens.starts[kept], tokens.ends[kept], new_tokens.codes, new_tokens.starts, new_tokens.ends)
        ):
            return detect(self.index, text, self.k, self.arity, self.max_combinations, self.flagging)
        analysis = self.analysis.without(np.flatnonzero(removed), text, new_tokens)
        combinations = None
        if self.combinations is not None:
            settled = None
            if granularity is not None:
                kept_candidates = np.ones(self.combinations.count, dtype=bool)
                kept_candidates[list(self.cover(granularity).removed)] = False
                settled = self.combinations.keys[kept_candidates]
            combinations = analyze_combinations(
                self.index, analysis, self.arity, self.max_combinations, previous=self.combinations, settled=settled,
            )
        return Detection(text, analysis, combinations, self.index, self.arity, self.max_combinations, self.flagging)


@nb.njit(cache=True, nogil=True)
def _same_tokens(
    codes: np.ndarray, starts: np.ndarray, ends: np.ndarray, new_codes: np.ndarray, new_starts: np.ndarray, new_ends: np.ndarray
) -> bool:
    """Whether the tokens ``[starts, ends)`` of ``codes`` are, one by one, the same strings as the new ones."""
    if len(starts) != len(new_starts):
        return False
    for i in range(len(starts)):
        if ends[i] - starts[i] != new_ends[i] - new_starts[i]:
            return False
        offset = new_starts[i] - starts[i]
        for position in range(starts[i], ends[i]):
            if codes[position] != new_codes[position + offset]:
                return False
    return True


def detect(
    index: CorpusIndex,
    text: str,
    k: int,
    arity: int = 1,
    max_combinations: int | None = 0,
    flagging: str = DEFAULT_STRATEGY,
    exact_frequent: bool = True,
) -> Detection:
    """Run the attack on ``text``: n-grams always, combinations when ``arity`` >= 2.

    The defaults compute what rewriting needs — the decision and the exact scores — and
    list no combinations (``max_combinations=0``), which lets the search skip minimal
    triples until a flagging strategy asks for them. A report asks for its cap instead.
    ``exact_frequent=False`` caps a frequent n-gram's df at k (``ngrams.analyze``): the
    same outputs at threshold k, but not the token rarities a flagging strategy weighs.
    """
    check_arity(arity, allow_single=True)
    check_strategy(flagging)
    analysis = analyze(index, text, k, exact_frequent=exact_frequent)
    combinations = analyze_combinations(index, analysis, arity, max_combinations=max_combinations) if arity >= 2 else None
    return Detection(text, analysis, combinations, index, arity, max_combinations, flagging)


def assess_text(
    index: CorpusIndex,
    doc_id: Any,
    text: str,
    k: int,
    arity: int = 1,
    max_combinations: int = DEFAULT_MAX_COMBINATIONS,
) -> dict[str, Any]:
    """One output record (the schema of ``delink assess``) for one document.

    At arity 1 the record holds only linkable phrases (df < k), so df is asked for only up
    to k; combinations report their members' exact df.
    """
    detection = detect(index, text, k, arity, max_combinations=max_combinations, exact_frequent=arity >= 2)
    return {
        "id": doc_id,
        "k": k,
        "arity": arity,
        "linkage_risk": detection.linkage_risk,
        "anonymity": detection.anonymity,
        "ngrams": ngram_records(detection.analysis),
        "combinations": (
            combination_records(text, detection.combinations, max_combinations) if detection.combinations else []
        ),
        "combination_linkable": detection.combination_linkable,
    }
