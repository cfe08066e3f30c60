"""What a released table itself guarantees: is it a generalization of the original, its k, l, t and re-identification risks.

A privacy level computed on a "release" whose rows do not come from the original (a typo,
rows paired in the wrong order, a value that was changed rather than generalized)
measures nothing, so :func:`check_generalization` looks at every cell first. A released
value generalizes the original one when

* a hierarchy is given for the column: it is on the original value's path (the value
  itself, one of its labels, or the top);
* else: it equals the original; it is suppressed (``*``, or missing); it is a mask in
  which ``*`` stands for any characters (``4767*``, ``47***``); or, for a numeric
  original, an interval that holds it (``20-29``, ``[20, 30)``, ``(20, 30]``, ``<=40``,
  ``<40``, ``>=40``, ``>40``, ``≤40``, ``≥40``).

The release's own figures (:func:`release_statistics`) group its rows by their released
quasi-identifiers (QIs). A withheld record (every QI and every sensitive value
suppressed, as :func:`~.anonymize.anonymize` writes a suppressed one) publishes nothing
and is left out; a row whose QIs are all ``*`` but whose sensitive values show is a
published class like any other:

* k: the size of the smallest class; l: the fewest distinct values of a sensitive
  attribute in a class; t: the largest EMD (:mod:`.emd`) between a class's distribution
  of a sensitive attribute and the original table's (the population's, as the anonymizer
  checks it; the same as the release's own when nothing is withheld).
* Re-identification risks, as ARX defines them. *Prosecutor* (the adversary knows the
  person is in the release): a record's risk is 1/|E|, E its class; reported are the
  highest risk 1/min|E|, the share of records at it, and the average over records
  (= number of classes / records). *Journalist* (the adversary does not know who is in
  the release and links against a population table, here the original): a record's risk
  is 1/|F|, F the population records whose QIs the released record generalizes; highest
  and the share of records at it. *Marketer* (the adversary links every record at once,
  no target in mind): the expected share of records linked correctly, (1/n)·Σ 1/|F|.
  With the original as the population F holds E, and equals it for a full-domain
  generalization (then journalist = prosecutor and marketer = the prosecutor average);
  they differ for local recoding, where a released value also fits rows of other classes.
"""
from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from .emd import equal_emd, hierarchical_emd, ordered_emd, tree_from_paths
from .table import Table, as_number

SUPPRESSED = "*"
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_RANGE = re.compile(rf"^\s*([\[(]?)\s*({_NUMBER})\s*(?:-|–|\.\.|,)\s*({_NUMBER})\s*([\])]?)\s*$")
_BOUND = re.compile(rf"^\s*(<=|>=|<|>|≤|≥)\s*({_NUMBER})\s*$")
# Violations listed in a check's message and report.
SHOWN = 5


def _is_suppressed(value: Hashable) -> bool:
    return value is None or value == SUPPRESSED or (isinstance(value, float) and math.isnan(value))


def _interval_holds(released: str, number: float) -> bool:
    match = _RANGE.match(released)
    if match:
        opening, low, high, closing = match.groups()
        low_value, high_value = float(low), float(high)
        above = number > low_value if opening == "(" else number >= low_value
        below = number < high_value if closing == ")" else number <= high_value
        return above and below
    match = _BOUND.match(released)
    if match:
        operator, bound = match.group(1), float(match.group(2))
        return {"<=": number <= bound, "≤": number <= bound, "<": number < bound,
                ">=": number >= bound, "≥": number >= bound, ">": number > bound}[operator]
    return False


def generalizes(released: Hashable, original: Hashable, path: tuple[str, ...] | None = None) -> bool:
    """Whether ``released`` may stand for ``original`` (the rules in the module docstring)."""
    if _is_suppressed(released):
        return True
    if path is not None:
        return str(released) in path
    if released == original or str(released) == str(original):
        return True
    text = str(released)
    if "*" in text and original is not None:
        return fnmatch.fnmatchcase(str(original), text.replace("[", "[[]").replace("?", "[?]"))
    number = as_number(original)
    return number is not None and _interval_holds(text, number)


@dataclass(frozen=True)
class Violation:
    """One released cell that cannot come from its original."""

    row: int
    column: str
    original: Any
    released: Any


@dataclass(frozen=True)
class GeneralizationCheck:
    """Every cell of the checked columns: how many are suppressed, and the first violations."""

    columns: tuple[str, ...]
    cells: int
    suppressed: int
    violations: int
    examples: tuple[Violation, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.violations == 0

    def message(self, original: str, anonymized: str) -> str:
        shown = "; ".join(
            f"row {v.row + 1} {v.column}: {v.released!r} cannot stand for {v.original!r}" for v in self.examples
        )
        return (
            f"{anonymized} is not a generalization of {original}: {self.violations} of {self.cells} cells "
            f"({shown}); fix the release, pair the rows by an id column, give the hierarchies used "
            "(-H / hierarchies=), or measure it anyway with --no-check (check=False)"
        )


def _paths(hierarchy: Any) -> Mapping[str, tuple[str, ...]]:
    return hierarchy.paths if hasattr(hierarchy, "paths") else hierarchy


def check_generalization(
    original: Table, anonymized: Table, columns: Sequence[str], hierarchies: Mapping[str, Any] | None = None
) -> GeneralizationCheck:
    """Check that every released cell of ``columns`` generalizes its original (rows already paired)."""
    hierarchies = hierarchies or {}
    violations, suppressed, cells = 0, 0, 0
    examples: list[Violation] = []
    for name in columns:
        paths = _paths(hierarchies[name]) if name in hierarchies else None
        verdicts: dict[tuple[Hashable, Hashable], bool] = {}
        shown = 0
        for row, (before, after) in enumerate(zip(original.column(name), anonymized.column(name))):
            cells += 1
            suppressed += _is_suppressed(after) and not _is_suppressed(before)
            key = (before, after)
            if key not in verdicts:
                path = None
                if paths is not None:
                    path = paths.get(str(before))
                    if path is None:
                        raise InputError(f"value {before!r} of column {name!r} (row {row + 1}) is not in its hierarchy; add a row for it")
                verdicts[key] = generalizes(after, before, path)
            if not verdicts[key]:
                violations += 1
                if shown < SHOWN:  # the first few of each column; the first few rows of all are among them
                    examples.append(Violation(row, name, before, after))
                    shown += 1
    examples.sort(key=lambda violation: (violation.row, list(columns).index(violation.column)))
    return GeneralizationCheck(tuple(columns), cells, suppressed, violations, tuple(examples[:SHOWN]))


@dataclass(frozen=True)
class Risks:
    """ARX-style re-identification risks of a release (definitions in the module docstring)."""

    prosecutor_highest: float
    prosecutor_average: float
    prosecutor_records_at_highest: float
    journalist_highest: float | None  # None when some row does not generalize its own original
    journalist_records_at_highest: float | None
    marketer: float | None


@dataclass(frozen=True)
class ReleaseStatistics:
    """The release's own k, l and t (per sensitive attribute) and its re-identification risks."""

    classes: int
    withheld: int
    k: int
    l: dict[str, int]
    t: dict[str, float | None]
    ground_distance: dict[str, str]
    risks: Risks

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _class_codes(table: Table, columns: Sequence[str]) -> np.ndarray:
    keys: dict[tuple, int] = {}
    return np.array(
        [keys.setdefault(tuple(_key(table.column(c)[row]) for c in columns), len(keys)) for row in range(table.n_rows)],
        dtype=np.int64,
    )


def _key(value: Hashable) -> Hashable:
    return SUPPRESSED if _is_suppressed(value) else value


def _sensitive_figures(
    classes: np.ndarray, values: list[Hashable], population: list[Hashable], hierarchy: Any | None
) -> tuple[int, float | None, str]:
    """(l, t, ground distance) of one sensitive column over the classes.

    With a hierarchy, t is undefined (None) when the release generalizes some sensitive
    values: the tree distance is between the values themselves, not their labels.
    """
    distinct: dict[Hashable, int] = {}
    codes = np.array([distinct.setdefault(_key(v), len(distinct)) for v in values], dtype=np.int64)
    population_codes = np.array([distinct.setdefault(_key(v), len(distinct)) for v in population], dtype=np.int64)
    n_classes, n_values = int(classes.max()) + 1, len(distinct)
    counts = np.zeros((n_classes, n_values))
    np.add.at(counts, (classes, codes), 1.0)
    l_value = int((counts > 0).sum(axis=1).min())
    share = counts / counts.sum(axis=1, keepdims=True)
    overall = np.bincount(population_codes, minlength=n_values) / len(population_codes)
    if hierarchy is not None:
        paths = _paths(hierarchy)
        if any(str(value) not in paths for value in distinct):
            return l_value, None, "hierarchical (undefined: the release generalizes some values)"
        tree = tree_from_paths(list(distinct), paths, getattr(hierarchy, "source", "hierarchy"))
        return l_value, float(hierarchical_emd(share, overall, tree).max()), "hierarchical"
    numbers = [as_number(v) for v in distinct]
    if all(number is not None for number in numbers):
        order = np.argsort(np.asarray(numbers, dtype=float), kind="stable")
        return l_value, float(ordered_emd(share[:, order], overall[order]).max()), "ordered"
    return l_value, float(equal_emd(share, overall).max()), "equal"


def _population_matches(
    original: Table, anonymized: Table, qis: Sequence[str], classes: np.ndarray, hierarchies: Mapping[str, Any]
) -> np.ndarray:
    """|F| per class: the original rows (the whole population) whose QI values the class's released values generalize."""
    first_row = np.zeros(int(classes.max()) + 1, dtype=np.int64)  # a released row of each class
    first_row[classes[::-1]] = np.arange(len(classes))[::-1]
    consistent = []  # per QI: (codes of each original row, released-code x original-code verdict matrix)
    for name in qis:
        originals: dict[Hashable, int] = {}
        original_codes = np.array([originals.setdefault(v, len(originals)) for v in original.column(name)], dtype=np.int64)
        releases: dict[Hashable, int] = {}
        released_codes = np.array([releases.setdefault(v, len(releases)) for v in anonymized.column(name)], dtype=np.int64)
        paths = _paths(hierarchies[name]) if name in hierarchies else None
        verdict = np.array(
            [[generalizes(r, o, paths.get(str(o)) if paths is not None else None) for o in originals] for r in releases],
            dtype=bool,
        )
        consistent.append((original_codes, released_codes, verdict))
    postings = []  # per QI: the rows of each original code, so a class starts from its rarest column
    for original_codes, _, verdict in consistent:
        order = np.argsort(original_codes, kind="stable")
        bounds = np.concatenate(([0], np.cumsum(np.bincount(original_codes, minlength=verdict.shape[1]))))
        postings.append((order, bounds, np.bincount(original_codes, minlength=verdict.shape[1])))
    matches = np.empty(len(first_row), dtype=np.int64)
    for label, row in enumerate(first_row):
        allowed = [verdict[released_codes[row]] for _, released_codes, verdict in consistent]
        start = int(np.argmin([counts[ok].sum() for ok, (_, _, counts) in zip(allowed, postings)]))
        order, bounds, _ = postings[start]
        candidates = np.concatenate(
            [order[bounds[code] : bounds[code + 1]] for code in np.flatnonzero(allowed[start])] or [np.zeros(0, np.int64)]
        )
        for column, (original_codes, _, _) in enumerate(consistent):
            if column != start:
                candidates = candidates[allowed[column][original_codes[candidates]]]
        matches[label] = candidates.size
    return matches


def release_statistics(
    original: Table,
    anonymized: Table,
    qis: Sequence[str],
    sensitive: Sequence[str],
    hierarchies: Mapping[str, Any] | None = None,
) -> ReleaseStatistics:
    """k, l, t and the risks of ``anonymized`` (rows paired with ``original``, the population)."""
    hierarchies = hierarchies or {}
    withheld = np.array(
        [all(_is_suppressed(anonymized.column(c)[row]) for c in (*qis, *sensitive)) for row in range(anonymized.n_rows)]
    )
    if withheld.all():
        raise InputError("every record of the release is withheld (all its values are *): there is nothing to measure")
    published = anonymized.take(np.flatnonzero(~withheld).tolist())
    classes = _class_codes(published, qis)
    sizes = np.bincount(classes)
    per_record = sizes[classes]
    l_values, t_values, distances = {}, {}, {}
    for name in sensitive:
        l_values[name], t_values[name], distances[name] = _sensitive_figures(
            classes, published.column(name), original.column(name), hierarchies.get(name)
        )
    n = published.n_rows
    matches = _population_matches(original, published, qis, classes, hierarchies)[classes]
    linked = bool(np.all(matches >= per_record))  # else the population model does not apply
    risks = Risks(
        prosecutor_highest=1.0 / int(sizes.min()),
        prosecutor_average=len(sizes) / n,
        prosecutor_records_at_highest=float((per_record == sizes.min()).sum() / n),
        journalist_highest=1.0 / int(matches.min()) if linked else None,
        journalist_records_at_highest=float((matches == matches.min()).sum() / n) if linked else None,
        marketer=float((1.0 / matches).sum() / n) if linked else None,
    )
    return ReleaseStatistics(len(sizes), int(withheld.sum()), int(sizes.min()), l_values, t_values, distances, risks)
