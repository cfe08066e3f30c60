"""``spacy_delink.Generalize.v1``: generalize flagged numbers and dates, then hand the rest to a model.

The rewrite loop runs the model's ``generalizer`` on every flagged text before any LLM
pass or mask (``rewrite.loop``); the model it wraps (``then``: an LLM, or the Mask model
by default) answers the prompts for what is still flagged. Every attribute it does not
have itself (``url``, ``stats``, ``check`` …) is the wrapped model's.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, List, Optional

from spacy_llm.registry import registry

from ..mask import MaskModel
from .choose import Generalizer
from .forms import KINDS

PromptExecutor = Callable[[Iterable[Iterable[str]]], Iterable[Iterable[str]]]


class GeneralizeModel:
    """A model that generalizes first (``generalizer``) and asks ``then`` for the rest."""

    def __init__(self, then: PromptExecutor, generalizer: Generalizer) -> None:
        self.then = then
        self.generalizer = generalizer

    def __getattr__(self, name: str) -> Any:
        if name in ("then", "generalizer") or name.startswith("__"):
            raise AttributeError(name)  # not set yet (unpickling): never recurse
        return getattr(self.then, name)

    def __call__(self, prompts: Iterable[Iterable[str]]) -> Iterable[Iterable[str]]:
        return self.then(prompts)


@registry.llm_models("spacy_delink.Generalize.v1")
def make_generalize_model(
    model: Optional[PromptExecutor] = None, kinds: List[str] = list(KINDS), lang: Optional[str] = None
) -> GeneralizeModel:
    """Generalize (``kinds``, in ``lang`` or guessed per text) before ``model`` (default: the Mask model without its own generalizer)."""
    return GeneralizeModel(model if model is not None else MaskModel(generalizer=None), Generalizer(kinds, lang))
