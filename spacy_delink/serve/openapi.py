"""The API's OpenAPI document and its docs page (``/openapi.json``, ``/docs``), served from the package alone.

The work endpoints read their bodies by hand (``answer``), so FastAPI cannot see their
request schema: it is declared here (``work_route``) and added to the document's
components. The docs page loads Swagger UI from the installed bundle, never from the network.
"""
from __future__ import annotations

from typing import Any

from ..extras import require_extra

require_extra("serve", "delink serve")  # one line naming the extra, before FastAPI's own ImportError

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

from .schema import ErrorResponse, RecordsResponse, TextsRequest
from .settings import ServeSettings

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
def work_route() -> dict[str, Any]:
    """What the document says of a work endpoint (``app.post``'s arguments): its body, its answers and refusals.

    Fresh for each application: FastAPI puts these dicts into the document it makes.
    """
    return {
        "response_model": None,
        "responses": {200: {"model": RecordsResponse, "description": "One record per text, in order."}, **ERRORS},
        "openapi_extra": {
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/TextsRequest"}}},
            }
        },
    }


def openapi_document(app: FastAPI, settings: ServeSettings) -> dict[str, Any]:
    """The application's OpenAPI document, with the request schema and, when the server has a key, its bearer security."""
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    request_schema = TextsRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.update(request_schema.pop("$defs", {}))
    components["TextsRequest"] = request_schema
    if settings.api_key is not None:
        schema["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        schema["security"] = [{"bearer": []}]
    return schema


def add_docs(app: FastAPI, settings: ServeSettings) -> None:
    """Serve the docs page and its assets, and the document (made once, at its first request)."""
    app.mount("/docs/assets", StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> Response:
        return get_swagger_ui_html(
            openapi_url="/openapi.json", title="spacy-delink API", swagger_js_url="/docs/assets/swagger-ui-bundle.js",
            swagger_css_url="/docs/assets/swagger-ui.css", swagger_favicon_url="/docs/assets/favicon-32x32.png",
        )

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = openapi_document(app, settings)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
