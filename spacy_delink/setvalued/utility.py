"""Utility of a set-valued release: how many frequent itemsets survive, and how far their supports move.

Item additions + deletions count every change alike; what analysts mine from baskets and
query logs are frequent itemsets, so a release is also judged by the itemsets held by at
least ``min_support`` records in the original: the share still frequent in the release
(recall), the share of the release's frequent itemsets that were frequent before
(precision, below 1 when added items fabricate patterns) and the mean relative change of
the original frequent itemsets' supports.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Hashable, Iterable, Sequence

from ..errors import InputError


@dataclass(frozen=True)
class ItemsetUtility:
    """Frequent itemsets (at most ``max_size`` items, support >= ``min_support`` records) before and after."""

    min_support: int
    max_size: int
    original: int
    published: int
    preserved: int
    recall: float
    precision: float
    support_error: float

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def frequent_itemsets(
    records: Sequence[Iterable[Hashable]], min_support: int, max_size: int = 3
) -> dict[frozenset[Hashable], int]:
    """Every itemset of at most ``max_size`` items held by at least ``min_support`` records (Apriori)."""
    if min_support < 1 or max_size < 1:
        raise InputError(f"min_support ({min_support}) and max_size ({max_size}) must be at least 1")
    sets = [frozenset(items) for items in records]
    counts = Counter(item for items in sets for item in items)
    frequent = {frozenset([item]): n for item, n in counts.items() if n >= min_support}
    level = set(frequent)
    for size in range(2, max_size + 1):
        frequent_items = {item for itemset in level for item in itemset}
        candidates: Counter[frozenset[Hashable]] = Counter()
        for items in sets:
            present = sorted(items & frequent_items, key=str)
            if len(present) < size:
                continue
            for combo in combinations(present, size):
                candidate = frozenset(combo)
                if all(candidate - {item} in level for item in candidate):
                    candidates[candidate] += 1
        level = {itemset for itemset, n in candidates.items() if n >= min_support}
        frequent.update((itemset, candidates[itemset]) for itemset in level)
        if not level:
            break
    return frequent


def _supports(records: Sequence[Iterable[Hashable]], itemsets: Iterable[frozenset[Hashable]]) -> Counter[frozenset[Hashable]]:
    """How many of ``records`` hold each of ``itemsets`` (0 for those none holds)."""
    targets = set(itemsets)
    counts: Counter[frozenset[Hashable]] = Counter(dict.fromkeys(targets, 0))
    items_used = {item for itemset in targets for item in itemset}
    sizes = sorted({len(itemset) for itemset in targets})
    for items in records:
        present = sorted(frozenset(items) & items_used, key=str)
        for size in sizes:
            for combo in combinations(present, size):
                if (candidate := frozenset(combo)) in targets:
                    counts[candidate] += 1
    return counts


def support_count(share_or_count: float, n_records: int) -> int:
    """A support threshold in records: a share in (0, 1) of the records (rounded up), or a count >= 1."""
    if 0.0 < share_or_count < 1.0:
        return max(1, math.ceil(share_or_count * n_records))
    if share_or_count >= 1.0 and float(share_or_count).is_integer():
        return int(share_or_count)
    raise InputError(f"min_support={share_or_count}: give a share in (0, 1) or a whole number of records")


def itemset_utility(
    original: Sequence[Iterable[Hashable]],
    published: Sequence[Iterable[Hashable]],
    min_support: float = 0.005,
    max_size: int = 3,
) -> ItemsetUtility:
    """Compare the frequent itemsets of ``original`` and ``published`` (same records, same order)."""
    if len(original) != len(published):
        raise InputError(f"the release has {len(published)} records but the original {len(original)}; pass both in full")
    threshold = support_count(min_support, len(original))
    before = frequent_itemsets(original, threshold, max_size)
    after = frequent_itemsets(published, threshold, max_size)
    kept = before.keys() & after.keys()
    supports_after = _supports(published, before.keys() - kept)
    supports_after.update({itemset: after[itemset] for itemset in kept})
    errors = [abs(supports_after[itemset] - support) / support for itemset, support in before.items()]
    return ItemsetUtility(
        min_support=threshold,
        max_size=max_size,
        original=len(before),
        published=len(after),
        preserved=len(kept),
        recall=len(kept) / len(before) if before else 1.0,
        precision=len(kept) / len(after) if after else 1.0,
        support_error=sum(errors) / len(errors) if errors else 0.0,
    )
