"""Reading an LLM's answer: the JSON list it holds, word runs, and the checks each replacement must pass."""
from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

from ....linkage.search_form import fold_text
from .content import CONTENT_PATTERNS, SimilarityCheck, introduced_content, introduces_lookalikes
from .fidelity import FIDELITY_REASONS, FidelityCheck
from .prompt import SPAN_CLOSE, SPAN_OPEN

REJECTION_REASONS = (
    "no_response", "malformed", "missing", "echo", "outside", "repeats", "example", "too_long", *CONTENT_PATTERNS, "lookalike", *FIDELITY_REASONS,
    "dissimilar",
)
#: Words in a run of the context that a replacement may not restate (``outside``), and in a
#: run it may not say twice (``repeats``), unless the span itself does.
RESTATED_RUN, REPEATED_RUN = 4, 3
#: (accepted, replacement) or (rejected, reason).
Verdict = Tuple[bool, str]

_WORD = re.compile(r"\w+")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
#: Four or more of one punctuation mark in a row ("]]]]", "...."): a decoding loop when the span lacks it.
_MARK_RUN = re.compile(r"([^\w\s])\1{3,}")


def search_words(text: str) -> List[str]:
    """The words of ``text``'s search form (SPEC §8), letter-spaced runs joined: what the echo and outside checks compare.

    The search form drops invisible characters and folds case, diacritics and look-alike
    letters, as the adversary's engine and eyes do; a run of two or more one-character
    words ("S a v a", "S.a.v.a") reads as the word it spells.
    """
    words: List[str] = []
    spelling = False  # whether words[-1] is a run of one-character words so far
    for word in _WORD.findall(fold_text(text)):
        if len(word) == 1 and spelling:
            words[-1] += word
        else:
            words.append(word)
            spelling = len(word) == 1
    return words


def contains_run(words: List[str], run: List[str]) -> bool:
    width = len(run)
    return width > 0 and any(words[i : i + width] == run for i in range(len(words) - width + 1))


def runs(words: List[str], width: int) -> Counter[Tuple[str, ...]]:
    """How often each run of ``width`` consecutive words occurs in ``words``."""
    return Counter(tuple(words[i : i + width]) for i in range(len(words) - width + 1))


def mark_runs(text: str) -> set[str]:
    """The punctuation marks that ``text`` repeats four or more times in a row."""
    return {match.group(1) for match in _MARK_RUN.finditer(text)}


def extract_json_list(response: str) -> Optional[List[Any]]:
    """The answer's JSON list, tolerating code fences, chatter around it or a wrapping object.

    Control characters inside strings are read as they are (``strict=False``): llama.cpp's
    JSON-schema grammar writes a fixed span's paragraph end as a raw line break, not ``\\n``
    (llama-cpp-python 0.3.36 does not escape the backslash of ``json.dumps``'s escapes when it
    makes the grammar literal), so every span across a paragraph end came back unreadable:
    20 of Qwen 0.5B's 50 answers on the first TAB text, each such a span."""
    decoder = json.JSONDecoder(strict=False)
    for candidate in [*_FENCE.findall(response), response]:
        for opener in "[{":
            first = candidate.find(opener)
            if first < 0:
                continue
            try:
                value, _ = decoder.raw_decode(candidate, first)
            except ValueError:
                continue
            if isinstance(value, dict):
                value = [value] if "span" in value else next((v for v in value.values() if isinstance(v, list)), None)
            if isinstance(value, list):
                return value
    return None


def longest_replacement(span: str) -> int:
    """The longest replacement accepted for ``span`` (longer ones are ``too_long``)."""
    return max(4 * len(span), len(span) + 80)


class AnswerChecks:
    """What a model's answer must pass, span by span (the reasons of ``REJECTION_REASONS``; ``task``'s docstring says each)."""

    def __init__(self, examples: List[Dict[str, Any]], similarity: Optional[SimilarityCheck], fidelity: FidelityCheck) -> None:
        #: The examples' replacements as search words, for the ``example`` check (one word,
        #: or the mask, is ordinary enough to be written independently).
        self.example_runs = [
            words for words in (search_words(example["replacement"]) for example in examples) if len(words) >= 2
        ]
        self.similarity = similarity
        self.fidelity = fidelity
        self.mask = fidelity.mask

    def use_mask(self, mask: str) -> None:
        """The component's mask: a replacement may use it, and the checks read around it."""
        self.mask = mask
        self.fidelity.mask = mask

    def check_similarity(
        self, judged: List[Tuple[Dict[str, Any], Optional[Verdict]]]
    ) -> List[Tuple[Dict[str, Any], Optional[Verdict]]]:
        """Demote accepted replacements that the similarity check refuses (one batch per Doc).

        The mask is exempt: it is what the fallback would write anyway.
        """
        if self.similarity is None:
            return judged
        pending = [i for i, (_, v) in enumerate(judged) if v is not None and v[0] and v[1].strip() != self.mask]
        if not pending:
            return judged
        before, after, masked = [], [], []
        for i in pending:
            item, (_, replacement) = judged[i]  # type: ignore[misc]
            context: str = item["context"]
            left, right = context[: context.index(SPAN_OPEN)], context[context.rindex(SPAN_CLOSE) + 1 :]
            before.append(f"{left}{item['span']}{right}")
            after.append(f"{left}{replacement}{right}")
            masked.append(f"{left}{self.mask}{right}")
        judged = list(judged)
        for i, refused in zip(pending, self.similarity.refused(before, after, masked)):
            if refused:
                judged[i] = (judged[i][0], (False, "dissimilar"))
        return judged

    def judge(self, chunk: List[Dict[str, Any]], response: str) -> List[Optional[Verdict]]:
        """Per item: a verdict, or None when the answer does not cover it."""
        if not isinstance(response, str) or not response.strip():
            return [(False, "no_response")] * len(chunk)
        entries = extract_json_list(response)
        if entries is None:
            return [(False, "malformed")] * len(chunk)
        outcomes: List[Optional[Verdict]] = [None] * len(chunk)
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            span, replacement, item_id = entry.get("span"), entry.get("replacement"), entry.get("id")
            if not isinstance(span, str) or not isinstance(replacement, str):
                continue
            position = self._position(chunk, outcomes, span, item_id)
            if position is None:
                continue
            if " ".join(span.split()) != " ".join(chunk[position]["span"].split()):
                outcomes[position] = (False, "outside")
            else:
                outcomes[position] = self.check(chunk[position], replacement)
        return outcomes

    @staticmethod
    def _position(chunk: List[Dict[str, Any]], outcomes: List[Optional[Verdict]], span: str, item_id: Any) -> Optional[int]:
        """Which item an answer entry belongs to: its id when valid, else the first open item with that span."""
        if isinstance(item_id, int) and not isinstance(item_id, bool) and 1 <= item_id <= len(chunk):
            return item_id - 1 if outcomes[item_id - 1] is None else None
        for position, item in enumerate(chunk):
            if outcomes[position] is None and " ".join(item["span"].split()) == " ".join(span.split()):
                return position
        return None

    def _copies_example(self, words: List[str], context: List[str]) -> bool:
        """Whether ``words`` hold an example's whole replacement that the item's own context lacks."""
        return any(contains_run(words, run) and not contains_run(context, run) for run in self.example_runs)

    def check(self, item: Dict[str, Any], replacement: str) -> Verdict:
        """Accept the replacement, or say why not."""
        span = item["span"]
        if len(replacement) > longest_replacement(span):
            return False, "too_long"
        words, span_words = search_words(replacement), search_words(span)
        if contains_run(words, span_words) or any(contains_run(words, search_words(phrase)) for phrase in item.get("phrases", ())):
            return False, "echo"
        context: str = item["context"]
        before = search_words(context[: context.index(SPAN_OPEN)])
        after = search_words(context[context.rindex(SPAN_CLOSE) + 1 :])
        if (len(before) >= 2 and words[:2] == before[-2:]) or (len(after) >= 2 and words[-2:] == after[:2]):
            return False, "outside"
        restated = (runs(before, RESTATED_RUN) | runs(after, RESTATED_RUN)).keys() - runs(span_words, RESTATED_RUN).keys()
        if restated & runs(words, RESTATED_RUN).keys():
            return False, "outside"
        said = runs(span_words, REPEATED_RUN)
        loops = any(n > 1 and said[run] < n for run, n in runs(words, REPEATED_RUN).items())
        if loops or mark_runs(replacement) - mark_runs(span):
            return False, "repeats"
        if self.example_runs and self._copies_example(words, search_words(context)):
            return False, "example"
        content = introduced_content(span, replacement, self.mask)
        if content is not None:
            return False, content
        if introduces_lookalikes(context, replacement.replace(self.mask, " ")):
            return False, "lookalike"
        left, right = context[: context.index(SPAN_OPEN)], context[context.rindex(SPAN_CLOSE) + 1 :]
        refusal = self.fidelity.refusal(f"{left}{span}{right}", f"{left}{replacement}{right}", span, replacement)
        if refusal is not None:
            return False, refusal
        return True, replacement
