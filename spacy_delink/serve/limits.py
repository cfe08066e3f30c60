"""Refusals and bounds: every error as one JSON shape, admission of requests, bodies read within a limit.

A refused request gets ``{"error": {"code", "message"}}`` with the status that says why
(400 unreadable, 401 no key, 408 body too slow, 413 too large, 415 not JSON, 422 not
acceptable, 429 too many at once, 503 not ready or too late); 429 and 503 carry
``Retry-After``, an estimate of when a place frees (never a made-up 1 when the places are
held by bodies still arriving: their body deadline bounds it). Admission is decided
before the body is read, so an overloaded server spends almost nothing on a request it
turns away, and holds at most ``capacity`` bodies in memory whatever the load.
"""
from __future__ import annotations

import math
import threading
import time
from collections import Counter
from concurrent.futures import Future
from typing import Any, AsyncIterator, Optional

from ..extras import require_extra

require_extra("serve", "delink serve")  # one line naming the extra, before FastAPI's own ImportError

import orjson
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

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[int] = None, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after
        self.close = close  # end the connection after the answer: the rest of its body is not worth waiting for

    def response(self) -> JSONResponse:
        headers = {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}
        if self.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="delink"'
        if self.close:
            headers["Connection"] = "close"
        return JSONResponse({"error": {"code": self.code, "message": self.message}}, self.status, headers)


class Admission:
    """Requests in the server (their bodies arriving, worked on or waiting), at most ``capacity``, at most
    ``per_client`` from one client address; the rest are turned away.

    A request holds its place from admission until its job has finished, also when its
    client left or its deadline passed while the job ran: the places count the work the
    server really has, so the queue cannot grow behind the clients' backs. A body must
    arrive by its request's ``body_deadline``, so a client that trickles its body holds a
    place that long at most; ``per_client`` keeps one address from holding them all.
    """

    def __init__(self, capacity: int, workers: int, per_client: Optional[int] = None) -> None:
        self.capacity = capacity
        self.workers = workers
        self.per_client = capacity if per_client is None else per_client
        self._held: set[Ticket] = set()
        self._by_client: Counter[str] = Counter()
        self._job_seconds = 0.0
        self._jobs_done = 0
        self._lock = threading.Lock()

    @property
    def inside(self) -> int:
        return len(self._held)

    def enter(self, client: str = "", body_deadline: float = math.inf) -> "Ticket":
        """A place for a request from ``client`` (its address) whose body must have arrived by ``body_deadline``
        (``time.monotonic()``), or the 429 that says when one is likely to be free."""
        with self._lock:
            if len(self._held) >= self.capacity:
                raise ApiError(
                    429, "overloaded",
                    f"the server holds {len(self._held)} requests, its limit; retry after the seconds in Retry-After",
                    self._retry_after(self._held),
                )
            if self._by_client[client] >= self.per_client:
                own = {ticket for ticket in self._held if ticket.client == client}
                raise ApiError(
                    429, "too_many_from_client",
                    f"this client already has {len(own)} requests in the server, the most one client may have; "
                    "wait for their answers, or retry after the seconds in Retry-After",
                    self._retry_after(own),
                )
            ticket = Ticket(self, client, body_deadline)
            self._held.add(ticket)
            self._by_client[client] += 1
        return ticket

    def leave(self, ticket: "Ticket") -> None:
        with self._lock:
            self._held.discard(ticket)
            self._by_client[ticket.client] -= 1
            if not self._by_client[ticket.client]:
                del self._by_client[ticket.client]

    def job_done(self, seconds: float) -> None:
        with self._lock:
            self._jobs_done += 1
            self._job_seconds += JOB_SECONDS_WEIGHT * (seconds - self._job_seconds) if self._jobs_done > 1 else seconds

    def retry_after(self) -> int:
        with self._lock:
            return self._retry_after(self._held)

    def _retry_after(self, held: "set[Ticket]") -> int:
        """Seconds until one of the places ``held`` is likely free: a body still arriving frees its place by its
        body deadline at the latest; jobs, after the mean job time times the rounds of work ahead of them.
        Without either to go by (no job has finished yet), 1."""
        now = time.monotonic()
        estimates = [min(ticket.body_deadline for ticket in held if ticket.reading) - now] if any(t.reading for t in held) else []
        working = sum(not ticket.reading for ticket in held)
        if working and self._jobs_done:
            estimates.append(self._job_seconds * max(1.0, working / max(self.workers, 1)))
        seconds = min(estimates) if estimates else 1.0
        return max(1, math.ceil(min(seconds, MAX_RETRY_AFTER_S)))


class Ticket:
    """One admitted request's place: given back when its job is done, or at once if it never had one."""

    def __init__(self, admission: Admission, client: str = "", body_deadline: float = math.inf) -> None:
        self.admission = admission
        self.client = client
        self.body_deadline = body_deadline
        self._job: Optional[Future[Any]] = None
        self._started = time.perf_counter()

    @property
    def reading(self) -> bool:
        """Whether the request's body may still be arriving (no job yet)."""
        return self._job is None

    def hand_over(self, job: Future[Any]) -> None:
        """The place is now the job's: freed when it finishes or is cancelled before it started."""
        self._job = job
        job.add_done_callback(self._finished)

    def _finished(self, job: Future[Any]) -> None:
        if not job.cancelled():
            self.admission.job_done(time.perf_counter() - self._started)
        self.admission.leave(self)

    def close(self) -> None:
        """End of the request: free the place unless a job holds it."""
        if self._job is None:
            self.admission.leave(self)


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
