"""How our HTTP clients wait before asking again: exponential backoff with jitter, or the server's ``Retry-After``.

The LLM model (``llm.models.openai_compatible``) and the service's client (``serve.client``)
retry with tenacity and this one wait: a server that says how long to wait (``Retry-After``,
in seconds or as an HTTP date, RFC 9110 §10.2.3) is believed up to a cap; otherwise the
waits double from ``initial`` with up to ``initial`` seconds of random jitter, so clients
refused together do not all come back at the same instant.
"""
from __future__ import annotations

import time
from email.utils import parsedate_to_datetime
from typing import Callable, Optional

from tenacity import RetryCallState, wait_exponential, wait_random


def parse_retry_after(value: str, now: Optional[float] = None) -> Optional[float]:
    """A ``Retry-After`` header's wait in seconds (>= 0), from delta-seconds or an HTTP date; None when absent or unreadable."""
    value = value.strip()
    if not value:
        return None
    if value.replace(".", "", 1).isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # RFC 9110: an HTTP date is always GMT
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def backoff(initial: float, cap: float) -> Callable[[RetryCallState], float]:
    """tenacity's wait: the ``retry_after`` of the last outcome (result or exception) if it has one, else
    ``initial * 2**(n - 1)`` plus up to ``initial`` of jitter before try ``n + 1``; never more than ``cap``."""
    exponential, jitter = wait_exponential(multiplier=initial, max=cap), wait_random(0, initial)

    def wait(state: RetryCallState) -> float:
        outcome = state.outcome
        told = None
        if outcome is not None:
            told = getattr(outcome.exception() if outcome.failed else outcome.result(), "retry_after", None)
        return min(float(told) if told is not None else exponential(state) + jitter(state), cap)

    return wait
