"""The rewrite task: prompts with local context (``task``), its Jinja template and examples (``prompt``),
answer checks (``parser``), its registration with spacy-llm (``registry``).

``spacy_delink.plugin`` imports ``registry`` whenever spaCy builds a pipeline, which runs
this file first: the names below load on first access (``_lazy``), not with the package.
"""
from ...._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "RESULT_KEY": "task",
    "RewriteTask": "task",
    "SPAN_CLOSE": "prompt",
    "SPAN_OPEN": "prompt",
    "make_rewrite_task": "registry",
    "read_examples": "prompt",
    "read_template": "prompt",
})
