"""The HTTP application of `delink serve`: endpoints, refusals, the page and the API docs.

FastAPI (on Starlette) gives the routes, the OpenAPI schema and the docs page (``openapi``).
A POST to an endpoint that does work is admitted or refused by ``gate.Gate`` before routing:
on the event loop alone, so a refusal is written at once however busy the workers are; an
admitted one is answered by ``answer.Answerer``, which reads its body by hand, within the
size limit. Every answer that is not a success is ``{"error": {"code", "message"}}``
(``limits``; ``middleware`` for the layers around the routes and the errors raised inside
them, ``protocol`` for what uvicorn refuses itself); an unexpected failure is logged with
its stack but without its message (which could quote a text) and answered 500 with a
request id to find it by.

Log lines hold request ids, endpoints, statuses, document counts, characters and
seconds: never a text.
"""
from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

from ..extras import require_extra

require_extra("serve", "delink serve")  # one line naming the extra, before FastAPI's own ImportError

from fastapi import Depends, FastAPI, Request
from starlette.responses import HTMLResponse, Response
from starlette.staticfiles import StaticFiles

from .. import __version__
from ..pages.markup import legend_html, report_asset
from .answer import Answerer
from .gate import check_key
from .limits import ApiError
from .metrics import CONTENT_TYPE
from .middleware import add_error_handlers, add_layers
from .openapi import ERRORS, add_docs, work_route
from .service import Service

STATIC = Path(__file__).resolve().parent / "static"
#: The page loads only what this server serves: no inline script, no other origin.
PAGE_POLICY = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"


def create_app(service: Service) -> FastAPI:
    """The application over a started ``service`` (closed when the application shuts down)."""
    settings = service.settings
    answerer = Answerer(service)

    async def authorized(request: Request) -> None:
        """A coroutine, not a plain function, which FastAPI would run on a thread."""
        check_key(settings, request.headers.get("authorization"))

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
    add_layers(app, service, answerer.done)
    add_error_handlers(app)
    post = work_route()

    @app.post("/v1/assess", summary="The linkage attack on each text", **post)
    async def assess(request: Request) -> Response:
        """Every phrase and combination of phrases that narrows a search of the original collection to fewer than k documents: the records of `delink assess`."""
        return await answerer.answer(request, "assess", lambda job: service.assess(job.documents, job.k, job.arity))

    @app.post("/v1/protect", summary="A protected version of each text", **post)
    async def protect(request: Request) -> Response:
        """Each text rewritten until no phrase or combination links at (k, arity), checked: the records of `delink protect`, each with its protected_under."""
        return await answerer.answer(request, "protect", lambda job: service.protect(job.documents, job.k, job.arity))

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
        return Response(service.metrics.render(), media_type=CONTENT_TYPE)

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
    add_docs(app, settings)
    return app
