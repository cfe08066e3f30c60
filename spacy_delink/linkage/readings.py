"""The readings of the rules: how the adversary's search reads a text (SPEC §8).

``exact`` is SPEC §1–§7, the paper's rules: tokens broken at punctuation, search forms
``NFKC(token).casefold()``. ``search`` is SPEC §8, the reading of an ordinary search
engine and a reader's eyes: the text's search form (invisible characters gone, look-alike
letters mapped back, case and diacritics folded) and phrases that run across punctuation
and paragraph ends, broken only by masks. ``gap`` is SPEC §9: the search reading's tokens,
with a sloppy phrase around each mask (``linkage.gap``): a mask does not hide its neighbours.

Neither reading is conservative alone: a folded phrase can have a larger df than the
exact one, and a phrase across a sentence end exists only in the search reading. So a
span links when it links under either reading, ``anonymity`` is the smallest support
under either, and a text is protected only when it is protected under every reading
checked. An index holds the readings it was built with (its manifest says which) and a
query for a reading it does not hold is refused, never answered from another.
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Iterable

import numpy as np

from ..errors import InputError

if TYPE_CHECKING:  # the tokenizers load compiled kernels: imported when one is made, not with the names
    from .tokenize import LinkageRules, SearchTokenizer, Tokenizer

READINGS = ("exact", "search", "gap")
#: The readings the index tokenizes and counts n-grams of; ``gap`` reads the search
#: reading's tokens (and the index's gap store, ``index.gapstore``), so it needs ``search``.
TOKEN_READINGS = ("exact", "search")
#: The version of the readings' tokens (beside the search form's tables, which the index
#: records apart). Version 2 reads each letter of a script written without spaces as a token,
#: bounded by ``max_n_chars``, under both readings, and joins paragraph ends under the search
#: one. An index whose search reading has another version is refused with a request to
#: rebuild; one whose exact reading has none (built before) reads those scripts as whole
#: runs, so a text holding them is never reported protected by it (``unread_scripts``).
READING_VERSION = 2
#: Every reading: SPEC §8–§9's default for building, querying and deciding "protected".
DEFAULT_READINGS = READINGS


def check_readings(readings: Iterable[str] | str) -> tuple[str, ...]:
    """Validated readings in canonical order; ``"exact,search"`` or a sequence of names."""
    names = [r.strip() for r in readings.split(",")] if isinstance(readings, str) else [str(r).strip() for r in readings]
    unknown = sorted({r for r in names if r not in READINGS})
    if unknown:
        raise InputError(f"unknown reading(s) {', '.join(map(repr, unknown))}; choose from {', '.join(READINGS)} (docs/linkage-rules.md §8)")
    if not names:
        raise InputError(f"at least one reading is needed; choose from {', '.join(READINGS)} (docs/linkage-rules.md §8)")
    if "gap" in names and "search" not in names:
        raise InputError(
            "the gap reading reads the search reading's tokens around each mask: ask for readings exact,search,gap "
            "or search,gap (docs/linkage-rules.md §9)"
        )
    return tuple(r for r in READINGS if r in names)


def token_readings(readings: Iterable[str]) -> tuple[str, ...]:
    """The readings among ``readings`` whose tokens the index counts (``gap`` reads the search one's)."""
    return tuple(r for r in check_readings(readings) if r in TOKEN_READINGS)


def tokenizer_for(reading: str, rules: "LinkageRules") -> "Tokenizer | SearchTokenizer":
    """The tokenizer of one reading under the index's rules."""
    from .tokenize import SearchTokenizer, Tokenizer

    return Tokenizer(rules) if reading == "exact" else SearchTokenizer(rules)  # gap: the search reading's tokens


class UnreadScriptWarning(UserWarning):
    """A text holds letters of a script written without spaces that the readings checked read only as whole runs."""


def unread_scripts(codes: np.ndarray, split: bool) -> list[str]:
    """The scripts written without spaces whose letters ``codes`` (a text's code points) hold
    and that the readings checked do not read one character at a time (SPEC §8): all of
    them when no reading checked ``split`` them (an index built before), else those no
    reading splits (``UNSPLIT_SCRIPTS``).

    Such a text is one token per clause to the index: nothing in it can be linkable, which
    says nothing of what an engine finds, so it is never reported protected.
    """
    from .characters import SPACELESS_SCRIPTS, script_table

    table, names = script_table()
    found = table[codes]
    if not found.any():  # most texts: one gather, no sort
        return []
    present = [names[number - 1] for number in np.unique(found[found != 0]).tolist()]
    read = {name for _, _, name in SPACELESS_SCRIPTS} if split else set()
    return [name for name in present if name not in read]


def unread_message(scripts: Iterable[str], readings: Iterable[str]) -> str:
    """The one-line warning for a text with ``unread_scripts``: what, why, and the fix."""
    from .characters import SPACELESS_SCRIPTS

    names = list(scripts)
    split = {name for _, _, name in SPACELESS_SCRIPTS}
    fix = (
        "rebuild the index with this spacy-delink, which reads them one character at a time "
        "(`delink index <corpus> -o <index> --overwrite`)"
        if any(name in split for name in names)
        else "no reading of this spacy-delink splits that script into characters: review such text by hand"
    )
    verb = "read" if len(check_readings(readings)) > 1 else "reads"
    return (
        f"the text holds {', '.join(names)} letters, which the {describe(readings)} {verb} only as whole runs "
        f"(a script written without spaces): it is not reported protected; {fix} (docs/languages.md)"
    )


def warn_unread(scripts: Iterable[str], readings: Iterable[str]) -> None:
    """``unread_message`` as an ``UnreadScriptWarning`` (Python shows each distinct one once)."""
    warnings.warn(unread_message(scripts, readings), UnreadScriptWarning, stacklevel=3)


def _known(readings: Iterable[str]) -> list[str]:
    """The readings among ``readings`` (one name or several, read once), in their canonical order."""
    given = {readings} if isinstance(readings, str) else set(readings)
    return [r for r in READINGS if r in given]


def listed(readings: Iterable[str]) -> str:
    """The readings named in their canonical order, as a sentence lists them ("exact, search and gap")."""
    names = _known(readings)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def describe(readings: Iterable[str]) -> str:
    """The readings as words for summaries and reports ("exact and search readings")."""
    names = _known(readings)  # read once: ``readings`` may be an iterator
    return f"{listed(names)} reading{'s' if len(names) > 1 else ''}"
