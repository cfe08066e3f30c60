"""The answer path of the work endpoints: an admitted request's body, its job, the wait for it, its answer.

The body is read by hand, within the size limit and by the body deadline, instead of by
FastAPI's body parameters, which would read any body whole before a check could run. A
client that leaves or a deadline that passes cancels a job that has not started. Every
answer is counted and logged with ids, endpoints, statuses, document counts, characters
and seconds: never a text; an unexpected failure is logged with its stack but without
its message (which could quote a text) and answered 500 with a request id to find it by.
"""
from __future__ import annotations

import asyncio
import logging
import time
import traceback
from typing import Any, Callable, Optional

from ..extras import require_extra

require_extra("serve", "delink serve")  # one line naming the extra, before FastAPI's own ImportError

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from ..errors import DelinkError, InputError
from .gate import ADMITTED, Admitted
from .limits import ApiError, read_body
from .schema import Job, parse_job
from .service import Service

logger = logging.getLogger("spacy_delink.serve")


class ClientGone(Exception):
    """The client closed the connection before its answer."""


async def _disconnected(request: Request) -> None:
    """Returns once the client has closed the connection (the body was read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _body(request: Request, body_deadline: float, deadline: float, limit: int) -> bytes:
    """The request's body, within its limit, by its body deadline (408, the connection closed) and the request's."""
    try:
        return await asyncio.wait_for(
            read_body(request.stream(), request.headers.get("content-length"), limit), max(min(body_deadline, deadline) - time.monotonic(), 0.0)
        )
    except asyncio.TimeoutError:
        if body_deadline < deadline:
            raise ApiError(
                408, "body_timeout", "the request body did not arrive within the server's --body-timeout; send it at once, or fewer texts per request",
                close=True,
            ) from None
        raise _too_late() from None


def _too_late() -> ApiError:
    return ApiError(503, "deadline_exceeded", "the request took longer than the server's deadline; retry later or send fewer texts", 1)


class Answerer:
    """Answers the admitted requests of one ``service`` (``Gate`` admits them) and records every answer (``done``)."""

    def __init__(self, service: Service) -> None:
        self.settings = service.settings
        self.metrics = service.metrics

    def done(self, endpoint: str, request_id: str, started: float, response: Response, job: Optional[Job]) -> None:
        """Count and log an answered request (ids and sizes, never a text)."""
        seconds = time.monotonic() - started
        self.metrics.answered(endpoint, response.status_code, seconds)
        response.headers["X-Request-ID"] = request_id
        documents = len(job.documents) if job is not None else 0
        characters = job.characters if job is not None else 0
        logger.info("%s %s %d: %d documents, %d characters, %.3f s", request_id, endpoint, response.status_code, documents, characters, seconds)

    async def answer(self, request: Request, endpoint: str, submit: Callable[[Job], Any]) -> Response:
        """One admitted POST (``Gate``) from its body to its answer: body, job, waiting (deadline, disconnect)."""
        settings = self.settings
        admitted: Admitted = request.scope[ADMITTED]
        started, request_id = admitted.started, admitted.request_id
        deadline = started + settings.deadline
        job: Job | None = None
        try:
            body = await _body(request, admitted.ticket.body_deadline, deadline, settings.max_body_bytes)
            job = parse_job(body, settings)
            work = submit(job)
            admitted.ticket.hand_over(work)
            answered = await self._wait(request, asyncio.wrap_future(work), deadline)
            response: Response = Response(answered, media_type="application/json")
        except ApiError as err:
            response = err.response()
        except (ClientGone, ClientDisconnect) as gone:
            stage = "body" if isinstance(gone, ClientDisconnect) else str(gone)
            self.metrics.abandoned.labels(stage).inc()
            logger.info("%s %s abandoned by the client (%s) after %.3f s", request_id, endpoint, stage, time.monotonic() - started)
            return Response(status_code=499)  # nobody reads it; the status only marks it so
        except InputError as err:  # settings a job refused (the library's own checks)
            response = ApiError(422, "invalid_request", str(err)).response()
        except Exception as err:
            stack = "".join(traceback.format_tb(err.__traceback__))
            logger.error("%s %s failed: %s (message withheld: it may quote a text)\n%s", request_id, endpoint, type(err).__name__, stack)
            code = "job_failed" if isinstance(err, DelinkError) else "internal"
            response = ApiError(500, code, f"the server failed on this request ({type(err).__name__}); report request id {request_id}").response()
        self.done(endpoint, request_id, started, response, job)
        return response

    async def _wait(self, request: Request, work: "asyncio.Future[bytes]", deadline: float) -> bytes:
        """The job's answer; a client that leaves or a deadline that passes cancels it if it has not started."""
        gone = asyncio.ensure_future(_disconnected(request))
        either: set[asyncio.Future[Any]] = {work, gone}
        try:
            finished, _ = await asyncio.wait(either, timeout=max(deadline - time.monotonic(), 0.0), return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if work in finished:
            return work.result()
        work.cancel()  # a job still waiting never runs; one running finishes and is dropped
        if gone in finished:
            raise ClientGone("waiting")
        raise _too_late()
