"""Optimal full-domain generalization with k-anonymity, distinct l-diversity and t-closeness.

Each quasi-identifier (QI) has a generalization hierarchy in ARX's CSV format: one row
per raw value, ``;``-separated, from the value itself (level 0) up to ``*``. A
*transformation* picks one level per QI; the transformations form a lattice ordered
level-wise. The search returns the transformation of least utility loss among those that
satisfy every privacy model after suppressing at most ``suppression_limit`` of the records.

Privacy models, checked per equivalence class (records sharing released QI values):

* k-anonymity: at least ``k`` records.
* distinct l-diversity: at least ``l`` distinct values of each sensitive attribute.
* t-closeness: earth mover's distance between the class's and the whole table's
  distribution of each sensitive attribute at most ``t`` (:mod:`.emd`): hierarchical
  distance for an attribute given a hierarchy in ``sensitive_hierarchies``, else ordered
  distance (|i − j| / (m − 1) over sorted values) for numeric ones (every value parses as
  a number), else equal ground distance.

Records of violating classes are suppressed, that is withheld: their QIs and their
sensitive values all become ``*`` (the row stays, so that rows still pair by position).
Keeping a suppressed record's sensitive value would publish one more class, the ``*``
rows, that no model was checked on: at t = 0.25 with 1% suppression on Adult its
native-country distribution lay 0.34 from the table's.

Utility loss: ARX's non-uniform entropy (its monotonic variant), N · Σ_QI H(X | X̄) in
bits over all records at the chosen levels — the information the release loses about
each original QI, in the same units as the privacy measure. Suppression is bounded by
the limit rather than priced, which keeps the loss monotone: a generalization never
loses less. (This reproduces ARX's own test values, e.g. 407289.54 for k = 5 on Adult.)

Search: exact optimum with Flash-style monotonicity pruning. k-anonymity and distinct
l-diversity are monotone with or without suppression, t-closeness only without: when
the predicate is monotone, a valid node settles all its generalizations as valid and an
invalid node all its specializations as invalid; chains of unsettled generalizations are
binary-searched for their lowest valid node. Otherwise (t-closeness with suppression)
every node is checked. Ties in loss go to the lower total level, then to the
lexicographically smaller level vector.
"""
from __future__ import annotations

import csv
import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..errors import InputError
from .emd import EmdTree, equal_emd, hierarchical_emd, ordered_emd, tree_from_paths
from .table import Table, TableSource, as_number, load_table

__all__ = ["AnonymizationResult", "Hierarchy", "anonymize", "load_hierarchies", "read_hierarchy"]

SUPPRESSED = "*"
# Tolerance when comparing an EMD with t, so that exact ties (e.g. t = 0.25) pass.
_T_TOLERANCE = 1e-9
# Mixed-radix class keys are compacted before they reach this bound (int64 headroom).
_KEY_LIMIT = 2**62


@dataclass(frozen=True)
class Hierarchy:
    """Generalization paths of one attribute: ``paths[value]`` = (value, level-1 label, ..., top)."""

    paths: dict[str, tuple[str, ...]]
    source: str

    @property
    def height(self) -> int:
        """Number of levels, including level 0 (the raw values)."""
        return len(next(iter(self.paths.values())))


def load_hierarchies(hierarchies: Mapping[str, Hierarchy | str | Path]) -> dict[str, Hierarchy]:
    """Hierarchies by column, reading the ones given as paths."""
    return {name: h if isinstance(h, Hierarchy) else read_hierarchy(h) for name, h in hierarchies.items()}


def read_hierarchy(path: str | Path) -> Hierarchy:
    """Read an ARX hierarchy CSV (``;``-separated, no header) and check it is a tree.

    Tree means: equal labels at one level have equal labels at every higher level, which
    is what makes generalizing further never split a class (the pruning relies on it).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such hierarchy file; check the path")
    paths: dict[str, tuple[str, ...]] = {}
    with open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle, delimiter=";")
        for row in reader:
            if not row or row == [""]:
                continue
            if paths and len(row) != len(next(iter(paths.values()))):
                raise InputError(
                    f"{path}:{reader.line_num}: {len(row)} levels where earlier rows have "
                    f"{len(next(iter(paths.values())))}; every row needs the same number of levels"
                )
            if row[0] in paths and paths[row[0]] != tuple(row):
                raise InputError(f"{path}:{reader.line_num}: value {row[0]!r} is listed twice with different labels")
            paths[row[0]] = tuple(row)
    if not paths:
        raise InputError(f"{path}: empty hierarchy; it needs one row per value")
    parents: dict[tuple[int, str], str] = {}
    for labels in paths.values():
        for level in range(1, len(labels) - 1):
            parent = parents.setdefault((level, labels[level]), labels[level + 1])
            if parent != labels[level + 1]:
                raise InputError(
                    f"{path}: label {labels[level]!r} at level {level} generalizes to both "
                    f"{parent!r} and {labels[level + 1]!r}; make the hierarchy a tree"
                )
    return Hierarchy(paths, str(path))


@dataclass(frozen=True)
class AnonymizationResult:
    """The chosen transformation, its cost and the released table (suppressed rows withheld as ``*``)."""

    levels: dict[str, int]
    loss: float
    suppressed: int
    rows: int
    classes: int
    min_class_size: int
    nodes_evaluated: int
    lattice_size: int
    seconds: float
    table: Table


@dataclass(frozen=True)
class _Sensitive:
    codes: np.ndarray  # per group
    n_values: int
    ordered: bool
    overall: np.ndarray  # distribution over the whole table
    tree: EmdTree | None = None

    def emd(self, share: np.ndarray) -> np.ndarray:
        """EMD of each class distribution (rows of ``share``) to the whole table's."""
        if self.tree is not None:
            return hierarchical_emd(share, self.overall, self.tree)
        return ordered_emd(share, self.overall) if self.ordered else equal_emd(share, self.overall)


@dataclass(frozen=True)
class _Models:
    """The privacy models every released class must satisfy (None: not asked for)."""

    k: int | None
    l: int | None
    t: float | None

    def check(self) -> None:
        """One line per bad setting: at least one model, each within its range."""
        if self.k is None and self.l is None and self.t is None:
            raise InputError("no privacy model given; set k (k-anonymity), l (l-diversity) or t (t-closeness)")
        if self.k is not None and (not isinstance(self.k, int) or self.k < 1):
            raise InputError(f"k must be a whole number >= 1, got {self.k!r}")
        if self.l is not None and (not isinstance(self.l, int) or self.l < 1):
            raise InputError(f"l must be a whole number >= 1, got {self.l!r}")
        if self.t is not None and not 0.0 <= self.t <= 1.0:
            raise InputError(f"t must lie in [0, 1], got {self.t!r}")


class _Lattice:
    """The data grouped into distinct (QI, sensitive) tuples with weights, ready to score transformations."""

    def __init__(
        self,
        table: Table,
        hierarchies: Mapping[str, Hierarchy],
        sensitive: Sequence[str],
        models: _Models,
        sensitive_hierarchies: Mapping[str, Hierarchy] | None = None,
    ) -> None:
        self.qis = list(hierarchies)
        self.heights = [hierarchies[name].height for name in self.qis]
        self.k, self.l, self.t = models.k or 1, models.l, models.t
        leaf_codes, self.level_codes, self.level_labels = [], [], []
        for name in self.qis:
            codes, level_codes, level_labels = _encode_qi(table, name, hierarchies[name])
            leaf_codes.append(codes)
            self.level_codes.append(level_codes)
            self.level_labels.append(level_labels)
        sensitive_columns = [_factorize(table.column(name)) for name in sensitive]
        stacked = np.stack([*leaf_codes, *(codes for codes, _ in sensitive_columns)], axis=1)
        groups, self.row_group, weights = np.unique(stacked, axis=0, return_inverse=True, return_counts=True)
        self.row_group = self.row_group.reshape(-1)
        self.weights = weights.astype(np.int64)
        self.n_rows = table.n_rows
        self.group_leaves = [groups[:, j] for j in range(len(self.qis))]
        self.level_loss = [
            [_conditional_information(np.bincount(codes), label_of_leaf) for label_of_leaf in level_codes]
            for codes, level_codes in zip(leaf_codes, self.level_codes)
        ]
        trees = sensitive_hierarchies or {}
        self.sensitive = [
            _sensitive_model(values, groups[:, len(self.qis) + j], self.weights, trees.get(name))
            for j, (name, (_, values)) in enumerate(zip(sensitive, sensitive_columns))
        ]

    def released_codes(self, levels: Sequence[int]) -> list[np.ndarray]:
        return [self.level_codes[j][level][self.group_leaves[j]] for j, level in enumerate(levels)]

    def classes(self, levels: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Equivalence class of each group and the size of each class."""
        joint = np.zeros(len(self.weights), dtype=np.int64)
        bound = 1
        for j, codes in enumerate(self.released_codes(levels)):
            radix = len(self.level_labels[j][levels[j]])
            if bound * radix >= _KEY_LIMIT:  # compact the mixed-radix key before it could overflow
                _, joint = np.unique(joint, return_inverse=True)
                joint = joint.reshape(-1)
                bound = len(self.weights)
            joint = joint * radix + codes
            bound *= radix
        _, class_of = np.unique(joint, return_inverse=True)
        class_of = class_of.reshape(-1)
        return class_of, np.bincount(class_of, weights=self.weights).astype(np.int64)

    def violating(self, class_of: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Mask of classes that break k-anonymity, distinct l-diversity or t-closeness."""
        bad = sizes < self.k
        n_classes = len(sizes)
        for model in self.sensitive:
            cell = class_of * model.n_values + model.codes
            if self.l is not None:
                distinct = np.bincount(np.unique(cell) // model.n_values, minlength=n_classes)
                bad |= distinct < self.l
            if self.t is not None:
                counts = np.bincount(cell, weights=self.weights, minlength=n_classes * model.n_values)
                share = counts.reshape(n_classes, model.n_values) / sizes[:, None]
                bad |= model.emd(share) > self.t + _T_TOLERANCE
        return bad

    def loss(self, levels: Sequence[int]) -> float:
        """Non-uniform entropy N · Σ H(X | X̄) of all records at ``levels`` (a sum of per-QI terms)."""
        return float(sum(self.level_loss[j][level] for j, level in enumerate(levels)))


def _conditional_information(leaf_counts: np.ndarray, label_of_leaf: np.ndarray) -> float:
    """N · H(X | X̄) = Σ_records log2(count(x̄) / count(x)) when X̄ is a function of X."""
    label_counts = np.bincount(label_of_leaf, weights=leaf_counts)
    present = leaf_counts > 0
    ratio = label_counts[label_of_leaf[present]] / leaf_counts[present]
    return float((leaf_counts[present] * np.log2(ratio)).sum())


def _factorize(values: Sequence[object]) -> tuple[np.ndarray, list[object]]:
    index: dict[object, int] = {}
    codes = np.fromiter((index.setdefault(v, len(index)) for v in values), dtype=np.int64, count=len(values))
    return codes, list(index)


def _sensitive_model(
    values: list[object], group_codes: np.ndarray, weights: np.ndarray, hierarchy: Hierarchy | None = None
) -> _Sensitive:
    """Codes in the ground-distance order: numeric values sorted (ordered distance), others as met."""
    if hierarchy is not None:
        overall = np.bincount(group_codes, weights=weights, minlength=len(values)) / weights.sum()
        tree = tree_from_paths(values, hierarchy.paths, hierarchy.source)
        return _Sensitive(group_codes, len(values), False, overall, tree)
    numbers = [as_number(v) for v in values]
    ordered = all(number is not None for number in numbers)
    if ordered:
        rank = np.empty(len(values), dtype=np.int64)
        rank[np.argsort(np.asarray(numbers, dtype=float), kind="stable")] = np.arange(len(values))
        group_codes = rank[group_codes]
    overall = np.bincount(group_codes, weights=weights, minlength=len(values)) / weights.sum()
    return _Sensitive(group_codes, len(values), ordered, overall)


def _encode_qi(table: Table, name: str, hierarchy: Hierarchy) -> tuple[np.ndarray, list[np.ndarray], list[list[str]]]:
    """Leaf codes of a QI column and, per level, the map leaf code → label code plus the labels."""
    column = table.column(name)
    leaf_codes, leaves = _factorize(["" if v is None else str(v) for v in column])
    level_codes: list[np.ndarray] = []
    level_labels: list[list[str]] = []
    for leaf in leaves:
        if leaf not in hierarchy.paths:
            row = leaf_codes.tolist().index(leaves.index(leaf)) + 1
            raise InputError(
                f"{table.source}: value {leaf!r} of column {name!r} (row {row}) is not in hierarchy "
                f"{hierarchy.source}; add a row for it"
            )
    for level in range(hierarchy.height):
        labels, label_of_leaf = _factorize([hierarchy.paths[str(leaf)][level] for leaf in leaves])
        level_codes.append(labels)
        level_labels.append([str(label) for label in label_of_leaf])
    return leaf_codes, level_codes, level_labels


def _predecessors(node: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [node[:j] + (node[j] - 1,) + node[j + 1 :] for j in range(len(node)) if node[j] > 0]


def _successors(node: tuple[int, ...], heights: Sequence[int]) -> list[tuple[int, ...]]:
    return [node[:j] + (node[j] + 1,) + node[j + 1 :] for j in range(len(node)) if node[j] + 1 < heights[j]]


def _search(
    lattice: _Lattice, nodes: list[tuple[int, ...]], budget: int, monotone: bool, progress: bool
) -> tuple[set[tuple[int, ...]], int]:
    """The valid transformations and how many were checked on the data.

    With a monotone privacy predicate, a valid node makes all its generalizations valid and
    an invalid node makes all its specializations invalid, without checking them. Checks
    follow Flash's idea: from the lowest unsettled node, climb a chain of unsettled
    generalizations and binary-search it for its lowest valid node.
    """
    status: dict[tuple[int, ...], bool] = {}
    evaluated = 0

    def check(node: tuple[int, ...]) -> bool:
        nonlocal evaluated
        if node not in status:
            evaluated += 1
            class_of, sizes = lattice.classes(node)
            is_valid = int(sizes[lattice.violating(class_of, sizes)].sum()) <= budget
            stack = [node]
            while stack:
                current = stack.pop()
                if current in status:
                    continue
                status[current] = is_valid
                if monotone:
                    stack += _successors(current, lattice.heights) if is_valid else _predecessors(current)
        return status[node]

    for start in tqdm(sorted(nodes, key=sum), desc="lattice", unit="node", disable=not progress, leave=False):
        if start in status:
            continue
        if not monotone:
            check(start)
            continue
        chain = [start]
        while True:
            upward = [s for s in _successors(chain[-1], lattice.heights) if s not in status]
            if not upward:
                break
            chain.append(upward[0])
        low, high = 0, len(chain) - 1
        while low <= high:
            middle = (low + high) // 2
            if check(chain[middle]):
                high = middle - 1
            else:
                low = middle + 1
    return {node for node, is_valid in status.items() if is_valid}, evaluated


def _check_arguments(
    table: Table, hierarchies: Mapping[str, Hierarchy], sensitive: Sequence[str], models: _Models, suppression_limit: float
) -> None:
    if not hierarchies:
        raise InputError("no quasi-identifiers: give a hierarchy for at least one column")
    if table.n_rows == 0:
        raise InputError(f"{table.source}: no rows to anonymize")
    models.check()
    if not 0.0 <= suppression_limit <= 1.0:
        raise InputError(f"suppression limit must lie in [0, 1] (a share of the rows), got {suppression_limit!r}")
    if (models.l is not None or models.t is not None) and not sensitive:
        raise InputError("l-diversity and t-closeness need at least one sensitive column")
    overlap = sorted(set(hierarchies) & set(sensitive))
    if overlap:
        raise InputError(f"columns {overlap} are both quasi-identifier and sensitive; choose one role for each")
    table.require([*hierarchies, *sensitive])


def anonymize(
    table: TableSource,
    hierarchies: Mapping[str, Hierarchy | str | Path],
    k: int | None = None,
    l: int | None = None,
    t: float | None = None,
    sensitive: Sequence[str] = (),
    suppression_limit: float = 0.0,
    progress: bool = False,
    sensitive_hierarchies: Mapping[str, Hierarchy | str | Path] | None = None,
) -> AnonymizationResult:
    """The least-loss full-domain generalization of ``table`` that satisfies every given model.

    ``hierarchies`` maps each QI (in the order levels are reported) to a
    :class:`Hierarchy` or the path of its ARX CSV; ``sensitive_hierarchies`` gives
    t-closeness the hierarchical ground distance for those sensitive columns. Raises
    InputError when even full generalization cannot satisfy the models within the
    suppression limit.
    """
    started = time.perf_counter()
    data = load_table(table, "table")
    loaded = load_hierarchies(hierarchies)
    trees = load_hierarchies(sensitive_hierarchies or {})
    sensitive = list(sensitive)
    models = _Models(k, l, t)
    _check_arguments(data, loaded, sensitive, models, suppression_limit)
    unknown = sorted(set(trees) - set(sensitive))
    if unknown:
        raise InputError(f"sensitive hierarchies for {unknown}, which are not sensitive columns; list them in --sensitive")
    lattice = _Lattice(data, loaded, sensitive, models, trees)
    budget = math.floor(suppression_limit * data.n_rows + 1e-9)
    nodes = list(itertools.product(*(range(h) for h in lattice.heights)))
    valid, evaluated = _search(lattice, nodes, budget, monotone=t is None or budget == 0, progress=progress)
    best = min(((lattice.loss(n), sum(n), n) for n in valid), default=None)
    if best is None:
        raise InputError(
            f"no generalization satisfies k={k}, l={l}, t={t} with at most {budget} suppressed rows; "
            "relax a model or raise the suppression limit"
        )
    levels = best[2]
    class_of, sizes = lattice.classes(levels)
    bad_classes = lattice.violating(class_of, sizes)
    released = _release(data, lattice, levels, bad_classes[class_of], sensitive)
    kept = sizes[~bad_classes]
    return AnonymizationResult(
        levels=dict(zip(lattice.qis, levels)),
        loss=best[0],
        suppressed=int(sizes[bad_classes].sum()),
        rows=data.n_rows,
        classes=int(len(kept)),
        min_class_size=int(kept.min()) if len(kept) else 0,
        nodes_evaluated=evaluated,
        lattice_size=len(nodes),
        seconds=time.perf_counter() - started,
        table=released,
    )


def _release(
    data: Table, lattice: _Lattice, levels: Sequence[int], suppressed_groups: np.ndarray, sensitive: Sequence[str]
) -> Table:
    """The input table with QIs generalized to ``levels``; suppressed records' QIs and sensitive values set to ``*``."""
    suppressed_rows = suppressed_groups[lattice.row_group]
    columns = dict(data.columns)
    for name in sensitive:
        columns[name] = [SUPPRESSED if withheld else value for value, withheld in zip(data.column(name), suppressed_rows)]
    for j, name in enumerate(lattice.qis):
        labels = np.asarray(lattice.level_labels[j][levels[j]], dtype=object)
        released = labels[lattice.released_codes(levels)[j][lattice.row_group]]
        released[suppressed_rows] = SUPPRESSED
        columns[name] = released.tolist()
    return Table(columns, data.n_rows, f"{data.source} (anonymized)")
