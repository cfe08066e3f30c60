"""The ASGI layers around the routes that make every answer keep the server's promises.

``NoSniffing``: browsers take every answer as the type it declares. ``HeadAsGet``: HEAD is
answered as GET without its body (RFC 9110 §9.3.2), which FastAPI's routes would refuse
with an empty 405. ``OneErrorShape``: a refusal written by a layer the application does
not own (Starlette's TrustedHostMiddleware and CORSMiddleware answer in plain text) gets
the one shape of every error, ``{"error": {"code", "message"}}``. All are pure ASGI: they
leave a client's disconnect visible to the endpoints. ``add_layers`` stacks them, with the
Host check, CORS and the ``gate``, in the order that keeps those promises;
``add_error_handlers`` gives the errors raised inside the application the same shape.
"""
from __future__ import annotations

import logging
import traceback

from ..extras import require_extra

require_extra("serve", "delink serve")  # one line naming the extra, before FastAPI's own ImportError

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .gate import Done, Gate
from .limits import ApiError
from .service import Service

logger = logging.getLogger("spacy_delink.serve")

#: Codes and messages of the plain-text refusals of Starlette's middleware, by the start of their text.
PLAIN_REFUSALS = {
    b"Invalid host header": (
        "invalid_host",
        "the Host header names no host this server answers for; call it by a loopback name (127.0.0.1, localhost, [::1]) "
        "or by a name given to `delink serve --allowed-host`",
    ),
    b"Disallowed CORS": (
        "cors_refused",
        "the CORS preflight was refused: pages of the --cors-origin origins only may call this server, with GET or POST "
        "and the headers Authorization and Content-Type",
    ),
}
#: Codes of other errors by status, as the application's own refusals name them.
CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 500: "internal", 503: "not_ready"}


class NoSniffing:
    """Every answer carries ``X-Content-Type-Options: nosniff``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)["X-Content-Type-Options"] = "nosniff"
            await send(message)

        await self.app(scope, receive, send_marked if scope["type"] == "http" else send)


class HeadAsGet:
    """The layers inside see a HEAD request as GET. The server keeps the request's own scope, which still says
    HEAD, and so writes the answer's head (status, headers, Content-Length) without its body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "HEAD":
            scope = {**scope, "method": "GET"}
        await self.app(scope, receive, send)


class OneErrorShape:
    """An error answer (status 400 or more) that is not JSON is rewritten as ``{"error": {"code", "message"}}``,
    its other headers (Allow, Vary, the CORS ones) kept."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start: Message | None = None
        plain = bytearray()

        async def send_json(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start" and message["status"] >= 400 and not _is_json(message):
                start = message
                return
            if start is None or message["type"] != "http.response.body":
                return await send(message)
            plain.extend(message.get("body", b""))
            if message.get("more_body", False):
                return
            answer = _as_error(start["status"], bytes(plain))
            kept = [(name, value) for name, value in start.get("headers", []) if name.lower() not in (b"content-type", b"content-length")]
            await send({**start, "headers": kept + [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]})
            await send({"type": "http.response.body", "body": answer, "more_body": False})

        await self.app(scope, receive, send_json)


def _is_json(start: Message) -> bool:
    return any(name.lower() == b"content-type" and value.startswith(b"application/json") for name, value in start.get("headers", []))


def _as_error(status: int, text: bytes) -> bytes:
    """The JSON body of a plain-text refusal: a known one's code and message, else its status's code and its text."""
    for begins, (code, message) in PLAIN_REFUSALS.items():
        if text.startswith(begins):
            return bytes(ApiError(status, code, message).response().body)
    said = text.decode("utf-8", "replace").strip()[:200] or f"HTTP {status}"
    return bytes(ApiError(status, CODES.get(status, f"http_{status}"), said).response().body)


def add_layers(app: FastAPI, service: Service, done: Done) -> None:
    """Wrap the routes in every layer; ``done`` counts and logs the requests the gate refuses.

    add_middleware wraps: the last added runs first. From the outside in: nosniff, one error shape, HEAD as GET,
    the Host check (a DNS-rebinding page's name is refused before anything else), CORS, the gate.
    """
    settings = service.settings
    app.add_middleware(Gate, service=service, done=done)  # inside CORS: a refusal carries its headers too
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware, allow_origins=list(settings.cors_origins), allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(settings.trusted_hosts), www_redirect=False)
    app.add_middleware(HeadAsGet)
    app.add_middleware(OneErrorShape)
    app.add_middleware(NoSniffing)


async def _refused(request: Request, err: ApiError) -> Response:
    return err.response()


async def _http_error(request: Request, err: HTTPException) -> Response:
    codes = {404: "not_found", 405: "method_not_allowed"}
    response = ApiError(err.status_code, codes.get(err.status_code, f"http_{err.status_code}"), str(err.detail)).response()
    response.headers.update(err.headers or {})  # a 405's Allow
    return response


async def _failed(request: Request, err: Exception) -> Response:
    """A failure outside an endpoint (in a layer around them): Starlette would answer it in plain text."""
    logger.error("%s %s failed: %s (message withheld)\n%s", request.method, request.url.path, type(err).__name__, "".join(traceback.format_tb(err.__traceback__)))
    return ApiError(500, "internal", f"the server failed on this request ({type(err).__name__})").response()


async def _invalid(request: Request, err: RequestValidationError) -> Response:
    return ApiError(422, "invalid_request", "invalid request parameters").response()


def add_error_handlers(app: FastAPI) -> None:
    """Every error raised in the application answered in the one shape (``limits.ApiError``)."""
    app.exception_handler(ApiError)(_refused)
    app.exception_handler(HTTPException)(_http_error)
    app.exception_handler(Exception)(_failed)
    app.exception_handler(RequestValidationError)(_invalid)
