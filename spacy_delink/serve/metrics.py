"""``GET /metrics``: what the service did, in the Prometheus text format.

Counts only (requests, documents, linkable documents, LLM calls and failures) and
latencies: nothing of a text. Each server has its own registry, so two servers in one
process (the tests) never mix their counts.
"""
from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Iterable

from ..extras import require_extra

require_extra("serve", "delink serve")  # one line naming the extra, before FastAPI's own ImportError

from prometheus_client import CollectorRegistry, Counter as PromCounter, Gauge, Histogram, generate_latest
from prometheus_client import CONTENT_TYPE_LATEST

#: Request latency buckets (seconds): a short document at arity 1 takes milliseconds, a batch with LLM passes a minute.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


def linkable(endpoint: str, record: dict[str, Any]) -> bool:
    """Whether a record's document was linkable: as assessed, or before it was protected."""
    if endpoint == "protect":
        return float(record.get("linkage_risk_before") or 0.0) > 0.0
    return record.get("anonymity") is not None


class ServeMetrics:
    """The service's counters, histograms and gauges in one registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = PromCounter(
            "delink_requests", "HTTP requests answered, by endpoint and status", ["endpoint", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "delink_request_seconds", "Seconds from a request's arrival to its answer", ["endpoint"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.documents = PromCounter("delink_documents", "Documents assessed or protected", ["endpoint"], registry=self.registry)
        self.linkable = PromCounter(
            "delink_linkable_documents", "Documents found linkable (protect: before protection)", ["endpoint"], registry=self.registry
        )
        self.linkable_share = Gauge(
            "delink_linkable_share", "Share of the documents so far that were linkable", ["endpoint"], registry=self.registry
        )
        self.llm_calls = PromCounter("delink_llm_calls", "Prompts the LLM answered (cache hits excluded)", registry=self.registry)
        self.llm_failures = PromCounter(
            "delink_llm_failures", "LLM calls without an answer, by kind, and rewrites refused by the task's checks, by reason",
            ["kind"], registry=self.registry,
        )
        self.in_progress = Gauge("delink_requests_in_progress", "Requests admitted whose job has not finished (worked on or waiting)", registry=self.registry)
        self.abandoned = PromCounter(
            "delink_requests_abandoned", "Requests whose client left before the answer, by where they were", ["stage"],
            registry=self.registry,
        )
        self._totals: Counter[str] = Counter()
        self._lock = threading.Lock()

    def answered(self, endpoint: str, status: int, seconds: float) -> None:
        self.requests.labels(endpoint, str(status)).inc()
        self.latency.labels(endpoint).observe(seconds)

    def records(self, endpoint: str, records: Iterable[dict[str, Any]]) -> None:
        """Count a job's documents and how many of them were linkable."""
        found = [linkable(endpoint, record) for record in records]
        self.documents.labels(endpoint).inc(len(found))
        self.linkable.labels(endpoint).inc(sum(found))
        with self._lock:
            self._totals[endpoint] += len(found)
            self._totals[endpoint + ":linkable"] += sum(found)
            if self._totals[endpoint]:
                self.linkable_share.labels(endpoint).set(self._totals[endpoint + ":linkable"] / self._totals[endpoint])

    def llm(self, calls: int, failures: Counter[str]) -> None:
        """Add one LLM batch's calls and failures (the rewriter's counts after it, less those before)."""
        if calls:
            self.llm_calls.inc(calls)
        for kind, count in failures.items():
            if count > 0:
                self.llm_failures.labels(kind).inc(count)

    def render(self) -> bytes:
        return generate_latest(self.registry)
