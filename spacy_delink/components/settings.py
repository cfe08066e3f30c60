"""The components' settings as values, and the names both their factories and the components read.

``spacy_delink.plugin`` (imported by spaCy for every pipeline) and the components (imported
when one is built) both need these, so they live here, below both, from light imports only:
the factories turn the config's keys into one of these dataclasses and the component reads
its settings from it, never from a list of positional arguments. The defaults live in the
factories' ``default_config``, the one place spaCy reads them from.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

#: What a ``scorer`` setting resolves to (``Examples -> scores``), as in spaCy's own pipes.
ScoreFunction = Callable[..., dict[str, Any]]
#: The span group of phrases to rephrase (``delink_combinations`` writes it, the rewrite task reads it).
REPHRASE_SPANS = "to_rephrase"
#: The Doc attributes ``delink_semantic_risk`` sets.
SEMANTIC_ATTRIBUTES = ("delink_nearest_id", "delink_nearest_number", "delink_nearest_similarity", "delink_nearest_margin")


@dataclass(frozen=True, kw_only=True)
class IndexSettings:
    """What every index-backed component is configured with (``components.base.IndexedComponent``)."""

    index: str
    k: int
    key_file: Optional[str]
    verify: bool
    copy_index: bool
    scorer: Optional[ScoreFunction]
    readings: Sequence[str]


@dataclass(frozen=True, kw_only=True)
class RiskSettings(IndexSettings):
    """``delink_risk``: where its spans go."""

    spans_key: str


@dataclass(frozen=True, kw_only=True)
class CombinationSettings(IndexSettings):
    """``delink_combinations``: the combinations searched and what is flagged to rephrase."""

    arity: int
    max_combinations: int
    flagging: str


@dataclass(frozen=True, kw_only=True)
class RewriterSettings(IndexSettings):
    """``delink_rewriter``: the loop's limits, its mask, the LLM cache and what leaves the component."""

    arity: int
    max_passes: int
    granularity: str
    mask: str
    cache_dir: Optional[str]
    cache_batch_size: int
    require_llm: bool
    keep_source: bool
    flagging: str
    threads: int
    retrieval: int


@dataclass(frozen=True, kw_only=True)
class SemanticSettings:
    """``delink_semantic_risk``: the N-gram index its embeddings sit beside, the model and the search."""

    index: str
    embeddings: Optional[str]
    key_file: Optional[str]
    verify: bool
    model: Optional[str]
    search: str
    batch_size: int
