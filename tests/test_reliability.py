"""Hostile and careless cases of `delink protect` and the LLM path, end to end.

Endpoints are real HTTP servers on 127.0.0.1 (tests/fake_openai_server.py) or a port that
refuses connections; commands run through the console entry point (``spacy_delink.cli.main``,
in this process) or through the library job when a test needs the model's counters. Every
verdict rests on counts and outcomes, never on how long something took.
"""
from __future__ import annotations

import json
import logging
import os
import re
import socket
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import spacy
import srsly

from fake_openai_server import INJECTIONS, REPLACEMENT, FakeOpenAI, prompt_items
from conftest import Outcome, assert_protected
from test_rewriter import CORPUS, K, TEXT, write_input
from spacy_delink.errors import DelinkError, InputError
from spacy_delink.evaluate.inputs import replay_edits
from spacy_delink.linkage.index import IndexBuilder
from spacy_delink.rewrite.config import load_rewriter
from spacy_delink.rewrite.protect import protect_file

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_OPENAI = ROOT / "spacy_delink" / "configs" / "rewriter_openai.cfg"
#: The rejection reason each injected kind must get.
REASONS = {**{kind: kind for kind in INJECTIONS}, "domain": "url"}


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A base URL whose port refuses connections: bound (so no one else takes it) but not listening."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        sock.close()


def write_config(path: Path, base_url: str, name: str, **settings: Any) -> Path:
    """The shipped OpenAI config pointed at ``base_url``/``name``, cache off, ``settings`` replaced."""
    text = SHIPPED_OPENAI.read_text()
    text = text.replace("http://127.0.0.1:11434/v1", base_url).replace('"llama3.1:8b"', json.dumps(name))
    for key, value in {"cache_dir": None, **settings}.items():
        text, count = re.subn(rf"(?m)^{key} = .*$", f"{key} = {json.dumps(value)}", text)
        assert count == 1, key
    path.write_text(text)
    return path


def error_line(completed: Outcome) -> str:
    """The command's one `error:` line (log warnings may precede it on stderr)."""
    lines = [line for line in completed.stderr.splitlines() if line.startswith("error: ")]
    assert completed.returncode == 1 and len(lines) == 1, completed.stderr
    assert "Traceback" not in completed.stderr
    return lines[0]


# -- an endpoint that is down ---------------------------------------------------------------


def test_unreachable_endpoint_trips_the_breaker_and_masks(
    delink: Callable[..., Outcome], index_path: Path, tmp_path: Path, refused_url: str
) -> None:
    write_input(tmp_path / "in.jsonl", 12)
    config = write_config(tmp_path / "down.cfg", refused_url, "any")  # shipped retries 4, backoff 1 s, 8 in flight
    rewriter = load_rewriter(index_path, K, 1, config, None)
    summary = protect_file(rewriter, tmp_path / "in.jsonl", tmp_path / "out.jsonl", progress=False)
    stats = rewriter.model.stats
    # 12 prompts per pass, 5 passes: only the requests in flight when the breaker opened were made.
    assert stats["requests"] <= rewriter.model.breaker.threshold + rewriter.model.max_in_flight
    assert stats["retries"] == 0  # the backoff waits ended when the breaker opened
    assert summary.endpoint_down == 5 * 12 - stats["calls"]  # one prompt per document and pass: not sent
    assert summary.failures["failed_connection"] == stats["calls"]
    assert summary.documents == summary.outcomes["with_mask"] == 12
    rows = list(srsly.read_jsonl(tmp_path / "out.jsonl"))
    assert len(rows) == 12 and all(r["protected"] for r in rows)
    for row in rows:
        assert_protected(CORPUS, row["text"], K, index=index_path)  # the shipped config checks every reading
        mask_passes = {e["pass"] for e in row["edits"] if e["by"] == "mask"}
        assert row["passes"] == 5 + len(mask_passes) and min(mask_passes) == 6  # five LLM passes without answers count

    completed = delink("protect", str(index_path), str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "cli.jsonl"),
                       "--k", str(K), "--config", str(config))
    assert completed.returncode == 0, completed.stderr
    assert "circuit breaker" in completed.stderr and "--require-llm" in completed.stderr


def test_require_llm_makes_an_unreachable_endpoint_an_error(
    delink: Callable[..., Outcome], index_path: Path, tmp_path: Path, refused_url: str
) -> None:
    write_input(tmp_path / "in.jsonl", 12)
    config = write_config(tmp_path / "down.cfg", refused_url, "any")
    out = tmp_path / "out.jsonl"
    completed = delink("protect", str(index_path), str(tmp_path / "in.jsonl"), "-o", str(out), "--k", str(K),
                       "--config", str(config), "--require-llm")
    line = error_line(completed)
    assert "require_llm" in line and "no answer" in line and "connection" in line
    assert not out.exists()  # nothing claimed
    # The same as a component setting.
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_rewriter", config={
        "index": str(index_path), "k": K, "require_llm": True, "cache_dir": None,
        "model": {"@llm_models": "spacy_delink.OpenAICompatible.v1", "base_url": refused_url, "name": "m", "backoff": 0.0},
    })
    with pytest.raises(DelinkError, match="require_llm"):
        nlp(TEXT)
    # Requiring an LLM without one is refused at once.
    with pytest.raises(InputError, match="require_llm needs an LLM"):
        spacy.blank("en").add_pipe("delink_rewriter", config={"index": str(index_path), "require_llm": True})
    line = error_line(delink("protect", str(index_path), str(tmp_path / "in.jsonl"), "-o", str(out), "--require-llm"))
    assert "--config openai" in line and not out.exists()


def test_require_llm_passes_when_the_llm_answers(delink: Callable[..., Outcome], index_path: Path, tmp_path: Path) -> None:
    write_input(tmp_path / "in.jsonl", 3)
    with FakeOpenAI() as fake:
        config = write_config(tmp_path / "good.cfg", fake.base_url, "good")
        completed = delink("protect", str(index_path), str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl"),
                           "--k", str(K), "--config", str(config), "--require-llm")
    assert completed.returncode == 0, completed.stderr
    rows = list(srsly.read_jsonl(tmp_path / "out.jsonl"))
    assert all({e["by"] for e in r["edits"]} == {"llm"} and REPLACEMENT in r["text"] for r in rows)


# -- hostile answers --------------------------------------------------------------------------


def test_valid_format_injection_is_refused_and_counted(
    delink: Callable[..., Outcome], index_path: Path, tmp_path: Path
) -> None:
    write_input(tmp_path / "in.jsonl", 12)
    with FakeOpenAI() as fake:
        config = write_config(tmp_path / "inject.cfg", fake.base_url, "inject", max_passes=2)
        rewriter = load_rewriter(index_path, K, 1, config, None)
        summary = protect_file(rewriter, tmp_path / "in.jsonl", tmp_path / "out.jsonl", progress=False)
        kinds = list(INJECTIONS)
        sent = Counter(kinds[(item["id"] - 1) % len(kinds)] for prompt in fake.prompts for item in prompt_items(prompt))
        cli = delink("protect", str(index_path), str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "cli.jsonl"),
                     "--k", str(K), "--config", str(config))
    rows = list(srsly.read_jsonl(tmp_path / "out.jsonl"))
    assert len(rows) == 12 and all(r["protected"] and {e["by"] for e in r["edits"]} == {"mask"} for r in rows)
    for row in rows:
        assert_protected(CORPUS, row["text"], K, index=index_path)  # the shipped config checks every reading
        assert not any(injected in row["text"] for injected in INJECTIONS.values())
    # Each injected kind got its reason; the CLI reports the same counts.
    expected: Counter[str] = Counter()
    for kind, n in sent.items():
        expected[f"rejected_{REASONS[kind]}"] += n
    assert summary.rejected == expected and len(expected) >= 2
    shown = ", ".join(f"{name.removeprefix('rejected_')} {n}" for name, n in sorted(expected.items()))
    assert cli.returncode == 0 and f"rejected rewrites: {shown};" in cli.stderr


@pytest.mark.parametrize("kind", sorted(INJECTIONS))
def test_each_kind_of_injected_content_is_refused(index_path: Path, kind: str) -> None:
    with FakeOpenAI() as fake:
        rewriter = spacy.blank("en").add_pipe("delink_rewriter", config={
            "index": str(index_path), "k": K, "max_passes": 1, "cache_dir": None,
            "model": {"@llm_models": "spacy_delink.OpenAICompatible.v1", "base_url": fake.base_url, "name": f"inject:{kind}"},
        })
        (result,) = rewriter.rewrite_texts([TEXT])
    spans = sum(len(prompt_items(prompt)) for prompt in fake.prompts)
    assert spans and rewriter.failures() == {f"rejected_{REASONS[kind]}": spans}
    assert result.protected and {e["by"] for e in result.edits} == {"mask"}


def test_slow_drip_answers_are_cut_by_the_deadline(index_path: Path) -> None:
    with FakeOpenAI(drip_s=0.3) as fake:  # ~300 bytes: 90 s for the whole answer
        rewriter = spacy.blank("en").add_pipe("delink_rewriter", config={
            "index": str(index_path), "k": K, "max_passes": 1, "cache_dir": None,
            "model": {"@llm_models": "spacy_delink.OpenAICompatible.v1", "base_url": fake.base_url, "name": "drip",
                      "timeout": 2.0, "deadline": 1.5, "retries": 2},
        })
        results = rewriter.rewrite_texts([TEXT, TEXT.replace("Her", "His")])
    assert rewriter.model.stats["failed_deadline"] == 2 and rewriter.model.stats["calls"] == 2
    assert all(r.protected and {e["by"] for e in r.edits} == {"mask"} for r in results)


def test_a_hung_endpoint_trips_the_breaker(index_path: Path) -> None:
    """An endpoint that accepts and never answers counts as down: timeouts open the breaker like refusals."""
    with FakeOpenAI(slow_s=30.0) as fake:
        rewriter = spacy.blank("en").add_pipe("delink_rewriter", config={
            "index": str(index_path), "k": K, "max_passes": 2, "cache_dir": None,
            "model": {"@llm_models": "spacy_delink.OpenAICompatible.v1", "base_url": fake.base_url, "name": "slow",
                      "timeout": 0.2, "deadline": 5.0, "retries": 1, "backoff": 0.0, "max_in_flight": 1,
                      "breaker_threshold": 2, "breaker_cooldown": 600.0},
        })
        results = rewriter.rewrite_texts([TEXT.replace("Her", name) for name in ("Her", "His", "Our", "Their", "My", "Your")])
    stats = rewriter.model.stats
    assert stats["requests"] == 2  # one prompt and its retry timed out; nothing more was sent
    assert stats["failed_endpoint_down"] == 2 * 6 - stats["calls"]
    assert all(r.protected and {e["by"] for e in r.edits} == {"mask"} for r in results)


# -- credentials ---------------------------------------------------------------------------------


def test_credentials_never_reach_logs_and_the_query_names_survive(
    index_path: Path, refused_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret_url = refused_url.replace("http://", "http://user:hunter2@") + "?api-key=topsecret&api-version=7"
    caplog.set_level(logging.WARNING)
    rewriter = spacy.blank("en").add_pipe("delink_rewriter", config={
        "index": str(index_path), "k": K, "max_passes": 1, "cache_dir": None,
        "model": {"@llm_models": "spacy_delink.OpenAICompatible.v1", "base_url": secret_url, "name": "m",
                  "retries": 0, "breaker_threshold": 1},
    })
    assert rewriter.rewrite_texts([TEXT])[0].protected
    assert caplog.records and all("hunter2" not in r.getMessage() and "topsecret" not in r.getMessage() for r in caplog.records)
    # every query value is hidden (urls.redact_url), not only secret-looking ones: its names still say what was set
    assert "api-version=***" in caplog.text and "api-key=***" in caplog.text and "***@" in caplog.text
    with pytest.warns(UserWarning) as warned:
        remote = spacy.blank("en").add_pipe("delink_rewriter", config={"model": {
            "@llm_models": "spacy_delink.OpenAICompatible.v1", "base_url": "https://u:pw@llm.invalid/v1?token=abc", "name": "m"}})
    assert all("pw@" not in str(w.message) and "abc" not in str(w.message) for w in warned)
    assert remote.model.url == "https://***@llm.invalid/v1/chat/completions?token=***"
    with FakeOpenAI() as fake:
        monkeypatch.setenv("DELINK_TEST_KEY", "sk-test")
        good = spacy.blank("en").add_pipe("delink_rewriter", config={
            "index": str(index_path), "k": K, "cache_dir": None,
            "model": {"@llm_models": "spacy_delink.OpenAICompatible.v1", "base_url": fake.base_url + "?api-version=7",
                      "name": "good", "api_key_env": "DELINK_TEST_KEY"},
        })
        assert {e["by"] for e in good.rewrite_texts([TEXT])[0].edits} == {"llm"}
    assert fake.paths == ["/v1/chat/completions?api-version=7"] and fake.authorizations == ["Bearer sk-test"]


# -- resume, ids and paths -------------------------------------------------------------------------


def protect_args(index_path: Path, source: Path, out: Path, *extra: str) -> list[str]:
    return ["protect", str(index_path), str(source), "-o", str(out), *extra]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """Four inputs (``write_input``) in ``in.jsonl``."""
    path = tmp_path / "in.jsonl"
    write_input(path, 4)
    return path


def test_resume_accepts_only_records_protected_under_the_same_settings(
    delink: Callable[..., Outcome], index_path: Path, source: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    assert delink(*protect_args(index_path, source, out, "--k", "2", "--arity", "1")).returncode == 0
    before = out.read_bytes()
    record = json.loads(before.splitlines()[0])
    assert record["protected_under"]["k"] == 2 and record["protected_under"]["arity"] == 1
    # Other k / arity: refused, file untouched.
    line = error_line(delink(*protect_args(index_path, source, out, "--k", "3", "--arity", "2")))
    assert "protected under" in line and "k=2" in line and "k=3" in line
    assert out.read_bytes() == before
    flagging = record["protected_under"]["flagging"]
    other_strategy = "shortest" if flagging != "shortest" else "min_cover"
    line = error_line(delink(*protect_args(index_path, source, out, "--k", "2", "--flagging", other_strategy)))
    assert f"flagging={flagging}" in line and f"flagging={other_strategy}" in line
    # The same settings resume (and find everything done).
    again = delink(*protect_args(index_path, source, out, "--k", "2", "--arity", "1"))
    assert again.returncode == 0 and "4 already done" in again.stderr and out.read_bytes() == before
    # Another index over the same corpus (a new key): refused.
    other = tmp_path / "other"
    IndexBuilder(progress=False).build([(f"d{i}", t) for i, t in enumerate(CORPUS)], other)
    assert "protected under" in error_line(delink(*protect_args(other, source, out, "--k", "2")))
    # A crash's half line is repaired only when the rest passes; a refused file stays as it was.
    out.write_bytes(before + b'{"id": "doc9", "te')
    assert "protected under" in error_line(delink(*protect_args(index_path, source, out, "--k", "3")))
    assert out.read_bytes() == before + b'{"id": "doc9", "te'


def test_protect_output_carries_no_source_phrase_by_default(
    delink: Callable[..., Outcome], index_path: Path, source: Path, tmp_path: Path
) -> None:
    """Each edit's ``original`` is a phrase that made the text linkable; the output keeps it
    only with ``keep_source`` (the component's rule), and the edits still replay."""
    out = tmp_path / "out.jsonl"
    assert delink(*protect_args(index_path, source, out, "--k", "2", "--arity", "2")).returncode == 0
    records = list(srsly.read_jsonl(out))
    texts = {r["id"]: r["text"] for r in srsly.read_jsonl(source)}
    assert any(record["edits"] for record in records)
    for record in records:
        assert all("original" not in edit for edit in record["edits"])
        assert replay_edits(texts[record["id"]], record["edits"]) == record["text"]


def test_resume_refuses_files_that_are_not_this_inputs_protect_output(
    delink: Callable[..., Outcome], index_path: Path, source: Path, tmp_path: Path
) -> None:
    assessed = tmp_path / "assessed.jsonl"
    assert delink("assess", str(index_path), str(source), "-o", str(assessed), "--k", "2").returncode == 0
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(source.read_bytes())
    for target in (assessed, copy):
        before = target.read_bytes()
        assert "not a `delink protect` record" in error_line(delink(*protect_args(index_path, source, target)))
        assert target.read_bytes() == before
    # The input itself as the output.
    before = source.read_bytes()
    assert "is the input" in error_line(delink(*protect_args(index_path, source, source)))
    link = tmp_path / "link.jsonl"
    os.link(source, link)  # another name, the same inode
    assert "is the input" in error_line(delink(*protect_args(index_path, source, link)))
    assert source.read_bytes() == before
    # Output of another input: its ids are not in this one.
    out = tmp_path / "out.jsonl"
    assert delink(*protect_args(index_path, source, out)).returncode == 0
    srsly.write_jsonl(tmp_path / "fewer.jsonl", list(srsly.read_jsonl(source))[:2])
    assert "not in the input" in error_line(delink(*protect_args(index_path, tmp_path / "fewer.jsonl", out)))


def test_duplicate_and_missing_ids_are_refused_before_any_work(
    delink: Callable[..., Outcome], index_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    (tmp_path / "dup.jsonl").write_text('{"id": "a", "text": "x"}\n{"id": "b", "text": "y"}\n{"id": "a", "text": "z"}\n')
    line = error_line(delink(*protect_args(index_path, tmp_path / "dup.jsonl", out)))
    assert "dup.jsonl:3" in line and "duplicate id 'a'" in line and "first at" in line and "dup.jsonl:1)" in line
    (tmp_path / "noid.jsonl").write_text('{"id": "a", "text": "x"}\n{"text": "y"}\n')
    assert "noid.jsonl:2" in error_line(delink(*protect_args(index_path, tmp_path / "noid.jsonl", out)))
    assert not out.exists()  # no 0-byte output on an early error


def test_lone_surrogates_are_refused_clearly_on_every_run(
    delink: Callable[..., Outcome], index_path: Path, tmp_path: Path
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": "a", "text": "fine text"}\n{"id": "b", "text": "bad \\ud800 text"}\n{"id": "c\\udfff", "text": "x"}\n')
    out = tmp_path / "out.jsonl"
    for _ in range(2):
        line = error_line(delink(*protect_args(index_path, source, out)))
        assert "in.jsonl:2" in line and "surrogate" in line and "\\ud800" in line
        assert not out.exists()
    skipped = delink(*protect_args(index_path, source, out, "--skip-invalid"))
    assert skipped.returncode == 0 and "2 input(s) skipped as invalid and not protected" in skipped.stderr
    assert [r["id"] for r in srsly.read_jsonl(out)] == ["a"]


def test_unwritable_outputs_fail_before_the_work(delink: Callable[..., Outcome], index_path: Path, source: Path, tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    assert "is a directory" in error_line(delink(*protect_args(index_path, source, folder)))
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    read_only.chmod(0o555)
    if os.geteuid() != 0:
        target = read_only / "out.jsonl"
    elif Path("/sys").is_dir():
        target = Path("/sys/delink-out.jsonl")  # root ignores mode bits; sysfs refuses everyone
    else:
        pytest.skip("root ignores a read-only mode and this system has no /sys to stand in")
    try:
        assert "cannot create files in" in error_line(delink(*protect_args(index_path, source, target)))
    finally:
        read_only.chmod(0o755)
    assert not target.exists()
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    assert "is not a directory" in error_line(delink(*protect_args(index_path, source, a_file / "out.jsonl")))
