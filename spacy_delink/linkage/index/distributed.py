"""Running the sharded build's tasks (``shards.py``) on Dask: a LocalCluster or a scheduler.

``--workers N`` starts a ``dask.distributed.LocalCluster`` of N single-threaded worker
processes on this machine; ``--scheduler tcp://host:port`` (or ``tls://``) uses an existing
cluster. Each level is one ``Client.map`` of independent tasks followed by a ``gather``:
the tasks only read and write files under the build's work directory and the partial
index, so that directory must be on a file system every worker sees (the default, beside
the output, is; with ``--scheduler`` choose ``--work-dir`` on shared storage). A task that
raises or whose worker dies is retried (``retries``); if it still fails, the build stops
with the task's error and the partial index is removed, so no half-written index is left.
A corpus given as URLs (``s3://``, ``https://``, ...) is opened by each worker itself with
fsspec and its own credentials; only the URL travels with the task (``corpus.py``).

The tasks carry the index secret to the workers (to digest tokens); on a network that is
not trusted, use a ``tls://`` scheduler address so Dask encrypts its traffic.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from ...errors import DelinkError, InputError
from .runners import Runner

#: Attempts after the first for each task (a killed worker or a transient error).
RETRIES = 2


def _require_dask() -> Any:
    try:
        from dask import distributed
    except ImportError:
        raise InputError(
            "--workers/--scheduler need Dask: pip install 'spacy-delink[distributed]' (or dask[distributed])"
        ) from None
    return distributed


class DaskRunner(Runner):
    """Runs each batch of tasks on a Dask cluster, with retries, and gathers the results in order."""

    def __init__(self, workers: int | None = None, scheduler: str | None = None, retries: int | None = None) -> None:
        if (workers is None) == (scheduler is None):
            raise InputError("give either --workers N (a local Dask cluster) or --scheduler ADDRESS, not both")
        if workers is not None and workers < 1:
            raise InputError(f"--workers must be at least 1, got {workers}")
        distributed = _require_dask()
        self.retries = RETRIES if retries is None else retries
        self._cluster = None
        try:
            if scheduler is not None:
                self.client = distributed.Client(scheduler, timeout="30s")
            else:
                self._cluster = distributed.LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                )
                self.client = distributed.Client(self._cluster)
        except OSError as err:
            where = scheduler if scheduler is not None else "a local cluster"
            raise InputError(f"cannot reach the Dask scheduler at {where} ({err}); check --scheduler") from None

    def map(self, function: Callable[..., Any], *iterables: Sequence[Any]) -> list[Any]:
        futures = self.client.map(function, *iterables, retries=self.retries, pure=False)
        return list(self._gather(function, futures))

    def submit(self, function: Callable[..., Any], *args: Any) -> "_Result":
        return _Result(self, function, self.client.submit(function, *args, retries=self.retries, pure=False))

    def _gather(self, function: Callable[..., Any], futures: Any) -> Any:
        try:
            return self.client.gather(futures)
        except DelinkError:
            raise
        except Exception as err:  # the task's own error, or Dask's KilledWorker, after the retries
            self.client.cancel(futures)
            raise DelinkError(
                f"task {function.__name__} failed after {self.retries} retries ({type(err).__name__}: {err}); "
                "the run stopped and wrote nothing"
            ) from err

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()


class _Result:
    """A submitted task; ``result()`` waits for it and reports a failure as ``DelinkError``."""

    def __init__(self, runner: DaskRunner, function: Callable[..., Any], future: Any) -> None:
        self._runner, self._function, self._future = runner, function, future

    def done(self) -> bool:
        return bool(self._future.done())

    def result(self) -> Any:
        return self._runner._gather(self._function, self._future)
