"""The flagging strategies' names (docs/flagging.md), light enough for spaCy's factory registrations.

``spacy_delink.plugin`` declares the components' defaults without importing ``cover``
(numba kernels), and every option or setting naming a strategy is checked here, before any
work: ``optimal`` also needs the HiGHS solver of the ``optimal`` extra.
"""
from __future__ import annotations

from ..errors import InputError
from ..extras import require_extra

STRATEGIES = ("shortest", "min_cover", "optimal")
DEFAULT_STRATEGY = "min_cover"


def check_strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise InputError(f"flagging must be one of {', '.join(STRATEGIES)}, got {strategy!r}; see docs/flagging.md")
    if strategy == "optimal":
        require_extra("optimal", "flagging 'optimal'")
    return strategy
