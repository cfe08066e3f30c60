"""Call a `delink serve` server from Python: the records of assess and protect, with httpx only.

    from spacy_delink.serve.client import DelinkClient

    with DelinkClient("http://127.0.0.1:8080", api_key=...) as client:   # or $DELINK_API_KEY
        records = client.assess(["The applicant's farm near the river Sava ..."], k=2, arity=3)
        protected = client.protect({"case-1": "...", "case-2": "..."})

A refusal raises ``ServeError`` with the server's status, code and message. A server that
is busy (429) or not ready (503) is asked again after the ``Retry-After`` it gives (else
after a jittered backoff, ``retrying.backoff``), at most ``retries`` times; every other
refusal is raised at once. A key an HTTP header
cannot carry (not visible ASCII) is refused at construction with an ``InputError`` that
says so, never sent.
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence, Union

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt

from ..errors import DelinkError, InputError
from ..retrying import backoff, parse_retry_after
from .auth import KEY_ENV, key_problem

#: Longest wait between two tries, whatever ``Retry-After`` says.
MAX_WAIT_S = 30.0
#: The statuses asked again: busy, not ready.
RETRY_STATUSES = (429, 503)
Texts = Union[str, Sequence[str], Mapping[Union[str, int], str]]


class ServeError(DelinkError):
    """A request the server refused or could not answer."""

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[float] = None) -> None:
        super().__init__(f"{message} [{code}, HTTP {status}]")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


def _payload(texts: Texts, k: Optional[int], arity: Optional[int]) -> dict[str, Any]:
    """One text, a list (ids 0, 1, ...) or a mapping of id to text, as the request body."""
    if isinstance(texts, str):
        body: dict[str, Any] = {"text": texts}
    elif isinstance(texts, Mapping):
        body = {"documents": [{"id": doc_id, "text": text} for doc_id, text in texts.items()]}
    else:
        body = {"texts": list(texts)}
    if k is not None:
        body["k"] = k
    if arity is not None:
        body["arity"] = arity
    return body


class DelinkClient:
    """A connection pool to one server; ``api_key`` defaults to ``$DELINK_API_KEY``."""

    def __init__(self, url: str = "http://127.0.0.1:8080", api_key: Optional[str] = None, timeout: float = 120.0, retries: int = 3) -> None:
        key = api_key if api_key is not None else os.environ.get(KEY_ENV)
        problem = key_problem(key) if key else None
        if problem is not None:  # httpx would raise a bare UnicodeEncodeError on the first request
            raise InputError(f"the API key ({'api_key' if api_key is not None else '$' + KEY_ENV}): {problem}; use the key the server was started with")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.retries = retries
        self._http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout)

    def __enter__(self) -> "DelinkClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def assess(self, texts: Texts, k: Optional[int] = None, arity: Optional[int] = None) -> list[dict[str, Any]]:
        """The `delink assess` record of each text, in order (k, arity: the server's unless given)."""
        return self._records("/v1/assess", _payload(texts, k, arity))

    def protect(self, texts: Texts, k: Optional[int] = None, arity: Optional[int] = None) -> list[dict[str, Any]]:
        """The `delink protect` record of each text, in order, each with its ``protected_under``."""
        return self._records("/v1/protect", _payload(texts, k, arity))

    def settings(self) -> dict[str, Any]:
        """The protection the server enforces, its limits and whether it needs a key."""
        result: dict[str, Any] = self._send("GET", "/v1/settings", None)
        return result

    def ready(self) -> bool:
        """Whether the server is up with its index open and kernels compiled."""
        try:
            return self._http.get("/readyz").status_code == 200
        except httpx.TransportError:
            return False

    def _records(self, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = self._send("POST", path, body)["records"]
        return records

    def _send(self, method: str, path: str, body: Optional[dict[str, Any]]) -> Any:
        retrying = Retrying(
            stop=stop_after_attempt(self.retries + 1),
            wait=backoff(1.0, MAX_WAIT_S),
            retry=retry_if_exception(lambda err: isinstance(err, ServeError) and err.status in RETRY_STATUSES),
            reraise=True,
        )
        return retrying(self._request, method, path, body)

    def _request(self, method: str, path: str, body: Optional[dict[str, Any]]) -> Any:
        """One try: the answer's JSON, or the refusal raised as a ``ServeError``."""
        response = self._http.request(method, path, json=body)
        if response.status_code != 200:
            raise _error(response)
        return response.json()


def _error(response: httpx.Response) -> ServeError:
    try:
        detail = response.json()["error"]
        code, message = str(detail["code"]), str(detail["message"])
    except (ValueError, KeyError, TypeError):
        code, message = f"http_{response.status_code}", response.text[:200] or response.reason_phrase
    return ServeError(response.status_code, code, message, parse_retry_after(response.headers.get("retry-after", "")))
