"""Reading set-valued records: item lists, query logs and free text (JSONL) or `.dat` transactions.

Text becomes a set of normalized terms (lowercase, lemma when the pipeline has a
lemmatizer, stop words and punctuation dropped) so that inflection and case variants
collapse into one item, as the paper does with stemming.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Hashable, Iterable, Literal, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..errors import InputError
from ..io.jsonl import JsonlStats, read_jsonl
from ..io.streams import open_binary

if TYPE_CHECKING:
    from spacy.language import Language

Duplicates = Literal["error", "merge"]
TEXT_FIELDS = ("items", "queries", "text")


@dataclass(frozen=True)
class SetRecord:
    """One record to anonymize; ``thread`` numbers the topic threads of one user (else None)."""

    id: Hashable
    items: frozenset[Hashable]
    thread: int | None = None


@dataclass
class LoadReport:
    """What loading did to the input, for the command's summary."""

    records: int = 0
    #: Records with no item (they take part like any other).
    empty: int = 0
    #: Lines whose id an earlier line had: their items were added to that record.
    merged_duplicates: int = 0
    #: Records over ``max_items`` (they keep their most widely held items), and the items they lost.
    truncated: int = 0
    truncated_items: int = 0
    #: Users whose queries form several topic threads (``threads``), each then a record of its own.
    users_split: int = 0
    skipped_lines: list[int] = field(default_factory=list)


class TermNormalizer:
    """Turns text into normalized terms with a spaCy pipeline (blank English by default)."""

    def __init__(
        self,
        model: str | None = None,
        *,
        lowercase: bool = True,
        lemmatize: bool = True,
        drop_stop_words: bool = True,
        drop_punctuation: bool = True,
    ) -> None:
        import spacy

        if model is None:
            self.nlp: Language = spacy.blank("en")
        else:
            try:
                self.nlp = spacy.load(model)
            except OSError as err:
                raise InputError(
                    f"cannot load spaCy pipeline {model!r} ({err}); install it or omit --model "
                    "to use a blank English tokenizer"
                ) from None
        self.lowercase = lowercase
        self.lemmatize = lemmatize and "lemmatizer" in self.nlp.pipe_names
        self.drop_stop_words = drop_stop_words
        self.drop_punctuation = drop_punctuation

    def terms(self, texts: Iterable[str]) -> list[list[str]]:
        """The normalized terms of each text, in order, duplicates kept."""
        result = []
        for doc in self.nlp.pipe(texts, batch_size=256):
            terms = []
            for token in doc:
                if token.is_space or (self.drop_punctuation and token.is_punct):
                    continue
                if self.drop_stop_words and token.is_stop:
                    continue
                term = token.lemma_ if self.lemmatize and token.lemma_ else token.text
                terms.append(term.lower() if self.lowercase else term)
            result.append(terms)
        return result


def query_threads(query_terms: Sequence[Sequence[str]]) -> list[list[int]]:
    """Split one user's queries into topic threads: connected components of shared terms.

    Queries without any term form their own thread each. Threads are ordered by their first query.
    """
    vocabulary: dict[str, int] = {}
    rows, cols = [], []
    for query, terms in enumerate(query_terms):
        for term in set(terms):
            rows.append(query)
            cols.append(vocabulary.setdefault(term, len(vocabulary)))
    n = len(query_terms)
    incidence = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, len(vocabulary)))
    _, component = connected_components(incidence @ incidence.T, directed=False)
    threads: dict[int, list[int]] = {}
    for query, label in enumerate(component):
        threads.setdefault(int(label), []).append(query)
    return list(threads.values())


def _dat_item(token: str) -> Hashable:
    return int(token) if token.isdigit() else token


def read_dat(path: Path) -> list[list[Hashable]]:
    """The items of each line of a (gzipped) `.dat` transaction file (integers where numeric)."""
    lines = []
    with open_binary(path) as handle:
        for line_no, raw in enumerate(handle, start=1):
            try:
                lines.append([_dat_item(token) for token in raw.decode("utf-8").split()])
            except UnicodeDecodeError as err:
                raise InputError(f"{path}:{line_no}: not valid UTF-8 ({err.reason}); re-encode the file as UTF-8") from None
    return lines


def _read_dat(path: Path) -> list[tuple[int, Hashable, list[list[Hashable]]]]:
    """(line, id, [items]) per line of a `.dat` transaction file; the id is the line number."""
    return [(line_no, line_no, [items]) for line_no, items in enumerate(read_dat(path), start=1)]


def _read_jsonl(
    path: Path, normalizer: TermNormalizer | None, threads: bool, report: LoadReport, skip_invalid: bool
) -> list[tuple[int, Hashable, list]]:
    """(line, id, parts) per JSON line: [items], [terms of the text] or one term list per query."""
    stats = JsonlStats()
    raw: list[tuple[int, Hashable, str, Any]] = []
    for record in read_jsonl(path, skip_invalid=skip_invalid, stats=stats):
        line_no = stats.lines
        if "id" not in record or not isinstance(record["id"], (str, int)) or isinstance(record["id"], bool):
            raise InputError(f'{path}:{line_no}: missing or non-scalar "id"; give every line a string or integer id')
        present = [name for name in TEXT_FIELDS if name in record]
        if len(present) != 1:
            raise InputError(
                f'{path}:{line_no}: expected exactly one of "items", "queries" or "text" (found {present or "none"})'
            )
        kind, value = present[0], record[present[0]]
        if kind == "text" and not isinstance(value, str):
            raise InputError(f'{path}:{line_no}: "text" must be a string')
        if kind == "queries" and not (isinstance(value, list) and all(isinstance(q, str) for q in value)):
            raise InputError(f'{path}:{line_no}: "queries" must be a list of strings')
        if kind == "items" and not (
            isinstance(value, list) and all(isinstance(i, (str, int)) and not isinstance(i, bool) for i in value)
        ):
            raise InputError(f'{path}:{line_no}: "items" must be a list of strings or integers')
        if threads and kind != "queries":
            raise InputError(f'{path}:{line_no}: --threads needs "queries" records (found "{kind}")')
        raw.append((line_no, record["id"], kind, value))
    report.skipped_lines = stats.skipped
    texts = [text for _, _, kind, value in raw if kind != "items" for text in ([value] if kind == "text" else value)]
    terms = iter((normalizer or TermNormalizer()).terms(texts) if texts else [])
    rows = []
    for line_no, record_id, kind, value in raw:
        if kind == "items":
            parts = [value]
        elif kind == "text":
            parts = [next(terms)]
        else:
            parts = [next(terms) for _ in value]
        rows.append((line_no, record_id, parts))
    return rows


def load_set_records(
    path: str | Path,
    *,
    normalizer: TermNormalizer | None = None,
    threads: bool = False,
    duplicates: Duplicates = "error",
    max_items: int = 1000,
    skip_invalid: bool = False,
) -> tuple[list[SetRecord], LoadReport]:
    """Read records from JSONL (``items`` / ``queries`` / ``text``) or a `.dat` transaction file.

    Duplicate ids raise (``duplicates="error"``) or are united (``"merge"``). A record with
    more than ``max_items`` items keeps its ``max_items`` most widely held ones (the others
    are deletions it would almost surely pay anyway) and is counted in the report, as are
    empty records, which take part like any other.
    """
    path = Path(path)
    if max_items < 1:
        raise InputError(f"--max-items must be at least 1 (got {max_items})")
    if duplicates not in ("error", "merge"):
        raise InputError(f"unknown duplicates policy {duplicates!r}; use 'error' or 'merge'")
    report = LoadReport()
    is_dat = path.name.endswith((".dat", ".dat.gz"))
    if threads and is_dat:
        raise InputError(f"{path}: --threads needs JSONL records with \"queries\", not a .dat file")
    rows = _read_dat(path) if is_dat else _read_jsonl(path, normalizer, threads, report, skip_invalid)
    first_line: dict[Hashable, int] = {}
    grouped: dict[Hashable, list] = {}
    for line_no, record_id, payload in rows:
        if record_id in first_line:
            if duplicates == "error":
                raise InputError(
                    f"{path}:{line_no}: duplicate id {record_id!r} (first on line {first_line[record_id]}); "
                    "make ids unique or pass --duplicates merge to unite their items"
                )
            report.merged_duplicates += 1
            grouped[record_id].extend(payload)
        else:
            first_line[record_id] = line_no
            grouped[record_id] = list(payload)
    records: list[SetRecord] = []
    for record_id, parts in grouped.items():
        if threads:
            user_threads = query_threads(parts) if parts else [[]]
            for number, members in enumerate(user_threads):
                records.append(SetRecord(record_id, frozenset(t for q in members for t in parts[q]), number))
            report.users_split += len(user_threads) > 1
        else:
            records.append(SetRecord(record_id, frozenset(item for part in parts for item in part)))
    records = _truncate_huge(records, max_items, report)
    report.records = len(records)
    report.empty = sum(1 for record in records if not record.items)
    return records, report


def _truncate_huge(records: list[SetRecord], max_items: int, report: LoadReport) -> list[SetRecord]:
    """Keep the ``max_items`` most widely held items of oversized records (ties: by text)."""
    if all(len(record.items) <= max_items for record in records):
        return records
    support = Counter(item for record in records for item in record.items)
    kept = []
    for record in records:
        if len(record.items) > max_items:
            ranked = sorted(record.items, key=lambda item: (-support[item], str(item)))
            report.truncated += 1
            report.truncated_items += len(record.items) - max_items
            record = SetRecord(record.id, frozenset(ranked[:max_items]), record.thread)
        kept.append(record)
    return kept
