"""SPEC §6 scores shared by every view of a detection."""
from __future__ import annotations


def risk_from_anonymity(anonymity: int | None) -> float:
    """SPEC §6: ``1 / anonymity``, or 0.0 when nothing is linkable."""
    return 0.0 if anonymity is None else 1.0 / anonymity


class SupportRisk:
    """A base for what ``support`` documents hold: its SPEC §6 risk is ``1 / support``."""

    support: int

    @property
    def risk(self) -> float:
        return risk_from_anonymity(self.support)
