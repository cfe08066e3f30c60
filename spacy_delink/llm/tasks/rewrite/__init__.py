"""The rewrite task: prompts with local context (``task``), answer checks (``parser``), factory (``registry``)."""
from ....plugin import make_rewrite_task
from .registry import read_examples, read_template
from .task import RESULT_KEY, SPAN_CLOSE, SPAN_OPEN, RewriteTask

__all__ = ["RESULT_KEY", "SPAN_CLOSE", "SPAN_OPEN", "RewriteTask", "make_rewrite_task", "read_examples", "read_template"]
