"""Earth mover's distances for t-closeness (Li, Li & Venkatasubramanian 2007), per equivalence class.

Each function takes ``share``, one row per class of that class's distribution over the m
values of a sensitive attribute, and ``overall``, the whole table's distribution, and
returns one EMD per class:

* equal ground distance (any two different values are 1 apart): ½·Σ|p − q|;
* ordered distance (values sorted, |i − j|/(m − 1) apart): Σ_i |Σ_{j≤i} (p_j − q_j)| / (m − 1);
* hierarchical distance (values are the leaves of a generalization tree of height H; two
  values are level(lowest common ancestor)/H apart): Σ over internal nodes N of
  height(N)/H · min(pos(N), neg(N)), where pos and neg sum the positive and the negative
  "extra" mass of N's children, extra(leaf) = p − q and extra(N) = Σ extra(children).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..errors import InputError


def equal_emd(share: np.ndarray, overall: np.ndarray) -> np.ndarray:
    return 0.5 * np.abs(share - overall[None, :]).sum(axis=1)


def ordered_emd(share: np.ndarray, overall: np.ndarray) -> np.ndarray:
    steps = max(1, share.shape[1] - 1)
    return np.abs(np.cumsum(share - overall[None, :], axis=1)).sum(axis=1) / steps


@dataclass(frozen=True)
class EmdTree:
    """A generalization tree over the values 0..m-1: per internal level, the parent node of each value.

    ``parents[h]`` maps every value to its ancestor at height h + 1 (h = 0 is the level just
    above the values); the last level is the root (one node).
    """

    parents: tuple[np.ndarray, ...]

    @property
    def height(self) -> int:
        return len(self.parents)


def tree_from_paths(values: Sequence[object], paths: Mapping[str, tuple[str, ...]], source: str) -> EmdTree:
    """The tree of ``values`` (in code order) from ARX-style hierarchy paths (value, level 1, ..., top).

    A value missing from the hierarchy, or paths that do not end in one root, are errors.
    """
    rows = []
    for value in values:
        path = paths.get(str(value))
        if path is None:
            raise InputError(f"sensitive value {value!r} is not in hierarchy {source}; add a row for it")
        rows.append(path)
    height = len(rows[0]) - 1
    if height < 1:
        raise InputError(f"hierarchy {source} has a single level; hierarchical EMD needs at least one level above the values")
    if len({path[-1] for path in rows}) != 1:
        raise InputError(f"hierarchy {source} has several top labels; a tree for EMD needs one root (e.g. *)")
    parents = []
    for level in range(1, height + 1):
        labels = {label: code for code, label in enumerate(dict.fromkeys(path[level] for path in rows))}
        parents.append(np.array([labels[path[level]] for path in rows], dtype=np.int64))
    return EmdTree(tuple(parents))


def hierarchical_emd(share: np.ndarray, overall: np.ndarray, tree: EmdTree) -> np.ndarray:
    """EMD under the tree distance, by the node-by-node formula of Li et al. (see the module docstring)."""
    extra = share - overall[None, :]
    total = np.zeros(share.shape[0])
    children = extra
    child_parent = tree.parents[0]
    for level in range(tree.height):
        n_nodes = int(tree.parents[level].max()) + 1
        positive = np.zeros((share.shape[0], n_nodes))
        negative = np.zeros((share.shape[0], n_nodes))
        np.add.at(positive.T, child_parent, np.clip(children, 0.0, None).T)
        np.add.at(negative.T, child_parent, np.clip(-children, 0.0, None).T)
        total += (level + 1) / tree.height * np.minimum(positive, negative).sum(axis=1)
        children = positive - negative
        if level + 1 < tree.height:
            # the parent of node j at this level is the next level's label of any value below j
            below = np.zeros(n_nodes, dtype=np.int64)
            below[tree.parents[level]] = tree.parents[level + 1]
            child_parent = below
    return total
