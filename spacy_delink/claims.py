"""What a run may claim, in words: the settings its checks ran under.

"Protected" or "linkable" means nothing without the index, k, arity and readings it was
checked under (docs/linkage-rules.md §7–§8), so every summary that makes such a claim
(`delink assess`, `delink protect`, `delink evaluate`) takes its wording from here, and a
run below the threat model's arity, or without the search reading, says what it left
unchecked.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from .linkage.readings import DEFAULT_READINGS, describe

#: The threat model's arity (docs/linkage-rules.md §5): the adversary searches single phrases
#: and combinations of up to three; every command and component checks this unless told less.
THREAT_MODEL_ARITY = 3


@dataclass(frozen=True)
class CheckedUnder:
    """The settings one check ran under, as a summary names them."""

    k: int
    arity: int
    #: The index as the user named it (a path), so the words point at what they gave.
    index: str | Path
    #: The readings of the rules checked (docs/linkage-rules.md §8).
    readings: Sequence[str] = DEFAULT_READINGS

    def __str__(self) -> str:
        return f"k={self.k}, arity {self.arity}, {describe(self.readings)}, index {self.index}"

    @property
    def unchecked(self) -> Optional[str]:
        """Plain sentences on what a run below the threat model's arity, or without the search reading, did not check; else None."""
        notes = []
        if self.arity < THREAT_MODEL_ARITY:
            which = "combinations of phrases" if self.arity == 1 else f"combinations of more than {self.arity} phrases"
            notes.append(
                f"{which[:1].upper()}{which[1:]} were not checked (arity {self.arity}); "
                f"the threat model's setting is arity {THREAT_MODEL_ARITY}."
            )
        if "search" not in self.readings:
            notes.append(
                "Phrases as a search engine reads them (across punctuation, with invisible or look-alike characters) "
                "were not checked (no search reading)."
            )
        return " ".join(notes) or None
