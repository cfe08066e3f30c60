"""`delink serve` as a real uvicorn process on 127.0.0.1: every endpoint, every refusal, auth, limits, load.

The records must be the very records `python -m spacy_delink assess` and `... protect` write
for the same texts, also when assess and protect requests run concurrently; every refusal is
``{"error": {"code", "message"}}`` with its status; texts never reach the log. Overload,
deadlines and clients that leave are made deterministic with an LLM endpoint that takes
its time (tests/fake_openai_server.py): a request is then certainly still in the server.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fake_openai_server import REPLACEMENT, FakeOpenAI
from serve_process import ServeProcess
from spacy_delink.serve.client import DelinkClient, ServeError

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
MARKER = "Zorblatt Quuxington"  # a name no log line may ever show
#: Bounds of every waiting loop here: each stops after this many seconds whatever happens.
WAIT_S = 60.0
#: What a work request's body must be declared as (`json=` sets it; a raw `content=` body says it here).
JSON = {"Content-Type": "application/json"}


def run_cli(*args: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spacy_delink", *map(str, args)], capture_output=True, text=True, timeout=600)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def metrics(client: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {WAIT_S:.0f} s waiting for {what}")
        time.sleep(0.05)


def address(server: ServeProcess) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").split(":")
    return host, int(port)


def read_response(raw: socket.socket) -> tuple[bytes, bytes]:
    """A response's head and body from a socket, however the server's writes were split into segments."""
    received = b""
    while b"\r\n\r\n" not in received and (chunk := raw.recv(65536)):
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")))
    while len(body) < length and (chunk := raw.recv(65536)):
        body += chunk
    return head, body


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    assert body["error"]["message"] and "Traceback" not in response.text
    return body


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serve")


@pytest.fixture(scope="module")
def index(workdir: Path) -> Path:
    result = run_cli("index", SAMPLES / "corpus.jsonl", "--output", workdir / "index")
    assert result.returncode == 0, result.stderr
    return workdir / "index"


@pytest.fixture(scope="module")
def documents() -> list[dict[str, Any]]:
    return read_jsonl(SAMPLES / "deidentified.jsonl")


@pytest.fixture(scope="module")
def cli_records(index: Path, workdir: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """What the command line writes for the sample documents at k = 2, arity 3, by id."""
    records = {}
    for command in ("assess", "protect"):
        out = workdir / f"cli-{command}.jsonl"
        result = run_cli(command, index, SAMPLES / "deidentified.jsonl", "--k", 2, "--arity", 3, "--output", out)
        assert result.returncode == 0, result.stderr
        records[command] = {record["id"]: record for record in read_jsonl(out)}
    return records


@pytest.fixture(scope="module")
def server(index: Path, workdir: Path) -> Iterator[ServeProcess]:
    """The defaults: no key (loopback only), k >= 2, arity >= 3, the Mask model; 2 workers and 10 places on any
    machine, all of which this test's one client address may hold (8 requests at once below)."""
    with ServeProcess(index, "--workers", "2", "--max-per-client", "10", log=workdir / "default.log") as process:
        yield process


@pytest.fixture
def client(server: ServeProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=120) as http:
        yield http


# -- the endpoints -------------------------------------------------------------------------


def test_health_readiness_and_settings(client: httpx.Client, server: ServeProcess) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
    settings = client.get("/v1/settings").json()
    assert (settings["k"], settings["arity"], settings["allow_weaker"], settings["auth"]) == (2, 3, False, False)
    output = server.output()
    assert "no API key" in output and "loopback interface only" in output
    assert output.index("kernels compiled") < output.index("serving "), "the port opened before the kernels were compiled"


def test_concurrent_assess_and_protect_give_the_cli_records(
    client: httpx.Client, server: ServeProcess, documents: list[dict[str, Any]], cli_records: dict[str, dict[str, dict[str, Any]]]
) -> None:
    def one(task: tuple[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        endpoint, batch = task
        with httpx.Client(base_url=server.url, timeout=120) as http:
            response = http.post(f"/v1/{endpoint}", json={"documents": [{"id": d["id"], "text": d["text"]} for d in batch]})
        assert response.status_code == 200, response.text
        records: list[dict[str, Any]] = response.json()["records"]
        return records

    tasks = [(endpoint, [document]) for document in documents for endpoint in ("assess", "protect")]
    tasks += [("assess", documents), ("protect", documents), ("assess", documents[::-1]), ("protect", documents[1::2])]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(one, tasks))
    for (endpoint, batch), records in zip(tasks, answers):
        assert [r["id"] for r in records] == [d["id"] for d in batch]
        for record in records:
            assert record == cli_records[endpoint][record["id"]]
    assert all(r["protected"] and r["protected_under"]["k"] == 2 and r["protected_under"]["arity"] == 3 for r in answers[1])


def test_one_text_texts_and_documents_give_the_same_records(client: httpx.Client, documents: list[dict[str, Any]]) -> None:
    text = documents[0]["text"]
    one = client.post("/v1/assess", json={"text": text}).json()["records"]
    listed = client.post("/v1/assess", json={"texts": [text, text]}).json()["records"]
    named = client.post("/v1/assess", json={"documents": [{"id": "x", "text": text}]}).json()["records"]
    assert [r["id"] for r in one + listed + named] == [0, 0, 1, "x"]
    strip = [{key: value for key, value in r.items() if key != "id"} for r in one + listed + named]
    assert all(r == strip[0] for r in strip) and strip[0]["k"] == 2 and strip[0]["arity"] == 3
    assert client.post("/v1/assess", json={"texts": []}).json() == {"records": []}
    stronger = client.post("/v1/assess", json={"text": text, "k": 5, "arity": 3}).json()["records"][0]
    assert (stronger["k"], stronger["arity"]) == (5, 3)
    protected = client.post("/v1/protect", json={"text": text, "k": 3}).json()["records"][0]
    assert protected["protected"] and protected["protected_under"]["k"] == 3


BAD_REQUESTS = [
    (b"{not json", 400, "invalid_json"),
    (b'["a list"]', 422, "invalid_request"),
    (b'{"text": "a", "texts": ["b"]}', 422, "invalid_request"),
    (b'{}', 422, "invalid_request"),
    (b'{"texts": "not a list"}', 422, "invalid_request"),
    (b'{"texts": [1, 2]}', 422, "invalid_request"),
    (b'{"text": "a", "arty": 3}', 422, "invalid_request"),
    (b'{"text": "a", "k": 1}', 422, "invalid_request"),
    (b'{"text": "a", "k": true}', 422, "invalid_request"),
    (b'{"text": "a", "k": "3"}', 422, "invalid_request"),
    (b'{"text": "a", "arity": 4}', 422, "invalid_request"),
    (b'{"text": "a", "arity": 1}', 422, "weaker_than_server"),
    (b'{"documents": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}', 422, "invalid_request"),
    (b'{"documents": [{"id": "", "text": "x"}]}', 422, "invalid_request"),
    (b'{"documents": [{"id": 1.5, "text": "x"}]}', 422, "invalid_request"),
    (b'{"documents": [{"text": "x"}]}', 422, "invalid_request"),
    (b'{"text": "broken \\ud800 escape"}', 400, "invalid_json"),  # a lone surrogate is not JSON text
]


@pytest.mark.parametrize("endpoint", ["assess", "protect"])
@pytest.mark.parametrize("body, status, code", BAD_REQUESTS)
def test_bad_requests_get_json_errors(client: httpx.Client, endpoint: str, body: bytes, status: int, code: str) -> None:
    assert_error(client.post(f"/v1/{endpoint}", content=body, headers=JSON), status, code)


def test_messages_say_what_is_wrong(client: httpx.Client) -> None:
    weaker = assert_error(client.post("/v1/assess", json={"text": "a", "k": 2, "arity": 2}), 422, "weaker_than_server")
    assert "k >= 2, arity >= 3" in weaker["error"]["message"]
    duplicate = assert_error(client.post("/v1/assess", json={"documents": [{"id": 7, "text": "x"}, {"id": 7, "text": "y"}]}), 422, "invalid_request")
    assert "duplicate document id 7" in duplicate["error"]["message"]
    surrogate = assert_error(client.post("/v1/protect", content=b'{"texts": ["ok", "bad \\udc00"]}', headers=JSON), 400, "invalid_json")
    assert "surrogate" in surrogate["error"]["message"]


def test_unknown_paths_and_methods(client: httpx.Client) -> None:
    assert_error(client.get("/v2/assess"), 404, "not_found")
    assert_error(client.get("/v1/assess"), 405, "method_not_allowed")
    assert_error(client.post("/healthz"), 405, "method_not_allowed")


def test_body_declared_too_large_is_refused_before_reading(client: httpx.Client, server: ServeProcess) -> None:
    """The 413 comes back although not one byte of the 9 MiB announced was sent."""
    with socket.create_connection(address(server), timeout=WAIT_S) as raw:
        raw.sendall(b"POST /v1/assess HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 9437184\r\n\r\n")
        head, body = read_response(raw)
    assert head.startswith(b"HTTP/1.1 413 ") and json.loads(body)["error"]["code"] == "body_too_large"
    assert client.get("/healthz").status_code == 200


def test_what_uvicorn_refuses_itself_has_the_one_error_shape(server: ServeProcess) -> None:
    """A Content-Length that is not a number never reaches the application: uvicorn answered it in plain text (issue 35.8)."""
    for length in (b"abc", b"-1", b"1, 2"):
        with socket.create_connection(address(server), timeout=WAIT_S) as raw:
            raw.sendall(b"POST /v1/assess HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " + length + b"\r\n\r\n{}")
            head, body = read_response(raw)
        assert head.startswith(b"HTTP/1.1 400 ") and b"content-type: application/json" in head.lower(), head
        assert json.loads(body)["error"]["code"] == "invalid_http"


def test_head_is_get_without_a_body_and_foreign_hosts_are_refused(server: ServeProcess) -> None:
    with socket.create_connection(address(server), timeout=WAIT_S) as raw:
        raw.sendall(b"HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        received = b""
        while chunk := raw.recv(65536):
            received += chunk
    head, _, rest = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and b"text/html" in head and rest == b"", received[:300]
    with httpx.Client(base_url=server.url, timeout=WAIT_S) as http:
        for path in ("/v1/settings", "/"):
            assert_error(http.get(path, headers={"Host": "rebind.attacker.example"}), 400, "invalid_host")
        assert_error(http.post("/v1/assess", json={"text": "a"}, headers={"Host": "rebind.attacker.example:8080"}), 400, "invalid_host")
        assert_error(http.post("/v1/assess", content=b'{"text": "a"}', headers={"Content-Type": "text/plain"}), 415, "unsupported_media_type")
        assert_error(http.post("/v1/assess/", json={"text": "a"}), 404, "not_found")


def test_metrics_count_requests_documents_and_linkable_share(client: httpx.Client, documents: list[dict[str, Any]]) -> None:
    before = metrics(client)
    texts = [d["text"] for d in documents[:3]] + ["Nothing here occurs in the collection at all, zyxw."]
    assert client.post("/v1/assess", json={"texts": texts}).status_code == 200
    assert client.post("/v1/assess", json={"text": "a", "k": 1}).status_code == 422
    after = metrics(client)

    def grew(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert grew("delink_requests_total", endpoint="assess", status="200") == 1
    assert grew("delink_requests_total", endpoint="assess", status="422") == 1
    assert grew("delink_documents_total", endpoint="assess") == 4
    assert grew("delink_linkable_documents_total", endpoint="assess") == 3
    assert grew("delink_request_seconds_count", endpoint="assess") == 2
    share = after[("delink_linkable_share", (("endpoint", "assess"),))]
    total = after[("delink_documents_total", (("endpoint", "assess"),))]
    assert share == pytest.approx(after[("delink_linkable_documents_total", (("endpoint", "assess"),))] / total)
    assert ("delink_llm_calls_total", ()) in after and after[("delink_requests_in_progress", ())] == 0


def test_openapi_and_docs_need_nothing_from_outside(client: httpx.Client) -> None:
    schema = client.get("/openapi.json").json()
    assert {"/v1/assess", "/v1/protect", "/healthz", "/readyz", "/metrics", "/v1/settings"} <= set(schema["paths"])
    body = schema["paths"]["/v1/assess"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/TextsRequest"}
    assert {"text", "texts", "documents", "k", "arity"} == set(schema["components"]["schemas"]["TextsRequest"]["properties"])
    assert "Document" in schema["components"]["schemas"] and "429" in schema["paths"]["/v1/protect"]["post"]["responses"]
    docs = client.get("/docs").text
    assert "swagger-ui-bundle.js" in docs and "http://" not in docs and "https://" not in docs
    for asset in ("/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css"):
        assert client.get(asset).status_code == 200


def test_page_and_its_files_are_served_from_the_package(client: httpx.Client) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert 'id="legend"' in page.text and "singled out" in page.text and "<!-- legend -->" not in page.text
    assert "http://" not in page.text and "https://" not in page.text and "<script>" not in page.text
    for asset, kind in (("/static/page.js", "javascript"), ("/static/page.css", "css"), ("/report.js", "javascript"), ("/report.css", "css")):
        response = client.get(asset)
        assert response.status_code == 200 and kind in response.headers["content-type"], asset


def test_a_client_leaving_mid_body_is_counted_and_the_server_goes_on(client: httpx.Client, server: ServeProcess) -> None:
    before = metrics(client).get(("delink_requests_abandoned_total", (("stage", "body"),)), 0.0)
    with socket.create_connection(address(server), timeout=10) as raw:
        raw.sendall(b"POST /v1/assess HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"texts\": [\"half")
    wait_until(lambda: metrics(client).get(("delink_requests_abandoned_total", (("stage", "body"),)), 0.0) == before + 1, "the abandoned body")
    assert client.post("/v1/assess", json={"text": "still answering"}).status_code == 200
    assert metrics(client)[("delink_requests_in_progress", ())] == 0


def test_python_client(server: ServeProcess, documents: list[dict[str, Any]], cli_records: dict[str, dict[str, dict[str, Any]]]) -> None:
    batch = {d["id"]: d["text"] for d in documents[:3]}
    with DelinkClient(server.url) as remote:
        assert remote.ready() and remote.settings()["k"] == 2
        assert remote.assess(batch) == [cli_records["assess"][i] for i in batch]
        assert remote.protect(batch) == [cli_records["protect"][i] for i in batch]
        assert remote.assess(documents[0]["text"])[0]["id"] == 0
        with pytest.raises(ServeError) as refused:
            remote.assess("text", arity=1)
    assert (refused.value.status, refused.value.code) == (422, "weaker_than_server")


def test_texts_never_reach_the_log(client: httpx.Client, server: ServeProcess) -> None:
    text = f"The farmer {MARKER} keeps bees near the river Sava."
    assert client.post("/v1/assess", json={"documents": [{"id": "logged-id", "text": text}]}).status_code == 200
    assert client.post("/v1/protect", json={"texts": [text]}).status_code == 200
    assert client.post("/v1/assess", json={"texts": [text], "k": 1}).status_code == 422
    assert client.post("/v1/assess", content=f'{{"texts": ["{MARKER}"'.encode(), headers=JSON).status_code == 400
    wait_until(lambda: server.output().count(" 400: ") >= 1, "the log line of the last request")
    log = server.output()
    assert MARKER not in log and "Zorblatt" not in log
    assert "assess 200: 1 documents" in log and "protect 200: 1 documents" in log


# -- auth and limits ---------------------------------------------------------------------------


API_KEY = secrets.token_urlsafe(24)


@pytest.fixture(scope="module")
def guarded(index: Path, workdir: Path) -> Iterator[ServeProcess]:
    """A key from the environment, small limits, k >= 3 and arity >= 2 by default, weaker allowed."""
    args = ["--k", "3", "--arity", "2", "--allow-weaker", "--max-texts", "2", "--max-chars", "300", "--max-body-bytes", "4096"]
    with ServeProcess(index, *args, log=workdir / "guarded.log", env={"DELINK_API_KEY": API_KEY}) as process:
        yield process


def test_the_key_is_required_where_it_matters(guarded: ServeProcess) -> None:
    with httpx.Client(base_url=guarded.url, timeout=60) as http:
        for headers in ({}, {"Authorization": "Bearer wrong-key-of-enough-length"}, {"Authorization": f"Basic {API_KEY}"}, {"Authorization": API_KEY}):
            response = http.post("/v1/assess", json={"text": "a"}, headers=headers)
            assert_error(response, 401, "unauthorized")
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert_error(http.post("/v1/protect", json={"text": "a"}, headers=headers), 401, "unauthorized")
            assert_error(http.get("/metrics", headers=headers), 401, "unauthorized")
        for open_path in ("/healthz", "/readyz", "/v1/settings", "/", "/openapi.json"):
            assert http.get(open_path).status_code == 200, open_path
        assert http.get("/v1/settings").json()["auth"] is True
        schema = http.get("/openapi.json").json()
        assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    with DelinkClient(guarded.url, api_key=API_KEY) as remote:
        record = remote.assess("The applicant's farm near the river Sava was registered in 1997.")[0]
        assert (record["k"], record["arity"]) == (3, 2)  # the server's defaults
        weaker = remote.protect("The applicant's farm near the river Sava.", k=2, arity=1)[0]  # --allow-weaker
        assert weaker["protected"] and (weaker["protected_under"]["k"], weaker["protected_under"]["arity"]) == (2, 1)
    assert "no API key" not in guarded.output() and API_KEY not in guarded.output()


def test_limits(guarded: ServeProcess) -> None:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=guarded.url, timeout=60, headers=headers) as http:
        assert_error(http.post("/v1/assess", json={"texts": ["a", "b", "c"]}), 413, "too_many_texts")
        long = assert_error(http.post("/v1/assess", json={"texts": ["fine", "x" * 301]}), 413, "text_too_long")
        assert "texts[1] has 301 characters" in long["error"]["message"]
        assert_error(http.post("/v1/assess", content=json.dumps({"text": "y" * 5000}).encode(), headers=JSON), 413, "body_too_large")

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is found while reading
            yield b'{"text": "'
            for _ in range(10):
                yield b"z" * 1000
            yield b'"}'

        assert_error(http.post("/v1/assess", content=chunks(), headers=JSON), 413, "body_too_large")
        assert http.post("/v1/assess", json={"texts": ["x" * 300, "fine"]}).status_code == 200


@pytest.mark.parametrize(
    "args, env, message",
    [
        (["--host", "0.0.0.0"], {}, "without an API key"),
        ([], {"DELINK_API_KEY": "short"}, "at least 16"),
        (["--api-key-file", "missing.key"], {}, "cannot read it"),
        (["--api-key-file", "key.txt"], {"DELINK_API_KEY": API_KEY}, "keep one"),
        (["--k", "1"], {}, "k must be an integer between 2 and"),
        (["--arity", "5"], {}, "arity must be"),
        (["--max-texts", "0"], {}, "--max-texts must be at least 1"),
        (["--cors-origin", "example.org"], {}, "--cors-origin"),
        (["--config", "nope.cfg"], {}, "config nope.cfg not found"),
        ([], {"DELINK_API_KEY": "ключ-ключ-ключ-ключ"}, "not visible ASCII"),
        (["--body-timeout", "0"], {}, "--body-timeout must be a positive number"),
        (["--max-per-client", "0"], {}, "--max-per-client must be"),
        (["--allowed-host", "a*b"], {}, "--allowed-host"),
    ],
)
def test_bad_settings_stop_the_start_with_one_line(index: Path, tmp_path: Path, args: list[str], env: dict[str, str], message: str) -> None:
    (tmp_path / "key.txt").write_text(API_KEY + "\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "spacy_delink", "serve", str(index), "--port", "0", *args], capture_output=True, text=True,
        timeout=600, cwd=tmp_path, env={**_environ_without_keys(), **env},
    )
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert "Traceback" not in result.stderr and "serving" not in result.stderr


def test_a_missing_index_stops_the_start(tmp_path: Path) -> None:
    result = run_cli("serve", tmp_path / "none", "--port", "0")
    assert result.returncode == 1 and result.stderr.startswith("error:") and "not found" in result.stderr


def _environ_without_keys() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.startswith("DELINK_API_KEY")}


# -- slow bodies -----------------------------------------------------------------------------


def trickle(server: ServeProcess, source: str) -> socket.socket:
    """A connection from ``source`` (a loopback address) that sends a request's head and the first byte of its body, then nothing."""
    raw = socket.socket()
    raw.settimeout(WAIT_S)
    raw.bind((source, 0))
    raw.connect(address(server))
    raw.sendall(b"POST /v1/assess HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
    return raw


def test_slow_bodies_from_one_client_neither_hold_every_place_nor_hold_them_long(index: Path, workdir: Path) -> None:
    """Clients trickling their bodies held every place, and everyone else got 429 with Retry-After: 1 (issue 35.4).
    Now one address holds at most half the places, each until its body timeout (then 408, connection closed)."""
    args = ["--workers", "1", "--queue", "3", "--body-timeout", "10"]  # 4 places, 2 per client address
    with ServeProcess(index, *args, log=workdir / "slow.log") as process, httpx.Client(base_url=process.url, timeout=WAIT_S) as http:
        slow = [trickle(process, "127.0.0.2") for _ in range(2)]
        try:
            wait_until(lambda: metrics(http)[("delink_requests_in_progress", ())] == 2, "the two slow bodies admitted")
            with trickle(process, "127.0.0.2") as third:
                head, body = read_response(third)
            assert head.startswith(b"HTTP/1.1 429 ") and json.loads(body)["error"]["code"] == "too_many_from_client"
            retry_after = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"retry-after:")))
            assert 1 <= retry_after <= 10  # the first slow body's deadline, not a guess
            answered = http.post("/v1/assess", json={"text": "The farmer keeps bees near the river."})  # another address: 127.0.0.1
            assert answered.status_code == 200, answered.text
            for raw in slow:
                head, body = read_response(raw)
                assert head.startswith(b"HTTP/1.1 408 ") and b"connection: close" in head.lower()
                assert json.loads(body)["error"]["code"] == "body_timeout"
                assert raw.recv(1) == b""  # the server closed the connection
        finally:
            for raw in slow:
                raw.close()
        wait_until(lambda: metrics(http)[("delink_requests_in_progress", ())] == 0, "every place given back")


# -- deadline --------------------------------------------------------------------------------


def test_a_request_past_the_deadline_gets_503(index: Path, workdir: Path, documents: list[dict[str, Any]]) -> None:
    long_text = " ".join(d["text"] for d in documents)  # every sample document in one text, 64 times: far beyond 50 ms
    with ServeProcess(index, "--deadline", "0.05", log=workdir / "deadline.log") as process:
        with httpx.Client(base_url=process.url, timeout=120) as http:
            response = http.post("/v1/assess", json={"texts": [long_text] * 64})
            assert_error(response, 503, "deadline_exceeded")
            assert int(response.headers["retry-after"]) >= 1
            assert http.get("/healthz").status_code == 200


# -- an LLM rewriter: concurrency across requests, overload, clients that leave -------------------


MAX_IN_FLIGHT = 2


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(delay_s=1.0) as fake:
        yield fake


def llm_settings(fake: FakeOpenAI) -> list[str]:
    return [
        "--config", "openai", "--set", f"components.delink_rewriter.model.base_url={fake.base_url}",
        "--set", "components.delink_rewriter.model.name=good",
        "--set", f"components.delink_rewriter.model.max_in_flight={MAX_IN_FLIGHT}",
        "--set", "components.delink_rewriter.cache_dir=null",
    ]


@pytest.fixture(scope="module")
def llm_index(workdir: Path) -> Path:
    """The sample collection and ten documents holding the fake model's word: a rewrite may use a
    word no rarer in the collection than the words it replaces (the ``rarer_word`` check)."""
    corpus = workdir / "llm_corpus.jsonl"
    extra = [{"id": f"replacement-{i}", "text": f"{REPLACEMENT}."} for i in range(10)]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in [*read_jsonl(SAMPLES / "corpus.jsonl"), *extra]), encoding="utf-8")
    result = run_cli("index", corpus, "--output", workdir / "llm_index")
    assert result.returncode == 0, result.stderr
    return workdir / "llm_index"


@pytest.fixture(scope="module")
def llm_server(llm_index: Path, workdir: Path, fake_llm: FakeOpenAI) -> Iterator[ServeProcess]:
    args = [*llm_settings(fake_llm), "--workers", "1", "--queue", "3", "--max-per-client", "4"]  # 4 requests at most, all from this test
    with ServeProcess(llm_index, *args, log=workdir / "llm.log") as process:
        yield process


SHORT_TEXTS = [  # each has linkable phrases, few enough for one prompt
    "The applicant's farm near the river Sava was registered in 1997.",
    "The applicant, a veterinary nurse, restored an old watermill.",
    "Her brother kept bees at the old watermill near the river Sava.",
    "The farm was registered in 1997 by a veterinary nurse.",
]


def test_llm_calls_of_concurrent_requests_run_together_within_max_in_flight(
    llm_server: ServeProcess, fake_llm: FakeOpenAI, llm_index: Path, tmp_path: Path
) -> None:
    fake_llm.max_in_flight = 0

    def protect(text: str) -> dict[str, Any]:
        with httpx.Client(base_url=llm_server.url, timeout=300) as http:
            response = http.post("/v1/protect", json={"text": text})
        assert response.status_code == 200, response.text
        record: dict[str, Any] = response.json()["records"][0]
        return record

    with ThreadPoolExecutor(len(SHORT_TEXTS)) as pool:
        records = list(pool.map(protect, SHORT_TEXTS))
    assert fake_llm.max_in_flight == MAX_IN_FLIGHT  # prompts of different requests overlapped, never more than allowed
    assert all(r["protected"] for r in records) and any(REPLACEMENT in r["text"] for r in records)
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(SHORT_TEXTS)), encoding="utf-8")
    result = run_cli("protect", llm_index, inputs, "--k", 2, "--arity", 3, "--output", tmp_path / "out.jsonl", *llm_settings(fake_llm))
    assert result.returncode == 0, result.stderr
    # the same records, but for the id (each request's text is its document 0) and so its input digest
    written = [{k: v for k, v in r.items() if k != "input_digest"} for r in read_jsonl(tmp_path / "out.jsonl")]
    assert [{**{k: v for k, v in r.items() if k != "input_digest"}, "id": i} for i, r in enumerate(records)] == written
    with httpx.Client(base_url=llm_server.url) as http:
        assert metrics(http)[("delink_llm_calls_total", ())] >= len(SHORT_TEXTS)


def test_overload_gets_429_at_once_and_nothing_is_lost(llm_server: ServeProcess, fake_llm: FakeOpenAI) -> None:
    fake_llm.delay_s = 4.0
    try:
        with httpx.Client(base_url=llm_server.url, timeout=300) as http, ThreadPoolExecutor(4) as pool:
            held = [pool.submit(http.post, "/v1/protect", json={"text": text}) for text in SHORT_TEXTS]
            wait_until(lambda: metrics(http)[("delink_requests_in_progress", ())] == 4, "four requests in the server")
            extra = http.post("/v1/protect", json={"text": SHORT_TEXTS[0]})
            assert_error(extra, 429, "overloaded")
            assert 1 <= int(extra.headers["retry-after"]) <= 60
            assert_error(http.post("/v1/assess", json={"text": "x"}), 429, "overloaded")
            assert all(future.result().status_code == 200 for future in held)  # every accepted request answered
            assert http.post("/v1/assess", json={"text": "x"}).status_code == 200
    finally:
        fake_llm.delay_s = 1.0


def test_a_client_leaving_while_its_job_waits(llm_server: ServeProcess, fake_llm: FakeOpenAI) -> None:
    fake_llm.delay_s = 3.0
    try:
        with httpx.Client(base_url=llm_server.url, timeout=300) as http:
            key = ("delink_requests_abandoned_total", (("stage", "waiting"),))
            before = metrics(http).get(key, 0.0)
            body = json.dumps({"text": SHORT_TEXTS[1]}).encode()
            with socket.create_connection(address(llm_server), timeout=10) as raw:
                raw.sendall(
                    b"POST /v1/protect HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode() + body
                )
                wait_until(lambda: metrics(http)[("delink_requests_in_progress", ())] == 1, "the request in the server")
            wait_until(lambda: metrics(http).get(key, 0.0) == before + 1, "the abandoned request counted")
            wait_until(lambda: metrics(http)[("delink_requests_in_progress", ())] == 0, "its place given back")
            assert http.post("/v1/protect", json={"text": SHORT_TEXTS[2]}).json()["records"][0]["protected"]
        assert "abandoned by the client (waiting)" in llm_server.output()
    finally:
        fake_llm.delay_s = 1.0


def test_sigterm_stops_the_server(index: Path, workdir: Path) -> None:
    """A graceful shutdown; uvicorn then ends the process by the signal it caught, as a process manager expects."""
    process = ServeProcess(index, log=workdir / "stop.log").start()
    assert process.stop() in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in process.output() and "Finished server process" in process.output()
