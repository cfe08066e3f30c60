"""The `delink setanon` job: read records, anonymize (or extend a release), verify, write atomically.

With ``threads`` the release holds one line per thread and nothing that links the
threads of one user: no id, no thread number, and the lines sorted by their items (the
input order would link them too). Every line is then k-anonymous on its own; a user's
threads published under one id would form a per-user set that k-anonymity of each
thread does not protect (tests/test_setvalued.py builds such a log).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Hashable, Iterable

from ..errors import DelinkError, InputError
from ..io.files import atomic_write, refuse_same_file
from ..io.jsonl import dumps_jsonl_line, read_jsonl
from .core import SetAnonymization, anonymize_sets, check_k, check_k_value, check_method, verify_k_anonymous
from .km import anonymize_km, check_m, verify_km_anonymous
from .online import extend_release
from .records import Duplicates, LoadReport, SetRecord, TermNormalizer, load_set_records, read_dat


@dataclass(frozen=True)
class SetanonSummary:
    """Figures for the command's closing line."""

    load: LoadReport
    groups: int
    distinct_published: int
    additions: int
    deletions: int
    seconds: float


def _is_dat(path: Path) -> bool:
    return path.name.endswith((".dat", ".dat.gz"))


def _sorted_items(items: Iterable[Hashable]) -> list[Hashable]:
    return sorted(items, key=lambda item: (isinstance(item, str), item))


def read_published(path: str | Path) -> list[frozenset[Hashable]]:
    """The published sets of an earlier release (our JSONL output, or a `.dat` file)."""
    path = Path(path)
    if _is_dat(path):
        return [frozenset(items) for items in read_dat(path)]
    sets = []
    for line_no, record in enumerate(read_jsonl(path), start=1):
        items = record.get("items")
        if not isinstance(items, list):
            raise InputError(f'{path}: record {line_no} has no "items" list; pass a release written by `delink setanon`')
        sets.append(frozenset(items))
    return sets


def write_release(path: Path, records: list[SetRecord], release: SetAnonymization, unlinked: bool = False) -> None:
    """JSONL ``{"id", "items"}`` per record, or `.dat` lines, in record order.

    ``unlinked`` (thread releases) writes ``{"items"}`` lines only, sorted by their items.
    """
    published = [_sorted_items(items) for items in release.published]
    if unlinked:
        published.sort(key=lambda items: [(isinstance(item, str), str(item)) for item in items])
    with atomic_write(path) as handle:
        for record, items in zip(records, published):
            if _is_dat(path):
                handle.write(" ".join(map(str, items)) + "\n")
            elif unlinked:
                handle.write(dumps_jsonl_line({"items": items}))
            else:
                handle.write(dumps_jsonl_line({"id": record.id, "items": items}))


def setanon_file(
    input_path: Path,
    output: Path,
    k: int,
    *,
    method: str = "cluster",
    deletions_only: bool = False,
    m: int = 2,
    threads: bool = False,
    model: str | None = None,
    keep_stop_words: bool = False,
    keep_punctuation: bool = False,
    duplicates: Duplicates = "error",
    max_items: int = 1000,
    bucket_size: int = 400,
    extend: Path | None = None,
    skip_invalid: bool = False,
    progress: bool = True,
) -> SetanonSummary:
    """Anonymize ``input_path`` into ``output``; with ``extend``, add to that release unchanged.

    ``method`` is ``cluster`` or ``suppress`` (k-anonymity of whole sets, ``deletions_only``
    publishing intersections) or ``km`` (k^m-anonymity against an adversary who knows at
    most ``m`` items, by deletions).
    """
    start = time.perf_counter()
    check_k_value(k)
    if method == "km":
        check_m(m)
        if extend is not None:
            raise InputError("--extend works with k-anonymous releases (--method cluster or suppress), not --method km")
    else:
        check_method(method)
    if deletions_only and extend is not None:
        raise InputError("--deletions-only cannot --extend: new records join earlier sets, which may add items")
    refuse_same_file([input_path, *([extend] if extend is not None else [])], output)
    if bucket_size < 2:
        raise InputError(f"--bucket-size must be at least 2 (got {bucket_size})")
    normalizer = None
    if not _is_dat(input_path):
        normalizer = TermNormalizer(model, drop_stop_words=not keep_stop_words, drop_punctuation=not keep_punctuation)
    records, report = load_set_records(
        input_path,
        normalizer=normalizer,
        threads=threads,
        duplicates=duplicates,
        max_items=max_items,
        skip_invalid=skip_invalid,
    )
    item_sets = [record.items for record in records]
    if extend is not None:
        previous = read_published(extend)
        release = extend_release(previous, item_sets, k, bucket_size=bucket_size)
        verify_k_anonymous([*previous, *release.published], k)
    elif method == "km":
        check_k(k, len(records))
        release = anonymize_km(item_sets, k, m)
        verify_km_anonymous(release.published, k, m)
    else:
        check_k(k, len(records))
        release = anonymize_sets(
            item_sets, k, method=method, deletions_only=deletions_only, bucket_size=bucket_size, progress=progress  # type: ignore[arg-type]
        )
        verify_k_anonymous(release.published, k)
    if deletions_only and int(release.additions.sum()):
        raise DelinkError(f"a deletions-only release added {int(release.additions.sum())} items; nothing was written")
    write_release(output, records, release, unlinked=threads)
    return SetanonSummary(
        load=report,
        groups=release.n_groups,
        distinct_published=len(set(release.published)),
        additions=int(release.additions.sum()),
        deletions=int(release.deletions.sum()),
        seconds=time.perf_counter() - start,
    )
