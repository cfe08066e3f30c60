"""Online set-valued k-anonymity: extend a published release without changing any of it.

The paper leaves the online setting open. Here a new record may be published as a set
that the release already contains at least k times (adding records to a k-anonymous
class keeps it k-anonymous), or new records may form new groups of >= k among
themselves. Both options are priced in one search: every published set is a group whose
center cannot move, next to the groups the new records open.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Hashable, Iterable, Sequence

import numpy as np

from ..errors import InputError
from .core import SetAnonymization, check_k_value, encode, majority_centers, partition, release_of, verify_k_anonymous


def extend_release(
    published: Sequence[Iterable[Hashable]],
    new_records: Sequence[Iterable[Hashable]],
    k: int,
    *,
    bucket_size: int = 400,
) -> SetAnonymization:
    """Publish ``new_records`` alongside an existing k-anonymous release ``published``.

    Returns the anonymization of the new records only; ``labels`` are -1-f for records
    published as the f-th distinct earlier set (in order of first appearance) and >= 0 for
    new groups. Raises :class:`InputError` if the earlier release is not k-anonymous, or if
    it is empty and there are fewer than k new records.
    """
    check_k_value(k)
    existing = Counter(frozenset(items) for items in published)
    rare = sum(1 for n in existing.values() if n < k)
    if rare:
        raise InputError(
            f"the release to extend is not {k}-anonymous ({rare} published set(s) occur fewer than {k} "
            "times); pass the same --k it was made with"
        )
    centers = list(existing)
    n_new = len(new_records)
    if not centers and n_new < k:
        raise InputError(f"{n_new} new record(s) and no existing release to join: need at least k={k}")
    rows, vocabulary = encode([*new_records, *centers])
    labels = partition(rows, k, n_fixed=len(centers), bucket_size=bucket_size) if n_new else np.zeros(0, np.int64)
    published_sets: list[frozenset[Hashable]] = [centers[-1 - label] if label < 0 else frozenset() for label in labels]
    opened = np.flatnonzero(labels >= 0)
    if opened.size:
        _, compact = np.unique(labels[opened], return_inverse=True)
        new_centers = majority_centers(rows[opened], compact)
        for record, group in zip(opened, compact):
            items = new_centers.indices[new_centers.indptr[group] : new_centers.indptr[group + 1]]
            published_sets[record] = frozenset(vocabulary[i] for i in items)
    verify_k_anonymous(list((existing + Counter(published_sets)).elements()), k)
    return replace(release_of(new_records, published_sets, k, verify=False), labels=labels)
