"""Reading an LLM's answer: the JSON list it holds, and word runs for the echo/outside checks."""
from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, List, Optional, Tuple

from ....linkage.search_form import fold_text

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
    """The answer's JSON list, tolerating code fences, chatter around it or a wrapping object."""
    decoder = json.JSONDecoder()
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


