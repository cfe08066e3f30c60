"""What `delink serve` enforces: the protection, the limits, who may call it and from where.

Every value is checked once, at start, so a server that runs is a server whose settings
make sense; a request can then only ask for what these allow.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..components.rewriter import resolve_threads
from ..errors import InputError
from ..linkage.attack import DEFAULT_MAX_COMBINATIONS
from ..linkage.combinations import check_arity, check_max_combinations
from ..linkage.strategies import check_strategy
from ..linkage.ngrams import check_k
from ..linkage.readings import DEFAULT_READINGS, check_readings
from ..memory import MAX_CHARS_ENV, max_document_chars
from .auth import LOOPBACK_HOSTS, ApiKey, is_loopback

#: Requests that may wait per worker unless ``--queue`` says otherwise: a burst of clients waits, a flood is refused.
QUEUE_PER_WORKER = 4
#: Seconds a request's body may take to arrive, from the request's arrival: a client trickling its body holds its place that long at most.
BODY_TIMEOUT_S = 10.0
#: How far below the event loop's the workers' OS priority is by default (nice steps): see ``ServeSettings.worker_nice``.
WORKER_NICE = 10


def _as_in_url(host: str) -> str:
    """A host as a URL (and so a Host header) writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _host_pattern(pattern: str) -> bool:
    """Whether ``pattern`` is what Starlette's TrustedHostMiddleware matches: ``*``, ``*.domain``, or a host as in a URL."""
    if pattern == "*":
        return True
    name = pattern.removeprefix("*.")
    return bool(name.strip(".")) and "*" not in name and _as_in_url(name) == name


@dataclass(frozen=True)
class ServeSettings:
    """The server's settings (`delink serve --help` documents each option)."""

    index: Path
    key_file: Optional[Path] = None
    host: str = "127.0.0.1"
    port: int = 8080
    #: The protection every request gets at least (unless ``allow_weaker``).
    k: int = 2
    arity: int = 3
    allow_weaker: bool = False
    #: The readings of the rules every request is checked under (docs/linkage-rules.md §8); a request cannot drop one.
    readings: tuple[str, ...] = DEFAULT_READINGS
    #: The rewriter's spaCy config (a path or a shipped name) and ``--set`` values for it; None: the Mask model.
    config: Optional[Path] = None
    config_overrides: dict[str, Any] = field(default_factory=dict)
    flagging: Optional[str] = None
    max_combinations: int = DEFAULT_MAX_COMBINATIONS
    #: Requests worked on at once (0: one per CPU) and requests waiting beyond them (None: 4 per worker); more get 429.
    workers: int = 0
    queue: Optional[int] = None
    #: Nice steps the worker threads run below the event loop (Linux): the loop, which admits, refuses and answers,
    #: gets a CPU before their batch work, so a busy server still answers at once; 0 keeps them level.
    worker_nice: int = WORKER_NICE
    max_body_bytes: int = 8 * 1024 * 1024
    max_texts: int = 64
    max_chars: int = 200_000
    #: Seconds from a request's arrival to its answer, waiting included; later it gets 503.
    deadline: float = 60.0
    #: Seconds from a request's arrival to the last byte of its body; later it gets 408 and its place is freed.
    body_timeout: float = BODY_TIMEOUT_S
    #: Requests one client address may have in the server at once (None: half the places); more get 429.
    max_per_client: Optional[int] = None
    #: Documents of concurrent protect requests rewritten together when the rewriter calls an LLM.
    llm_batch_size: int = 16
    cors_origins: tuple[str, ...] = ()
    #: Host header names answered besides the loopback ones and the address listened on (``*``: any; ``*.example.org``).
    allowed_hosts: tuple[str, ...] = ()
    api_key: Optional[ApiKey] = None

    def __post_init__(self) -> None:
        check_k(self.k)
        check_arity(self.arity, allow_single=True)
        object.__setattr__(self, "readings", check_readings(self.readings))
        check_max_combinations(self.max_combinations)
        if self.flagging is not None:
            check_strategy(self.flagging)
        if not 0 <= self.port <= 65535:
            raise InputError(f"--port must be 0-65535 (0: any free port), got {self.port}")
        if self.queue is not None and self.queue < 0:
            raise InputError(f"--queue must be >= 0 (0: no request waits), got {self.queue}")
        for name, value in (
            ("--max-body-bytes", self.max_body_bytes), ("--max-texts", self.max_texts), ("--max-chars", self.max_chars),
            ("--llm-batch-size", self.llm_batch_size),
        ):
            if value < 1:
                raise InputError(f"{name} must be at least 1, got {value}")
        for name, seconds in (("--deadline", self.deadline), ("--body-timeout", self.body_timeout)):
            if not 0 < seconds < float("inf"):
                raise InputError(f"{name} must be a positive number of seconds, got {seconds}")
        if self.max_chars > max_document_chars():
            raise InputError(
                f"--max-chars {self.max_chars:,} is over the {max_document_chars():,} characters a document may have "
                f"(its memory; ${MAX_CHARS_ENV} raises it, docs/serve.md)"
            )
        if self.max_per_client is not None and not 1 <= self.max_per_client <= self.capacity:
            raise InputError(f"--max-per-client must be 1-{self.capacity} (the places: --workers + --queue), got {self.max_per_client}")
        for pattern in self.allowed_hosts:
            if not _host_pattern(pattern):
                raise InputError(
                    f"--allowed-host {pattern!r}: give a host name or address as clients write it in the URL "
                    "(server.example.org, 10.0.0.5, [fd00::5]), a domain pattern (*.example.org), or * for any"
                )
        if self.workers < 0:
            raise InputError(f"--workers must be >= 0 (0: one per CPU), got {self.workers}")
        if not 0 <= self.worker_nice <= 19:
            raise InputError(f"--worker-nice must be 0-19 (0: the workers at the event loop's priority), got {self.worker_nice}")
        if self.api_key is None and not is_loopback(self.host):
            raise InputError(
                f"--host {self.host} without an API key would let anyone who reaches this machine use the index; "
                "set $DELINK_API_KEY or --api-key-file (docs/serve.md), or serve on --host 127.0.0.1"
            )
        for origin in self.cors_origins:
            if origin != "*" and not origin.startswith(("http://", "https://")):
                raise InputError(f"--cors-origin {origin!r}: give an origin such as https://reviewer.example.org, or *")

    @property
    def worker_count(self) -> int:
        return resolve_threads(self.workers)

    @property
    def per_client(self) -> int:
        """Places one client address may hold: ``max_per_client``, by default half of them (at least 1)."""
        return self.max_per_client if self.max_per_client is not None else max(1, self.capacity // 2)

    @property
    def trusted_hosts(self) -> tuple[str, ...]:
        """The Host header names answered: the loopback ones, the address or name listened on (not 0.0.0.0 or ::,
        which no client writes), and ``allowed_hosts``."""
        listened = () if self.host in ("0.0.0.0", "::", "[::]") else (_as_in_url(self.host),)
        return tuple(dict.fromkeys((*LOOPBACK_HOSTS, *listened, *self.allowed_hosts)))

    @property
    def capacity(self) -> int:
        """Requests admitted at once: those worked on plus those waiting (``--queue``, by default 4 per worker)."""
        return self.worker_count + (QUEUE_PER_WORKER * self.worker_count if self.queue is None else self.queue)

    def public(self) -> dict[str, Any]:
        """What a client may know (``GET /v1/settings``): the protection, the limits, whether a key is needed."""
        return {
            "k": self.k,
            "arity": self.arity,
            "readings": list(self.readings),
            "allow_weaker": self.allow_weaker,
            "max_texts": self.max_texts,
            "max_chars": self.max_chars,
            "max_body_bytes": self.max_body_bytes,
            "deadline_seconds": self.deadline,
            "body_timeout_seconds": self.body_timeout,
            "max_per_client": self.per_client,
            "auth": self.api_key is not None,
            "rewriter": "mask" if self.config is None else os.path.basename(str(self.config)),
        }
