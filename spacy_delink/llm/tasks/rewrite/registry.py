"""Registers ``spacy_delink.Rewrite.v1`` with spacy-llm, as spacy-llm's own tasks do in their ``registry.py``.

``spacy_delink.plugin`` imports this module for every pipeline spaCy builds (the
``thinc_llm_tasks`` entry point names it there), so it imports only names: the task, its
checks and its files load when a task is made.
"""
from __future__ import annotations

from typing import Any, Optional

from spacy_llm.registry import registry as llm_registry

from ....components.settings import REPHRASE_SPANS


@llm_registry.llm_tasks("spacy_delink.Rewrite.v1")
def make_rewrite_task(
    examples: Optional[str] = None,
    context: str = "sentence",
    window: int = 30,
    spans_per_prompt: int = 20,
    template: Optional[str] = None,
    spans_key: str = REPHRASE_SPANS,
    min_similarity: Optional[float] = None,
    similarity_model: Optional[str] = None,
    above_mask: bool = False,
    fidelity: Optional[list[str]] = None,
    unit: str = "span",
) -> Any:
    """The rewrite task (a ``RewriteTask``); ``examples`` defaults to the shipped ``examples.jsonl``.

    ``spans_key``: the span group to rewrite when the task runs in a plain ``llm`` component.
    ``min_similarity``: refuse replacements whose context embedding falls below this cosine
    (needs the embeddings extra; None = off); ``similarity_model``: a sentence-transformer
    folder instead of the shipped all-MiniLM-L6-v2; ``above_mask``: also refuse a rephrasing
    whose context is less similar to the original than the context with the span masked;
    ``fidelity``: the never-invent checks to run (``fidelity.FIDELITY_REASONS``; None = all);
    ``unit``: "span" (rewrite each flagged span) or "sentence" (each sentence holding them,
    with ``template``/``examples`` defaulting to the shipped sentence prompt).
    """
    from .content import SimilarityCheck
    from .prompt import DEFAULT_EXAMPLES, DEFAULT_TEMPLATE, SENTENCE_EXAMPLES, SENTENCE_TEMPLATE, read_examples, read_template
    from .task import RewriteTask

    sentences = unit == "sentence"
    return RewriteTask(
        examples=read_examples(examples or (SENTENCE_EXAMPLES if sentences else DEFAULT_EXAMPLES)),
        context=context,
        window=window,
        spans_per_prompt=spans_per_prompt,
        template=read_template(template or (SENTENCE_TEMPLATE if sentences else DEFAULT_TEMPLATE)),
        spans_key=spans_key,
        similarity=SimilarityCheck.from_settings(min_similarity, similarity_model, above_mask),
        fidelity=fidelity,
        unit=unit,
    )
