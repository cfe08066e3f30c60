"""What a run may claim, in words: the settings its checks ran under.

"Protected" or "linkable" means nothing without the index, k and arity it was checked
under (docs/linkage-rules.md §7), so every summary that makes such a claim (`delink
assess`, `delink protect`, `delink evaluate`) takes its wording from here, and a run below
the threat model's arity says what it left unchecked.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

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

    def __str__(self) -> str:
        return f"k={self.k}, arity {self.arity}, index {self.index}"

    @property
    def unchecked(self) -> Optional[str]:
        """One plain sentence on what a run below the threat model's arity did not check, else None."""
        if self.arity >= THREAT_MODEL_ARITY:
            return None
        which = "combinations of phrases" if self.arity == 1 else f"combinations of more than {self.arity} phrases"
        return (
            f"{which[:1].upper()}{which[1:]} were not checked (arity {self.arity}); "
            f"the threat model's setting is arity {THREAT_MODEL_ARITY}."
        )
