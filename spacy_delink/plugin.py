"""What spaCy and spacy-llm import from spacy-delink whenever they build a pipeline.

spaCy imports the module behind every installed ``spacy_factories`` and ``spacy_scorers``
entry point each time it creates a ``Language`` (``spacy.blank``, ``spacy.load``), with or
without a delink pipe. So the factories, the scorer and the spacy-llm task (in its own
``registry.py``, imported here) are registered from light imports only: the settings are
the dataclasses of ``components.settings``, and each factory imports its component (numba
kernels, index readers, model clients, torch) when it is called: an installed plugin costs
a spaCy user nothing until a delink pipe is added.

Annotations must resolve from this module's own names (no ``TYPE_CHECKING`` imports): spaCy
validates a config against them, and silently validates nothing when one cannot be resolved.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from spacy.language import Language
from spacy.tokens import Doc
from spacy.util import registry

from .claims import THREAT_MODEL_ARITY
from .components.settings import (
    SEMANTIC_ATTRIBUTES,
    CombinationSettings,
    RewriterSettings,
    RiskSettings,
    ScoreFunction,
    SemanticSettings,
)
from .linkage.readings import DEFAULT_READINGS
from .linkage.strategies import DEFAULT_STRATEGY
from .llm.tasks.rewrite.registry import make_rewrite_task  # noqa: F401  (registers the task; the thinc_llm_tasks entry point names it here)

#: A component: spaCy calls it on each Doc.
Component = Callable[[Doc], Doc]
#: The scores ``linkage_score`` reports, shown (not weighted) in training logs.
SCORE_WEIGHTS: dict[str, float | None] = {
    "delink_linkable_share": None,
    "delink_mean_risk": None,
    "delink_protected_share": None,
}
LINKAGE_SCORER = {"@scorers": "spacy_delink.linkage_scorer.v1"}


def index_defaults(**own: Any) -> dict[str, Any]:
    """An index-backed pipe's ``default_config``: the settings they share (``IndexSettings``), then its own."""
    shared = {"index": "", "k": 2, "key_file": None, "verify": True, "copy_index": False, "scorer": LINKAGE_SCORER}
    return {**shared, **own, "readings": list(DEFAULT_READINGS)}


@registry.scorers("spacy_delink.linkage_scorer.v1")
def make_linkage_scorer() -> ScoreFunction:
    """The scorer of every delink component (``scorer = {"@scorers": "spacy_delink.linkage_scorer.v1"}``)."""
    from .components.extensions import linkage_score

    return linkage_score


@Language.factory(
    "delink_risk",
    assigns=[
        "doc.spans",
        "doc._.delink_anonymity",
        "doc._.delink_risk",
        "span._.delink_support",
        "span._.delink_risk",
        "span._.delink_readings",
        "token._.delink_risk",
    ],
    default_config=index_defaults(spans_key="linkable"),
    default_score_weights=SCORE_WEIGHTS,
)
def make_risk_annotator(
    nlp: Language,
    name: str,
    index: str,
    k: int,
    key_file: Optional[str],
    verify: bool,
    copy_index: bool,
    spans_key: str,
    scorer: Optional[ScoreFunction],
    readings: list[str],
) -> Component:
    """``nlp.add_pipe("delink_risk", config={"index": "path/to/index", "k": 2})``."""
    from .components.risk import LinkageRiskAnnotator

    settings = RiskSettings(
        index=index, k=k, key_file=key_file, verify=verify, copy_index=copy_index, scorer=scorer, readings=readings,
        spans_key=spans_key,
    )
    return LinkageRiskAnnotator(nlp, name, settings=settings)


@Language.factory(
    "delink_combinations",
    assigns=[
        "doc.spans",
        "doc._.delink_anonymity",
        "doc._.delink_risk",
        "doc._.delink_combinations",
        "doc._.delink_combination_linkable",
        "span._.delink_support",
        "span._.delink_combinations",
    ],
    default_score_weights=SCORE_WEIGHTS,
    default_config=index_defaults(arity=THREAT_MODEL_ARITY, max_combinations=1000, flagging=DEFAULT_STRATEGY),
)
def make_combination_detector(
    nlp: Language,
    name: str,
    index: str,
    k: int,
    arity: int,
    max_combinations: int,
    key_file: Optional[str],
    verify: bool,
    copy_index: bool,
    scorer: Optional[ScoreFunction],
    flagging: str,
    readings: list[str],
) -> Component:
    """``nlp.add_pipe("delink_combinations", config={"index": ..., "k": 2, "arity": 3})``."""
    from .components.combinations import CombinationDetector

    settings = CombinationSettings(
        index=index, k=k, key_file=key_file, verify=verify, copy_index=copy_index, scorer=scorer, readings=readings,
        arity=arity, max_combinations=max_combinations, flagging=flagging,
    )
    return CombinationDetector(nlp, name, settings=settings)


@Language.factory(
    "delink_rewriter",
    assigns=[
        "doc._.delink_source",
        "doc._.delink_passes",
        "doc._.delink_edits",
        "doc._.delink_protected",
        "doc._.delink_anonymity",
        "doc._.delink_risk",
    ],
    retokenizes=True,  # a new Doc on the rewritten text (see extensions.carry_over)
    default_score_weights=SCORE_WEIGHTS,
    default_config=index_defaults(
        arity=THREAT_MODEL_ARITY,
        max_passes=5,
        granularity="token",
        mask="[REDACTED]",
        task={"@llm_tasks": "spacy_delink.Rewrite.v1"},
        model={"@llm_models": "spacy_delink.Mask.v1"},
        cache_dir="auto",
        cache_batch_size=1,
        require_llm=False,
        keep_source=False,
        flagging=DEFAULT_STRATEGY,
        threads=0,
        retrieval=0,
    ),
)
def make_rewriter(
    nlp: Language,
    name: str,
    index: str,
    k: int,
    arity: int,
    key_file: Optional[str],
    verify: bool,
    copy_index: bool,
    max_passes: int,
    granularity: str,
    mask: str,
    task: Any,
    model: Callable[[Iterable[Iterable[str]]], Iterable[Iterable[str]]],
    cache_dir: Optional[str],
    cache_batch_size: int,
    require_llm: bool,
    keep_source: bool,
    scorer: Optional[ScoreFunction],
    flagging: str,
    threads: int,
    readings: list[str],
    retrieval: int,
) -> Component:
    """``nlp.add_pipe("delink_rewriter", config={"index": "path/to/index", "k": 2, "arity": 3})``."""
    from .components.rewriter import DelinkRewriter
    from .errors import InputError
    from .llm.tasks.rewrite.task import RewriteTask

    if not isinstance(task, RewriteTask):  # the type this module cannot name without importing it
        raise InputError(
            f"component {name!r}: task must be {{\"@llm_tasks\": \"spacy_delink.Rewrite.v1\"}}, got {type(task).__name__}"
        )
    settings = RewriterSettings(
        index=index, k=k, key_file=key_file, verify=verify, copy_index=copy_index, scorer=scorer, readings=readings,
        arity=arity, max_passes=max_passes, granularity=granularity, mask=mask, cache_dir=cache_dir,
        cache_batch_size=cache_batch_size, require_llm=require_llm, keep_source=keep_source, flagging=flagging,
        threads=threads, retrieval=retrieval,
    )
    return DelinkRewriter(nlp, name, settings=settings, task=task, model=model)


@Language.factory(
    "delink_semantic_risk",
    assigns=[f"doc._.{name}" for name in SEMANTIC_ATTRIBUTES],
    requires=[],
    default_config={
        "index": "",
        "embeddings": None,
        "key_file": None,
        "verify": True,
        "model": None,
        "search": "auto",
        "batch_size": 32,
    },
)
def make_semantic_risk(
    nlp: Language,
    name: str,
    index: str,
    embeddings: Optional[str],
    key_file: Optional[str],
    verify: bool,
    model: Optional[str],
    search: str,
    batch_size: int,
) -> Component:
    """``nlp.add_pipe("delink_semantic_risk", config={"index": "path/to/index"})`` (embeddings beside it)."""
    from .extras import require_extra

    require_extra("semantic", "the delink_semantic_risk component")
    from .components.semantic_risk import SemanticRiskAnnotator

    settings = SemanticSettings(
        index=index, embeddings=embeddings, key_file=key_file, verify=verify, model=model, search=search, batch_size=batch_size
    )
    return SemanticRiskAnnotator(nlp, name, settings=settings)


@Language.factory(
    "delink_redactor",
    assigns=["token._.delink_redaction_score", "doc.spans", "doc._.delink_redacted_text"],
    default_config={
        "method": "ranker",
        "fraction": 0.2,
        "embedder": "minilm",
        "model_path": None,
        "mask_token": "[MASK]",
        "seed": 0,
    },
)
def make_redactor(
    nlp: Language,
    name: str,
    method: str,
    fraction: float,
    embedder: str,
    model_path: Optional[str],
    mask_token: str,
    seed: int,
) -> Component:
    """Build a redactor; ``ranker`` and ``logreg`` need ``initialize`` (or ``fit``) before use."""
    from .extras import require_extra

    require_extra("redaction", "the delink_redactor component")
    from .redaction.component import DelinkRedactor

    return DelinkRedactor(nlp, name, method, fraction, embedder, model_path, mask_token, seed)
