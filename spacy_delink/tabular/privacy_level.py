"""Privacy level of anonymized tables (Zang & Zhu 2024): PL = DR × IR, local PL and entropy change.

All quantities are Shannon entropies in bits over discrete values; a set of columns is
one joint variable (the tuple of its values). X is a column set before anonymization,
X̄ the same columns after it, and the adversary is assumed to know the released
quasi-identifiers (QIs):

* DR = 1 − H(X̄prv | X̄qd) / H(X̄prv)  (discrimination rate, Sondeck et al. 2017): how much
  knowing the released QIs narrows down the released sensitive values.
* IR = I(Xprv ; X̄prv) / H(Xprv): how much of the original sensitive information survives.
* PL = DR × IR in [0, 1]; closer to 0 is better protection.
* EC = (H(X̄qd) + H(X̄prv)) / (H(Xqd) + H(Xprv)) (entropy change).

Defined edge cases (never a ZeroDivisionError):

* Missing values (``None``, NaN, an empty CSV cell) are one value of their own, like any other.
* H(X̄) = 0 (the released column is constant): nothing tells records apart, so DR = 0.
* H(X) = 0 (the original column is constant): there is nothing to disclose, so IR = 0.
* EC with H(Xqd) + H(Xprv) = 0: 1.0 when the released entropies are 0 too, else ``inf``.
* Known set empty: H(X̄ | ∅) = H(X̄), so DR = 0.

Rows of the two tables are paired by position, or by ``id_column`` when given (every id
must be unique and present in both tables; keep suppressed records as ``*`` rows).
:func:`privacy_level` first checks that the release is a generalization of the original
(:mod:`.release`) and reports the release's own k, l, t and re-identification risks.
"""
from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from .anonymize import Hierarchy, load_hierarchies
from .release import GeneralizationCheck, ReleaseStatistics, check_generalization, release_statistics
from .table import Table, TableSource, load_table

Column = Sequence[Hashable]
# Numerical noise below this is treated as zero when clamping entropies and ratios.
_EPSILON = 1e-12


class _Missing:
    """The single stand-in for None and NaN, so every missing cell is the same value."""

    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def _is_missing(value: Hashable) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _codes(column: Column) -> np.ndarray:
    """Integer codes 0..m-1 for the distinct values of one column (first appearance order)."""
    index: dict[Hashable, int] = {}
    return np.fromiter(
        (index.setdefault(_MISSING if _is_missing(v) else v, len(index)) for v in column),
        dtype=np.int64,
        count=len(column),
    )


def _joint_codes(code_arrays: Sequence[np.ndarray], n_rows: int) -> np.ndarray:
    """Codes of the tuple variable formed by several coded columns (compacted after each step)."""
    joint = np.zeros(n_rows, dtype=np.int64)
    for codes in code_arrays:
        if len(codes) != n_rows:
            raise InputError(f"columns have different lengths ({len(codes)} vs {n_rows}); align the rows")
        _, joint = np.unique(joint * (int(codes.max(initial=0)) + 1) + codes, return_inverse=True)
    return joint.reshape(-1)


def _entropy_of_codes(codes: np.ndarray) -> float:
    if codes.size == 0:
        return 0.0
    counts = np.bincount(codes)
    p = counts[counts > 0] / codes.size
    return max(0.0, float(-(p * np.log2(p)).sum()))


def _columns_codes(columns: Sequence[Column]) -> tuple[list[np.ndarray], int]:
    if isinstance(columns, (str, bytes)) or (len(columns) > 0 and isinstance(columns[0], (str, bytes))):
        raise InputError("pass a variable as a list of columns, e.g. [ages] or [ages, zips], not one column")
    n_rows = len(columns[0]) if len(columns) > 0 else 0
    return [_codes(column) for column in columns], n_rows


def entropy(columns: Sequence[Column]) -> float:
    """H(X) in bits of the joint variable formed by ``columns`` (a list of equal-length columns)."""
    codes, n_rows = _columns_codes(columns)
    return _entropy_of_codes(_joint_codes(codes, n_rows))


def joint_entropy(x: Sequence[Column], y: Sequence[Column]) -> float:
    """H(X, Y) in bits; ``x`` and ``y`` are each a list of columns."""
    return entropy([*x, *y])


def conditional_entropy(x: Sequence[Column], given: Sequence[Column]) -> float:
    """H(X | Y) = H(X, Y) − H(Y) in bits (0 when Y determines X; H(X) when ``given`` is empty)."""
    return max(0.0, joint_entropy(x, given) - entropy(given))


def mutual_information(x: Sequence[Column], y: Sequence[Column]) -> float:
    """I(X ; Y) = H(X) + H(Y) − H(X, Y) in bits."""
    return max(0.0, entropy(x) + entropy(y) - joint_entropy(x, y))


def _ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator clamped to [0, 1], with 0 for a zero denominator (see module doc)."""
    if denominator <= _EPSILON:
        return 0.0
    return min(1.0, max(0.0, numerator / denominator))


def discrimination_rate(target: Sequence[Column], known: Sequence[Column]) -> float:
    """DR = 1 − H(target | known) / H(target), in [0, 1]; 0 for a constant target."""
    h_target = entropy(target)
    return _ratio(h_target - conditional_entropy(target, known), h_target)


@dataclass(frozen=True)
class PrivacyMeasure:
    """DR, IR and PL of ``attributes`` (one joint variable) for an adversary who knows ``known``.

    The entropies are the ones the formulas use: H(X), H(X̄), H(X̄ | Ȳ) and I(X ; X̄).
    """

    attributes: tuple[str, ...]
    known: tuple[str, ...]
    discrimination_rate: float
    information_ratio: float
    privacy_level: float
    entropy_original: float
    entropy_anonymized: float
    entropy_anonymized_given_known: float
    mutual_information: float


@dataclass(frozen=True)
class PrivacyReport:
    """The whole evaluation: overall PL of the sensitive attributes, their single PLs, local PLs and EC."""

    rows: int
    quasi_identifiers: tuple[str, ...]
    sensitive: tuple[str, ...]
    overall: PrivacyMeasure
    per_sensitive: dict[str, PrivacyMeasure]
    local: dict[str, PrivacyMeasure]
    entropy_qi_original: float
    entropy_qi_anonymized: float
    entropy_change: float
    generalization: GeneralizationCheck | None = None
    release: ReleaseStatistics | None = None

    @property
    def discrimination_rate(self) -> float:
        return self.overall.discrimination_rate

    @property
    def information_ratio(self) -> float:
        return self.overall.information_ratio

    @property
    def privacy_level(self) -> float:
        return self.overall.privacy_level

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (tuples become lists; an infinite EC becomes None)."""
        data = asdict(self)
        if not math.isfinite(self.entropy_change):
            data["entropy_change"] = None
        return data


class _CodedPair:
    """The original and anonymized tables, aligned by row and coded column by column once."""

    def __init__(self, original: TableSource, anonymized: TableSource, id_column: str | None) -> None:
        self.original = load_table(original, "original")
        self.anonymized = load_table(anonymized, "anonymized")
        if id_column is not None:
            self.anonymized = _align_by_id(self.original, self.anonymized, id_column)
        elif self.original.n_rows != self.anonymized.n_rows:
            raise InputError(
                f"row counts differ: {self.original.source} has {self.original.n_rows} rows, "
                f"{self.anonymized.source} has {self.anonymized.n_rows}; keep suppressed records "
                "(as '*' rows) or pair the rows with an id column"
            )
        if self.original.n_rows == 0:
            raise InputError(f"{self.original.source}: no rows to measure")
        self.n_rows = self.original.n_rows
        self._cache: dict[tuple[bool, str], np.ndarray] = {}

    def codes(self, names: Iterable[str], anonymized: bool) -> np.ndarray:
        table = self.anonymized if anonymized else self.original
        arrays = []
        for name in names:
            key = (anonymized, name)
            if key not in self._cache:
                self._cache[key] = _codes(table.column(name))
            arrays.append(self._cache[key])
        return _joint_codes(arrays, self.n_rows)

    def entropy(self, names: Iterable[str], anonymized: bool) -> float:
        return _entropy_of_codes(self.codes(names, anonymized))

    def measure(self, attributes: Sequence[str], known: Sequence[str]) -> PrivacyMeasure:
        """DR × IR of the joint variable ``attributes`` given the released ``known`` columns."""
        attributes = tuple(attributes)
        known = tuple(name for name in known if name not in attributes)
        h_original = self.entropy(attributes, anonymized=False)
        h_anonymized = self.entropy(attributes, anonymized=True)
        h_joint_released = self.entropy((*attributes, *known), anonymized=True)
        h_given = max(0.0, h_joint_released - self.entropy(known, anonymized=True))
        before = self.codes(attributes, anonymized=False)
        after = self.codes(attributes, anonymized=True)
        h_before_after = _entropy_of_codes(_joint_codes([before, after], self.n_rows))
        mutual = max(0.0, h_original + h_anonymized - h_before_after)
        dr = _ratio(h_anonymized - h_given, h_anonymized)
        ir = _ratio(mutual, h_original)
        return PrivacyMeasure(attributes, known, dr, ir, dr * ir, h_original, h_anonymized, h_given, mutual)


def _align_by_id(original: Table, anonymized: Table, id_column: str) -> Table:
    """Reorder ``anonymized`` so that row i carries the same id as row i of ``original``."""
    positions: dict[str, int] = {}
    for position, value in enumerate(anonymized.column(id_column)):
        key = str(value)
        if key in positions:
            raise InputError(f"{anonymized.source}: id {key!r} in column {id_column!r} occurs twice; ids must be unique")
        positions[key] = position
    order = []
    seen: set[str] = set()
    for value in original.column(id_column):
        key = str(value)
        if key in seen:
            raise InputError(f"{original.source}: id {key!r} in column {id_column!r} occurs twice; ids must be unique")
        seen.add(key)
        if key not in positions:
            raise InputError(
                f"{anonymized.source}: id {key!r} from {original.source} is missing; "
                "keep suppressed records as '*' rows so that both tables hold the same ids"
            )
        order.append(positions[key])
    if len(order) != anonymized.n_rows:
        extra = sorted(set(positions) - seen)[:3]
        raise InputError(f"{anonymized.source}: ids {extra} are not in {original.source}; both tables need the same ids")
    return anonymized.take(order)


def _names(value: str | Sequence[str], what: str, allow_empty: bool = False) -> tuple[str, ...]:
    """Column names from a list or a comma-separated string; no duplicates, at least one unless allowed."""
    names = tuple(part.strip() for part in value.split(",")) if isinstance(value, str) else tuple(value)
    names = tuple(name for name in names if name)
    if not names and not allow_empty:
        raise InputError(f"no {what} columns given; name at least one")
    if len(set(names)) != len(names):
        raise InputError(f"{what} columns {list(names)} repeat a name; list each column once")
    return names


def _checked_columns(
    pair: _CodedPair, quasi_identifiers: str | Sequence[str], sensitive: str | Sequence[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    qis = _names(quasi_identifiers, "quasi-identifier")
    prv = _names(sensitive, "sensitive")
    overlap = sorted(set(qis) & set(prv))
    if overlap:
        raise InputError(f"columns {overlap} are both quasi-identifier and sensitive; choose one role for each")
    for table in (pair.original, pair.anonymized):
        table.require((*qis, *prv))
    return qis, prv


def _entropy_change(pair: _CodedPair, qis: Sequence[str], prv: Sequence[str]) -> tuple[float, float, float]:
    h_qi_before = pair.entropy(qis, anonymized=False)
    h_qi_after = pair.entropy(qis, anonymized=True)
    before = h_qi_before + pair.entropy(prv, anonymized=False)
    after = h_qi_after + pair.entropy(prv, anonymized=True)
    if before <= _EPSILON:
        change = 1.0 if after <= _EPSILON else math.inf
    else:
        change = after / before
    return h_qi_before, h_qi_after, change


def entropy_change(
    original: TableSource,
    anonymized: TableSource,
    quasi_identifiers: str | Sequence[str],
    sensitive: str | Sequence[str],
    id_column: str | None = None,
) -> float:
    """EC = (H(X̄qd) + H(X̄prv)) / (H(Xqd) + H(Xprv)): the share of entropy the release keeps."""
    pair = _CodedPair(original, anonymized, id_column)
    qis, prv = _checked_columns(pair, quasi_identifiers, sensitive)
    return _entropy_change(pair, qis, prv)[2]


def local_privacy_level(
    original: TableSource,
    anonymized: TableSource,
    attribute: str | Sequence[str],
    known: str | Sequence[str],
    id_column: str | None = None,
) -> PrivacyMeasure:
    """Local PL of ``attribute`` for an adversary who knows the released ``known`` columns (Algorithm 2).

    ``attribute`` is removed from ``known``; an empty known set gives DR = 0.
    """
    pair = _CodedPair(original, anonymized, id_column)
    attributes = _names(attribute, "attribute")
    known_names = _names(known, "known", allow_empty=True)
    for table in (pair.original, pair.anonymized):
        table.require((*attributes, *known_names))
    return pair.measure(attributes, known_names)


def privacy_level(
    original: TableSource,
    anonymized: TableSource,
    quasi_identifiers: str | Sequence[str],
    sensitive: str | Sequence[str],
    id_column: str | None = None,
    local: bool = True,
    hierarchies: Mapping[str, Hierarchy | str | Path] | None = None,
    check: bool = True,
) -> PrivacyReport:
    """PL = DR × IR of the sensitive columns given the released QIs, plus EC, per-attribute PLs and the release's own figures.

    ``per_sensitive`` holds each sensitive column given the QIs; ``local`` (when asked for)
    holds each QI given the other QIs, as in the paper's Algorithm 2. With ``check`` (the
    default) a release that is not a generalization of the original is refused;
    ``hierarchies`` (per column, ARX CSVs) make that check exact and give t the
    hierarchical distance for sensitive columns. ``release`` holds k, l, t and the risks.
    """
    pair = _CodedPair(original, anonymized, id_column)
    qis, prv = _checked_columns(pair, quasi_identifiers, sensitive)
    loaded = load_hierarchies(hierarchies or {})
    unknown = sorted(set(loaded) - {*qis, *prv})
    if unknown:
        raise InputError(f"hierarchies for {unknown}, which are neither quasi-identifiers nor sensitive columns")
    generalization = check_generalization(pair.original, pair.anonymized, (*qis, *prv), loaded)
    if check and not generalization.ok:
        raise InputError(generalization.message(pair.original.source, pair.anonymized.source))
    overall = pair.measure(prv, qis)
    per_sensitive = {name: pair.measure((name,), qis) for name in prv}
    local_levels = {name: pair.measure((name,), qis) for name in qis} if local else {}
    h_qi_before, h_qi_after, change = _entropy_change(pair, qis, prv)
    return PrivacyReport(
        rows=pair.n_rows,
        quasi_identifiers=qis,
        sensitive=prv,
        overall=overall,
        per_sensitive=per_sensitive,
        local=local_levels,
        entropy_qi_original=h_qi_before,
        entropy_qi_anonymized=h_qi_after,
        entropy_change=change,
        generalization=generalization,
        release=release_statistics(pair.original, pair.anonymized, qis, prv, loaded),
    )
