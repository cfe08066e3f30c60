"""Refusals and bounds: every error as one JSON shape, admission of requests, bodies read within a limit.

A refused request gets ``{"error": {"code", "message"}}`` with the status that says why
(400 unreadable, 401 no key, 413 too large, 422 not acceptable, 429 too many at once,
503 not ready or too late); 429 and 503 carry ``Retry-After``. Admission is decided
before the body is read, so an overloaded server spends almost nothing on a request it
turns away, and holds at most ``capacity`` bodies in memory whatever the load.
"""
from __future__ import annotations

import math
import threading
import time
from concurrent.futures import Future
from typing import Any, AsyncIterator, Optional

from ..extras import require_extra

require_extra("serve", "delink serve")  # one line naming the extra, before FastAPI's own ImportError

import orjson  # noqa: E402
from starlette.responses import Response

#: Longest wait a refusal suggests; a client retrying sooner than the estimate just gets refused again.
MAX_RETRY_AFTER_S = 60
#: Weight of the latest job in the running mean of job seconds (behind ``Retry-After``).
JOB_SECONDS_WEIGHT = 0.2


class JSONResponse(Response):
    """JSON through orjson: records with many phrases serialize several times faster than with ``json``."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class ApiError(Exception):
    """A refusal: its status, a stable ``code`` for programs and a ``message`` for people."""

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[int] = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after

    def response(self) -> JSONResponse:
        headers = {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}
        if self.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="delink"'
        return JSONResponse({"error": {"code": self.code, "message": self.message}}, self.status, headers)


class Admission:
    """Requests in the server (worked on or waiting), at most ``capacity``; the rest are turned away.

    A request holds its place from admission until its job has finished, also when its
    client left or its deadline passed while the job ran: the places count the work the
    server really has, so the queue cannot grow behind the clients' backs.
    """

    def __init__(self, capacity: int, workers: int) -> None:
        self.capacity = capacity
        self.workers = workers
        self.inside = 0
        self._job_seconds = 0.0
        self._lock = threading.Lock()

    def enter(self) -> "Ticket":
        with self._lock:
            if self.inside >= self.capacity:
                raise ApiError(
                    429, "overloaded",
                    f"the server is working on {self.inside} requests, its limit; retry after the time in Retry-After",
                    self.retry_after(),
                )
            self.inside += 1
        return Ticket(self)

    def leave(self) -> None:
        with self._lock:
            self.inside -= 1

    def job_done(self, seconds: float) -> None:
        with self._lock:
            self._job_seconds += JOB_SECONDS_WEIGHT * (seconds - self._job_seconds)

    def retry_after(self) -> int:
        """Seconds until a place is likely free: the mean job time, times the rounds of work ahead."""
        rounds = max(1.0, self.inside / max(self.workers, 1))
        return min(MAX_RETRY_AFTER_S, max(1, math.ceil(self._job_seconds * rounds)))


class Ticket:
    """One admitted request's place: given back when its job is done, or at once if it never had one."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission
        self._job: Optional[Future[Any]] = None
        self._started = time.perf_counter()

    def hand_over(self, job: Future[Any]) -> None:
        """The place is now the job's: freed when it finishes or is cancelled before it started."""
        self._job = job
        job.add_done_callback(self._finished)

    def _finished(self, job: Future[Any]) -> None:
        if not job.cancelled():
            self.admission.job_done(time.perf_counter() - self._started)
        self.admission.leave()

    def close(self) -> None:
        """End of the request: free the place unless a job holds it."""
        if self._job is None:
            self.admission.leave()


async def read_body(chunks: AsyncIterator[bytes], declared: Optional[str], limit: int) -> bytes:
    """The request body, refused (413) as soon as it is known to exceed ``limit`` bytes."""
    too_large = ApiError(413, "body_too_large", f"the request body is over the {limit:,}-byte limit; send fewer or shorter texts per request")
    if declared is not None:
        if not declared.isdigit():
            raise ApiError(400, "bad_content_length", "the Content-Length header is not a number")
        if int(declared) > limit:
            raise too_large
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > limit:
            raise too_large
    return bytes(body)
