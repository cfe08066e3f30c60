"""The readings of the rules: how the adversary's search reads a text (SPEC §8).

``exact`` is SPEC §1–§7, the paper's rules: tokens broken at punctuation, search forms
``NFKC(token).casefold()``. ``search`` is SPEC §8, the reading of an ordinary search
engine and a reader's eyes: the text's search form (invisible characters gone, look-alike
letters mapped back, case and diacritics folded) and phrases that run across punctuation,
broken only by masks and paragraph ends.

Neither reading is conservative alone: a folded phrase can have a larger df than the
exact one, and a phrase across a sentence end exists only in the search reading. So a
span links when it links under either reading, ``anonymity`` is the smallest support
under either, and a text is protected only when it is protected under every reading
checked. An index holds the readings it was built with (its manifest says which) and a
query for a reading it does not hold is refused, never answered from another.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from ..errors import InputError

if TYPE_CHECKING:  # the tokenizers load compiled kernels: imported when one is made, not with the names
    from .tokenize import LinkageRules, SearchTokenizer, Tokenizer

READINGS = ("exact", "search")
#: The version of the search reading's tokens (beside its search form's tables, which the
#: index records apart): 2 joins paragraph ends and reads each character of a script written
#: without spaces as a token, bounded by ``max_n_chars``. An index whose search reading has
#: another version reads texts otherwise, so it is refused with a request to rebuild.
SEARCH_READING_VERSION = 2
#: Both readings: SPEC §8's default for building, querying and deciding "protected".
DEFAULT_READINGS = READINGS


def check_readings(readings: Iterable[str] | str) -> tuple[str, ...]:
    """Validated readings in canonical order; ``"exact,search"`` or a sequence of names."""
    names = [r.strip() for r in readings.split(",")] if isinstance(readings, str) else [str(r).strip() for r in readings]
    unknown = sorted({r for r in names if r not in READINGS})
    if unknown:
        raise InputError(f"unknown reading(s) {', '.join(map(repr, unknown))}; choose from {', '.join(READINGS)} (docs/linkage-rules.md §8)")
    if not names:
        raise InputError(f"at least one reading is needed; choose from {', '.join(READINGS)} (docs/linkage-rules.md §8)")
    return tuple(r for r in READINGS if r in names)


def tokenizer_for(reading: str, rules: "LinkageRules") -> "Tokenizer | SearchTokenizer":
    """The tokenizer of one reading under the index's rules."""
    from .tokenize import SearchTokenizer, Tokenizer

    return Tokenizer(rules) if reading == "exact" else SearchTokenizer(rules)


def describe(readings: Iterable[str]) -> str:
    """The readings as words for summaries and reports ("exact and search readings")."""
    names = check_readings(readings)
    return f"{' and '.join(names)} reading{'s' if len(names) > 1 else ''}"
