"""The work behind the endpoints: the index and rewriters opened once, a bounded pool, LLM batches.

Requests run as jobs on ``workers`` threads (the compiled searches release the GIL, so
they overlap); each job is one request, its documents in order, through the library's
own functions (``batch.assess_documents``, ``batch.protect_documents``), so a record is
the one `delink assess` or `delink protect` writes for that text. The worker threads run
``worker_nice`` steps below the event loop's OS priority (``lower_thread_priority``): on
a machine whose CPUs are all busy, the loop otherwise waits its turn behind the workers
it feeds, and a refusal that costs it microseconds comes hundreds of milliseconds late.

With a rewriter that calls an LLM, protect requests are not run one per thread: their
documents are gathered into batches of up to ``llm_batch_size``, one batch at a time, and
a batch's prompts (from all its requests) go out together, at most ``max_in_flight`` at
once as the model allows. So LLM calls from concurrent requests run concurrently, and the
endpoint never sees more than ``max_in_flight``, however many requests arrive.

The server's rewriters never cache LLM answers on disk: a cached prompt holds document
text, which a service must not keep.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
from collections import OrderedDict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Optional

import orjson

from ..batch import assess_documents, protect_documents
from ..components.rewriter import DelinkRewriter
from ..corpus.rules import DocId
from ..linkage.index import CorpusIndex
from ..memory import give_back
from ..rewrite.config import load_rewriter
from .limits import Admission
from .metrics import ServeMetrics
from .settings import ServeSettings

logger = logging.getLogger("spacy_delink.serve")

#: Characters of a job after which its freed memory is given back (shorter jobs free too little to matter).
GIVE_BACK_AFTER_CHARS = 100_000
#: Rewriters kept loaded, one per (k, arity) that requests asked for, least recently used dropped first.
LOADED_REWRITERS = 8
Documents = list[tuple[DocId, str]]
Records = list[dict[str, Any]]


def lower_thread_priority(steps: int) -> None:
    """Run the calling thread ``steps`` nice steps below its current priority (Linux, where each thread has its
    own; elsewhere the process's would change with it, so nothing is done). Lowering needs no privilege."""
    if steps and sys.platform == "linux":
        thread = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + steps))


def _give_back_after(documents: Documents) -> None:
    """After a job with long texts, the memory its detections freed goes back to the system (``memory.give_back``):
    glibc would keep it in the worker thread's arena, and the server's resident size would stay at its peak."""
    if sum(len(text) for _, text in documents) >= GIVE_BACK_AFTER_CHARS:
        give_back()


def answer_body(records: Records) -> bytes:
    """The JSON body of a success, made on the job's thread, not the event loop's: records of long
    documents at arity 3 run to hundreds of kilobytes, and the loop has every connection to serve."""
    return orjson.dumps({"records": records})


class Rewriters:
    """The rewriter of each (k, arity), loaded on first use: one thread each, no LLM answer cache.

    Loading one takes a few tenths of a second (a spaCy pipeline, its config): it runs under
    a lock of its own (k, arity), so two requests for a new setting load it once, and
    requests at settings already loaded never wait behind it.
    """

    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        self._loaded: OrderedDict[tuple[int, int], DelinkRewriter] = OrderedDict()
        self._loading: dict[tuple[int, int], threading.Lock] = {}
        self._lock = threading.Lock()  # guards the two dicts only, never held while loading

    def get(self, k: int, arity: int) -> DelinkRewriter:
        key = (k, arity)
        with self._lock:
            rewriter = self._loaded.get(key)
            if rewriter is not None:
                self._loaded.move_to_end(key)
                return rewriter
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:
            with self._lock:
                rewriter = self._loaded.get(key)  # loaded by the request this one waited for
            if rewriter is None:
                try:
                    rewriter = self._load(k, arity)
                except BaseException:
                    with self._lock:
                        self._loading.pop(key, None)
                    raise
            with self._lock:  # in place and no longer loading at once: a later request finds it
                self._loaded[key] = rewriter
                self._loaded.move_to_end(key)
                while len(self._loaded) > LOADED_REWRITERS:
                    self._loaded.popitem(last=False)
                self._loading.pop(key, None)
        return rewriter

    def _load(self, k: int, arity: int) -> DelinkRewriter:
        settings = self.settings
        rewriter = load_rewriter(
            settings.index, k, arity, settings.config, settings.key_file, flagging=settings.flagging,
            config_overrides=settings.config_overrides, threads=1, readings=settings.readings,
        )
        rewriter.cache_dir = None  # read when its LLM wrapper is built, on the first LLM pass
        return rewriter


@dataclass
class _Waiting:
    k: int
    arity: int
    documents: Documents
    future: Future[bytes]


class LlmBatches:
    """Protect jobs under an LLM rewriter, gathered into one batch at a time (see the module docstring)."""

    def __init__(self, rewriters: Rewriters, batch_size: int, metrics: ServeMetrics, answer: Callable[[Records], bytes]) -> None:
        self.rewriters = rewriters
        self.batch_size = batch_size
        self.metrics = metrics
        self.answer = answer  # a job's records -> its answer
        self._waiting: deque[_Waiting] = deque()
        self._wake = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="delink-serve-llm", daemon=True)
        self._thread.start()

    def submit(self, k: int, arity: int, documents: Documents) -> Future[bytes]:
        future: Future[bytes] = Future()
        with self._wake:
            self._waiting.append(_Waiting(k, arity, documents, future))
            self._wake.notify()
        return future

    def _next_batch(self) -> Optional[list[_Waiting]]:
        """The oldest job and the next ones at its settings, up to ``batch_size`` documents; None once closed."""
        with self._wake:
            while not self._waiting and not self._closed:
                self._wake.wait()
            if self._closed:
                return None
            first = self._waiting.popleft()
            batch, size = [first], len(first.documents)
            for job in list(self._waiting):
                if (job.k, job.arity) == (first.k, first.arity) and size + len(job.documents) <= self.batch_size:
                    self._waiting.remove(job)
                    batch.append(job)
                    size += len(job.documents)
        return [job for job in batch if job.future.set_running_or_notify_cancel()]  # skips jobs whose clients left

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            if batch:
                self._protect(batch)

    def _protect(self, batch: list[_Waiting]) -> None:
        documents = [document for job in batch for document in job.documents]
        try:
            rewriter = self.rewriters.get(batch[0].k, batch[0].arity)
            calls, failures = rewriter.llm_calls(), rewriter.failures()
            records = protect_documents(rewriter, documents)
            self.metrics.llm(rewriter.llm_calls() - calls, rewriter.failures() - failures)
        except BaseException as err:  # every job of the batch gets the error; the thread goes on
            for job in batch:
                job.future.set_exception(err)
            return
        finally:
            _give_back_after(documents)
        start = 0
        for job in batch:
            job.future.set_result(self.answer(records[start : start + len(job.documents)]))
            start += len(job.documents)

    def close(self) -> None:
        """Stop after the batch in progress; jobs still waiting are cancelled."""
        with self._wake:
            self._closed = True
            waiting, self._waiting = list(self._waiting), deque()
            self._wake.notify_all()
        for job in waiting:
            job.future.cancel()
        self._thread.join()


class Service:
    """The index, the rewriters, the pool and the admission of one server."""

    def __init__(self, settings: ServeSettings, metrics: Optional[ServeMetrics] = None) -> None:
        self.settings = settings
        self.metrics = metrics or ServeMetrics()
        self.rewriters = Rewriters(settings)
        #: The rewriter at the server's settings, kept apart from the least-recently-used ones: its ``index`` is the
        #: one assess answers from. Loading it opens the index and its key, so a bad one stops the start.
        self._enforced = self.rewriters.get(settings.k, settings.arity)
        self.uses_llm = self._enforced.uses_llm
        self.admission = Admission(settings.capacity, settings.worker_count, settings.per_client)
        self.metrics.in_progress.set_function(lambda: self.admission.inside)
        self.pool = ThreadPoolExecutor(
            settings.worker_count, thread_name_prefix="delink-serve", initializer=lower_thread_priority, initargs=(settings.worker_nice,)
        )
        self.llm_batches = LlmBatches(self.rewriters, settings.llm_batch_size, self.metrics, self._protected) if self.uses_llm else None
        self.ready = False
        self.index.warn_if_k_exceeds_collection(settings.k)

    @property
    def index(self) -> CorpusIndex:
        """The index as it is on disk now, as every rewriter sees it: the components' own ``index`` opens it again
        once `delink index --update` or `delink compact` has replaced its manifest, so assess never answers from
        an index that protect has moved past."""
        return self._enforced.index

    def assess(self, documents: Documents, k: int, arity: int) -> Future[bytes]:
        """The answer to an assess request: its records as a JSON body."""
        return self.pool.submit(self._assess, documents, k, arity)

    def protect(self, documents: Documents, k: int, arity: int) -> Future[bytes]:
        """The answer to a protect request, from the pool or, under an LLM rewriter, from a shared batch."""
        if self.llm_batches is not None:
            return self.llm_batches.submit(k, arity, documents)
        return self.pool.submit(self._protect, documents, k, arity)

    def _assess(self, documents: Documents, k: int, arity: int) -> bytes:
        try:
            records = assess_documents(self.index, documents, k, arity, self.settings.max_combinations, self.settings.readings)
            self.metrics.records("assess", records)
            return answer_body(records)
        finally:
            _give_back_after(documents)

    def _protect(self, documents: Documents, k: int, arity: int) -> bytes:
        """One document at a time: a batch holds every document's detection until its last document is done, so a
        request's memory would grow with its documents (40 long texts: 1 to 3.5 GB), not with its longest one."""
        rewriter = self.rewriters.get(k, arity)
        try:
            return self._protected([record for document in documents for record in protect_documents(rewriter, [document])])
        finally:
            _give_back_after(documents)

    def _protected(self, records: Records) -> bytes:
        self.metrics.records("protect", records)
        return answer_body(records)

    def close(self) -> None:
        """Refuse new work, cancel what waits, finish what runs."""
        self.ready = False
        if self.llm_batches is not None:
            self.llm_batches.close()
        self.pool.shutdown(wait=True, cancel_futures=True)

