"""The one retry policy of the HTTP clients: ``Retry-After`` in both forms, else jittered exponential backoff."""
from __future__ import annotations

from email.utils import format_datetime
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest
from tenacity import RetryCallState

from spacy_delink.retrying import backoff, parse_retry_after
from spacy_delink.serve.client import DelinkClient, ServeError

NOW = 1_800_000_000.0


def _http_date(timestamp: float) -> str:
    return format_datetime(datetime.fromtimestamp(timestamp, tz=timezone.utc), usegmt=True)


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after(_http_date(NOW + 42), now=NOW) == 42.0
    assert parse_retry_after(_http_date(NOW - 42), now=NOW) == 0.0  # a date gone by: ask again now
    for unreadable in ("", "soon", "-3", "Wed, 99 Foo 2026 00:00:00 GMT", "Wed, 21 Oct 2026 07:28:00"):
        assert parse_retry_after(unreadable, now=NOW) is None, unreadable


def _state(attempt: int, outcome: Any, failed: bool = False) -> RetryCallState:
    state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
    state.attempt_number = attempt
    if failed:
        state.set_exception((type(outcome), outcome, None))
    else:
        state.set_result(outcome)
    return state


class _Told:
    def __init__(self, retry_after: float | None) -> None:
        self.retry_after = retry_after


def test_backoff_believes_the_server_up_to_the_cap_else_doubles_with_jitter() -> None:
    wait = backoff(1.0, 30.0)
    assert wait(_state(1, _Told(4.0))) == 4.0
    assert wait(_state(1, ServeError(503, "not_ready", "x", retry_after=90.0), failed=True)) == 30.0
    for attempt in (1, 2, 3):
        waits = {wait(_state(attempt, _Told(None))) for _ in range(50)}
        assert all(2 ** (attempt - 1) <= w <= 2 ** (attempt - 1) + 1.0 for w in waits)
        assert len(waits) > 1  # jittered: clients refused together do not return together
    assert wait(_state(9, _Told(None))) == 30.0
    assert backoff(0.0, 30.0)(_state(3, _Told(None))) == 0.0


def _client(monkeypatch: pytest.MonkeyPatch, answers: list[httpx.Response], retries: int) -> tuple[DelinkClient, list[int]]:
    seen: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(len(seen))
        return answers[min(len(seen) - 1, len(answers) - 1)]

    client = DelinkClient("http://delink.invalid", api_key="", retries=retries)
    client.close()
    monkeypatch.setattr(client, "_http", httpx.Client(base_url="http://delink.invalid", transport=httpx.MockTransport(handler)))
    return client, seen


def test_the_client_asks_a_busy_server_again_after_an_http_date_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    busy = httpx.Response(503, headers={"Retry-After": _http_date(NOW)}, json={"error": {"code": "not_ready", "message": "warming up"}})
    client, seen = _client(monkeypatch, [busy, httpx.Response(200, json={"k": 2})], retries=3)
    assert client.settings() == {"k": 2}
    assert len(seen) == 2


def test_the_client_gives_up_after_its_retries_and_raises_other_refusals_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    busy = httpx.Response(429, headers={"Retry-After": "0"}, json={"error": {"code": "busy", "message": "full"}})
    client, seen = _client(monkeypatch, [busy], retries=2)
    with pytest.raises(ServeError) as refused:
        client.settings()
    assert (refused.value.status, refused.value.retry_after, len(seen)) == (429, 0.0, 3)
    bad = httpx.Response(400, json={"error": {"code": "bad_request", "message": "no"}})
    client, seen = _client(monkeypatch, [bad], retries=2)
    with pytest.raises(ServeError, match=r"no \[bad_request, HTTP 400\]"):
        client.settings()
    assert len(seen) == 1
