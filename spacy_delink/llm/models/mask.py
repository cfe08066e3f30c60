"""``spacy_delink.Mask.v1``: the offline default model, which generalizes and masks, never rewrites.

With it the rewriter skips the LLM passes: it first generalizes the flagged numbers and
dates as far as detection requires (``generalizer``, see ``models.generalize``; off with
``generalize = false``), then masks the fewest tokens that break every span still
linkable (see ``spacy_delink.rewrite.masking``). Called through spacy-llm anyway, it
answers an empty list, i.e. "no rewrite", for which the same fallback applies — so both
paths give the same, deterministic output.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, List, Optional

from spacy_llm.registry import registry

if TYPE_CHECKING:
    from .generalize import Generalizer

EMPTY_ANSWER = "[]"


class MaskModel:
    """A prompt executor that never rewrites; the rewriter recognizes it and masks directly."""

    def __init__(self, generalizer: Optional["Generalizer"] = None) -> None:
        self.generalizer = generalizer

    @property
    def context_length(self) -> int:
        """Unlimited in practice; given so spacy-llm does not warn about sharding."""
        return 1 << 30

    def __call__(self, prompts: Iterable[Iterable[str]]) -> Iterable[Iterable[str]]:
        answers: List[List[str]] = [[EMPTY_ANSWER for _ in doc_prompts] for doc_prompts in prompts]
        return answers


@registry.llm_models("spacy_delink.Mask.v1")
def make_mask_model(generalize: bool = True) -> MaskModel:
    """The deterministic, offline default of ``delink_rewriter``; ``generalize = false`` only masks."""
    from .generalize import Generalizer

    return MaskModel(Generalizer() if generalize else None)
