"""The prompt of ``spacy_delink.Rewrite.v1``: its Jinja template, its few-shot examples and the span markers.

As in spacy-llm's own tasks, the template is a Jinja file that lays out the whole fixed
part of a prompt: the instructions (naming ``open``, ``close`` and ``mask``) and a loop
over ``prompt_examples``, each a ``request``/``answer`` pair already written as JSON (the
task writes the JSON, so the prompt's bytes, and the cache keys taken from them, never
depend on Jinja's own JSON filter). It renders in spacy-llm's sandbox, as a template named
in a config is the user's text.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List

from jinja2 import TemplateSyntaxError, meta
from jinja2.sandbox import SandboxedEnvironment

from ....errors import InputError
from ....io.jsonl import JsonlStats, read_jsonl

SPAN_OPEN, SPAN_CLOSE = "⟦", "⟧"
_TEMPLATES = Path(__file__).with_name("templates")
#: The prompt of ``unit = "span"``: rephrase each marked span in place.
DEFAULT_TEMPLATE = _TEMPLATES / "rewrite.v1.jinja"
#: The prompt of ``unit = "sentence"``: rewrite the whole sentence, drop the listed phrases, keep every fact.
SENTENCE_TEMPLATE = _TEMPLATES / "rewrite_sentence.v1.jinja"
#: Shipped inside the package, so a wheel install finds it.
DEFAULT_EXAMPLES = Path(__file__).with_name("examples.jsonl")
#: The sentence prompt's examples: each a sentence, the phrases to drop, and the generalizer's own forms.
SENTENCE_EXAMPLES = Path(__file__).with_name("examples_sentence.jsonl")
#: What a template must use: the span markers, the mask and the few-shot examples.
TEMPLATE_VARIABLES = ("open", "close", "mask", "prompt_examples")
_ENVIRONMENT = SandboxedEnvironment()


def read_examples(path: str | Path) -> List[Dict[str, Any]]:
    """Few-shot examples: JSONL lines of ``{"context", "span", "replacement"}``, span marked in context,
    and for sentence prompts ``"remove"``: the phrases the replacement drops."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"few-shot examples file {path} not found; pass task.examples = path/to/examples.jsonl")
    examples = []
    stats = JsonlStats()
    for record in read_jsonl(path, stats=stats):
        context, span, replacement = (record.get(name) for name in ("context", "span", "replacement"))
        if not isinstance(context, str) or not isinstance(span, str) or not isinstance(replacement, str):
            raise InputError(f"{path}:{stats.lines}: expected {{\"context\", \"span\", \"replacement\"}} strings")
        if f"{SPAN_OPEN}{span}{SPAN_CLOSE}" not in context:
            raise InputError(f"{path}:{stats.lines}: the context must mark the span as {SPAN_OPEN}{span}{SPAN_CLOSE}")
        remove = record.get("remove")
        if remove is not None and not (isinstance(remove, list) and all(isinstance(p, str) and p in span for p in remove)):
            raise InputError(f"{path}:{stats.lines}: \"remove\" must list phrases of the span")
        examples.append({"context": context, "span": span, "replacement": replacement, **({"remove": remove} if remove else {})})
    return examples


def read_template(path: str | Path) -> str:
    """The prompt's Jinja template, checked to parse and to use every name of ``TEMPLATE_VARIABLES``."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"prompt template {path} not found; pass task.template = path/to/rewrite.jinja")
    text = path.read_text(encoding="utf-8")
    try:
        used = meta.find_undeclared_variables(_ENVIRONMENT.parse(text))
    except TemplateSyntaxError as err:
        raise InputError(f"prompt template {path}:{err.lineno}: {err.message}; fix the Jinja syntax") from None
    missing = [name for name in TEMPLATE_VARIABLES if name not in used]
    if missing:
        raise InputError(
            f"prompt template {path}: must use {', '.join('{{ ' + name + ' }}' for name in missing)} (the span markers, "
            "the mask and a loop over the few-shot examples, as the shipped templates/rewrite.v1.jinja does)"
        )
    return text.rstrip("\n")


@lru_cache(maxsize=16)
def _compiled(template: str) -> Any:
    """A template's compiled form, once per process (the task keeps only its text, which pickles)."""
    return _ENVIRONMENT.from_string(template)


def prompt_examples(examples: List[Dict[str, Any]]) -> List[Dict[str, str]]:
    """Each example as the template shows it: its request (one item) and its answer, as JSON."""
    shown = []
    for example in examples:
        item = {"id": 1, "context": example["context"], "span": example["span"], **({"remove": example["remove"]} if "remove" in example else {})}
        answer = {"id": 1, "span": example["span"], "replacement": example["replacement"]}
        shown.append({"request": json.dumps([item], ensure_ascii=False), "answer": json.dumps([answer], ensure_ascii=False)})
    return shown


def render_preamble(template: str, mask: str, examples: List[Dict[str, str]]) -> str:
    """The fixed part of every prompt: ``template`` rendered with the markers, ``mask`` and the ``prompt_examples``."""
    return str(_compiled(template).render(open=SPAN_OPEN, close=SPAN_CLOSE, mask=mask, prompt_examples=examples))
