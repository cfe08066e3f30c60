"""The files of ``spacy_delink.Rewrite.v1``: its few-shot examples and prompt template (the factory is in ``spacy_delink.plugin``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from ....errors import InputError
from ....io.jsonl import JsonlStats, read_jsonl
from .task import SPAN_CLOSE, SPAN_OPEN

#: Shipped inside the package, so a wheel install finds it.
DEFAULT_EXAMPLES = Path(__file__).with_name("examples.jsonl")
#: The sentence prompt's examples: each a sentence, the phrases to drop, and the generalizer's own forms.
SENTENCE_EXAMPLES = Path(__file__).with_name("examples_sentence.jsonl")


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
    """The prompt's instructions; they must name ``{open}``, ``{close}`` and ``{mask}``."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"prompt template {path} not found; pass task.template = path/to/instructions.txt")
    text = path.read_text(encoding="utf-8")
    missing = [field for field in ("{open}", "{close}", "{mask}") if field not in text]
    if missing:
        raise InputError(f"prompt template {path}: must contain {', '.join(missing)} (the span markers and the mask)")
    return text.rstrip("\n")
