"""``spacy_delink.Rewrite.v1``: ask an LLM to rephrase linkable spans, and check its answer.

The task never sees the whole document: each span goes out with its local context only
(its sentence, or a window of words). ``delink_rewriter`` sends requests as Docs whose
single token is a digest of the request, so spacy-llm's cache (keyed on token hashes)
keys on exactly what was asked; the text and spans themselves ride in ``doc.user_data``.

In spacy-llm's own ``llm`` component the task works on the pipeline's Docs instead: it
asks for the spans in ``doc.spans[spans_key]`` (``to_rephrase``, set by
``delink_combinations``) and stores its verdicts in ``doc.user_data[RESULT_KEY]``. It
only *proposes* rewrites there: a Doc's text cannot change inside a pipeline, and nothing
re-checks the result; ``delink_rewriter`` is the component that applies, re-detects and
guarantees protection.

Every requested span ends with exactly one outcome, counted in the result: accepted, or
rejected as ``no_response`` (the model call failed or came back empty), ``malformed``
(no JSON list in the answer), ``missing`` (the answer skips it), ``echo`` (the
replacement's search form still contains the span's words, letter-spaced or not),
``outside`` (the answer rewrites text around the span, restates four or more words of
its context that the span lacks, or names a span that was not asked for), ``repeats``
(it says a run of three words twice, or one punctuation mark four times in a row,
where the span does not: a small model's loop),
``example`` (it copies a few-shot example's replacement of two or more words that its
context does not hold: small models answer every span with the last example's),
``too_long``, one of the content reasons of ``content.CONTENT_PATTERNS``
(``markup``, ``url``, ``code``, ``instruction``, ``control``: the replacement brings in
what the span lacks; ``control`` covers every invisible character), ``lookalike``
(letters of a script or form the context does not use, or a word mixing scripts), one of
``fidelity.FIDELITY_REASONS`` (``invented_number``, ``invented_name``, ``rarer_word``,
``negation``, ``broken_sentence``: the rewritten sentence states another fact) or
``dissimilar`` (below ``min_similarity``, or with ``above_mask`` less similar than the
span masked, when those checks are on). Words are compared in
the search form of SPEC §8, as the adversary's engine reads them.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np
from spacy.tokens import Doc
from spacy.vocab import Vocab

from ....errors import InputError
from ....rewrite.masking import merge_ranges
from .content import SimilarityCheck
from .fidelity import FIDELITY_REASONS, DocumentFrequencies, FidelityCheck
from .parser import REJECTION_REASONS, AnswerChecks, Verdict, longest_replacement
from .prompt import SPAN_CLOSE, SPAN_OPEN, prompt_examples, render_preamble

REQUEST_KEY = "delink.rewrite_request"
ITEMS_KEY = "delink.rewrite_items"
RESULT_KEY = "delink.rewrite_result"
#: Why a span of a several-span prompt is asked again alone before its pass ends: the
#: answer as a whole failed (no JSON list) or skipped it. A small model that loses the
#: thread of a long list often answers one span well.
RETRY_ALONE = ("malformed", "missing")
#: Bumped when the answer checks change: cached verdicts from other checks are not reused.
CHECKS_VERSION = 6
CONTEXT_MODES = ("sentence", "window")
UNITS = ("span", "sentence")
_WORD = re.compile(r"\w+")
_SENTENCE_END = re.compile(r"[.!?…]\s+|\n[ \t\r]*\n")
#: Characters scanned per context word when looking for a window's edge (long words are rare).
_CHARS_PER_WORD = 40

class RewritePrompt(str):
    """A prompt that also carries the JSON schema of a valid answer (its items' ids and spans, in order).

    Models that can constrain decoding (``LlamaCpp.v1``; ``OpenAICompatible.v1`` with
    ``response_format``) read ``answer_schema``; to every other model it is a plain string.
    """

    answer_schema: Dict[str, Any]

    def __new__(cls, text: str, answer_schema: Dict[str, Any]) -> "RewritePrompt":
        prompt = super().__new__(cls, text)
        prompt.answer_schema = answer_schema
        return prompt


#: The longest replacement a schema asks for: llama.cpp refuses a grammar whose string
#: repeats a character more than about a thousand times (and llama-cpp-python then crashes
#: the process), as it did for a 270-character TAB span (limit 1,080). The too_long check
#: still applies its own limit to every answer.
SCHEMA_MAX_LENGTH = 500
#: A span holding one of these is not fixed as a constant: llama-cpp-python (0.3.36, in process
#: and its server) copies a constant's JSON escapes ``\"`` and ``\\`` into its grammar
#: unescaped, and the grammar it then cannot parse crashes the process.
_UNFIXABLE = ('"', "\\")


def _span_schema(span: str) -> Dict[str, Any]:
    """The span as a constant, or as a string of its length where a constant would break the grammar."""
    if any(mark in span for mark in _UNFIXABLE):
        return {"type": "string", "maxLength": min(len(span), SCHEMA_MAX_LENGTH)}
    return {"const": span}


def answer_schema(items: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The answer to ``items`` as a JSON schema: one object per item, in order, its id and span fixed.

    Decoding under it leaves the model only the replacements to write, none longer than
    the too_long check accepts (nor than ``SCHEMA_MAX_LENGTH``); the answer is still
    checked like any other, and a span the model had to write itself must be the one asked.
    """
    entries = [
        {
            "type": "object",
            "properties": {
                "id": {"const": item["id"]},
                "span": _span_schema(item["span"]),
                "replacement": {"type": "string", "minLength": 1, "maxLength": min(longest_replacement(item["span"]), SCHEMA_MAX_LENGTH)},
            },
            "required": ["id", "span", "replacement"],
            "additionalProperties": False,
        }
        for item in items
    ]
    return {"type": "array", "prefixItems": entries, "minItems": len(entries), "maxItems": len(entries)}


class RewriteTask:
    """Prompts for span rewrites with local context; validates the answers (see module docstring).

    Not spacy-llm's ``BuiltinTask``: its shards split a Doc's tokens to fit the model's context,
    while a request Doc's one token is a digest (the text rides in ``user_data``) and each
    prompt is already bounded, by ``spans_per_prompt`` spans in their local context.
    """

    def __init__(
        self,
        *,
        examples: List[Dict[str, Any]],
        context: str,
        window: int,
        spans_per_prompt: int,
        template: str,
        spans_key: str,
        similarity: Optional[SimilarityCheck],
        fidelity: Optional[List[str]] = None,
        unit: str = "span",
    ) -> None:
        if unit not in UNITS:
            raise InputError(f"task.unit must be one of {', '.join(UNITS)}, got {unit!r}")
        #: What the model rewrites: each flagged span, or each sentence that holds flagged spans.
        self.unit = unit
        if context not in CONTEXT_MODES:
            raise InputError(f"task.context must be one of {', '.join(CONTEXT_MODES)}, got {context!r}")
        if window < 1 or spans_per_prompt < 1:
            raise InputError(f"task.window and task.spans_per_prompt must be >= 1, got {window} and {spans_per_prompt}")
        self.examples = examples
        #: The Jinja template of each prompt's fixed part (``prompt``), and the examples as it shows them.
        self.template = template
        self.prompt_examples = prompt_examples(examples)
        self.context = context
        self.window = window
        self.spans_per_prompt = spans_per_prompt
        self.spans_key = spans_key
        unknown = sorted(set(fidelity or ()) - set(FIDELITY_REASONS))
        if unknown:
            raise InputError(f"task.fidelity: unknown check(s) {', '.join(unknown)}; choose among {', '.join(FIDELITY_REASONS)}")
        #: The checks of every answer (``parser``); they hold the mask, which the prompt names too.
        self.checks = AnswerChecks(
            examples, similarity, FidelityCheck("[REDACTED]", checks=FIDELITY_REASONS if fidelity is None else tuple(fidelity))
        )

    def use_mask(self, mask: str) -> None:
        """The component's mask, named in the prompt as the fallback replacement."""
        self.checks.use_mask(mask)

    def use_document_frequencies(self, frequencies: DocumentFrequencies) -> None:
        """Words' document frequencies in the collection (the component's index), for the ``rarer_word`` check."""
        self.checks.fidelity.frequencies = frequencies

    @property
    def prompt_template(self) -> str:
        """Everything fixed in a prompt and its checks (spacy-llm's cache refuses a directory built with another).

        The cache stores judged answers, so the checks are part of it too.
        """
        similarity = self.checks.similarity
        threshold = similarity.threshold if similarity is not None else None
        above_mask = similarity is not None and similarity.above_mask
        return self._preamble() + (
            f"\ncontext={self.context} window={self.window} per_prompt={self.spans_per_prompt} unit={self.unit}"
            f" checks={CHECKS_VERSION} min_similarity={threshold} above_mask={above_mask} fidelity={','.join(self.checks.fidelity.checks)}"
        )

    def _preamble(self) -> str:
        return render_preamble(self.template, self.checks.mask, self.prompt_examples)

    # -- requests -------------------------------------------------------------------------

    def request_doc(
        self, vocab: Vocab, text: str, spans: List[Tuple[int, int]], attempt: int = 1, per_prompt: Optional[int] = None
    ) -> Doc:
        """A Doc carrying one rewrite request; its only token is the request's digest (the cache key).

        ``attempt`` (the pass number) is part of the key: asking the same thing again in a
        later pass gets a fresh answer, while a resumed run finds each pass's answers cached.
        ``per_prompt`` overrides ``spans_per_prompt`` for this request (1: the one-span retry).
        """
        per_prompt = per_prompt or self.spans_per_prompt
        digest = hashlib.sha256(
            json.dumps([self.prompt_template, text, spans, attempt, per_prompt], ensure_ascii=False).encode("utf-8")
        ).hexdigest()
        doc = Doc(vocab, words=[f"delink-request-{digest}"])
        doc.user_data[REQUEST_KEY] = {"text": text, "spans": [list(span) for span in spans], "per_prompt": per_prompt}
        return doc

    def bounds(self, text: str, spans: List[Tuple[int, int]]) -> List[Tuple[int, int]]:
        """Each span's sentence (or word window), cut to ``window`` words on each side, as a character range.

        Word and sentence boundaries are found once per text and bisected per span, so a
        10 MB document with a hundred thousand spans stays linear.
        """
        words = np.array([m.span() for m in _WORD.finditer(text)], dtype=np.int64).reshape(-1, 2)
        breaks = np.array([m.span() for m in _SENTENCE_END.finditer(text)], dtype=np.int64).reshape(-1, 2)
        reach = self.window * _CHARS_PER_WORD
        found = []
        for start, end in spans:
            before = int(np.searchsorted(words[:, 0], start))  # words starting before the span
            left = max(int(words[before - self.window, 0]) if before >= self.window else 0, start - reach)
            after = int(np.searchsorted(words[:, 0], end))  # first word starting at or after its end
            last = after + self.window - 1
            right = min(int(words[last, 1]) if last < len(words) else len(text), end + reach)
            if self.context == "sentence":
                previous = int(np.searchsorted(breaks[:, 1], start, side="right")) - 1
                if previous >= 0 and breaks[previous, 0] >= left:
                    left = int(breaks[previous, 1])
                following = int(np.searchsorted(breaks[:, 0], end))
                if following < len(breaks) and breaks[following, 0] < right:
                    boundary = int(breaks[following, 0])
                    right = boundary + (0 if text[boundary].isspace() else 1)
            found.append((min(left, start), max(right, end)))
        return found

    def contexts(self, text: str, spans: List[Tuple[int, int]]) -> List[str]:
        """Each span's sentence (or word window, ``bounds``), span marked."""
        return [
            f"{text[left:start]}{SPAN_OPEN}{text[start:end]}{SPAN_CLOSE}{text[end:right]}"
            for (start, end), (left, right) in zip(spans, self.bounds(text, spans))
        ]

    def sentence_items(self, text: str, spans: List[Tuple[int, int]]) -> List[Dict[str, Any]]:
        """``unit = "sentence"``: one item per sentence (``bounds``) holding flagged spans, the whole sentence to rewrite.

        Sentences that overlap (a span across a sentence end) are merged; ``phrases`` lists
        the flagged phrases the rewrite must drop (its ``echo`` check reads them).
        """
        sentences = merge_ranges(self.bounds(text, spans))
        items = []
        for left, right in sentences:
            inside = [text[s:e] for s, e in spans if left <= s and e <= right]
            sentence = text[left:right]
            items.append({"start": left, "end": right, "span": sentence, "context": f"{SPAN_OPEN}{sentence}{SPAN_CLOSE}",
                          "phrases": list(dict.fromkeys(inside))})
        return items

    def _request(self, doc: Doc) -> Tuple[str, List[Tuple[int, int]], int]:
        """What to rewrite, and how many spans a prompt: a ``delink_rewriter`` request, or a pipeline Doc's ``doc.spans[spans_key]``."""
        request = doc.user_data.get(REQUEST_KEY)
        if request is not None:
            spans = [(int(s), int(e)) for s, e in request["spans"]]
            return request["text"], spans, int(request.get("per_prompt") or self.spans_per_prompt)
        if self.spans_key not in doc.spans:
            raise InputError(
                f"spacy_delink.Rewrite.v1 in an `llm` component rewrites the spans in doc.spans[{self.spans_key!r}], "
                "which this Doc lacks: put delink_combinations before it (or delink_risk with "
                'task.spans_key = "linkable"), or use the delink_rewriter component, which detects, rewrites '
                "and re-checks on its own (docs/llm.md)"
            )
        spans = merge_ranges((span.start_char, span.end_char) for span in doc.spans[self.spans_key])
        return doc.text, spans, self.spans_per_prompt

    def _items(self, doc: Doc) -> List[List[Dict[str, Any]]]:
        """The request's items, chunked per prompt (ids restart at 1 in each prompt); kept on the Doc."""
        if ITEMS_KEY in doc.user_data:
            return doc.user_data[ITEMS_KEY]
        text, spans, per_prompt = self._request(doc)
        items = self.sentence_items(text, spans) if self.unit == "sentence" else [
            {"start": s, "end": e, "span": text[s:e], "context": context}
            for (s, e), context in zip(spans, self.contexts(text, spans))
        ]
        chunks = [
            [{"id": i, **item} for i, item in enumerate(items[offset : offset + per_prompt], start=1)]
            for offset in range(0, len(items), per_prompt)
        ]
        doc.user_data[ITEMS_KEY] = chunks
        return chunks

    def generate_prompts(
        self, docs: Iterable[Doc], context_length: Optional[int] = None
    ) -> Iterable[Tuple[Iterable[str], Iterable[Doc]]]:
        """One prompt per chunk of spans, carrying its answer's schema; the request Doc is its own (single) shard."""
        preamble = self._preamble()
        for doc in docs:
            prompts = []
            for chunk in self._items(doc):
                items = [
                    {"id": it["id"], "context": it["context"], "span": it["span"], **({"remove": it["phrases"]} if "phrases" in it else {})}
                    for it in chunk
                ]
                text = f"{preamble}\n\nItems: {json.dumps(items, ensure_ascii=False)}\nAnswer:"
                prompts.append(RewritePrompt(text, answer_schema(chunk)))
            yield prompts, [doc]

    # -- answers --------------------------------------------------------------------------

    def parse_responses(
        self, shards: Iterable[Iterable[Doc]], responses: Iterable[Iterable[str]]
    ) -> Iterable[Doc]:
        """Accept or reject every requested span; results go to ``doc.user_data[RESULT_KEY]``.

        ``retry`` lists ``[start, end, reason]`` of the spans of several-span prompts
        rejected for a reason of ``RETRY_ALONE``: ``delink_rewriter`` asks for them again,
        one per prompt, before the pass ends.
        """
        for doc_shards, doc_responses in zip(shards, responses):
            doc = list(doc_shards)[0]
            accepted: List[List[Any]] = []
            rejected = dict.fromkeys(REJECTION_REASONS, 0)
            retry: List[List[Any]] = []
            judged: List[Tuple[Dict[str, Any], Optional[Verdict]]] = []
            for chunk, response in zip(self._items(doc), doc_responses):
                judged += zip(chunk, self.checks.judge(chunk, response))
            alone = {chunk[0]["start"] for chunk in self._items(doc) if len(chunk) == 1}
            for item, verdict in self.checks.check_similarity(judged):
                if verdict is not None and verdict[0]:
                    accepted.append([item["start"], item["end"], verdict[1]])
                    continue
                reason = "missing" if verdict is None else verdict[1]
                rejected[reason] += 1
                if reason in RETRY_ALONE and item["start"] not in alone:
                    retry.append([item["start"], item["end"], reason])
            doc.user_data.pop(REQUEST_KEY, None)
            doc.user_data.pop(ITEMS_KEY, None)
            doc.user_data[RESULT_KEY] = {"accepted": accepted, "rejected": rejected, "retry": retry}
            yield doc
