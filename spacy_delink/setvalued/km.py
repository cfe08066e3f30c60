"""k^m-anonymity (Terrovitis, Mamoulis & Kalnis 2008): the standard weaker notion for set-valued data.

An adversary who knows at most m items of a person's record must match either no
published record or at least k of them: every itemset of at most m items that occurs in
the release occurs in at least k published records. k-anonymity of whole sets implies
k^m for every m, so k^m costs fewer changes; it protects only against that bounded
knowledge.

The solver deletes items only (the paper generalizes along an item hierarchy; without one,
generalizing an item to the root is deleting it). It repeats, smallest itemsets first,
until no itemset of at most m items is rare. An item held by fewer than k records is
deleted everywhere (deletions only lower supports, so no release keeps it); for a larger
itemset held by fewer than k records, every record holding it loses the itemset's item
that the fewest records hold (ties: by the item's text). Each round removes at least one
item occurrence, so it ends; the result is checked by :func:`verify_km_anonymous` before
it is returned. It is a greedy heuristic, not Terrovitis et al.'s optimal hierarchy cut.
"""
from __future__ import annotations

from collections import Counter
from itertools import combinations
from typing import Hashable, Iterable, Sequence

from ..errors import DelinkError, InputError
from .core import SetAnonymization, check_k, release_of

# Counting every itemset of up to m items is exponential in m; beyond this it is impractical.
MAX_M = 3


def check_m(m: int) -> None:
    """Refuse an m outside 1..MAX_M."""
    if not 1 <= m <= MAX_M:
        raise InputError(f"m must lie between 1 and {MAX_M} (got {m}): the adversary's number of known items")


def _itemset_supports(sets: Sequence[tuple[int, ...]], size: int) -> Counter[tuple[int, ...]]:
    """How many of ``sets`` (sorted item codes) hold each itemset of ``size`` items."""
    counts: Counter[tuple[int, ...]] = Counter()
    for items in sets:
        if len(items) >= size:
            counts.update(combinations(items, size))
    return counts


def _encode(records: Sequence[Iterable[Hashable]]) -> tuple[list[tuple[int, ...]], list[Hashable]]:
    """Records as sorted tuples of item codes; codes follow the items' text, so ties break the same way every run."""
    sets = [frozenset(items) for items in records]
    vocabulary = sorted({item for items in sets for item in items}, key=lambda item: (isinstance(item, str), str(item)))
    code = {item: position for position, item in enumerate(vocabulary)}
    return [tuple(sorted(code[item] for item in items)) for items in sets], vocabulary


def km_violations(published: Sequence[Iterable[Hashable]], k: int, m: int) -> list[tuple[tuple[Hashable, ...], int]]:
    """Every itemset of at most m items held by between 1 and k-1 published records, with its count."""
    check_m(m)
    sets, vocabulary = _encode(published)
    return [
        (tuple(vocabulary[item] for item in itemset), count)
        for size in range(1, m + 1)
        for itemset, count in sorted(_itemset_supports(sets, size).items(), key=lambda pair: pair[1])
        if count < k
    ]


def verify_km_anonymous(published: Sequence[Iterable[Hashable]], k: int, m: int) -> None:
    """Raise unless every itemset of at most m items in the release is held by 0 or at least k records."""
    violations = km_violations(published, k, m)
    if violations:
        itemset, count = violations[0]
        raise DelinkError(
            f"not {k}^{m}-anonymous: {len(violations)} itemset(s) of at most {m} items are held by fewer than "
            f"k={k} records (e.g. {sorted(map(str, itemset))} x{count})"
        )


def km_level(published: Sequence[Iterable[Hashable]], m: int) -> int:
    """The largest k for which the release is k^m-anonymous (the least support of an itemset of <= m items)."""
    check_m(m)
    sets, _ = _encode(published)
    supports = [count for size in range(1, m + 1) for count in _itemset_supports(sets, size).values()]
    return min(supports, default=len(sets))


def anonymize_km(records: Sequence[Iterable[Hashable]], k: int, m: int = 2) -> SetAnonymization:
    """A k^m-anonymous release by deleting items (see the module docstring); nothing is added."""
    check_k(k, len(records))
    check_m(m)
    current, vocabulary = _encode(records)
    size = 1
    while size <= m:
        supports = _itemset_supports(current, size)
        rare = {itemset for itemset, count in supports.items() if count < k}
        if not rare:
            size += 1
            continue
        if size == 1:  # an item held fewer than k times can only be deleted everywhere
            dropped = {item for (item,) in rare}
            current = [tuple(item for item in items if item not in dropped) for items in current]
            continue
        item_support = Counter(item for items in current for item in items)
        involved = {item for itemset in rare for item in itemset}
        for record, items in enumerate(current):
            if len(items) < size or involved.isdisjoint(items):
                continue
            kept = set(items)
            for itemset in combinations(items, size):
                if itemset in rare and kept.issuperset(itemset):
                    kept.discard(min(itemset, key=lambda item: (item_support[item], item)))
            current[record] = tuple(sorted(kept))
        size = 1  # deletions lower the support of smaller itemsets too: check them again
    published = [frozenset(vocabulary[item] for item in items) for items in current]
    verify_km_anonymous(published, k, m)
    return release_of(records, published, k, verify=False)
