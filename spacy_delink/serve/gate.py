"""Admission before routing: each POST to a work endpoint is let in or refused before its body is read.

The gate checks the API key, that the body is declared JSON and that the server is ready,
then asks ``limits.Admission`` for a place; the ``Admitted`` request goes on to its
endpoint (``answer``), a refused one is answered at once.
"""
from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Optional

from ..extras import require_extra

require_extra("serve", "delink serve")  # one line naming the extra, before FastAPI's own ImportError

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .limits import ApiError, Ticket
from .schema import Job
from .service import Service
from .settings import ServeSettings

#: A client's X-Request-ID is kept when it looks like an id, so log lines can never be forged through it.
REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
#: The endpoints that do work, by path: admitted or refused by ``Gate``.
WORK_PATHS = {"/v1/assess": "assess", "/v1/protect": "protect"}
#: Where ``Gate`` leaves an admitted request's ``Admitted`` in the ASGI scope, for its endpoint.
ADMITTED = "delink.admitted"
#: Counts and logs an answered request: endpoint, request id, when it arrived, the answer, its job if one was read.
Done = Callable[[str, str, float, Response, Optional[Job]], None]


@dataclass
class Admitted:
    """A request let in: its place, its id and when it arrived."""

    ticket: Ticket
    request_id: str
    started: float


class Gate:
    """ASGI middleware: each POST to a work endpoint is checked (key, readiness) and admitted or refused here.

    This runs before routing and before the body is read, on the event loop with no
    thread hop (FastAPI runs a plain ``def`` dependency on a thread, which under load
    waits for the GIL behind the workers): a refusal costs the loop some microseconds, so
    at several times the limit every extra request is answered at once.
    """

    def __init__(self, app: ASGIApp, service: Service, done: Done) -> None:
        self.app = app
        self.service = service
        self.done = done  # counts and logs an answered request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = WORK_PATHS.get(_route_path(scope)) if scope["type"] == "http" and scope["method"] == "POST" else None
        if endpoint is None:
            return await self.app(scope, receive, send)
        started = time.monotonic()
        headers = Headers(scope=scope)
        given = headers.get("x-request-id", "")
        request_id = given if REQUEST_ID.fullmatch(given) else uuid.uuid4().hex[:16]
        settings = self.service.settings
        try:
            check_key(settings, headers.get("authorization"))
            _check_json(headers.get("content-type"))
            if not self.service.ready:
                raise ApiError(503, "not_ready", "the server is starting or stopping; retry shortly", 1)
            client = (scope.get("client") or ("",))[0]
            ticket = self.service.admission.enter(client, started + min(settings.body_timeout, settings.deadline))
        except ApiError as err:
            response = err.response()
            self.done(endpoint, request_id, started, response, None)
            return await response(scope, receive, send)
        scope[ADMITTED] = Admitted(ticket, request_id, started)
        try:
            await self.app(scope, receive, send)
        finally:
            ticket.close()  # the endpoint handed the place to its job, or never reached it (a place is never kept)


def _route_path(scope: Scope) -> str:
    """The path the routes match: without the ``root_path`` the application may be mounted under."""
    path, root = scope["path"], scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


def check_key(settings: ServeSettings, authorization: Optional[str]) -> None:
    """Refuse a request without the server's API key (when it has one)."""
    if settings.api_key is not None and not settings.api_key.accepts(authorization):
        raise ApiError(401, "unauthorized", "missing or wrong API key; send the header Authorization: Bearer <key>")


def _check_json(content_type: Optional[str]) -> None:
    """A work request's body must be declared JSON: a page on another origin can send a form or plain text
    without asking (no CORS preflight), never JSON."""
    if (content_type or "").partition(";")[0].strip().lower() != "application/json":
        raise ApiError(415, "unsupported_media_type", "send the body as JSON, with the header Content-Type: application/json")
