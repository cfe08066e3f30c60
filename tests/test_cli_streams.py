"""Outputs and inputs behave like a Unix tool's (docs/cli.md, "Streams" and "Outputs"), and one run writes an output.

* ``-`` is stdin as an input and stdout as an output, streamed;
* an output that is a symlink is written through to its target, the link stays;
* a FIFO or a character device is written to, never replaced;
* nothing beside the named output is left behind;
* a second run into an output being written gets one line and exit status 1.

The real ``/dev/stdout`` is never used: a symlink and a FIFO in a temporary folder stand
in for it (the bug replaced the symlink ``/dev/stdout`` with a regular file).
"""
from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable, Iterator

import pytest

from conftest import Outcome

REPO = Path(__file__).resolve().parents[1]



def _ids(text: str) -> list[object]:
    return [json.loads(line)["id"] for line in text.splitlines() if line.strip()]


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[tuple[Path, Callable[[], bytes]]]:
    """A FIFO with its reading end already open (non-blocking), so a writer never waits and a test never hangs."""
    path = tmp_path / "fifo"
    os.mkfifo(path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)

    def read() -> bytes:
        """What the FIFO holds now: read until it is empty (no writer left) or would block."""
        chunks: list[bytes] = []
        try:
            chunks.extend(iter(lambda: os.read(reader, 1 << 16), b""))
        except BlockingIOError:
            pass
        return b"".join(chunks)

    yield path, read
    os.close(reader)


def _leftovers(folder: Path, *expected: str) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name not in expected)


@pytest.mark.parametrize("command", ["assess", "protect"])
def test_a_symlink_output_is_written_through_and_stays_a_link(
    command: str, tmp_path: Path, index: Path, inputs: Path, delink: Callable[..., Outcome]
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    target = outside / "target.jsonl"
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)  # dangling: the run creates the target
    result = delink(command, index, inputs, "-o", link)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert _ids(target.read_text(encoding="utf-8")) == [1, 2]
    assert _leftovers(outside, "target.jsonl") == []  # no temporary file or lock left beside the target
    target.write_text("previous\n", encoding="utf-8")
    if command == "assess":  # an existing target is replaced as a whole, through the link
        assert delink(command, index, inputs, "-o", link).returncode == 0
        assert link.is_symlink() and _ids(target.read_text(encoding="utf-8")) == [1, 2]


@pytest.mark.parametrize("command", ["assess", "protect"])
def test_a_fifo_output_is_streamed_to_and_never_replaced(
    command: str, tmp_path: Path, index: Path, inputs: Path, fifo: tuple[Path, Callable[[], bytes]],
    delink: Callable[..., Outcome],
) -> None:
    path, read = fifo
    outcome: list[Outcome] = []
    run = threading.Thread(target=lambda: outcome.append(delink(command, index, inputs, "-o", path)), daemon=True)
    run.start()
    run.join(timeout=300)  # never reached by a run that streams: the reading end is open, so no write waits
    if run.is_alive():  # a run reading its output back (to resume) waits for a writer: give it one, then fail
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        run.join()
        pytest.fail(f"delink {command} read its FIFO output back instead of streaming to it")
    (result,) = outcome
    assert result.returncode == 0, result.stderr
    assert stat.S_ISFIFO(os.lstat(path).st_mode)
    assert _ids(read().decode("utf-8")) == [1, 2]


def test_a_character_device_output_is_written_to_and_never_replaced(
    tmp_path: Path, index: Path, inputs: Path, delink: Callable[..., Outcome]
) -> None:
    device = tmp_path / "null"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # the null device, in this temporary folder
        with open(device, "w") as probe:
            probe.write("")
    except OSError as err:
        pytest.skip(f"cannot make a character device here ({err.strerror})")
    for command in ("assess", "protect"):
        result = delink(command, index, inputs, "-o", device)
        assert result.returncode == 0, result.stderr
        assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert _leftovers(tmp_path, "null", "corpus.jsonl", "in.jsonl", "index", "index.key", "index.ids.json") == []


def test_a_folder_output_refuses_a_symlink_and_a_stream(
    tmp_path: Path, index: Path, inputs: Path, fifo: tuple[Path, Callable[[], bytes]], delink: Callable[..., Outcome]
) -> None:
    (tmp_path / "real").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real")
    corpus = tmp_path / "corpus.jsonl"
    for output, message in ((link, "is a symlink"), (fifo[0], "a stream cannot be")):
        result = delink("index", corpus, "-o", output, "--overwrite")
        assert result.returncode == 1 and result.stderr_lines == [result.stderr.strip()], result.stderr
        assert message in result.stderr
    assert link.is_symlink() and stat.S_ISFIFO(os.lstat(fifo[0]).st_mode)


def test_dash_reads_stdin_and_writes_stdout(
    tmp_path: Path, index: Path, inputs: Path, monkeypatch: pytest.MonkeyPatch, delink: Callable[..., Outcome]
) -> None:
    data = inputs.read_bytes()
    for command in ("assess", "protect"):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        result = delink(command, index, "-", "-o", "-")
        assert result.returncode == 0, result.stderr
        assert _ids(result.stdout) == [1, 2]
        assert "→ stdout" in result.stderr or "-> stdout" in result.stderr
        assert not (Path.cwd() / "-").exists()
    bad = b'{"id": 1, "text": "farm"}\n{oops\n'
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(bad), encoding="utf-8"))
    result = delink("protect", index, "-", "-o", tmp_path / "p.jsonl")
    assert result.returncode == 1 and "<stdin>:2: invalid JSON line" in result.stderr
    assert not (tmp_path / "p.jsonl").exists()  # every line is checked before anything is written


def test_dash_as_a_folder_or_report_is_refused(tmp_path: Path, index: Path, inputs: Path, delink: Callable[..., Outcome]) -> None:
    result = delink("assess", index, inputs, "-o", tmp_path / "a.jsonl", "--html", "-")
    assert result.returncode == 1 and "--html -" in result.stderr
    corpus = tmp_path / "corpus.jsonl"
    result = delink("evaluate", index, "--original", corpus, "--deidentified", inputs, "-o", "-")
    assert result.returncode == 1 and "--output -" in result.stderr, result.stderr


def test_stdout_is_streamed_through_a_pipe(tmp_path: Path, index: Path, inputs: Path) -> None:
    """The real thing, once: `delink assess INDEX - -o - < in.jsonl | cat`."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "spacy_delink", "assess", str(index), "-", "-o", "-"],
        input=inputs.read_bytes(), capture_output=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert _ids(run.stdout.decode("utf-8")) == [1, 2]
    assert b"\r" not in run.stderr and not (tmp_path / "-").exists()


def _run_twice_at_once(
    monkeypatch: pytest.MonkeyPatch, owner: object, hook: str, run: Callable[[], Outcome]
) -> tuple[Outcome, Outcome]:
    """``run()``, and inside its first call of ``owner.hook`` (while it writes), ``run()`` again: both outcomes."""
    original = getattr(owner, hook)
    second: list[Outcome] = []
    started: list[bool] = []

    def hooked(*args: object, **kwargs: object) -> object:
        if not started:
            started.append(True)
            second.append(run())
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, hook, hooked)
    first = run()
    return first, second[0]


@pytest.mark.parametrize("command", ["protect", "assess"])
def test_a_second_run_into_the_same_output_is_refused(
    command: str, tmp_path: Path, index: Path, inputs: Path, monkeypatch: pytest.MonkeyPatch, delink: Callable[..., Outcome]
) -> None:
    """While one run writes (inside its first batch), another into the same output gets one line and exit 1."""
    from spacy_delink.components.rewriter import DelinkRewriter
    from spacy_delink.evaluate import assess as assess_module

    output = tmp_path / "out.jsonl"
    owner, hook = (DelinkRewriter, "rewrite_texts") if command == "protect" else (assess_module, "assess_text")
    first, refused = _run_twice_at_once(monkeypatch, owner, hook, lambda: delink(command, index, inputs, "-o", output))
    assert first.returncode == 0, first.stderr
    assert refused.returncode == 1 and refused.stderr_lines == [
        f"error: another delink {command} is writing {output}; wait for it to finish, or write to another output"
    ]
    assert _ids(output.read_text(encoding="utf-8")) == [1, 2]  # every id once
    assert _leftovers(tmp_path, "out.jsonl", "corpus.jsonl", "in.jsonl", "index", "index.key", "index.ids.json") == []
