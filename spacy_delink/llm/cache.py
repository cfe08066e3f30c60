"""spacy-llm's answer cache, adapted so that unanswered requests are retried on a rerun."""
from __future__ import annotations

from spacy.tokens import Doc
from spacy_llm.cache import BatchCache

from .tasks.rewrite.task import RESULT_KEY


class AnsweredCache(BatchCache):
    """spacy-llm's BatchCache, minus requests the model never answered (so a rerun retries them)."""

    def add(self, doc: Doc) -> None:
        if not doc.user_data[RESULT_KEY]["rejected"]["no_response"]:
            super().add(doc)
