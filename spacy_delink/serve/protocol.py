"""uvicorn's HTTP/1.1 protocol (httptools), with its one answer of its own in the server's error shape.

A request that is not valid HTTP (a malformed request line or header, a Content-Length
that is not a number) never reaches the application: uvicorn answers it 400 itself, in
plain text. This protocol answers it as every other refusal, ``{"error": {"code",
"message"}}``, and closes the connection as uvicorn does.
"""
from __future__ import annotations

from ..extras import require_extra

require_extra("serve", "delink serve")  # one line naming the extra, before FastAPI's own ImportError

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from .limits import ApiError

NOT_HTTP = ApiError(
    400, "invalid_http",
    "the request is not valid HTTP/1.1 (its request line, a header or its Content-Length); send it with an HTTP client",
)


class JsonErrorsHttpTools(HttpToolsProtocol):
    """``HttpToolsProtocol`` whose own 400 is JSON (``uvicorn.Config(http=...)``)."""

    def send_400_response(self, msg: str) -> None:
        body = bytes(NOT_HTTP.response().body)
        content = [STATUS_LINE[400]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend([
            b"content-type: application/json\r\n",
            b"x-content-type-options: nosniff\r\n",
            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
            b"connection: close\r\n",
            b"\r\n",
            body,
        ])
        self.transport.write(b"".join(content))
        self.transport.close()
