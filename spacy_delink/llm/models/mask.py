"""``spacy_delink.Mask.v1``: the offline default model, which rewrites nothing.

With it the rewriter skips the LLM passes and goes straight to its mask fallback, which
masks the fewest tokens that break every linkable span (see ``spacy_delink.rewrite.masking``).
Called through spacy-llm anyway, it answers an empty list, i.e. "no rewrite", for which
the same fallback applies — so both paths give the same, deterministic output.
"""
from __future__ import annotations

from typing import Iterable, List

from spacy_llm.registry import registry

EMPTY_ANSWER = "[]"


class MaskModel:
    """A prompt executor that never rewrites; the rewriter recognizes it and masks directly."""

    @property
    def context_length(self) -> int:
        """Unlimited in practice; given so spacy-llm does not warn about sharding."""
        return 1 << 30

    def __call__(self, prompts: Iterable[Iterable[str]]) -> Iterable[Iterable[str]]:
        answers: List[List[str]] = [[EMPTY_ANSWER for _ in doc_prompts] for doc_prompts in prompts]
        return answers


@registry.llm_models("spacy_delink.Mask.v1")
def make_mask_model() -> MaskModel:
    """The deterministic, offline default of ``delink_rewriter``."""
    return MaskModel()
