"""Corpus URLs (fsspec): `delink index URL...` reads as the same files at local paths would,
in this process and on Dask workers that open the URLs themselves; every failure is one line
with the URL's credentials redacted."""
from __future__ import annotations

import functools
import gzip
import json
import socket
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator

import fsspec
import pytest
from fsspec.registry import known_implementations

from spacy_delink.corpus.source import read_documents, resolve_sources
from spacy_delink.errors import InputError
from spacy_delink.urls import redact_url
from spacy_delink.linkage.index import CorpusFiles, IndexBuilder
from spacy_delink.linkage.tokenize import LinkageRules

from test_index_scale import _arrays, _corpus, _write_jsonl, fixed_secret  # noqa: F401  # fixed_secret: a fixture

TOKEN = "hunter2-s3cr3t"
PASSWORD = "pa55word"


class _Handler(SimpleHTTPRequestHandler):
    """Serves a folder (no range requests, like many simple servers); ``/private/`` answers 403."""

    def _refused(self) -> bool:
        self.server.paths.append(self.path)  # type: ignore[attr-defined]  # set by the fixture
        if self.path.startswith("/private/"):
            self.send_error(403)
            return True
        return False

    def do_GET(self) -> None:
        if not self._refused():
            super().do_GET()

    def do_HEAD(self) -> None:
        if not self._refused():
            super().do_HEAD()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, list[str]]]:
    """An HTTP server on this machine: its base URL, the folder it serves and the paths it was asked for."""
    pytest.importorskip("aiohttp", reason="fsspec's HTTP file system needs aiohttp: pip install 'spacy-delink[http]'")
    root = tmp_path_factory.mktemp("served")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(root)))
    httpd.paths = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", root, httpd.paths  # type: ignore[attr-defined]
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """A local Dask cluster of 2 worker processes (they see neither this process's memory nor its patches)."""
    distributed = pytest.importorskip("dask.distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    yield cluster.scheduler_address
    cluster.close()


def _write_gz(path: Path, documents: list[tuple[str, str]]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in documents))
    return path


def _one_error_line(outcome: Any) -> str:
    assert outcome.returncode == 1, outcome.stderr
    assert len(outcome.stderr_lines) == 1 and outcome.stderr_lines[0].startswith("error: "), outcome.stderr
    return str(outcome.stderr_lines[0])


def test_a_file_url_build_equals_the_local_path_build(tmp_path: Path, fixed_secret: bytes, delink: Callable[..., Any]) -> None:
    documents = _corpus(40)
    a = _write_jsonl(tmp_path / "a.jsonl", documents[:20])
    b = _write_gz(tmp_path / "b.jsonl.gz", documents[20:])
    assert delink("index", a, b, "-o", tmp_path / "local", "--max-n", 4).returncode == 0
    urls = [f"file://{a}", f"simplecache::file://{b}"]  # a chained URL reads the same bytes
    assert delink("index", *urls, "-o", tmp_path / "url", "--max-n", 4).returncode == 0
    assert _arrays(tmp_path / "url") == _arrays(tmp_path / "local")
    assert (tmp_path / "url.ids.json").read_bytes() == (tmp_path / "local.ids.json").read_bytes()


def test_url_globs_expand_in_name_order_and_an_empty_match_is_an_error(tmp_path: Path, delink: Callable[..., Any]) -> None:
    for name in ("part-2.jsonl", "part-10.jsonl", "part-1.jsonl.gz", "other.jsonl"):
        (tmp_path / name).write_text("{}\n", encoding="utf-8")
    assert resolve_sources([f"file://{tmp_path}/part-*"]) == [
        f"file://{tmp_path}/{name}" for name in ("part-1.jsonl.gz", "part-10.jsonl", "part-2.jsonl")
    ]
    assert resolve_sources(["relative.jsonl"]) == [str(Path("relative.jsonl").resolve())]  # the shell globs paths
    line = _one_error_line(delink("index", f"file://{tmp_path}/nothing-*.jsonl", "-o", tmp_path / "index"))
    assert line.endswith("nothing-*.jsonl: no file matches this pattern; check the URL")
    assert not (tmp_path / "index").exists()


def test_an_http_corpus_on_two_dask_workers_equals_the_in_process_build(
    tmp_path: Path, fixed_secret: bytes, server: tuple[str, Path, list[str]], scheduler: str,
    monkeypatch: pytest.MonkeyPatch, delink: Callable[..., Any],
) -> None:
    base, root, served = server
    documents = _corpus(60)
    local = (str(_write_gz(tmp_path / "a.jsonl.gz", documents[:30])), str(_write_jsonl(tmp_path / "b.jsonl", documents[30:])))
    for path in local:
        (root / Path(path).name).write_bytes(Path(path).read_bytes())
    urls = (f"{base}/a.jsonl.gz?token={TOKEN}", f"{base}/b.jsonl")
    rules = LinkageRules(max_n=4)
    IndexBuilder(rules, progress=False, shards=4).build(CorpusFiles(local), tmp_path / "local")
    IndexBuilder(rules, progress=False, shards=4).build(CorpusFiles(urls), tmp_path / "http")
    assert _arrays(tmp_path / "http") == _arrays(tmp_path / "local")

    # This process cannot read http(s) any more: the workers must open the URLs themselves.
    from fsspec.implementations.http import HTTPFileSystem

    def no_http_here(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the driver read a corpus URL")

    monkeypatch.setattr(HTTPFileSystem, "_open", no_http_here)
    served.clear()
    outcome = delink("index", *urls, "-o", tmp_path / "dask", "--max-n", 4, "--shards", 4, "--scheduler", scheduler)
    assert outcome.returncode == 0, outcome.stderr
    assert _arrays(tmp_path / "dask") == _arrays(tmp_path / "local")
    assert {"/a.jsonl.gz?token=" + TOKEN, "/b.jsonl"} <= set(served)


def test_memory_urls_build_in_process_and_are_refused_on_workers(tmp_path: Path, fixed_secret: bytes, scheduler: str) -> None:
    documents = _corpus(20)
    local = _write_jsonl(tmp_path / "corpus.jsonl", documents)
    url = f"memory://{tmp_path.name}/corpus.jsonl"
    fsspec.filesystem("memory").pipe(url, local.read_bytes())
    rules = LinkageRules(max_n=3)
    IndexBuilder(rules, progress=False).build(CorpusFiles((str(local),)), tmp_path / "local")
    IndexBuilder(rules, progress=False).build(CorpusFiles((url,)), tmp_path / "memory")
    assert _arrays(tmp_path / "memory") == _arrays(tmp_path / "local")
    with pytest.raises(InputError, match="a memory:// URL lives in this process only, and Dask workers cannot read it"):
        IndexBuilder(rules, progress=False, scheduler=scheduler).build(CorpusFiles((url,)), tmp_path / "dask")
    assert not (tmp_path / "dask").exists()


def test_folder_urls_read_as_local_folders(tmp_path: Path, server: tuple[str, Path, list[str]]) -> None:
    folder = tmp_path / "texts"
    for name, text in {"a/b.txt": "one\r\ntwo", "a-c.txt": "three", "z.txt": "four\rfive", "skip.rtf": "not read"}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(text.encode("utf-8"))
    memory = f"memory://{tmp_path.name}-texts"
    for file in folder.rglob("*"):
        if file.is_file():
            fsspec.filesystem("memory").pipe(f"{memory}/{file.relative_to(folder)}", file.read_bytes())
    expected = list(read_documents([folder]))
    assert [doc_id for doc_id, _ in expected] == ["a/b.txt", "a-c.txt", "z.txt"]  # a path sorts by its parts
    assert list(read_documents([f"file://{folder}"])) == expected
    assert list(read_documents([memory + "/"])) == expected
    with pytest.raises(InputError, match="an http.s. URL cannot be listed as a folder; give the URL of each file"):
        list(read_documents([f"{server[0]}/texts"]))
    with pytest.raises(InputError, match="texts/skip.rtf: unsupported corpus format"):
        list(read_documents([f"file://{folder}/skip.rtf"]))


def test_a_docbin_url_reads_as_the_local_docbin(tmp_path: Path) -> None:
    import spacy
    from spacy.tokens import DocBin

    nlp = spacy.blank("en")
    docs = [nlp(text) for text in ("the farm near the river", "was sold.")]
    for n, doc in enumerate(docs):
        doc.user_data["id"] = f"doc-{n}"
    DocBin(docs=docs, store_user_data=True).to_disk(tmp_path / "corpus.spacy")
    assert list(read_documents([f"file://{tmp_path}/corpus.spacy"])) == list(read_documents([tmp_path / "corpus.spacy"]))


@pytest.fixture
def missing_implementation(monkeypatch: pytest.MonkeyPatch) -> str:
    """A protocol fsspec knows whose implementation is not installed (as s3:// is without s3fs)."""
    monkeypatch.setitem(known_implementations, "delinkabsent", {"class": "delink_absent_fs.FileSystem", "err": "Install delink_absent_fs"})
    return "delinkabsent"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    "url, message",
    [
        ("{base}/missing.jsonl?token={token}", "/missing.jsonl?token=***: not found; check the URL"),
        ("http://reader:{password}@{host}/private/x.jsonl.gz?sig={token}&v=1", "http://***@{host}/private/x.jsonl.gz?sig=***&v=***: access denied (ClientResponseError 403); check the credentials"),
        ("http://127.0.0.1:{closed}/x.jsonl?token={token}", "/x.jsonl?token=***: cannot read it (Connect"),
        ("file://{tmp}/missing.jsonl", "missing.jsonl: not found; check the URL"),
        ("nosuchproto://bucket/x.jsonl", "nosuchproto://bucket/x.jsonl: unknown URL protocol 'nosuchproto'; give a local path or a URL fsspec knows"),
        ("simplecache::delinkabsent://bucket/x.jsonl?key={token}", "simplecache::delinkabsent://bucket/x.jsonl?key=***: reading delinkabsent:// URLs needs the package delink_absent_fs, which is not installed; pip install delink_absent_fs"),
    ],
)
def test_url_errors_are_one_line_without_credentials(
    url: str, message: str, tmp_path: Path, server: tuple[str, Path, list[str]], missing_implementation: str,
    delink: Callable[..., Any],
) -> None:
    host = server[0].removeprefix("http://")
    fields = {"base": server[0], "host": host, "token": TOKEN, "password": PASSWORD, "closed": _closed_port(), "tmp": tmp_path}
    line = _one_error_line(delink("index", url.format(**fields), "-o", tmp_path / "index"))
    assert message.format(**fields) in line
    assert TOKEN not in line and PASSWORD not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no index, no key, no partial


def test_bad_lines_of_a_url_are_named_by_the_redacted_url(
    tmp_path: Path, server: tuple[str, Path, list[str]], delink: Callable[..., Any]
) -> None:
    base, root, _ = server
    (root / "bad.jsonl").write_text('{"id": "a", "text": "the farm"}\nnot json\n{"id": "b", "text": "the river"}\n', encoding="utf-8")
    url = f"{base}/bad.jsonl?token={TOKEN}"
    line = _one_error_line(delink("index", url, "-o", tmp_path / "index"))
    assert f"{base}/bad.jsonl?token=***:2: invalid JSON line" in line and TOKEN not in line
    outcome = delink("index", url, "-o", tmp_path / "index", "--skip-invalid")
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.stderr_lines[-1] == f"warning: 1 input(s) skipped as invalid and not indexed: {base}/bad.jsonl?token=***:2"
    assert TOKEN not in outcome.stderr


def test_redact_url_hides_user_info_query_values_and_fragments_in_every_link() -> None:
    assert redact_url(f"simplecache::https://me:{PASSWORD}@host/a/x.jsonl.gz?X-Amz-Signature={TOKEN}&X-Amz-Expires=60#{TOKEN}") == (
        "simplecache::https://***@host/a/x.jsonl.gz?X-Amz-Signature=***&X-Amz-Expires=***#***"
    )
    assert redact_url("s3://bucket/key.jsonl") == "s3://bucket/key.jsonl"
    assert redact_url("file:///data/corpus.jsonl") == "file:///data/corpus.jsonl"


def test_update_reads_urls_and_a_file_url_cannot_be_the_output(
    tmp_path: Path, fixed_secret: bytes, delink: Callable[..., Any]
) -> None:
    documents = _corpus(20, words=50)
    base = _write_jsonl(tmp_path / "base.jsonl", documents[:15])
    new = _write_jsonl(tmp_path / "new.jsonl", documents[15:])
    for name, source in (("local", str(new)), ("url", f"file://{new}")):
        assert delink("index", base, "--updatable", "--max-n", 3, "-o", tmp_path / name).returncode == 0
        outcome = delink("index", "--update", tmp_path / name, source)
        assert outcome.returncode == 0, outcome.stderr
    assert _arrays(tmp_path / "url") == _arrays(tmp_path / "local")
    line = _one_error_line(delink("index", f"file://{base}", "-o", tmp_path / "x", "--key-file", base))
    assert line == f"error: --key-file {base} is the input file://{base}; write the output to another path"
