"""Reading an LLM's answer: the JSON list it holds, and word runs for the echo/outside checks."""
from __future__ import annotations

import json
import re
import unicodedata
from typing import Any, List, Optional

_WORD = re.compile(r"\w+")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def search_words(text: str) -> List[str]:
    """Words compared case- and width-insensitively (echo and outside checks)."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def contains_run(words: List[str], run: List[str]) -> bool:
    width = len(run)
    return width > 0 and any(words[i : i + width] == run for i in range(len(words) - width + 1))


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


