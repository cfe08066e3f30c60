"""Load benchmark of `delink serve` against the same work done in-process, in one run. Prints one JSON object.

Assess requests of 1 and of 32 documents (TAB's de-identified test judgments, arity 3,
k = 2; the sample documents when ../shared/data/tab is absent) are sent by 1, 8 and 64
concurrent clients to a real server on 127.0.0.1, each client on one keep-alive connection
(a small asyncio HTTP/1.1 client, so the load generator takes little of the CPU it
shares with the server). The same requests then run in this process through the function
the server calls (``batch.assess_documents``) on a pool of the server's size, with the
same number of concurrent callers. Reported per level: p50/p99 latency and documents per
second of both, and the server's overhead ``server seconds / in-process seconds - 1``.

Then the overload: with ``--workers W --queue Q`` the server admits L = W + Q requests;
4 L clients send a 32-document request at once, three times. Every request beyond those
admitted must get 429 or 503 within 100 ms, every admitted one its full records (nothing
lost), and the server's resident memory must not grow from the first round to the last.

Every phase is bounded in requests and seconds, the server listens on 127.0.0.1 only and
is stopped at the end. Targets: overhead <= 15 % at 8 clients; no error below the limit.

    python benchmarks/bench_serve.py [--seconds 20] [--out benchmarks/results/serve/bench_serve.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

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

TAB = ROOT.parent / "shared" / "data" / "tab"
K, ARITY = 2, 3
SIZES = (1, 32)
CLIENTS = (1, 8, 64)
TARGETS = {"overhead_at_8_clients": 0.15, "refusal_ms": 100.0, "memory_growth": 0.05}
OVERLOAD_ROUNDS = 3
#: The server's deadline: 64 clients of 32 long documents queue for minutes on a busy 2-core machine.
DEADLINE_S = 600


# -- a small HTTP/1.1 client: one keep-alive connection per client --------------------------------


class Connection:
    """One TCP connection to the server, requests sent one after another on it."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        self.writer.write(head.encode("ascii") + body)
        sent = asyncio.ensure_future(self.writer.drain())  # read while writing: a refusal comes before the body is read
        status_line, *lines = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines if line)}
        content = await self.reader.readexactly(int(headers.get("content-length", "0")))
        await sent
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


def percentiles(latencies: list[float]) -> dict[str, float]:
    array = np.array(latencies) * 1000
    return {"p50_ms": round(float(np.percentile(array, 50)), 2), "p99_ms": round(float(np.percentile(array, 99)), 2)}


#: Once in each assess record (its phrases and combinations have no arity): counting it checks an answer
#: without parsing hundreds of kilobytes on the CPU the server needs.
RECORD_MARK = b'"arity":%d' % ARITY


def complete(content: bytes, documents: int) -> bool:
    """An answer holds one record per document (ids 0, 1, ... of ``texts``)."""
    return content.startswith(b'{"records":[{"id":0,') and content.count(RECORD_MARK) == documents


def body_of(texts: list[str]) -> bytes:
    return orjson.dumps({"texts": texts, "k": K, "arity": ARITY})


# -- one level: the server, then the same requests in-process --------------------------------------


async def _server_level(url: str, requests: list[list[str]], clients: int, seconds: float) -> dict[str, Any]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    bodies = [body_of(texts) for texts in requests]
    next_request = iter(range(len(requests)))
    latencies: list[float] = []
    done: list[int] = []
    errors: list[str] = []
    stop_at = time.monotonic() + seconds

    async def client() -> None:
        connection = Connection(host, int(port))
        try:
            for number in next_request:
                if time.monotonic() > stop_at:
                    break
                started = time.perf_counter()
                status, _, content = await connection.post("/v1/assess", bodies[number])
                latencies.append(time.perf_counter() - started)
                if status != 200 or not complete(content, len(requests[number])):
                    errors.append(f"{status}: {content[:120]!r}")
                done.append(number)
        finally:
            await connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - started
    documents = sum(len(requests[number]) for number in done)
    return {"requests": len(done), "errors": len(errors), "error_examples": errors[:3], "seconds": round(wall, 3),
            "docs_per_s": round(documents / wall, 1), **percentiles(latencies), "done": sorted(done)}


def _in_process_level(index: CorpusIndex, requests: list[list[str]], clients: int, workers: int) -> dict[str, Any]:
    """The same requests through ``assess_documents`` on a pool of the server's size, ``clients`` callers at once."""
    pending = iter(requests)
    lock = threading.Lock()
    latencies: list[float] = []
    with ThreadPoolExecutor(workers) as pool:

        def caller() -> None:
            while True:
                with lock:
                    texts = next(pending, None)
                if texts is None:
                    return
                started = time.perf_counter()
                pool.submit(assess_documents, index, list(enumerate(texts)), K, ARITY).result()
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        callers = [threading.Thread(target=caller) for _ in range(clients)]
        for thread in callers:
            thread.start()
        for thread in callers:
            thread.join()
        wall = time.perf_counter() - started
    documents = sum(len(r) for r in requests)
    return {"requests": len(requests), "seconds": round(wall, 3), "docs_per_s": round(documents / wall, 1), **percentiles(latencies)}


def requests_of(texts: list[str], size: int, count: int) -> list[list[str]]:
    """``count`` requests of ``size`` texts, cycling through the texts."""
    out, position = [], 0
    for _ in range(count):
        out.append([texts[(position + i) % len(texts)] for i in range(size)])
        position += size
    return out


# -- overload ---------------------------------------------------------------------------------------


async def _burst(url: str, body: bytes, documents: int, count: int) -> dict[str, Any]:
    host, port = url.removeprefix("http://").rsplit(":", 1)

    async def one() -> tuple[int, float, bool, str]:
        connection = Connection(host, int(port))
        try:
            started = time.perf_counter()
            status, headers, content = await connection.post("/v1/assess", body)
            seconds = time.perf_counter() - started
            return status, seconds, status != 200 or complete(content, documents), headers.get("retry-after", "")
        finally:
            await connection.close()

    results = await asyncio.gather(*(one() for _ in range(count)), return_exceptions=True)
    failures = [repr(r) for r in results if isinstance(r, BaseException)]
    answered = [r for r in results if not isinstance(r, BaseException)]
    refused = [seconds for status, seconds, _, _ in answered if status in (429, 503)]
    return {
        "sent": count,
        "answered_200": sum(status == 200 for status, _, _, _ in answered),
        "refused_429_503": len(refused),
        "other_status": sorted({status for status, _, _, _ in answered if status not in (200, 429, 503)}),
        "connection_failures": len(failures),
        "records_complete": all(ok for _, _, ok, _ in answered),
        "retry_after_on_every_refusal": all(retry.isdigit() for status, _, _, retry in answered if status in (429, 503)),
        "refusal_ms_max": round(max(refused) * 1000, 2) if refused else None,
        "refusal_ms_p50": round(float(np.median(refused)) * 1000, 2) if refused else None,
    }


def overload(process: ServeProcess, texts: list[str], limit: int) -> dict[str, Any]:
    request = requests_of(texts, 32, 1)[0]
    body = body_of(request)
    server = psutil.Process(process.pid)
    memory = [server.memory_info().rss]
    rounds = []
    for _ in range(OVERLOAD_ROUNDS):
        rounds.append(asyncio.run(_burst(process.url, body, len(request), 4 * limit)))
        memory.append(server.memory_info().rss)
    growth = memory[-1] / memory[1] - 1
    return {"limit": limit, "clients": 4 * limit, "rounds": rounds, "rss_mb": [round(m / 2**20, 1) for m in memory],
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
    parser.add_argument("--seconds", type=float, default=20.0, help="Longest phase of the server (the in-process one repeats its requests).")
    parser.add_argument("--requests", type=int, default=64, help="Most requests per phase (at least 2 per client).")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)), help="The server's workers and the in-process pool.")
    parser.add_argument("--tab", type=Path, default=TAB, help="TAB's JSON files [default: ../shared/data/tab; the samples when absent].")
    parser.add_argument("--out", type=Path, default=None, help="Also write the JSON here.")
    args = parser.parse_args()
    queue = max(CLIENTS) - args.workers  # the 64 clients are exactly at the limit, never beyond
    limit = args.workers + queue
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as folder:
        work = Path(folder)
        name, index_path, documents = test_bed(work, args.tab)
        index = CorpusIndex(index_path)
        assess_documents(index, list(enumerate(documents[:4])), K, ARITY)  # this process's kernels, as the server's
        started = time.perf_counter()
        server_args = [
            "--workers", str(args.workers), "--queue", str(queue), "--k", str(K), "--arity", str(ARITY), "--log-level", "warning",
            "--deadline", str(DEADLINE_S),
        ]
        with ServeProcess(index_path, *server_args, log=work / "serve.log") as process:
            start_seconds = time.perf_counter() - started
            levels = []
            for size in SIZES:
                warm = requests_of(documents, size, 4)
                asyncio.run(_server_level(process.url, warm, 2, 60))
                for clients in CLIENTS:
                    requests = requests_of(documents, size, max(args.requests, 2 * clients))
                    served = asyncio.run(_server_level(process.url, requests, clients, args.seconds))
                    same = [requests[number] for number in served.pop("done")]
                    local = _in_process_level(index, same, clients, args.workers)
                    levels.append({
                        "docs_per_request": size, "clients": clients, "server": served, "in_process": local,
                        "overhead": round(served["seconds"] / local["seconds"] - 1, 4),
                    })
            burst = overload(process, documents, limit)
        at_8 = [level["overhead"] for level in levels if level["clients"] == 8]
        refusals = [r["refusal_ms_max"] for r in burst["rounds"] if r["refusal_ms_max"] is not None]
        result = {
            "benchmark": "delink serve: assess requests against the same work in-process",
            "test_bed": name,
            "documents": len(documents),
            "settings": {"k": K, "arity": ARITY, "workers": args.workers, "queue": queue, "limit": limit, "deadline_s": DEADLINE_S,
                         "seconds_per_phase": args.seconds, "max_requests_per_phase": args.requests},
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
                    r["other_status"] == [] and r["connection_failures"] == 0 and r["answered_200"] + r["refused_429_503"] == r["sent"]
                    and r["retry_after_on_every_refusal"] for r in burst["rounds"]
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
