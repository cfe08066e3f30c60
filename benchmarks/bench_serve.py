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

Every phase is bounded in requests and seconds, the server listens on 127.0.0.1 only and
is stopped at the end. Targets: overhead <= 15 % at 8 clients; no error below the limit.

    python benchmarks/bench_serve.py [--seconds 6] [--tab DIR] [--out benchmarks/results/serve/bench_serve.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Awaitable, Callable

import numpy as np
import orjson
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from serve_process import ServeProcess  # noqa: E402
from tab_testbed import load_tab  # noqa: E402

from spacy_delink.batch import assess_documents  # noqa: E402
from spacy_delink.corpus import read_jsonl_documents  # noqa: E402
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="Server seconds each repeat of a level aims at (sized by its warm-up).")
    parser.add_argument("--repeats", type=int, default=2, help="Server and in-process runs of each level, alternating.")
    parser.add_argument("--max-requests", type=int, default=2000, help="Most requests in one repeat of a level.")
    parser.add_argument("--overload-rounds", type=int, default=3, help="Rounds of the overload (2 at least: the memory is compared between the first and the last).")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="Documents per request of the levels.")
    parser.add_argument("--clients", type=int, nargs="+", default=list(CLIENTS), help="Concurrent clients of the levels.")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)), help="The server's workers and the in-process pool.")
    parser.add_argument("--worker-nice", type=int, default=WORKER_NICE, help="The server's --worker-nice, and the in-process pool's threads' too.")
    parser.add_argument("--tab", type=Path, default=TAB, help="TAB's JSON files [default: ../shared/data/tab; the samples when absent].")
    parser.add_argument("--out", type=Path, default=None, help="Also write the JSON here.")
    args = parser.parse_args()
    if args.overload_rounds < 2:
        parser.error("--overload-rounds must be 2 or more: the memory is compared between the first round and the last")
    queue = max(CLIENTS) - args.workers  # the 64 clients are exactly at the limit, never beyond
    limit = args.workers + queue
    pool = ThreadPoolExecutor(args.workers, initializer=lower_thread_priority, initargs=(args.worker_nice,))  # as the server's
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as folder, pool:
        work = Path(folder)
        name, index_path, documents = test_bed(work, args.tab)
        index = CorpusIndex(index_path)
        assess_documents(index, list(enumerate(documents)), K, ARITY)  # this process's kernels and index pages, as the server's
        started = time.perf_counter()
        server_args = [
            "--workers", str(args.workers), "--queue", str(queue), "--worker-nice", str(args.worker_nice), "--k", str(K), "--arity", str(ARITY), "--log-level", "warning",
            "--deadline", str(DEADLINE_S),
        ]
        with ServeProcess(index_path, *server_args, log=work / "serve.log") as process:
            start_seconds = time.perf_counter() - started
            levels = [
                level(process.url, process.pid, index, pool, documents, size, clients, args.seconds, args.repeats, args.max_requests)
                for size in args.sizes for clients in args.clients
            ]
            burst = overload(process, documents, limit, args.overload_rounds)
        at_8 = [level["overhead"] for level in levels if level["clients"] == 8]
        refusals = [r["refusal_ms_max"] for r in burst["rounds"] if r["refusal_ms_max"] is not None]
        result = {
            "benchmark": "delink serve: assess requests against the same work in-process",
            "command": "python benchmarks/bench_serve.py " + " ".join(sys.argv[1:]),
            "test_bed": name,
            "documents": len(documents),
            "settings": {"k": K, "arity": ARITY, "workers": args.workers, "worker_nice": args.worker_nice, "queue": queue, "limit": limit, "deadline_s": DEADLINE_S,
                         "seconds_per_repeat": args.seconds, "repeats": args.repeats, "max_requests": args.max_requests,
                         "overload_rounds": args.overload_rounds},
            "machine": {"cpus": os.cpu_count(), "load_average_at_end": [round(x, 2) for x in os.getloadavg()]},
            "server_start_seconds": round(start_seconds, 1),
            "levels": levels,
            "overload": burst,
            "targets": TARGETS,
            "met": {
                "overhead_at_8_clients": all(o <= TARGETS["overhead_at_8_clients"] for o in at_8),
                "no_error_below_the_limit": all(level["server"]["errors"] == 0 for level in levels),
                "refusals_within_100_ms": bool(refusals) and max(refusals) <= TARGETS["refusal_ms"],
                "every_extra_request_refused": all(
                    r["other_status"] == [] and r["connection_failures"] == 0 and r["extra_refused_429_503"] == r["extra_sent"]
                    and r["filling_answered_200"] == r["filled_with"] and r["retry_after_on_every_refusal"] for r in burst["rounds"]
                ),
                "nothing_lost": all(r["records_complete"] for r in burst["rounds"]),
                "memory_flat": burst["rss_growth_first_to_last_round"] <= TARGETS["memory_growth"],
            },
        }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
