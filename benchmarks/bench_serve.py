"""Load benchmark of `delink serve` against the same work done in-process, in one run. Prints one JSON object.

Assess requests of 1 and of 32 documents (TAB's de-identified test judgments, arity 3,
k = 2; the sample documents when the TAB data is absent) are sent by 1, 8 and 64
concurrent clients to a real server on 127.0.0.1. Each client is one asyncio task on one
keep-alive connection of a small HTTP/1.1 client (so the load generator, which shares the
CPUs with the server, spends little of them: its CPU seconds are reported).

Per level: a warm-up of one request per client (not counted) measures the server's rate,
which sizes the level to about ``--seconds`` of work (one request per client at least):
the same list of requests (same documents, same order) then runs against the server and
in this process, where ``clients`` asyncio callers hand the requests to a pool of the
server's size and priority (``--worker-nice``) running the function the server calls
(``batch.assess_documents``). The two alternate server, in-process, in-process, server
(``--repeats`` 2), so a change in the machine's load over the level falls on both alike.
Reported: p50/p99 latency, documents/s, errors, CPU seconds of client, server and
in-process, and the overhead ``server seconds / in-process seconds - 1`` over all repeats.

Then the overload: the server admits L = workers + queue requests. Each round fills it with
L requests of 32 documents (waiting until /metrics shows all L admitted), opens 3 L more
connections, then sends a request on each at once (4 L in all): every extra request must
get 429 or 503 within 100 ms of its sending (measured by the client; the connecting, the
client's CPU and the time the server's event-loop thread ran and waited for a CPU are
reported beside it),
every admitted one its full records (nothing lost), and the server's resident memory must
stay flat from the first round to the last.

Slow clients (issue 35.4): a server at its defaults but ``--workers``; ``--attackers``
connections from 127.0.0.2 each send a request's head and then its body one byte every
5 s, connecting again once answered or dropped, for ``--slow-seconds``; meanwhile a
normal client from 127.0.0.3 sends one-document assess requests one after another,
waiting out each 429/503 for its ``Retry-After`` as ``DelinkClient`` does. Reported: what
the attackers got, and the normal client's statuses, the Retry-After values it was
given, when its first 200 came and its median latency.

Memory (issue 35.5): a server with ``--memory-concurrent`` workers gets one protect request
of ``--memory-docs`` texts of ``--memory-chars`` characters (the test bed's texts one after
another), then that many such requests at once; its resident size before, at its peak
(sampled every 20 ms) and 3 s after each round. ``cli_memory``: `delink protect` on one
JSONL line of each of ``--cli-chars`` characters, its peak resident size and its last stderr line.
The "before" figures of docs/serve.md are these phases run with ``PYTHONPATH`` on the
previous code (``code`` in the JSON says which).

Every phase is bounded in requests and seconds, the server listens on loopback addresses
only and is stopped at the end. Targets: overhead <= 15 % at 8 clients; no error below
the limit; the normal client answered under attack; memory given back after each round.

    python benchmarks/bench_serve.py [--only PHASE ...] [--seconds 6] [--tab DIR] [--out benchmarks/results/serve/bench_serve.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Awaitable, Callable

import httpx
import numpy as np
import orjson
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from serve_process import ServeProcess  # noqa: E402
from tab_testbed import load_tab  # noqa: E402

from spacy_delink.batch import assess_documents  # noqa: E402
from spacy_delink.corpus.rows import read_jsonl_documents  # noqa: E402
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder  # noqa: E402
from spacy_delink.linkage.tokenize import LinkageRules  # noqa: E402
from spacy_delink.serve.service import lower_thread_priority  # noqa: E402
from spacy_delink.serve.settings import WORKER_NICE  # noqa: E402

TAB = ROOT.parent / "shared" / "data" / "tab"
K, ARITY = 2, 3
SIZES = (1, 32)
CLIENTS = (1, 8, 64)
TARGETS = {"overhead_at_8_clients": 0.15, "refusal_ms": 100.0, "memory_growth": 0.05}
#: The server's deadline: 64 clients of 32 long documents queue for a minute on a busy 2-core machine.
DEADLINE_S = 600
#: Longest wait for the server to show every filling request admitted.
FILL_TIMEOUT_S = 60.0


# -- a small HTTP/1.1 client: one keep-alive connection per client --------------------------------


class Connection:
    """One TCP connection to the server, requests sent one after another on it."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
        await self.connect()
        assert self.reader is not None and self.writer is not None
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        self.writer.write(head.encode("ascii") + body)
        sent = asyncio.ensure_future(self.writer.drain())  # read while writing: a refusal comes before the body is read
        status_line, *lines = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines if line)}
        content = await self.reader.readexactly(int(headers.get("content-length", "0")))
        try:
            await sent
        except ConnectionError:  # a refused request's body need not arrive whole
            await self.close()
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return int(status_line.split()[1]), headers, content

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass
            self.writer = None


def percentiles(seconds: list[float]) -> dict[str, float]:
    array = np.array(seconds) * 1000
    return {"p50_ms": round(float(np.percentile(array, 50)), 2), "p99_ms": round(float(np.percentile(array, 99)), 2)}


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


#: Once in each assess record (its phrases and combinations have no arity): counting it checks an answer
#: without parsing hundreds of kilobytes on the CPU the server needs.
RECORD_MARK = b'"arity":%d' % ARITY


def complete(content: bytes, documents: int) -> bool:
    """An answer holds one record per document (ids 0, 1, ... of ``texts``)."""
    return content.startswith(b'{"records":[{"id":0,') and content.count(RECORD_MARK) == documents


def body_of(texts: list[str]) -> bytes:
    return orjson.dumps({"texts": texts, "k": K, "arity": ARITY})


def requests_of(texts: list[str], size: int, count: int) -> list[list[str]]:
    """``count`` requests of ``size`` texts, cycling through the texts."""
    return [[texts[(number * size + i) % len(texts)] for i in range(size)] for number in range(count)]


# -- one side of a level: the same requests, ``clients`` at a time ---------------------------------


async def _callers(count: int, clients: int, call: Callable[[int], Awaitable[None]]) -> float:
    """Requests 0 .. count-1, each taken by the next free one of ``clients`` callers; the wall seconds."""
    numbers = iter(range(count))

    async def caller() -> None:
        for number in numbers:
            await call(number)

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(min(clients, count))))
    return time.perf_counter() - started


async def _server_side(url: str, requests: list[list[str]], clients: int) -> dict[str, Any]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    bodies = [body_of(texts) for texts in requests]
    free = [Connection(host, int(port)) for _ in range(clients)]
    latencies: list[float] = []
    errors: list[str] = []

    async def call(number: int) -> None:
        connection = free.pop()
        try:
            started = time.perf_counter()
            status, _, content = await connection.request("POST", "/v1/assess", bodies[number])
            latencies.append(time.perf_counter() - started)
            if status != 200 or not complete(content, len(requests[number])):
                errors.append(f"{status}: {content[:120]!r}")
        finally:
            free.append(connection)

    try:
        wall = await _callers(len(requests), clients, call)
    finally:
        for connection in free:
            await connection.close()
    return {"wall": wall, "latencies": latencies, "errors": errors}


async def _in_process_side(index: CorpusIndex, pool: ThreadPoolExecutor, requests: list[list[str]], clients: int) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    latencies: list[float] = []

    async def call(number: int) -> None:
        started = time.perf_counter()
        await loop.run_in_executor(pool, assess_documents, index, list(enumerate(requests[number])), K, ARITY)
        latencies.append(time.perf_counter() - started)

    return {"wall": await _callers(len(requests), clients, call), "latencies": latencies, "errors": []}


def _side(run: Callable[[], Awaitable[dict[str, Any]]], processes: dict[str, psutil.Process]) -> dict[str, Any]:
    before = {name: cpu_seconds(process) for name, process in processes.items()}
    result = asyncio.run(run())  # type: ignore[arg-type]
    result["cpu"] = {name: cpu_seconds(process) - before[name] for name, process in processes.items()}
    return result


def _summary(sides: list[dict[str, Any]], documents: int) -> dict[str, Any]:
    wall = sum(side["wall"] for side in sides)
    errors = [error for side in sides for error in side["errors"]]
    cpu = {name: round(sum(side["cpu"][name] for side in sides), 2) for name in sides[0]["cpu"]}
    return {"requests": sum(len(side["latencies"]) for side in sides), "errors": len(errors), "error_examples": errors[:3],
            "seconds": round(wall, 3), "docs_per_s": round(documents * len(sides) / wall, 1),
            **percentiles([s for side in sides for s in side["latencies"]]), "cpu_seconds": cpu}


def level(url: str, server_pid: int, index: CorpusIndex, pool: ThreadPoolExecutor, texts: list[str], size: int, clients: int,
          seconds: float, repeats: int, max_requests: int) -> dict[str, Any]:
    """One (documents per request, clients) level: warm-up, then server and in-process in turn on the same requests."""
    me, server = psutil.Process(), psutil.Process(server_pid)
    warm = requests_of(texts[::-1], size, clients)  # one request per client: connections opened, threads started
    warm_up = asyncio.run(_server_side(url, warm, clients))
    rate = len(warm) / warm_up["wall"]  # requests per second, under this level's concurrency
    count = int(min(max_requests, max(clients, round(rate * seconds))))
    requests = requests_of(texts, size, count)
    server_runs, local_runs = [], []
    for repeat in range(repeats):
        order = ("server", "in_process") if repeat % 2 == 0 else ("in_process", "server")
        for side in order:
            if side == "server":
                server_runs.append(_side(lambda: _server_side(url, requests, clients), {"client": me, "server": server}))
            else:
                local_runs.append(_side(lambda: _in_process_side(index, pool, requests, clients), {"in_process": me}))
    documents = count * size
    served, local = _summary(server_runs, documents), _summary(local_runs, documents)
    return {
        "docs_per_request": size, "clients": clients, "requests_per_repeat": count, "repeats": repeats,
        "server": served, "in_process": local,
        "overhead": round(served["seconds"] / local["seconds"] - 1, 4),
        "overhead_per_repeat": [round(s["wall"] / i["wall"] - 1, 4) for s, i in zip(server_runs, local_runs)],
    }


# -- overload ---------------------------------------------------------------------------------------


async def _in_progress(connection: Connection) -> float:
    _, _, content = await connection.request("GET", "/metrics")
    for line in content.decode().splitlines():
        if line.startswith("delink_requests_in_progress "):
            return float(line.split()[1])
    raise RuntimeError("the server's /metrics has no delink_requests_in_progress")


def _loop_thread_schedule(pid: int) -> tuple[float, float]:
    """Seconds the server's main (event-loop) thread has run, and has waited runnable for a CPU (Linux; else 0, 0)."""
    path = Path(f"/proc/{pid}/task/{pid}/schedstat")
    if not path.exists():
        return 0.0, 0.0
    ran, waited, _ = (int(field) for field in path.read_text().split())
    return ran / 1e9, waited / 1e9


async def _round(url: str, server_pid: int, body: bytes, documents: int, limit: int) -> dict[str, Any]:
    """Fill the server with ``limit`` requests, then send ``3 limit`` more at once; how each was answered."""
    host, port = url.removeprefix("http://").rsplit(":", 1)

    async def one(connection: Connection) -> tuple[int, float, bool, str]:
        try:
            started = time.perf_counter()
            status, headers, content = await connection.request("POST", "/v1/assess", body)
            return status, time.perf_counter() - started, status != 200 or complete(content, documents), headers.get("retry-after", "")
        finally:
            await connection.close()

    filling = [asyncio.ensure_future(one(Connection(host, int(port)))) for _ in range(limit)]
    probe = Connection(host, int(port))
    try:
        deadline = time.monotonic() + FILL_TIMEOUT_S
        while await _in_progress(probe) < limit:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not admit {limit} requests within {FILL_TIMEOUT_S:.0f} s")
            await asyncio.sleep(0.02)
    finally:
        await probe.close()
    extra = [Connection(host, int(port)) for _ in range(3 * limit)]
    connecting = time.perf_counter()
    await asyncio.gather(*(connection.connect() for connection in extra))
    connect_seconds = time.perf_counter() - connecting
    me = psutil.Process()
    client_cpu, (loop_ran, loop_waited), sent = cpu_seconds(me), _loop_thread_schedule(server_pid), time.perf_counter()
    answers = await asyncio.gather(*(one(connection) for connection in extra), return_exceptions=True)
    wall = time.perf_counter() - sent
    client_cpu = cpu_seconds(me) - client_cpu
    loop_ran, loop_waited = (after - before for after, before in zip(_loop_thread_schedule(server_pid), (loop_ran, loop_waited)))
    filled = await asyncio.gather(*filling, return_exceptions=True)
    failures = [repr(r) for r in [*answers, *filled] if isinstance(r, BaseException)]
    extra_answers = [r for r in answers if not isinstance(r, BaseException)]
    fill_answers = [r for r in filled if not isinstance(r, BaseException)]
    refused = [seconds for status, seconds, _, _ in extra_answers if status in (429, 503)]
    return {
        "filled_with": limit,
        "filling_answered_200": sum(status == 200 for status, _, _, _ in fill_answers),
        "extra_sent": 3 * limit,
        "extra_refused_429_503": len(refused),
        "other_status": sorted({status for status, _, _, _ in extra_answers if status not in (429, 503)}
                               | {status for status, _, _, _ in fill_answers if status != 200}),
        "connection_failures": len(failures),
        "records_complete": all(ok for _, _, ok, _ in fill_answers),
        "retry_after_on_every_refusal": all(retry.isdigit() for status, _, _, retry in extra_answers if status in (429, 503)),
        "refusal_ms_p50": round(float(np.median(refused)) * 1000, 2) if refused else None,
        "refusal_ms_p99": round(float(np.percentile(refused, 99)) * 1000, 2) if refused else None,
        "refusal_ms_max": round(max(refused) * 1000, 2) if refused else None,
        "connecting_the_extra_ms": round(connect_seconds * 1000, 2),
        "extra_requests_wall_ms": round(wall * 1000, 2),
        "client_cpu_ms": round(client_cpu * 1000, 1),
        "server_loop_thread_ran_ms": round(loop_ran * 1000, 1),
        "server_loop_thread_waited_for_a_cpu_ms": round(loop_waited * 1000, 1),
    }


def overload(process: ServeProcess, texts: list[str], limit: int, rounds: int) -> dict[str, Any]:
    request = requests_of(texts, 32, 1)[0]
    body = body_of(request)
    server = psutil.Process(process.pid)
    memory = [server.memory_info().rss]
    results = []
    for _ in range(rounds):
        results.append(asyncio.run(_round(process.url, process.pid, body, len(request), limit)))
        memory.append(server.memory_info().rss)
    growth = memory[-1] / memory[1] - 1
    return {"limit": limit, "clients": 4 * limit, "body_bytes": len(body), "rounds": results,
            "rss_mb_before_and_after_each_round": [round(m / 2**20, 1) for m in memory],
            "rss_growth_first_to_last_round": round(growth, 4)}


# -- slow clients: bodies trickled in while a normal client asks --------------------------------------


SLOW_ADDRESS, NORMAL_ADDRESS = "127.0.0.2", "127.0.0.3"  # two client addresses, both loopback (Linux answers all of 127/8)
#: The red team's trickle: one byte of the body every 5 seconds.
TRICKLE_EVERY_S = 5.0
#: An attacker's pause before it connects again after an answer (keeps the benchmark's own client off the CPUs).
RECONNECT_AFTER_S = 0.2


async def _trickler(host: str, port: int, stop: float, outcomes: list[str]) -> None:
    """One attacking connection after another until ``stop``: each sends a request's head and then its body one
    byte every ``TRICKLE_EVERY_S`` seconds, and reconnects once answered or dropped."""
    while time.monotonic() < stop:
        try:
            reader, writer = await asyncio.open_connection(host, port, local_addr=(SLOW_ADDRESS, 0))
        except OSError as err:
            outcomes.append(f"connect failed: {err.strerror}")
            await asyncio.sleep(0.5)
            continue
        writer.write(f"POST /v1/assess HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n".encode())
        answer = asyncio.ensure_future(reader.readuntil(b"\r\n\r\n"))
        try:
            while not answer.done() and time.monotonic() < stop:
                writer.write(b" ")
                await asyncio.wait({answer}, timeout=min(TRICKLE_EVERY_S, max(stop - time.monotonic(), 0.01)))
            if answer.done() and answer.exception() is None:
                outcomes.append(answer.result().split(b" ", 2)[1].decode())
            elif answer.done():
                outcomes.append("dropped")
        except (ConnectionError, OSError):
            outcomes.append("dropped")
        finally:
            answer.cancel()
            writer.close()
        await asyncio.sleep(RECONNECT_AFTER_S)


async def _normal_client(host: str, port: int, start: float, stop: float, texts: list[str]) -> dict[str, Any]:
    """One-document assess requests, one after another from another address, each 429 or 503 waited out for its
    Retry-After as ``DelinkClient`` does; what each got."""
    await asyncio.sleep(max(start - time.monotonic(), 0.0))
    began = time.monotonic()
    first_200: float | None = None
    statuses: list[int] = []
    retry_after: list[str] = []
    answered_after: list[float] = []
    number = 0
    while time.monotonic() < stop:
        body = body_of([texts[number % len(texts)]])
        number += 1
        sent = time.monotonic()
        try:
            reader, writer = await asyncio.open_connection(host, port, local_addr=(NORMAL_ADDRESS, 0))
            writer.write(f"POST /v1/assess HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), max(stop - sent, 0.01) + DEADLINE_S)).decode("latin-1")
            writer.close()
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            statuses.append(0)
            continue
        status = int(head.split(" ", 2)[1])
        statuses.append(status)
        if status == 200:
            answered_after.append(time.monotonic() - sent)
            first_200 = time.monotonic() - began if first_200 is None else first_200
            continue
        wait = next((line.split(":", 1)[1].strip() for line in head.split("\r\n") if line.lower().startswith("retry-after:")), "")
        retry_after.append(wait)
        await asyncio.sleep(min(float(wait) if wait.isdigit() else 1.0, max(stop - time.monotonic(), 0.0)))
    return {
        "requests": len(statuses),
        "answered_200": statuses.count(200),
        "statuses": {str(status): statuses.count(status) for status in sorted(set(statuses))},
        "retry_after_seen": sorted(set(retry_after), key=lambda value: (len(value), value)),
        "first_200_after_s": None if first_200 is None else round(first_200, 2),
        "latency_200_ms_p50": round(float(np.median(answered_after)) * 1000, 1) if answered_after else None,
    }


def slow_clients(index: Path, texts: list[str], workers: int, attackers: int, seconds: float, log: Path) -> dict[str, Any]:
    """A server at its defaults but ``--workers``; ``attackers`` connections from one address trickle bodies for
    ``seconds`` while a normal client, from another address, sends one-document requests."""
    with ServeProcess(index, "--workers", str(workers), "--log-level", "warning", log=log) as process:
        host, port = process.url.removeprefix("http://").rsplit(":", 1)

        async def run() -> tuple[list[str], dict[str, Any]]:
            stop = time.monotonic() + seconds
            outcomes: list[str] = []
            attacking = [asyncio.ensure_future(_trickler(host, int(port), stop, outcomes)) for _ in range(attackers)]
            normal = await _normal_client(host, int(port), time.monotonic() + 1.0, stop, texts)
            await asyncio.gather(*attacking)
            return outcomes, normal

        outcomes, normal = asyncio.run(run())
    return {
        "workers": workers, "attacking_connections": attackers, "attacker_address": SLOW_ADDRESS, "normal_client_address": NORMAL_ADDRESS,
        "seconds": seconds, "trickle_every_s": TRICKLE_EVERY_S,
        "attackers_answered": {outcome: outcomes.count(outcome) for outcome in sorted(set(outcomes))},
        "normal_client": normal,
    }


# -- memory: long protect requests, and one long line through the command line --------------------------


class PeakRss:
    """The largest resident size of a process (and its children), sampled every 20 ms on a thread."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = 0
        self._stop = False
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop:
            try:
                rss = self.process.memory_info().rss + sum(child.memory_info().rss for child in self.process.children(recursive=True))
            except psutil.Error:
                return
            self.peak = max(self.peak, rss)
            time.sleep(0.02)

    def __enter__(self) -> "PeakRss":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop = True
        self._thread.join()


def long_texts(texts: list[str], count: int, chars: int) -> list[str]:
    """``count`` texts of ``chars`` characters each, the test bed's texts one after another (each starting elsewhere)."""
    joined = " ".join(texts)
    while len(joined) < chars + len(texts[0]) * count:
        joined += " " + joined
    return [joined[number * len(texts[0]) % len(joined):][:chars] for number in range(count)]


def memory(index: Path, texts: list[str], documents: int, chars: int, concurrent: int, log: Path) -> dict[str, Any]:
    """The server's resident size around one protect request of ``documents`` texts of ``chars`` characters, then
    ``concurrent`` such requests at once: before, at its peak, and 3 s after each answer."""
    body = orjson.dumps({"texts": long_texts(texts, documents, chars)})
    args = ["--workers", str(concurrent), "--deadline", str(DEADLINE_S), "--max-body-bytes", str(max(len(body), 8 * 2**20)), "--log-level", "warning"]
    with ServeProcess(index, *args, log=log) as process, httpx.Client(base_url=process.url, timeout=DEADLINE_S) as http:
        server = psutil.Process(process.pid)
        rounds = []
        for at_once in (1, concurrent):
            before = server.memory_info().rss
            started = time.perf_counter()
            with PeakRss(process.pid) as peak, ThreadPoolExecutor(at_once) as pool:
                statuses = [r.status_code for r in pool.map(lambda _: http.post("/v1/protect", content=body, headers={"Content-Type": "application/json"}), range(at_once))]
            seconds = time.perf_counter() - started
            time.sleep(3.0)
            rounds.append({
                "requests_at_once": at_once, "statuses": statuses, "seconds": round(seconds, 1),
                "rss_mb_before": round(before / 2**20, 1), "rss_mb_peak": round(peak.peak / 2**20, 1),
                "rss_mb_3s_after": round(server.memory_info().rss / 2**20, 1),
            })
    return {"documents_per_request": documents, "chars_per_document": chars, "body_bytes": len(body), "workers": concurrent, "rounds": rounds}


def cli_memory(index: Path, texts: list[str], sizes: list[int], work: Path) -> list[dict[str, Any]]:
    """`delink protect` on a JSONL file of one line holding a text of each of ``sizes`` characters: its peak resident
    size, seconds, exit status and last stderr line (the one-line refusal beyond the bound)."""
    runs = []
    for chars in sizes:
        inputs = work / f"line-{chars}.jsonl"
        inputs.write_text(orjson.dumps({"id": "long", "text": long_texts(texts, 1, chars)[0]}).decode() + "\n", encoding="utf-8")
        started = time.perf_counter()
        command = [sys.executable, "-m", "spacy_delink", "protect", str(index), str(inputs), "--output", str(work / f"line-{chars}.out.jsonl")]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        with PeakRss(process.pid) as peak:
            _, errors = process.communicate(timeout=3600)
        lines = [line for line in errors.splitlines() if line.strip()]
        runs.append({"chars": chars, "line_bytes": inputs.stat().st_size, "exit_status": process.returncode,
                     "seconds": round(time.perf_counter() - started, 1), "rss_mb_peak": round(peak.peak / 2**20, 1),
                     "last_stderr_line": lines[-1][:300] if lines else ""})
    return runs


# -- the run ---------------------------------------------------------------------------------------


def test_bed(work: Path, tab_dir: Path) -> tuple[str, Path, list[str]]:
    """(name, index, de-identified texts): TAB when present, else the shipped samples."""
    if tab_dir.exists():
        tab = load_tab(tab_dir)
        IndexBuilder(LinkageRules()).build(iter(tab.corpus), work / "index")
        return "TAB (1,268 ECHR judgments; the 127 manually de-identified test documents)", work / "index", [t for _, t in tab.inputs]
    IndexBuilder(LinkageRules()).build(read_jsonl_documents(ROOT / "samples" / "corpus.jsonl"), work / "index")
    inputs = [text for _, text in read_jsonl_documents(ROOT / "samples" / "deidentified.jsonl")]
    return "samples/ (48 invented documents; 12 de-identified)", work / "index", inputs


PHASES = ("levels", "overload", "slow_clients", "memory", "cli_memory")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="+", choices=PHASES, default=list(PHASES), help="Phases to run [default: all].")
    parser.add_argument("--seconds", type=float, default=6.0, help="Server seconds each repeat of a level aims at (sized by its warm-up).")
    parser.add_argument("--repeats", type=int, default=2, help="Server and in-process runs of each level, alternating.")
    parser.add_argument("--max-requests", type=int, default=2000, help="Most requests in one repeat of a level.")
    parser.add_argument("--overload-rounds", type=int, default=3, help="Rounds of the overload (2 at least: the memory is compared between the first and the last).")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="Documents per request of the levels.")
    parser.add_argument("--clients", type=int, nargs="+", default=list(CLIENTS), help="Concurrent clients of the levels.")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)), help="The server's workers and the in-process pool.")
    parser.add_argument("--worker-nice", type=int, default=WORKER_NICE, help="The server's --worker-nice, and the in-process pool's threads' too.")
    parser.add_argument("--attackers", type=int, default=10, help="slow_clients: connections trickling bodies (the red team's 10: every place at 2 workers).")
    parser.add_argument("--slow-seconds", type=float, default=30.0, help="slow_clients: how long the attack lasts.")
    parser.add_argument("--memory-docs", type=int, default=40, help="memory: texts per protect request.")
    parser.add_argument("--memory-chars", type=int, default=199_000, help="memory: characters per text.")
    parser.add_argument("--memory-concurrent", type=int, default=3, help="memory: requests at once in the second round (and the server's workers).")
    parser.add_argument("--cli-chars", type=int, nargs="+", default=[2_000, 50_000, 199_000, 250_000],
                        help="cli_memory: characters of the one line given to `delink protect`, one run each.")
    parser.add_argument("--tab", type=Path, default=TAB, help="TAB's JSON files [default: ../shared/data/tab; the samples when absent].")
    parser.add_argument("--out", type=Path, default=None, help="Also write the JSON here.")
    args = parser.parse_args()
    if args.overload_rounds < 2:
        parser.error("--overload-rounds must be 2 or more: the memory is compared between the first round and the last")
    queue = max(CLIENTS) - args.workers  # the 64 clients are exactly at the limit, never beyond
    limit = args.workers + queue
    result: dict[str, Any] = {
        "benchmark": "delink serve: assess requests against the same work in-process; slow clients; memory",
        "command": "python benchmarks/bench_serve.py " + " ".join(sys.argv[1:]),
        "code": os.environ.get("PYTHONPATH", "") or str(ROOT),
    }
    pool = ThreadPoolExecutor(args.workers, initializer=lower_thread_priority, initargs=(args.worker_nice,))  # as the server's
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as folder, pool:
        work = Path(folder)
        name, index_path, documents = test_bed(work, args.tab)
        result.update({"test_bed": name, "documents": len(documents)})
        result["settings"] = {"k": K, "arity": ARITY, "workers": args.workers, "worker_nice": args.worker_nice, "queue": queue, "limit": limit,
                              "deadline_s": DEADLINE_S, "seconds_per_repeat": args.seconds, "repeats": args.repeats,
                              "max_requests": args.max_requests, "overload_rounds": args.overload_rounds}
        if {"levels", "overload"} & set(args.only):
            index = CorpusIndex(index_path)
            assess_documents(index, list(enumerate(documents)), K, ARITY)  # this process's kernels and index pages, as the server's
            started = time.perf_counter()
            server_args = [
                "--workers", str(args.workers), "--queue", str(queue), "--worker-nice", str(args.worker_nice), "--k", str(K), "--arity", str(ARITY),
                "--log-level", "warning", "--deadline", str(DEADLINE_S), "--max-per-client", str(limit),  # one client address fills every place
            ]
            with ServeProcess(index_path, *server_args, log=work / "serve.log") as process:
                result["server_start_seconds"] = round(time.perf_counter() - started, 1)
                if "levels" in args.only:
                    result["levels"] = [
                        level(process.url, process.pid, index, pool, documents, size, clients, args.seconds, args.repeats, args.max_requests)
                        for size in args.sizes for clients in args.clients
                    ]
                if "overload" in args.only:
                    result["overload"] = overload(process, documents, limit, args.overload_rounds)
        if "slow_clients" in args.only:
            result["slow_clients"] = slow_clients(index_path, documents, args.workers, args.attackers, args.slow_seconds, work / "slow.log")
        if "memory" in args.only:
            result["memory"] = memory(index_path, documents, args.memory_docs, args.memory_chars, args.memory_concurrent, work / "memory.log")
        if "cli_memory" in args.only:
            result["cli_memory"] = cli_memory(index_path, documents, args.cli_chars, work)
    result["machine"] = {"cpus": os.cpu_count(), "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}
    result["targets"] = TARGETS
    result["met"] = met(result)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")


def met(result: dict[str, Any]) -> dict[str, bool]:
    """Each target of the phases that ran, met or not."""
    met: dict[str, bool] = {}
    levels, burst = result.get("levels"), result.get("overload")
    if levels is not None:
        met["overhead_at_8_clients"] = all(level["overhead"] <= TARGETS["overhead_at_8_clients"] for level in levels if level["clients"] == 8)
        met["no_error_below_the_limit"] = all(level["server"]["errors"] == 0 for level in levels)
    if burst is not None:
        refusals = [r["refusal_ms_max"] for r in burst["rounds"] if r["refusal_ms_max"] is not None]
        met["refusals_within_100_ms"] = bool(refusals) and max(refusals) <= TARGETS["refusal_ms"]
        met["every_extra_request_refused"] = all(
            r["other_status"] == [] and r["connection_failures"] == 0 and r["extra_refused_429_503"] == r["extra_sent"]
            and r["filling_answered_200"] == r["filled_with"] and r["retry_after_on_every_refusal"] for r in burst["rounds"]
        )
        met["nothing_lost"] = all(r["records_complete"] for r in burst["rounds"])
        met["memory_flat"] = burst["rss_growth_first_to_last_round"] <= TARGETS["memory_growth"]
    if "slow_clients" in result:
        met["normal_client_answered_under_attack"] = result["slow_clients"]["normal_client"]["answered_200"] > 0
    if "memory" in result:
        rounds = result["memory"]["rounds"]
        met["memory_given_back"] = all(r["rss_mb_3s_after"] <= r["rss_mb_before"] * (1 + TARGETS["memory_growth"]) for r in rounds)
    return met


if __name__ == "__main__":
    main()
