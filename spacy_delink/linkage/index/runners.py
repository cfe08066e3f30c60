"""Running the build's tasks: ``Runner`` (the interface the build calls) and ``ThreadRunner`` (in this process).

The build (``shards.py``, ``builder.py``) submits independent tasks in batches and waits
for their results; where they run is the runner's concern alone: threads of this process
here, Dask workers in ``distributed.py``. The same tasks write the same bytes either way.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator, Sequence


class Runner:
    """Runs batches of independent tasks: ``map`` returns their results in order (a barrier)."""

    def map(self, function: Callable[..., Any], *iterables: Sequence[Any]) -> list[Any]:
        return [future.result() for future in [self.submit(function, *args) for args in zip(*iterables)]]

    def submit(self, function: Callable[..., Any], *args: Any) -> Any:
        """Start one task; the returned future's ``result()`` waits for it, ``done()`` says whether it has ended."""
        raise NotImplementedError

    def task_threads(self, tasks: int) -> int:
        """Threads each of ``tasks`` tasks run at once may use (a Dask worker runs one task per thread)."""
        return 1

    def ordered(self, function: Callable[..., Any], arguments: Iterable[tuple[Any, ...]], in_flight: int) -> Iterator[Any]:
        """``function(*args)`` for each argument tuple, results in input order, at most
        ``in_flight`` tasks running or waiting at once (so a long input streams)."""
        pending: deque[Any] = deque()
        for args in arguments:
            pending.append(self.submit(function, *args))
            if len(pending) >= in_flight:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()

    def close(self) -> None:
        """Release the workers."""


class ThreadRunner(Runner):
    """In this process, on ``threads`` threads: the compiled kernels and sorts release the GIL."""

    def __init__(self, threads: int) -> None:
        self.threads = max(1, threads)
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="delink-build")

    def submit(self, function: Callable[..., Any], *args: Any) -> Future[Any]:
        return self._pool.submit(function, *args)

    def task_threads(self, tasks: int) -> int:
        """The pool's threads that fewer tasks than threads (one shard) would leave idle, shared out."""
        return max(1, self.threads // max(1, tasks))

    def close(self) -> None:
        self._pool.shutdown(cancel_futures=True)
