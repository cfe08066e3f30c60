"""The `delink setanon` job: read records, anonymize (or extend a release), verify, write atomically."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Hashable, Iterable

from ..errors import InputError
from ..io import atomic_write, dumps_jsonl_line, read_jsonl
from .core import Method, SetAnonymization, anonymize_sets, check_k, check_k_value, check_method, verify_k_anonymous
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


def write_release(path: Path, records: list[SetRecord], release: SetAnonymization) -> None:
    """JSONL ``{"id", ["thread"], "items"}`` per record, or `.dat` lines in record order."""
    with atomic_write(path) as handle:
        for record, items in zip(records, release.published):
            if _is_dat(path):
                handle.write(" ".join(map(str, _sorted_items(items))) + "\n")
                continue
            line: dict[str, object] = {"id": record.id}
            if record.thread is not None:
                line["thread"] = record.thread
            line["items"] = _sorted_items(items)
            handle.write(dumps_jsonl_line(line))


def setanon_file(
    input_path: Path,
    output: Path,
    k: int,
    *,
    method: Method = "cluster",
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
    """Anonymize ``input_path`` into ``output``; with ``extend``, add to that release unchanged."""
    start = time.perf_counter()
    check_k_value(k)
    check_method(method)
    if output.resolve() == input_path.resolve():
        raise InputError(f"--output {output} is the input file; choose another path")
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
    else:
        check_k(k, len(records))
        release = anonymize_sets(item_sets, k, method=method, bucket_size=bucket_size, progress=progress)
        verify_k_anonymous(release.published, k)
    write_release(output, records, release)
    return SetanonSummary(
        load=report,
        groups=release.n_groups,
        distinct_published=len(set(release.published)),
        additions=int(release.additions.sum()),
        deletions=int(release.deletions.sum()),
        seconds=time.perf_counter() - start,
    )
