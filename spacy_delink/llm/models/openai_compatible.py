"""``spacy_delink.OpenAICompatible.v1``: any OpenAI-compatible chat-completions endpoint.

vLLM, Ollama, llama.cpp server, LM Studio and OpenAI all speak ``POST {base_url}/chat/completions``.
Unlike spacy-llm's built-in OpenAI models this one makes no network call when built (so
``spacy.load`` works offline and with local endpoints) and accepts any model name.

A failed prompt (timeout, HTTP error after the retries, an answer without message
content) is answered with an empty string, counted in ``stats`` and logged: the
rewriter then leaves those spans flagged for the next pass or its mask fallback, so one
bad call never stops a run. Three bounds keep a bad endpoint from stalling a run:

* ``timeout``: httpx's limit on each phase (connect, each read, each write);
* ``deadline``: the whole prompt, all attempts and waits included. A server that drips
  one byte a second never trips a per-read timeout; the deadline cancels it;
* a circuit breaker: after ``breaker_threshold`` consecutive failures to connect or to
  answer within ``timeout`` or ``deadline`` (a hung endpoint counts as a down one) the
  endpoint is known down, and for ``breaker_cooldown`` seconds every prompt is answered
  empty at once (counted as ``failed_endpoint_down``) instead of retrying; the first
  prompt after the cooldown probes it again.

With ``response_format`` set, a prompt that carries its answer's JSON schema
(``spacy_delink.Rewrite.v1``'s do) asks the server to decode under it: ``"json_schema"``
sends OpenAI's form (``{"type": "json_schema", "json_schema": {"name", "schema"}}``: vLLM,
llama.cpp's ``llama-server``), ``"json_object"`` the older one with the schema inside
(``{"type": "json_object", "schema": ...}``: llama.cpp's server and llama-cpp-python's
``python -m llama_cpp.server``). Off by default: a server that does not know the field
may refuse the request.

Credentials never reach a log line or warning: user info in ``base_url``, every query
value and the fragment are shown as ``***`` (``urls.redact_url``). Retries wait as
``retrying.backoff`` says: the server's ``Retry-After`` (seconds or an HTTP date, at most
``MAX_RETRY_AFTER_S``), else ``backoff`` doubling per try, with jitter.
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Awaitable, Dict, Iterable, List, Optional, TypeVar

import httpx
from spacy_llm.registry import registry
from tenacity import AsyncRetrying, retry_if_result, stop_after_attempt

from ...errors import InputError
from ...retrying import backoff, parse_retry_after
from ...urls import redact_url

logger = logging.getLogger("spacy_delink.llm")

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
RETRY_STATUSES = frozenset({429}) | frozenset(range(500, 600))
MAX_RETRY_AFTER_S = 60.0
#: The ``response_format`` settings and what each sends with a prompt's answer schema.
RESPONSE_FORMATS = ("json_schema", "json_object")

T = TypeVar("T")


def _run(coroutine: Awaitable[T]) -> T:
    """Run a coroutine to completion, also from code already inside an event loop (Jupyter)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)  # type: ignore[arg-type]
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()  # type: ignore[arg-type]


class CircuitBreaker:
    """Consecutive failures (connection, timeout, deadline); at ``threshold`` the endpoint counts as down for ``cooldown`` s.

    After the cooldown one prompt goes through as a probe: its success closes the breaker,
    its failure opens it again at once (the count is still at the threshold).
    ``threshold`` 0 turns the breaker off.
    """

    def __init__(self, threshold: int, cooldown: float) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self.consecutive = 0
        self.opened = 0
        self._open_until = 0.0
        self._lock = threading.Lock()

    def is_open(self) -> bool:
        return time.monotonic() < self._open_until

    def success(self) -> None:
        with self._lock:
            self.consecutive = 0

    def failure(self) -> bool:
        """Count one failure; True when this one opened the breaker."""
        with self._lock:
            self.consecutive += 1
            if not self.threshold or self.consecutive < self.threshold or time.monotonic() < self._open_until:
                return False
            self._open_until = time.monotonic() + self.cooldown
            self.opened += 1
            return True

    def __getstate__(self) -> Dict[str, Any]:
        return {**self.__dict__, "_lock": None}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


class _Batch:
    """What the prompts of one ``__call__`` share: the client, the concurrency limit, the breaker signal."""

    def __init__(self, client: httpx.AsyncClient, max_in_flight: int, down: bool) -> None:
        self.client = client
        self.slots = asyncio.Semaphore(max_in_flight)
        self.endpoint_down = asyncio.Event()  # set when the breaker opens: wakes waiting retries
        if down:
            self.endpoint_down.set()

    async def pause(self, seconds: float) -> None:
        """A backoff wait that ends early when the breaker opens."""
        try:
            await asyncio.wait_for(self.endpoint_down.wait(), seconds)
        except asyncio.TimeoutError:
            pass


@dataclass(frozen=True)
class _Try:
    """One request's outcome: the answer, or why it failed; whether to ask again, and when the server said to."""

    answer: Optional[str]
    failure: str
    #: Requests sent for the prompt so far, this one included.
    attempts: int
    retry: bool = False
    retry_after: Optional[float] = None


class OpenAICompatibleModel:
    """Sends each prompt as one user message; up to ``max_in_flight`` requests run at once."""

    def __init__(
        self,
        base_url: str,
        name: str,
        *,
        api_key_env: Optional[str],
        timeout: float,
        deadline: float,
        retries: int,
        backoff: float,
        max_in_flight: int,
        temperature: float,
        max_tokens: int,
        context_length: int,
        breaker_threshold: int,
        breaker_cooldown: float,
        response_format: Optional[str] = None,
    ) -> None:
        try:
            url = httpx.URL(base_url)
        except httpx.InvalidURL as err:
            raise InputError(f"model.base_url is not a valid URL ({err}); use one such as http://127.0.0.1:8000/v1") from None
        shown = redact_url(str(url))
        if url.scheme not in ("http", "https") or not url.host:
            raise InputError(f"model.base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {shown!r}")
        if not name:
            raise InputError("model.name is empty; set it to the model the endpoint serves (e.g. 'llama3.1:8b')")
        if timeout <= 0 or deadline <= 0 or max_in_flight < 1:
            raise InputError("model.timeout, model.deadline and model.max_in_flight must be positive")
        if retries < 0 or backoff < 0 or breaker_threshold < 0 or breaker_cooldown < 0:
            raise InputError("model.retries, model.backoff, model.breaker_threshold and model.breaker_cooldown must be >= 0")
        if response_format is not None and response_format not in RESPONSE_FORMATS:
            raise InputError(
                f"model.response_format must be null, {' or '.join(repr(f) for f in RESPONSE_FORMATS)}, got {response_format!r}"
            )
        if url.host not in LOCAL_HOSTS:
            warnings.warn(
                f"model.base_url {shown} is not on this machine: document text (the context of each "
                "linkable span) will be sent to it",
                UserWarning,
                stacklevel=2,
            )
        endpoint = url.copy_with(path=url.path.rstrip("/") + "/chat/completions")
        self._endpoint = str(endpoint)  # may hold credentials: never logged
        #: The endpoint as logs and messages show it (credentials as ***).
        self.url = redact_url(str(endpoint))
        self.name = name
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.deadline = deadline
        self.retries = retries
        self.backoff = backoff
        self.max_in_flight = max_in_flight
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._context_length = context_length
        self.breaker = CircuitBreaker(breaker_threshold, breaker_cooldown)
        self.response_format = response_format
        self.stats: Counter[str] = Counter()

    @property
    def context_length(self) -> int:
        return self._context_length

    @property
    def endpoint_down(self) -> bool:
        """Whether the circuit breaker holds the endpoint for down right now."""
        return self.breaker.is_open()

    def _headers(self) -> Dict[str, str]:
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        return {"Authorization": f"Bearer {key}"} if key else {}

    def __call__(self, prompts: Iterable[Iterable[str]]) -> Iterable[Iterable[str]]:
        """All prompts of a batch concurrently (at most ``max_in_flight``), answers in order."""
        nested = [list(doc_prompts) for doc_prompts in prompts]
        flat = [prompt for doc_prompts in nested for prompt in doc_prompts]
        if not flat:
            return [[] for _ in nested]
        answers = iter(_run(self._complete_all(flat)))
        result: List[List[str]] = [[next(answers) for _ in doc_prompts] for doc_prompts in nested]
        return result

    async def _complete_all(self, prompts: List[str]) -> List[str]:
        limits = httpx.Limits(max_connections=self.max_in_flight, max_keepalive_connections=self.max_in_flight)
        async with httpx.AsyncClient(timeout=self.timeout, limits=limits) as client:
            batch = _Batch(client, self.max_in_flight, self.endpoint_down)
            return list(await asyncio.gather(*(self._complete(batch, prompt) for prompt in prompts)))

    async def _complete(self, batch: _Batch, prompt: str) -> str:
        """One prompt: '' when it ultimately fails, is cut by the deadline or the endpoint is down."""
        async with batch.slots:
            if self.endpoint_down:
                self.stats["failed_endpoint_down"] += 1
                return ""
            self.stats["calls"] += 1
            try:
                answer, failure, attempts = await asyncio.wait_for(self._attempts(batch, prompt), self.deadline)
            except asyncio.TimeoutError:
                answer, failure, attempts = None, f"deadline ({self.deadline:g} s for the whole call)", 0
                self._count_failure(batch)
        if answer is not None:
            return answer
        self.stats[f"failed_{failure.split(' ')[0]}"] += 1
        if failure != "endpoint_down":
            tries = f" after {attempts} attempt(s)" if attempts else ""
            logger.warning("LLM call to %s failed%s: %s", self.url, tries, failure)
        return ""

    def _count_failure(self, batch: _Batch) -> None:
        """One more consecutive failure to connect or to answer in time; opens the breaker at its threshold."""
        if self.breaker.failure():
            batch.endpoint_down.set()
            logger.warning(
                "LLM endpoint %s looks down (%d consecutive failures to connect or answer in time): for the next "
                "%g s prompts are answered empty without calling it, so their spans fall back to masks",
                self.url, self.breaker.consecutive, self.breaker.cooldown,
            )

    def _payload(self, prompt: str) -> Dict[str, Any]:
        """The request body; with ``response_format`` and a prompt that carries its answer schema, that schema too."""
        payload: Dict[str, Any] = {
            "model": self.name,
            "messages": [{"role": "user", "content": str(prompt)}],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        schema = getattr(prompt, "answer_schema", None) if self.response_format else None
        if schema is not None:
            self.stats["constrained"] += 1
            if self.response_format == "json_schema":
                payload["response_format"] = {"type": "json_schema", "json_schema": {"name": "rewrites", "schema": schema}}
            else:
                payload["response_format"] = {"type": "json_object", "schema": schema}
        return payload

    async def _attempts(self, batch: _Batch, prompt: str) -> tuple[Optional[str], str, int]:
        """(answer, '', attempts) or (None, why it failed, attempts), with retries and backoff."""
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.retries + 1),
            wait=backoff(self.backoff, MAX_RETRY_AFTER_S),
            retry=retry_if_result(lambda tried: tried.retry),
            sleep=batch.pause,
            retry_error_callback=lambda state: state.outcome.result() if state.outcome is not None else None,
        )
        tried: _Try = await retrying(self._attempt, batch, self._payload(prompt), [])
        return tried.answer, tried.failure, tried.attempts

    async def _attempt(self, batch: _Batch, payload: Dict[str, Any], history: List[_Try]) -> _Try:
        """One request; none once the breaker is open: a prompt already tried keeps its own failure."""
        attempt = len(history)
        if self.endpoint_down:
            return replace(history[-1], retry=False) if history else _Try(None, "endpoint_down", 0)
        if attempt:
            self.stats["retries"] += 1
        self.stats["requests"] += 1
        try:
            response = await batch.client.post(self._endpoint, json=payload, headers=self._headers())
        except (httpx.ConnectError, httpx.ConnectTimeout) as err:
            tried = _Try(None, f"connection ({type(err).__name__})", attempt + 1, retry=True)
            self._count_failure(batch)
        except httpx.TimeoutException:
            tried = _Try(None, "timeout", attempt + 1, retry=True)
            self._count_failure(batch)  # a hung endpoint is as down as a refusing one
        except httpx.HTTPError as err:
            tried = _Try(None, f"connection ({type(err).__name__})", attempt + 1, retry=True)
        else:
            self.breaker.success()
            status = response.status_code
            if status == 200:
                tried = _Try(self._content(response), "", attempt + 1)
            else:
                retry_after = parse_retry_after(response.headers.get("retry-after", ""))
                tried = _Try(None, f"http_{status}", attempt + 1, retry=status in RETRY_STATUSES, retry_after=retry_after)
        history.append(tried)
        return tried

    def _content(self, response: httpx.Response) -> str:
        """The answer's text; '' (counted as failed_malformed) when the body has none."""
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            self.stats["failed_malformed"] += 1
            logger.warning("LLM endpoint %s answered without choices[0].message.content", self.url)
            return ""
        return content


@registry.llm_models("spacy_delink.OpenAICompatible.v1")
def make_openai_compatible(
    base_url: str,
    name: str,
    api_key_env: Optional[str] = "OPENAI_API_KEY",
    timeout: float = 60.0,
    deadline: float = 180.0,
    retries: int = 4,
    backoff: float = 1.0,
    max_in_flight: int = 8,
    temperature: float = 0.0,
    max_tokens: int = 2048,
    context_length: int = 8192,
    breaker_threshold: int = 5,
    breaker_cooldown: float = 30.0,
    response_format: Optional[str] = None,
) -> OpenAICompatibleModel:
    """Chat model at ``base_url``; the API key is read from ``$api_key_env`` at call time.

    ``response_format``: null (off), ``"json_schema"`` or ``"json_object"``: send each
    prompt's answer schema in that form for constrained decoding (module docstring).
    """
    return OpenAICompatibleModel(
        base_url, name, api_key_env=api_key_env, timeout=timeout, deadline=deadline, retries=retries, backoff=backoff,
        max_in_flight=max_in_flight, temperature=temperature, max_tokens=max_tokens, context_length=context_length,
        breaker_threshold=breaker_threshold, breaker_cooldown=breaker_cooldown, response_format=response_format,
    )
