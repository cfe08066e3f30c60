"""``spacy_delink.OpenAICompatible.v1``: any OpenAI-compatible chat-completions endpoint.

vLLM, Ollama, llama.cpp server, LM Studio and OpenAI all speak ``POST {base_url}/chat/completions``.
Unlike spacy-llm's built-in OpenAI models this one makes no network call when built (so
``spacy.load`` works offline and with local endpoints) and accepts any model name.

A failed prompt (timeout, HTTP error after the retries, an answer without message
content) is answered with an empty string, counted in ``stats`` and logged: the
rewriter then leaves those spans flagged for the next pass or its mask fallback, so one
bad call never stops a run.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterable, List, Optional
from urllib.parse import urlparse

import httpx
from spacy_llm.registry import registry

from ...errors import InputError

logger = logging.getLogger("spacy_delink.llm")

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
RETRY_STATUSES = frozenset({429}) | frozenset(range(500, 600))
MAX_RETRY_AFTER_S = 60.0


class OpenAICompatibleModel:
    """Sends each prompt as one user message; up to ``max_in_flight`` requests run at once."""

    def __init__(
        self,
        base_url: str,
        name: str,
        api_key_env: Optional[str],
        timeout: float,
        retries: int,
        backoff: float,
        max_in_flight: int,
        temperature: float,
        max_tokens: int,
        context_length: int,
    ) -> None:
        parsed = urlparse(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise InputError(f"model.base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {base_url!r}")
        if not name:
            raise InputError("model.name is empty; set it to the model the endpoint serves (e.g. 'llama3.1:8b')")
        if timeout <= 0 or retries < 0 or backoff < 0 or max_in_flight < 1:
            raise InputError("model.timeout and model.max_in_flight must be positive, model.retries and model.backoff >= 0")
        if parsed.hostname not in LOCAL_HOSTS:
            warnings.warn(
                f"model.base_url {base_url} is not on this machine: document text (the context of each "
                "linkable span) will be sent to it",
                UserWarning,
                stacklevel=2,
            )
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.name = name
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_in_flight = max_in_flight
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._context_length = context_length
        self.stats: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._client: Optional[httpx.Client] = None

    @property
    def context_length(self) -> int:
        return self._context_length

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        state["_lock"] = None
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                limits = httpx.Limits(max_connections=self.max_in_flight, max_keepalive_connections=self.max_in_flight)
                self._client = httpx.Client(timeout=self.timeout, limits=limits)
            return self._client

    def _headers(self) -> Dict[str, str]:
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _count(self, event: str) -> None:
        with self._lock:
            self.stats[event] += 1

    def __call__(self, prompts: Iterable[Iterable[str]]) -> Iterable[Iterable[str]]:
        """All prompts of a batch concurrently (at most ``max_in_flight``), answers in order."""
        nested = [list(doc_prompts) for doc_prompts in prompts]
        flat = [prompt for doc_prompts in nested for prompt in doc_prompts]
        if not flat:
            return [[] for _ in nested]
        with ThreadPoolExecutor(max_workers=min(self.max_in_flight, len(flat))) as pool:
            answers = iter(list(pool.map(self.complete, flat)))
        result: List[List[str]] = [[next(answers) for _ in doc_prompts] for doc_prompts in nested]
        return result

    def complete(self, prompt: str) -> str:
        """One chat completion with retries; '' when it ultimately fails."""
        self._count("calls")
        payload = {
            "model": self.name,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        failure = "unknown"
        for attempt in range(self.retries + 1):
            if attempt:
                self._count("retries")
            self._count("requests")
            delay = self.backoff * 2**attempt
            try:
                response = self._http().post(self.url, json=payload, headers=self._headers())
            except httpx.TimeoutException:
                failure = "timeout"
            except httpx.HTTPError as err:
                failure = f"connection ({type(err).__name__})"
            else:
                if response.status_code == 200:
                    return self._content(response)
                failure = f"http_{response.status_code}"
                if response.status_code not in RETRY_STATUSES:
                    break
                retry_after = response.headers.get("retry-after", "")
                if retry_after.replace(".", "", 1).isdigit():
                    delay = min(float(retry_after), MAX_RETRY_AFTER_S)
            if attempt < self.retries:
                time.sleep(delay)
        self._count(f"failed_{failure.split(' ')[0]}")
        logger.warning("LLM call to %s failed after %d attempt(s): %s", self.url, attempt + 1, failure)
        return ""

    def _content(self, response: httpx.Response) -> str:
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            self._count("failed_malformed")
            logger.warning("LLM endpoint %s answered without choices[0].message.content", self.url)
            return ""
        return content


@registry.llm_models("spacy_delink.OpenAICompatible.v1")
def make_openai_compatible(
    base_url: str,
    name: str,
    api_key_env: Optional[str] = "OPENAI_API_KEY",
    timeout: float = 60.0,
    retries: int = 4,
    backoff: float = 1.0,
    max_in_flight: int = 8,
    temperature: float = 0.0,
    max_tokens: int = 2048,
    context_length: int = 8192,
) -> OpenAICompatibleModel:
    """Chat model at ``base_url``; the API key is read from ``$api_key_env`` at call time."""
    return OpenAICompatibleModel(
        base_url, name, api_key_env, timeout, retries, backoff, max_in_flight, temperature, max_tokens, context_length
    )
