"""What ``delink evaluate`` measures: the (k, arity) cells, the report's cell, the readings and the optional checks."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..errors import InputError
from ..linkage.attack import DEFAULT_MAX_COMBINATIONS
from ..linkage.combinations import check_arity
from ..linkage.ngrams import check_k
from ..linkage.readings import DEFAULT_READINGS, check_readings
from .adversary import check_proximity_slop
from .inputs import InputFields
from .proximity import DEFAULT_MAX_GAP, DEFAULT_WIDEST_SLOP


def parse_int_list(value: str, option: str, check: Callable[[int], Any]) -> list[int]:
    """``"2,3,5"`` → ``[2, 3, 5]`` (sorted, unique), each value checked."""
    values = []
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            number = int(part)
        except ValueError:
            raise InputError(f"{option} {value!r}: {part!r} is not an integer; write e.g. {option} 2,3,5") from None
        check(number)
        values.append(number)
    if not values:
        raise InputError(f"{option} is empty; write e.g. {option} 2,3,5")
    return sorted(set(values))


@dataclass
class EvaluationSettings:
    ks: list[int]
    arities: list[int]
    report_k: int | None = None
    report_arity: int | None = None
    max_combinations: int = DEFAULT_MAX_COMBINATIONS
    adversary: bool = True
    semantic: bool = True
    #: The readings of the rules our attack checks (SPEC §8).
    readings: Sequence[str] = DEFAULT_READINGS
    #: The widest slop of the engine's sloppy phrases around masks (search reading); those
    #: above ``max_gap`` are outside the contract. None: not run, as without the search reading.
    proximity_slop: int | None = DEFAULT_WIDEST_SLOP
    #: SPEC §9's G: the slop up to which a sloppy phrase around a mask is inside the contract;
    #: None: the index's own (``LinkageRules.max_gap``, what ``protect`` checked).
    max_gap: int | None = None
    #: How the three inputs are read: id and text fields, format where a name does not say it.
    fields: InputFields = field(default_factory=InputFields)
    #: Ranked retrieval: tantivy's BM25 with the text as the query (``evaluate.ranked``; outside the rules).
    ranked: bool = True

    def __post_init__(self) -> None:
        self.readings = check_readings(self.readings)
        if "search" not in self.readings:
            self.proximity_slop = None
        if self.proximity_slop is not None:
            check_proximity_slop(self.proximity_slop, self.readings, DEFAULT_MAX_GAP if self.max_gap is None else self.max_gap)
        for k in self.ks:
            check_k(k)
        for arity in self.arities:
            check_arity(arity, allow_single=True)
        self.report_k = self.ks[0] if self.report_k is None else check_k(self.report_k)
        self.report_arity = self.arities[-1] if self.report_arity is None else check_arity(self.report_arity, allow_single=True)

    @property
    def cells(self) -> list[tuple[int, int]]:
        return [(k, arity) for k in self.ks for arity in self.arities]
