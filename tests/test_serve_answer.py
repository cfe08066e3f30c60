"""The answer path of `delink serve` (``serve.answer.Answerer``) on its own: no application, no process, no index."""
from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import orjson
import pytest

pytest.importorskip("fastapi")

from starlette.requests import Request

from spacy_delink.errors import InputError
from spacy_delink.serve.answer import Answerer
from spacy_delink.serve.gate import ADMITTED, Admitted
from spacy_delink.serve.limits import Admission
from spacy_delink.serve.metrics import ServeMetrics
from spacy_delink.serve.schema import Job
from spacy_delink.serve.settings import ServeSettings


def _answer(body: bytes, submit: Callable[[Job], "Future[bytes]"], **settings: Any) -> tuple[Any, ServeMetrics, Admission]:
    """What ``Answerer.answer`` gives for an admitted POST with ``body``, and the metrics and places after it."""
    metrics = ServeMetrics()
    service = SimpleNamespace(settings=ServeSettings(index=Path("unused-index"), **settings), metrics=metrics)
    admission = Admission(capacity=1, workers=1)
    ticket = admission.enter()
    sent = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return sent.pop(0) if sent else await asyncio.Future()  # the client stays until the answer

    scope = {
        "type": "http", "method": "POST", "path": "/v1/assess", "headers": [(b"content-length", str(len(body)).encode())],
        ADMITTED: Admitted(ticket, "req-1", time.monotonic()),
    }
    response = asyncio.run(Answerer(service).answer(Request(scope, receive), "assess", submit))  # type: ignore[arg-type]
    ticket.close()
    return response, metrics, admission


def _done(value: bytes) -> "Future[bytes]":
    future: Future[bytes] = Future()
    future.set_result(value)
    return future


def _requests(metrics: ServeMetrics, status: int) -> float | None:
    return metrics.registry.get_sample_value("delink_requests_total", {"endpoint": "assess", "status": str(status)})


def test_a_job_answer_is_sent_as_it_is_with_the_request_id_and_counted() -> None:
    jobs: list[Job] = []

    def submit(job: Job) -> "Future[bytes]":
        jobs.append(job)
        return _done(b'{"records":[]}')

    response, metrics, admission = _answer(orjson.dumps({"texts": ["one", "two"], "k": 3}), submit)
    assert (response.status_code, response.body) == (200, b'{"records":[]}')
    assert response.headers["X-Request-ID"] == "req-1"
    assert [document[1] for document in jobs[0].documents] == ["one", "two"] and jobs[0].k == 3
    assert _requests(metrics, 200) == 1 and admission.inside == 0


@pytest.mark.parametrize(("body", "status", "code"), [
    (b"not json", 400, "invalid_json"),
    (b'{"texts": ["a"], "text": "b"}', 422, "invalid_request"),
    (b'{"texts": ["a", "b", "c"]}', 413, "too_many_texts"),
])
def test_a_refused_body_never_becomes_a_job(body: bytes, status: int, code: str) -> None:
    def submit(job: Job) -> "Future[bytes]":
        raise AssertionError("no job for a refused body")

    response, metrics, admission = _answer(body, submit, max_texts=2)
    assert response.status_code == status and orjson.loads(response.body)["error"]["code"] == code
    assert response.headers["X-Request-ID"] == "req-1" and _requests(metrics, status) == 1 and admission.inside == 0


def test_a_job_that_fails_is_answered_422_for_bad_settings_and_500_otherwise() -> None:
    def refused(job: Job) -> "Future[bytes]":
        raise InputError("arity 9 is not an arity")

    def crashed(job: Job) -> "Future[bytes]":
        future: Future[bytes] = Future()
        future.set_exception(RuntimeError("a text the log must not show"))
        return future

    response, _, _ = _answer(b'{"text": "a"}', refused)
    assert response.status_code == 422 and "arity 9" in orjson.loads(response.body)["error"]["message"]
    response, _, _ = _answer(b'{"text": "a"}', crashed)
    error = orjson.loads(response.body)["error"]
    assert response.status_code == 500 and error["code"] == "internal" and "req-1" in error["message"]
    assert "must not show" not in error["message"]
