"""Which generalization of each flagged number or date to keep: the most specific one detection accepts.

Every candidate (``forms.candidates``) that overlaps a range the flagging strategy
rewrites (with its value, not only a preposition before it) is tried at its most specific form, all at once; the text is detected again
(every reading checked, as everywhere else); a candidate whose new words no flagged range
touches (words it shares with the original at either end, such as "in", do not count) keeps that form, the others move on to their next form, until none is left. A
candidate that no form frees keeps its original text and is left to the mask fallback,
which masks the fewest tokens (perhaps not this one). Nothing here is trusted: the
loop re-detects the result, masks what is still flagged and verifies the output.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ....linkage.attack import Detection
from ....rewrite.masking import merge_ranges
from .forms import KINDS, Candidate, candidates

#: (start, end, replacement, kind) in the text generalized.
Generalization = Tuple[int, int, str, str]


def _overlaps(start: int, end: int, ranges: Sequence[Tuple[int, int]]) -> bool:
    return any(s < end and start < e for s, e in ranges)


def _flagged(detection: Detection) -> List[Tuple[int, int]]:
    return merge_ranges((r.start, r.end) for r in detection.to_rephrase())


def _changed(original: str, form: str, start: int) -> Tuple[int, int]:
    """Where ``form``, written at ``start`` in place of ``original``, differs from it (their common ends left out)."""
    prefix = len(os.path.commonprefix([original, form]))
    suffix = len(os.path.commonprefix([original[prefix:][::-1], form[prefix:][::-1]]))
    return start + prefix, start + max(len(form) - suffix, prefix + 1)


def _replace(text: str, chosen: Dict[Candidate, str]) -> Tuple[str, Dict[Candidate, Tuple[int, int]]]:
    """``text`` with each candidate replaced by its chosen form, and where each form now lies."""
    pieces: List[str] = []
    where: Dict[Candidate, Tuple[int, int]] = {}
    cursor = length = 0
    for candidate in sorted(chosen, key=lambda c: c.start):
        kept = text[cursor : candidate.start]
        pieces += [kept, chosen[candidate]]
        length += len(kept)
        where[candidate] = (length, length + len(chosen[candidate]))
        length += len(chosen[candidate])
        cursor = candidate.end
    pieces.append(text[cursor:])
    return "".join(pieces), where


@dataclass
class Generalizer:
    """Generalizes the flagged numbers, dates, ages, durations, percentages and ordinals of a text."""

    #: The kinds of ``forms.KINDS`` to generalize.
    kinds: Sequence[str] = KINDS
    #: "en" or "de"; None guesses per text (``forms.guess_language``).
    lang: Optional[str] = None
    _kinds: frozenset[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        from ....errors import InputError

        unknown = sorted(set(self.kinds) - set(KINDS))
        if unknown:
            raise InputError(f"Generalize kinds {', '.join(unknown)} unknown; choose among {', '.join(KINDS)}")
        if self.lang is not None and self.lang not in ("en", "de"):
            raise InputError(f"Generalize lang must be 'en', 'de' or null (guess per text), got {self.lang!r}")
        self._kinds = frozenset(self.kinds)

    def generalize(self, text: str, detection: Detection, detect: Callable[[str], Detection]) -> Tuple[List[Generalization], Detection]:
        """The generalizations to apply to ``text`` (offsets into it) and the detection of the text with them applied."""
        flagged = _flagged(detection)
        if not flagged:
            return [], detection
        found = candidates(text, self.lang, within=flagged)
        pending = [c for c in found if c.kind in self._kinds and _overlaps(c.value_start, c.end, flagged)]
        level = {candidate: 0 for candidate in pending}
        settled: Dict[Candidate, str] = {}
        last: Optional[Tuple[Dict[Candidate, str], Detection]] = None
        while pending:
            trial = {**settled, **{c: c.forms[level[c]] for c in pending}}
            trial_text, where = _replace(text, trial)
            trial_detection = detect(trial_text)
            last = (trial, trial_detection)
            still = _flagged(trial_detection)
            waiting = []
            for candidate in pending:
                start = where[candidate][0]
                if not _overlaps(*_changed(text[candidate.start : candidate.end], trial[candidate], start), still):
                    settled[candidate] = trial[candidate]
                elif level[candidate] + 1 < len(candidate.forms):
                    level[candidate] += 1
                    waiting.append(candidate)
            pending = waiting
        if not settled:
            return [], detection
        assert last is not None
        final_text, _ = _replace(text, settled)
        final = last[1] if last[0] == settled else detect(final_text)
        return [(c.start, c.end, form, c.kind) for c, form in sorted(settled.items(), key=lambda item: item[0].start)], final
