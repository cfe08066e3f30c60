"""The pieces of `delink serve` without a process: assess_texts/protect_texts, the key, the settings, readiness."""
from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio.to_thread
import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from spacy_delink import assess_texts, protect_texts
from spacy_delink.errors import InputError
from spacy_delink.evaluate.assess import assess_file
from spacy_delink.linkage.index import STRICT_PERMISSIONS_ENV, CorpusIndex, IndexBuilder, KeyPermissionWarning
from spacy_delink.linkage.index.update import update_index
from spacy_delink.linkage.tokenize import LinkageRules
from spacy_delink.memory import MAX_CHARS_ENV
from spacy_delink.rewrite.config import load_rewriter
from spacy_delink.rewrite.protect import protect_file
from spacy_delink.serve.app import create_app
from spacy_delink.serve.auth import ApiKey, is_loopback, load_api_key
from spacy_delink.serve.client import DelinkClient
from spacy_delink.serve import limits
from spacy_delink.serve.limits import Admission, ApiError
from spacy_delink.serve import service as service_module
from spacy_delink.serve.service import Rewriters, Service
from spacy_delink.serve.settings import ServeSettings
from spacy_delink.serve.warmup import CORPUS, TEXT

ORIGINALS = [
    ("a", "The farmer keeps bees near the river. He sold honey and wax in Murska Sobota."),
    ("b", "The farmer keeps goats near the lake. He sold cheese in Maribor."),
    ("c", "The baker sells bread near the river. She sold cakes in Celje."),
    ("d", "The baker sells cakes near the lake. She sold bread in Ptuj."),
]
TEXTS = ["The farmer keeps bees near the lake. He sold cakes in [LOCATION].", "Nothing of this was indexed.", ""]
KEY = "k" * 16 + "-a-long-enough-key"
#: Where the in-process clients call the application: a loopback name, the only Host names answered by default.
LOCAL = "http://127.0.0.1"
#: Bound of every wait here: each stops after this many seconds whatever happens.
WAIT_S = 60.0


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("library") / "index"
    IndexBuilder(LinkageRules()).build(iter(ORIGINALS), path)
    return path


def _jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)), encoding="utf-8")
    return path


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("arity", [1, 2, 3])
def test_assess_texts_gives_the_records_of_assess_file(index: Path, tmp_path: Path, arity: int) -> None:
    assess_file(CorpusIndex(index), _jsonl(tmp_path / "in.jsonl", TEXTS), tmp_path / "out.jsonl", 2, arity, progress=False)
    assert assess_texts(index, TEXTS, k=2, arity=arity) == _read(tmp_path / "out.jsonl")
    named = assess_texts(CorpusIndex(index), TEXTS[:1], k=2, arity=arity, ids=["doc-a"])
    assert named[0]["id"] == "doc-a" and {**named[0], "id": 0} == _read(tmp_path / "out.jsonl")[0]


def test_protect_texts_gives_the_records_of_protect_file(index: Path, tmp_path: Path) -> None:
    protect_file(load_rewriter(index, 2, 3, None, None), _jsonl(tmp_path / "in.jsonl", TEXTS), tmp_path / "out.jsonl", progress=False)
    records = protect_texts(index, TEXTS, k=2, arity=3)
    assert records == _read(tmp_path / "out.jsonl")
    assert all(r["protected"] and r["protected_under"]["arity"] == 3 for r in records)
    assert protect_texts(CorpusIndex(index), TEXTS, k=2, arity=3, ids=["x", "y", "z"])[1]["id"] == "y"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda i: assess_texts(i, ["a", "b"], ids=["same", "same"]), "duplicate document id 'same'"),
        (lambda i: assess_texts(i, ["a", "b"], ids=["one"]), "1 ids for 2 texts"),
        (lambda i: assess_texts(i, ["a", 3]), "texts[1]: a text must be a string, got int"),
        (lambda i: assess_texts(i, ["bad \ud800"]), "texts[0]: the text holds a lone UTF-16 surrogate"),
        (lambda i: assess_texts(i, ["a"], ids=[1.5]), "must be a string or an integer"),
        (lambda i: assess_texts(i, ["a"], k=1), "k must be an integer between 2 and"),
        (lambda i: protect_texts(i, ["a"], arity=4), "arity must be"),
        (lambda i: protect_texts(i, ["a"], config="nope.cfg"), "config nope.cfg not found"),
    ],
)
def test_bad_batches_are_refused_before_any_work(index: Path, call: Any, message: str) -> None:
    with pytest.raises(InputError) as refused:
        call(index)
    assert message in str(refused.value)


def test_the_key_is_compared_as_a_bearer_token_only() -> None:
    key = ApiKey(KEY, "test")
    assert key.accepts(f"Bearer {KEY}") and key.accepts(f"bearer {KEY}")
    for header in (None, "", KEY, f"Basic {KEY}", f"Bearer {KEY}x", f"Bearer {KEY[:-1]}", "Bearer", f"Bearer \udcff{KEY}"):
        assert not key.accepts(header), header
    assert KEY not in repr(key)
    with pytest.raises(InputError, match="at least 16"):
        ApiKey("short", "test")


def test_where_the_key_comes_from(tmp_path: Path) -> None:
    (tmp_path / "key").write_text(KEY + "\n", encoding="utf-8")
    (tmp_path / "key").chmod(0o600)
    assert load_api_key(None, {}) is None
    assert load_api_key(tmp_path / "key", {}).accepts(f"Bearer {KEY}")  # type: ignore[union-attr]
    assert load_api_key(None, {"DELINK_API_KEY_FILE": str(tmp_path / "key")}).accepts(f"Bearer {KEY}")  # type: ignore[union-attr]
    assert load_api_key(None, {"DELINK_API_KEY": KEY}).accepts(f"Bearer {KEY}")  # type: ignore[union-attr]
    with pytest.raises(InputError, match="keep one"):
        load_api_key(tmp_path / "key", {"DELINK_API_KEY": KEY})
    with pytest.raises(InputError, match="cannot read it"):
        load_api_key(tmp_path / "missing", {})


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True),
                                            ("localhost", True), ("0.0.0.0", False), ("::", False), ("10.0.0.1", False), ("example.org", False)])
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_server_without_a_key_stays_on_loopback(index: Path) -> None:
    with pytest.raises(InputError, match="without an API key"):
        ServeSettings(index=index, host="0.0.0.0")
    assert ServeSettings(index=index, host="0.0.0.0", api_key=ApiKey(KEY, "test")).host == "0.0.0.0"


def test_admission_holds_places_until_the_job_is_done() -> None:
    admission = Admission(capacity=2, workers=1)
    first, second = admission.enter(), admission.enter()
    with pytest.raises(ApiError) as refused:
        admission.enter()
    assert refused.value.status == 429 and (refused.value.retry_after or 0) >= 1
    job: Future[Any] = Future()
    first.hand_over(job)
    first.close()  # the request ended (client gone, deadline): its job still holds the place
    second.close()
    assert admission.inside == 1
    job.set_result([])
    assert admission.inside == 0


@pytest.mark.parametrize("api_key", [None, ApiKey(KEY, "test")])
def test_a_refusal_needs_no_thread_but_the_event_loops(index: Path, api_key: ApiKey | None) -> None:
    """Under load every other thread waits for the GIL behind the workers: a 429 (or 401) that needed one would
    wait with them. Here the only worker and every thread FastAPI could borrow are held until the end: the
    refusals must come anyway (a generous bound: they need nothing that is held)."""
    service = Service(ServeSettings(index=index, workers=1, queue=0, api_key=api_key))
    service.ready = True
    release = threading.Event()
    authorization = {"Authorization": f"Bearer {KEY}"} if api_key is not None else {}

    async def refusals() -> list[httpx.Response]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = 1
        borrowed = asyncio.ensure_future(anyio.to_thread.run_sync(release.wait))  # FastAPI's one thread, held
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(service)), base_url="http://localhost") as client:
                answers = [await asyncio.wait_for(client.post("/v1/assess", json={"text": "a"}, headers=authorization), 10)]
                if api_key is not None:
                    answers.append(await asyncio.wait_for(client.post("/v1/protect", json={"text": "a"}), 10))
        finally:
            release.set()
            await borrowed
        return answers

    service.admission.enter().hand_over(service.pool.submit(release.wait))  # the one place, its job on the only worker
    try:
        answers = asyncio.run(refusals())
    finally:
        release.set()
        service.close()
    assert answers[0].status_code == 429 and answers[0].json()["error"]["code"] == "overloaded"
    assert answers[0].headers["retry-after"].isdigit() and answers[0].headers["x-request-id"]
    if api_key is not None:
        assert answers[1].status_code == 401 and answers[1].json()["error"]["code"] == "unauthorized"


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's own nice value is Linux's (elsewhere the workers keep the process's)")
def test_the_workers_run_below_the_event_loops_priority(index: Path) -> None:
    """The loop must get a CPU before the workers' batch work, or on a busy machine its answers and refusals wait."""

    def own_nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    base = own_nice()
    for nice in (0, 5):
        service = Service(ServeSettings(index=index, workers=1, worker_nice=nice))
        try:
            assert service.pool.submit(own_nice).result() == min(19, base + nice)
        finally:
            service.close()
    assert own_nice() == base  # the caller's thread keeps its priority
    with pytest.raises(InputError, match="--worker-nice"):
        ServeSettings(index=index, worker_nice=20)


def test_the_gate_admits_under_a_mount_path(index: Path) -> None:
    """Mounted under a prefix (scope root_path), the work endpoints are still admitted by the gate, not failed."""
    service = Service(ServeSettings(index=index, workers=1))
    service.ready = True
    try:
        with TestClient(Starlette(routes=[Mount("/api", app=create_app(service))]), base_url=LOCAL) as client:
            response = client.post("/api/v1/assess", json={"text": TEXTS[0]})
            assert response.status_code == 200, response.text
            assert response.json()["records"][0]["id"] == 0 and service.admission.inside == 0
    finally:
        service.close()


def test_a_server_not_ready_answers_503(index: Path) -> None:
    service = Service(ServeSettings(index=index, workers=1))
    try:
        with TestClient(create_app(service), base_url=LOCAL) as client:
            assert client.get("/healthz").status_code == 200
            for response in (client.get("/readyz"), client.post("/v1/assess", json={"text": "a"})):
                assert response.status_code == 503 and response.json()["error"]["code"] == "not_ready"
                assert response.headers["retry-after"] == "1"
            service.ready = True
            assert client.get("/readyz").status_code == 200
            assert client.post("/v1/assess", json={"text": "a"}).json()["records"][0]["id"] == 0
    finally:
        service.close()


def test_cors_is_off_unless_configured(index: Path) -> None:
    for origins, allowed in (((), None), (("https://review.example.org",), "https://review.example.org")):
        service = Service(ServeSettings(index=index, workers=1, cors_origins=origins))
        service.ready = True
        try:
            with TestClient(create_app(service), base_url=LOCAL) as client:
                preflight = client.options(
                    "/v1/assess", headers={"Origin": "https://review.example.org", "Access-Control-Request-Method": "POST"}
                )
                assert preflight.headers.get("access-control-allow-origin") == allowed
        finally:
            service.close()


def test_the_warm_up_text_links_at_every_arity(tmp_path: Path) -> None:
    """The warm-up runs the masking and combination kernels only if its text links on its collection."""
    IndexBuilder(LinkageRules()).build(iter(CORPUS), tmp_path / "index")
    for arity in (1, 2, 3):
        record = assess_texts(CorpusIndex(tmp_path / "index"), [TEXT], k=2, arity=arity)[0]
        assert record["ngrams"] and record["anonymity"] == 1
        assert bool(record["combinations"]) is (arity > 1)


def test_every_answer_comes_from_the_index_as_updated(tmp_path: Path) -> None:
    """`delink index --update` under a running server: assess and protect both answer from the new index (issue 35.2)."""
    path = tmp_path / "index"
    IndexBuilder(LinkageRules(), progress=False, updatable=True).build(iter(ORIGINALS), path)
    text = "The potter Zorblatt restored a watermill at Kobarid."
    service = Service(ServeSettings(index=path, workers=1))
    service.ready = True
    try:
        with TestClient(create_app(service), base_url=LOCAL) as client:
            for endpoint in ("assess", "protect"):  # both open the index first
                assert client.post(f"/v1/{endpoint}", json={"text": text}).status_code == 200
            assert not client.post("/v1/assess", json={"text": text}).json()["records"][0]["ngrams"]
            update_index(path, [("e", "The potter Zorblatt restored a watermill at Kobarid in 1997.")])
            assessed = client.post("/v1/assess", json={"text": text}).json()["records"][0]
            assert assessed["ngrams"] and assessed == assess_texts(CorpusIndex(path), [text], k=2, arity=3)[0]
            protected = client.post("/v1/protect", json={"text": text}).json()["records"][0]
            assert protected["protected"] and protected["text"] != text
            assert service.index.documents == len(ORIGINALS) + 1
    finally:
        service.close()


def test_a_new_setting_loads_its_rewriter_without_holding_up_the_others(index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request at a new (k, arity) loads a rewriter (tenths of a second); requests at loaded settings must not wait for it."""
    loading, release = threading.Event(), threading.Event()
    loads: list[tuple[int, int]] = []
    real = service_module.load_rewriter

    def slow_load(path: Path, k: int, arity: int, *args: Any, **kwargs: Any) -> Any:
        loads.append((k, arity))
        if k == 5:
            loading.set()
            release.wait(WAIT_S)
        return real(path, k, arity, *args, **kwargs)

    monkeypatch.setattr(service_module, "load_rewriter", slow_load)
    rewriters = Rewriters(ServeSettings(index=index))
    loaded = rewriters.get(2, 3)
    with ThreadPoolExecutor(3) as pool:
        new = [pool.submit(rewriters.get, 5, 3) for _ in range(2)]
        assert loading.wait(WAIT_S)
        try:
            assert pool.submit(rewriters.get, 2, 3).result(timeout=WAIT_S) is loaded  # not behind the load of (5, 3)
        finally:
            release.set()
        first, second = (future.result(timeout=WAIT_S) for future in new)
    assert first is second and loads == [(2, 3), (5, 3)]  # two requests for (5, 3), one load


@pytest.fixture
def app_client(index: Path) -> Any:
    """The application of a ready server at the defaults, called in-process."""
    service = Service(ServeSettings(index=index, workers=1))
    service.ready = True
    try:
        with TestClient(create_app(service), base_url=LOCAL) as client:
            yield client
    finally:
        service.close()


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body: dict[str, Any] = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"} and body["error"]["code"] == code, body
    return body


def test_only_loopback_host_names_are_answered_unless_allowed(index: Path) -> None:
    """A DNS-rebinding page reaches a loopback server under its own name: refused, in the one error shape (issue 35.7)."""
    for allowed, answered in (((), ("127.0.0.1:8080", "localhost", "[::1]:8080")), (("review.example.org",), ("review.example.org",))):
        service = Service(ServeSettings(index=index, workers=1, allowed_hosts=allowed))
        service.ready = True
        try:
            with TestClient(create_app(service), base_url=LOCAL) as client:
                for host in ("rebind.attacker.example", "127.0.0.1.attacker.example:8080", "localhost.:80"):
                    body = assert_error(client.get("/v1/settings", headers={"Host": host}), 400, "invalid_host")
                    assert "--allowed-host" in body["error"]["message"]
                    assert_error(client.post("/v1/assess", json={"text": TEXTS[0]}, headers={"Host": host}), 400, "invalid_host")
                for host in answered:
                    assert client.post("/v1/assess", json={"text": TEXTS[0]}, headers={"Host": host}).status_code == 200, host
        finally:
            service.close()
    assert ServeSettings(index=index, host="10.0.0.5", api_key=ApiKey(KEY, "test")).trusted_hosts[-1] == "10.0.0.5"
    assert "0.0.0.0" not in ServeSettings(index=index, host="0.0.0.0", api_key=ApiKey(KEY, "test")).trusted_hosts
    for pattern in ("a*b", "*.", "::1"):
        with pytest.raises(InputError, match="--allowed-host"):
            ServeSettings(index=index, allowed_hosts=(pattern,))


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx"])
def test_work_requests_must_be_declared_json(app_client: TestClient, content_type: str | None) -> None:
    """A cross-origin form or text/plain POST needs no CORS preflight; JSON does (issue 35.7)."""
    headers = {"Content-Type": content_type} if content_type else {}
    for endpoint in ("assess", "protect"):
        response = app_client.post(f"/v1/{endpoint}", content=json.dumps({"text": "a"}).encode(), headers=headers)
        assert_error(response, 415, "unsupported_media_type")
    declared = app_client.post("/v1/assess", content=json.dumps({"text": "a"}).encode(), headers={"Content-Type": "Application/JSON; charset=utf-8"})
    assert declared.status_code == 200


@pytest.mark.parametrize("body", [
    b'{"text": "a", "text": "b"}',
    b'{"texts": ["a"], "k": 2, "k": 5}',
    b'{"documents": [{"id": "a", "text": "x", "text": "y"}]}',
])
def test_a_key_given_twice_is_refused(app_client: TestClient, body: bytes) -> None:
    refused = assert_error(app_client.post("/v1/assess", content=body, headers={"Content-Type": "application/json"}), 400, "invalid_json")
    assert "twice" in refused["error"]["message"]


def test_every_refusal_has_the_one_error_shape(index: Path) -> None:
    """A slash too many, a refused CORS preflight, HEAD on a page: no plain text, no empty 307 (issue 35.8)."""
    service = Service(ServeSettings(index=index, workers=1, cors_origins=("https://review.example.org",), api_key=ApiKey(KEY, "test")))
    service.ready = True
    try:
        with TestClient(create_app(service), base_url=LOCAL, follow_redirects=False) as client:
            for path in ("/v1/assess/", "/v1/protect/"):
                assert_error(client.post(path, json={"text": "a"}), 404, "not_found")
            preflight = client.options("/v1/assess", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
            assert_error(preflight, 400, "cors_refused")
            allowed = client.options("/v1/assess", headers={"Origin": "https://review.example.org", "Access-Control-Request-Method": "POST"})
            assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == "https://review.example.org"
            for path in ("/", "/healthz", "/v1/settings"):
                assert client.head(path).status_code == 200, path
            assert client.head("/").headers["content-type"].startswith("text/html")
            head = client.head("/v1/assess")  # a HEAD answer has no body to show its code
            assert head.status_code == 405 and head.headers["content-type"] == "application/json" and head.headers["allow"] == "POST"
    finally:
        service.close()


class Broken:
    """A layer around the routes with a bug."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            raise RuntimeError("a bug in a layer around the routes")
        await self.app(scope, receive, send)


def test_the_one_error_shape_covers_failures_around_the_routes(index: Path) -> None:
    """An exception outside an endpoint is answered 500 in JSON, not in Starlette's plain text."""
    service = Service(ServeSettings(index=index, workers=1))
    service.ready = True
    try:
        app = create_app(service)
        app.add_middleware(Broken)
        with TestClient(app, base_url=LOCAL, raise_server_exceptions=False) as client:
            assert_error(client.get("/healthz"), 500, "internal")
    finally:
        service.close()


def test_an_api_key_no_header_can_carry_is_refused_at_start_and_by_the_client() -> None:
    for secret in ("ключ-" * 4, "a key with spaces in it", "tab\tseparated-key-long"):
        with pytest.raises(InputError, match="not visible ASCII"):
            ApiKey(secret, "test")
        with pytest.raises(InputError, match="not visible ASCII"):
            DelinkClient(api_key=secret)
    assert "ключ" not in str(pytest.raises(InputError, ApiKey, "ключ-" * 4, "test").value)  # never echoed


def test_an_api_key_file_others_may_read_is_warned_about(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The index key's own check (issue 35.8)."""
    key_file = tmp_path / "api.key"
    key_file.write_text(KEY + "\n", encoding="utf-8")
    key_file.chmod(0o644)
    with pytest.warns(KeyPermissionWarning, match=r"API key file .* accessible to group or others"):
        assert load_api_key(key_file, {}) is not None
    key_file.chmod(0o600)
    with warnings.catch_warnings():
        warnings.simplefilter("error", KeyPermissionWarning)
        assert load_api_key(key_file, {}) is not None
    key_file.chmod(0o640)
    monkeypatch.setenv(STRICT_PERMISSIONS_ENV, "1")
    with pytest.raises(InputError, match="strict key permissions"):
        load_api_key(key_file, {})


def test_one_client_address_cannot_hold_every_place() -> None:
    """Slow bodies from one address held all places; now at most ``per_client`` (issue 35.4)."""
    admission = Admission(capacity=4, workers=1, per_client=2)
    soon = time.monotonic() + 30
    held = [admission.enter("127.0.0.2", soon) for _ in range(2)]
    with pytest.raises(ApiError) as refused:
        admission.enter("127.0.0.2", soon)
    assert refused.value.code == "too_many_from_client"
    others = [admission.enter("127.0.0.3", soon + 5), admission.enter("127.0.0.4", soon + 5)]
    with pytest.raises(ApiError) as full:
        admission.enter("127.0.0.5", soon)
    assert full.value.code == "overloaded"
    for ticket in held + others:
        ticket.close()
    assert admission.inside == 0


def test_retry_after_counts_bodies_still_arriving(monkeypatch: pytest.MonkeyPatch) -> None:
    """Places held by bodies trickling in free by their body deadline: Retry-After says so, not a made-up 1.

    The admission's clock stands still here, so the answer does not depend on how fast the test runs."""
    now = 1000.0
    monkeypatch.setattr(limits, "time", SimpleNamespace(**{**vars(time), "monotonic": lambda: now}))
    admission = Admission(capacity=2, workers=1)
    tickets = [admission.enter("a", now + 20), admission.enter("b", now + 30)]
    with pytest.raises(ApiError) as refused:
        admission.enter("c", now + 10)
    assert refused.value.retry_after == 20
    job: Future[Any] = Future()
    tickets[0].hand_over(job)  # a job whose time is not known yet: the other body's deadline is the estimate
    with pytest.raises(ApiError) as refused:
        admission.enter("c", now + 10)
    assert refused.value.retry_after == 30
    job.set_result(b"")
    tickets[1].close()


# -- memory per request and per document (issue 35.5) ----------------------------------------------


def test_protect_holds_one_documents_detection_at_a_time_and_gives_memory_back(index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch holds every document's detection until its last one is done: 40 long texts took the server from
    1 to 3.5 GB. The server protects one document at a time, the same records, and returns freed memory."""
    batches: list[int] = []
    given_back: list[bool] = []
    real = service_module.protect_documents

    def counted(rewriter: Any, documents: list[tuple[Any, str]]) -> list[dict[str, Any]]:
        batches.append(len(documents))
        return real(rewriter, documents)

    monkeypatch.setattr(service_module, "protect_documents", counted)
    monkeypatch.setattr(service_module, "give_back", lambda: given_back.append(True))
    long_texts = [" ".join([TEXTS[0]] * 2000)] * 3  # 3 x 130,000 characters
    service = Service(ServeSettings(index=index, workers=1))
    try:
        answered = orjson.loads(service.protect(list(enumerate(TEXTS)), 2, 3).result(timeout=WAIT_S))["records"]
        assert batches == [1, 1, 1] and not given_back  # short texts: nothing worth giving back
        assert answered == protect_texts(index, TEXTS, k=2, arity=3)
        batches.clear()
        service.protect(list(enumerate(long_texts)), 2, 3).result(timeout=WAIT_S)
        assert batches == [1, 1, 1] and given_back == [True]
        service.assess(list(enumerate(long_texts)), 2, 3).result(timeout=WAIT_S)
        assert given_back == [True, True]
    finally:
        service.close()


def test_a_document_over_the_memory_bound_is_refused_with_one_line(index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`delink protect` on a 10 MB line peaked at 6.6 GB; beyond ``max_document_chars`` it is refused before any work."""
    monkeypatch.setenv(MAX_CHARS_ENV, "100")
    inputs = _jsonl(tmp_path / "in.jsonl", ["short enough", "x" * 101, "also short"])
    with pytest.raises(InputError) as refused:
        protect_file(load_rewriter(index, 2, 3, None, None), inputs, tmp_path / "out.jsonl", progress=False)
    message = str(refused.value)
    assert message.startswith(f"{inputs}:2: the text has 101 characters, over the 100") and MAX_CHARS_ENV in message and "\n" not in message
    assert not (tmp_path / "out.jsonl").exists()
    summary = protect_file(load_rewriter(index, 2, 3, None, None), inputs, tmp_path / "out.jsonl", skip_invalid=True, progress=False)
    assert summary.skipped_lines == [f"{inputs}:2"] and [r["id"] for r in _read(tmp_path / "out.jsonl")] == [0, 2]
    with pytest.raises(InputError, match="--max-chars 200,000 is over the 100 characters"):
        ServeSettings(index=index)  # the server's per-text limit stays within the bound
    assert ServeSettings(index=index, max_chars=100).max_chars == 100
    monkeypatch.setenv(MAX_CHARS_ENV, "a lot")
    with pytest.raises(InputError, match=MAX_CHARS_ENV):
        ServeSettings(index=index)
