"""The HTTP application of `delink serve`: endpoints, refusals, the page and the API docs.

FastAPI (on Starlette) gives the routes, the OpenAPI schema and the docs page; the
request bodies are read by hand, within the size limit and after admission, instead of
by FastAPI's body parameters, which would read any body whole before a check could run.
A POST to an endpoint that does work is admitted or refused by ``Gate`` before routing:
on the event loop alone, so a refusal is written at once however busy the workers are.
Every answer that is not a success is ``{"error": {"code", "message"}}`` (``limits``;
``middleware`` for the layers around the routes, ``protocol`` for what uvicorn refuses itself);
an unexpected failure is logged with its stack but without its message (which could
quote a text) and answered 500 with a request id to find it by.

Log lines hold request ids, endpoints, statuses, document counts, characters and
seconds: never a text.
"""
from __future__ import annotations

import asyncio
import logging
import re
import time
import traceback
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Optional

from ..extras import require_extra

require_extra("serve", "delink serve")  # one line naming the extra, before FastAPI's own ImportError

from fastapi import Depends, FastAPI, Request  # noqa: E402
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import ClientDisconnect
from starlette.responses import HTMLResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send
from swagger_ui_bundle import swagger_ui_path

from .. import __version__
from ..errors import DelinkError, InputError
from ..pages.markup import legend_html, report_asset
from .limits import ApiError, Ticket, read_body
from .metrics import CONTENT_TYPE
from .middleware import HeadAsGet, NoSniffing, OneErrorShape
from .schema import ErrorResponse, Job, RecordsResponse, TextsRequest, parse_job
from .service import Service
from .settings import ServeSettings

logger = logging.getLogger("spacy_delink.serve")

STATIC = Path(__file__).resolve().parent / "static"
#: The page loads only what this server serves: no inline script, no other origin.
PAGE_POLICY = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
#: A client's X-Request-ID is kept when it looks like an id, so log lines can never be forged through it.
REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in (
        (400, "The body is not JSON."),
        (401, "No or a wrong API key (Authorization: Bearer <key>)."),
        (408, "The body did not arrive within the server's body timeout."),
        (413, "Body, number of texts or a text over the server's limits."),
        (415, "The body is not declared JSON (Content-Type: application/json)."),
        (422, "Valid JSON that is not an acceptable request (fields, ids, k, arity)."),
        (429, "The server is at its limit of requests; retry after Retry-After seconds."),
        (503, "Not ready, or the deadline passed; retry after Retry-After seconds."),
    )
}


#: The endpoints that do work, by path: admitted or refused by ``Gate``.
WORK_PATHS = {"/v1/assess": "assess", "/v1/protect": "protect"}
#: Where ``Gate`` leaves an admitted request's ``Admitted`` in the ASGI scope, for its endpoint.
ADMITTED = "delink.admitted"


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

    def __init__(self, app: ASGIApp, service: Service, done: Callable[[str, str, float, Response, Optional[Job]], None]) -> None:
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
            _check_key(settings, headers.get("authorization"))
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


def _check_key(settings: ServeSettings, authorization: Optional[str]) -> None:
    if settings.api_key is not None and not settings.api_key.accepts(authorization):
        raise ApiError(401, "unauthorized", "missing or wrong API key; send the header Authorization: Bearer <key>")


def _check_json(content_type: Optional[str]) -> None:
    """A work request's body must be declared JSON: a page on another origin can send a form or plain text
    without asking (no CORS preflight), never JSON."""
    if (content_type or "").partition(";")[0].strip().lower() != "application/json":
        raise ApiError(415, "unsupported_media_type", "send the body as JSON, with the header Content-Type: application/json")


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


def create_app(service: Service) -> FastAPI:
    """The application over a started ``service`` (closed when the application shuts down)."""
    settings = service.settings
    metrics = service.metrics

    async def authorized(request: Request) -> None:
        """A coroutine, not a plain function, which FastAPI would run on a thread."""
        _check_key(settings, request.headers.get("authorization"))

    def done(endpoint: str, request_id: str, started: float, response: Response, job: Optional[Job]) -> None:
        """Count and log an answered request (ids and sizes, never a text)."""
        seconds = time.monotonic() - started
        metrics.answered(endpoint, response.status_code, seconds)
        response.headers["X-Request-ID"] = request_id
        documents = len(job.documents) if job is not None else 0
        characters = job.characters if job is not None else 0
        logger.info("%s %s %d: %d documents, %d characters, %.3f s", request_id, endpoint, response.status_code, documents, characters, seconds)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await asyncio.to_thread(service.close)

    app = FastAPI(
        title="spacy-delink",
        version=__version__,
        description="Is this text linkable to its source, and a protected version of it (docs/serve.md).",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
        redirect_slashes=False,  # `/v1/assess/` is no endpoint (404), not a 307 to one answered before any check
    )
    # add_middleware wraps: the last added runs first. From the outside in: nosniff, one error shape, HEAD as GET,
    # the Host check (a DNS-rebinding page's name is refused before anything else), CORS, the gate.
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

    @app.exception_handler(ApiError)
    async def refused(request: Request, err: ApiError) -> Response:
        return err.response()

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, err: HTTPException) -> Response:
        codes = {404: "not_found", 405: "method_not_allowed"}
        response = ApiError(err.status_code, codes.get(err.status_code, f"http_{err.status_code}"), str(err.detail)).response()
        response.headers.update(err.headers or {})  # a 405's Allow
        return response

    @app.exception_handler(Exception)
    async def failed(request: Request, err: Exception) -> Response:
        """A failure outside an endpoint (in a layer around them): Starlette would answer it in plain text."""
        logger.error("%s %s failed: %s (message withheld)\n%s", request.method, request.url.path, type(err).__name__, "".join(traceback.format_tb(err.__traceback__)))
        return ApiError(500, "internal", f"the server failed on this request ({type(err).__name__})").response()

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, err: RequestValidationError) -> Response:
        return ApiError(422, "invalid_request", "invalid request parameters").response()

    async def answer(request: Request, endpoint: str, submit: Callable[[Job], Any]) -> Response:
        """One admitted POST (``Gate``) from its body to its answer: body, job, waiting (deadline, disconnect)."""
        admitted: Admitted = request.scope[ADMITTED]
        started, request_id = admitted.started, admitted.request_id
        deadline = started + settings.deadline
        job: Job | None = None
        try:
            body = await _body(request, admitted.ticket.body_deadline, deadline, settings.max_body_bytes)
            job = parse_job(body, settings)
            work = submit(job)
            admitted.ticket.hand_over(work)
            answered = await _wait(request, asyncio.wrap_future(work), deadline)
            response: Response = Response(answered, media_type="application/json")
        except ApiError as err:
            response = err.response()
        except (ClientGone, ClientDisconnect) as gone:
            stage = "body" if isinstance(gone, ClientDisconnect) else str(gone)
            metrics.abandoned.labels(stage).inc()
            logger.info("%s %s abandoned by the client (%s) after %.3f s", request_id, endpoint, stage, time.monotonic() - started)
            return Response(status_code=499)  # nobody reads it; the status only marks it so
        except InputError as err:  # settings a job refused (the library's own checks)
            response = ApiError(422, "invalid_request", str(err)).response()
        except Exception as err:  # noqa: BLE001 (logged, answered 500: the server goes on)
            stack = "".join(traceback.format_tb(err.__traceback__))
            logger.error("%s %s failed: %s (message withheld: it may quote a text)\n%s", request_id, endpoint, type(err).__name__, stack)
            code = "job_failed" if isinstance(err, DelinkError) else "internal"
            response = ApiError(500, code, f"the server failed on this request ({type(err).__name__}); report request id {request_id}").response()
        done(endpoint, request_id, started, response, job)
        return response

    async def _wait(request: Request, work: "asyncio.Future[bytes]", deadline: float) -> bytes:
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

    body_docs: dict[str, Any] = {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/TextsRequest"}}},
        }
    }
    post: dict[str, Any] = {"response_model": None, "responses": {200: {"model": RecordsResponse, "description": "One record per text, in order."}, **ERRORS}, "openapi_extra": body_docs}

    @app.post("/v1/assess", summary="The linkage attack on each text", **post)
    async def assess(request: Request) -> Response:
        """Every phrase and combination of phrases that narrows a search of the original collection to fewer than k documents: the records of `delink assess`."""
        return await answer(request, "assess", lambda job: service.assess(job.documents, job.k, job.arity))

    @app.post("/v1/protect", summary="A protected version of each text", **post)
    async def protect(request: Request) -> Response:
        """Each text rewritten until no phrase or combination links at (k, arity), checked: the records of `delink protect`, each with its protected_under."""
        return await answer(request, "protect", lambda job: service.protect(job.documents, job.k, job.arity))

    @app.get("/v1/settings", summary="The protection this server enforces and its limits")
    async def public_settings() -> dict[str, Any]:
        return settings.public()

    @app.get("/healthz", summary="The process answers")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", summary="Index open and kernels compiled", responses={503: ERRORS[503]})
    async def readyz() -> dict[str, str]:
        if not service.ready:
            raise ApiError(503, "not_ready", "the server is starting or stopping", 1)
        return {"status": "ready"}

    @app.get("/metrics", dependencies=[Depends(authorized)], summary="Prometheus text format", response_class=Response)
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    page = (STATIC / "index.html").read_text(encoding="utf-8").replace("<!-- legend -->", legend_html(None, with_edits=True))

    @app.get("/", include_in_schema=False)
    async def index_page() -> Response:
        return HTMLResponse(page, headers={"Content-Security-Policy": PAGE_POLICY})

    @app.get("/report.css", include_in_schema=False)
    async def report_css() -> Response:
        return Response(report_asset("report.css"), media_type="text/css")

    @app.get("/report.js", include_in_schema=False)
    async def report_js() -> Response:
        return Response(report_asset("report.js"), media_type="text/javascript")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.mount("/docs/assets", StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> Response:
        return get_swagger_ui_html(
            openapi_url="/openapi.json", title="spacy-delink API", swagger_js_url="/docs/assets/swagger-ui-bundle.js",
            swagger_css_url="/docs/assets/swagger-ui.css", swagger_favicon_url="/docs/assets/favicon-32x32.png",
        )

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            request_schema = TextsRequest.model_json_schema(ref_template="#/components/schemas/{model}")
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update(request_schema.pop("$defs", {}))
            components["TextsRequest"] = request_schema
            if settings.api_key is not None:
                schema["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
                schema["security"] = [{"bearer": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
