"""The command-line conventions of docs/cli.md, for every command.

* help texts print as written: every declared help text and default is shown, boolean flags
  take no value (no ``<bool>``);
* ``--version``;
* a command line that does not parse: one ``error:`` line on stderr, status 2;
* a failure found while running: one ``error:`` line on stderr, status 1;
* summaries and notes on stderr, so stdout carries only data.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import srsly
import typer

from conftest import Outcome
from spacy_delink import __version__
from spacy_delink.cli import app

COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_every_command_is_checked() -> None:
    assert {"index", "assess", "protect", "setanon", "privacy-level", "anonymize-table"} <= set(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_help_shows_every_text_and_default_and_no_bool_metavar(name: str, delink: Callable[..., Outcome]) -> None:
    result = delink(name, "--help")
    assert result.returncode == 0 and result.stderr == ""
    assert "<bool>" not in result.stdout
    shown = _squeezed(result.stdout)
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    for param in command.params:
        declared = getattr(param, "help", None)
        if declared:  # markup would eat "[default: ...]", "[thread]" and the like
            assert _squeezed(declared) in shown, (name, param.name, declared)
        if getattr(param, "is_flag", False):
            continue
        if param.default not in (None, (), "") and param.param_type_name == "option":
            default = ", ".join(map(str, param.default)) if isinstance(param.default, (list, tuple)) else str(param.default)
            assert _squeezed(f"[default: {default}]") in shown, (name, param.name, default)


@pytest.mark.parametrize("name", COMMANDS)
def test_docs_cli_describes_every_command_and_option(name: str) -> None:
    """docs/cli.md keeps up with the code: a heading per command, a row per option."""
    docs = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text(encoding="utf-8")
    heading = f"### `delink {name}`\n"
    assert heading in docs, f"docs/cli.md has no section {heading.strip()}"
    section = docs.split(heading, 1)[1].split("\n### ", 1)[0]
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    declared = {option for param in command.params if param.param_type_name == "option"
                for option in param.opts + param.secondary_opts}
    for option in sorted(declared):
        assert f"`{option}`" in section, f"docs/cli.md, delink {name}: option {option} is not described"
    documented = set(re.findall(r"^\| `(--?[\w-]+)`", section, re.MULTILINE))
    assert documented <= declared, f"docs/cli.md, delink {name}: {sorted(documented - declared)} no longer exist"


def test_flags_take_no_value(delink: Callable[..., Outcome]) -> None:
    """`--skip-invalid` is a switch: it must not swallow the next word as its value."""
    result = delink("index", "--skip-invalid", "--help")
    assert result.returncode == 0 and "Usage:" in result.stdout


def test_version(delink: Callable[..., Outcome]) -> None:
    result = delink("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"spacy-delink {__version__}\n", "")
    root = delink("--help")
    assert root.returncode == 0 and "--version" in root.stdout and "<bool>" not in root.stdout
    assert "docs/linkage-rules.md" in root.stdout and "docs/cli.md" in root.stdout


def test_python_dash_m_is_the_same_program(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "spacy_delink", *args], capture_output=True, text=True, cwd=tmp_path)

    version = run("--version")
    assert (version.returncode, version.stdout) == (0, f"spacy-delink {__version__}\n")
    usage = run("assess", "--no-such-option")
    assert usage.returncode == 2 and usage.stdout == "" and len(usage.stderr.splitlines()) == 1
    failure = run("assess", "missing-index", "missing.jsonl", "-o", "out.jsonl")
    assert failure.returncode == 1 and failure.stderr.splitlines()[-1].startswith("error: ")


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["no-such-command"], "no such command 'no-such-command'"),
        (["index", "--no-such-option"], "no such option: --no-such-option"),
        (["assess"], "missing argument"),
        (["assess", "idx", "in.jsonl", "-o", "out.jsonl", "--k", "two"], "'--k'"),
        (["protect", "idx", "in.jsonl"], "missing option '--output'"),
        (["setanon", "in.jsonl", "-o", "out.jsonl", "--k"], "--k"),
    ],
)
def test_usage_errors_are_one_line_and_status_2(args: list[str], fragment: str, delink: Callable[..., Outcome]) -> None:
    result = delink(*args)
    assert result.returncode == 2, result
    assert result.stdout == ""
    assert len(result.stderr_lines) == 1, result.stderr
    line = result.stderr_lines[0]
    assert line.startswith("error: ") and fragment.lower() in line.lower(), line
    command = "delink" if args[0] == "no-such-command" else f"delink {args[0]}"
    assert line.endswith(f"see `{command} --help`"), line


def test_no_command_prints_the_help_and_status_2(delink: Callable[..., Outcome]) -> None:
    result = delink()
    assert result.returncode == 2 and result.stdout == "" and "Commands:" in result.stderr


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    srsly.write_jsonl(
        path,
        [
            {"id": "a", "text": "The applicant's farm near the river Mura was sold."},
            {"id": "b", "text": "The applicant's farm was sold in 1994."},
            {"id": "c", "text": "The farm near the river was sold."},
        ],
    )
    return path


def test_run_time_errors_are_one_line_and_status_1(tmp_path: Path, corpus: Path, delink: Callable[..., Outcome]) -> None:
    cases = [
        (["assess", tmp_path / "missing", corpus, "-o", tmp_path / "out.jsonl"], "delink index"),
        (["index", corpus, "-o", tmp_path / "index", "--max-n", "0"], "max_n"),
        (["index", tmp_path / "absent.jsonl", "-o", tmp_path / "index2"], "absent.jsonl"),
    ]
    for args, fragment in cases:
        result = delink(*args)
        assert result.returncode == 1, (args, result)
        assert len(result.stderr_lines) == 1 and result.stderr_lines[0].startswith("error: "), (args, result.stderr)
        assert fragment in result.stderr_lines[0], (args, result.stderr)
    assert not (tmp_path / "out.jsonl").exists()


def test_interrupt_is_one_line_and_status_130(
    tmp_path: Path, corpus: Path, delink: Callable[..., Outcome], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while a command runs: one line and 128 + SIGINT, as a shell reports it."""
    import spacy_delink.corpus.source

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(spacy_delink.corpus.source, "read_documents", interrupted)
    result = delink("index", corpus, "-o", tmp_path / "index")
    assert result.returncode == 130, result
    assert result.stderr_lines[-1].startswith("error: interrupted"), result.stderr
    assert not (tmp_path / "index").exists()


def test_unwritable_output_is_one_line_and_status_1(tmp_path: Path, corpus: Path, delink: Callable[..., Outcome]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = delink("index", corpus, "-o", blocker / "index")
    assert result.returncode == 1, result
    assert result.stderr_lines[-1].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr


def test_summaries_go_to_stderr(tmp_path: Path, corpus: Path, delink: Callable[..., Outcome]) -> None:
    """Each command that writes files prints nothing on stdout, and its summary on stderr."""
    index = tmp_path / "index"
    released = tmp_path / "released.jsonl"
    srsly.write_jsonl(released, [{"id": "a", "text": "The applicant's farm near the river [LOCATION] was sold."}])
    baskets = tmp_path / "baskets.jsonl"
    srsly.write_jsonl(baskets, [{"id": f"u{i}", "items": ["milk", "bread"] if i % 2 else ["beer", f"x{i % 3}"]} for i in range(12)])
    table = tmp_path / "table.csv"
    table.write_text("age;disease\n" + "".join(f"{a};{d}\n" for a, d in zip([1, 2, 3, 6, 7, 8] * 2, ["flu", "cold"] * 6)))
    hierarchy = tmp_path / "h_age.csv"
    hierarchy.write_text("".join(f"{a};{'0-4' if a < 5 else '5-9'};*\n" for a in range(10)))
    texts = [f"Patient {i} was treated for asthma at the clinic." for i in range(10)]
    others = [f"Visitor {i} walked along the river in spring." for i in range(10)]
    sensitive, safe = tmp_path / "d0.jsonl", tmp_path / "d1.jsonl"
    srsly.write_jsonl(sensitive, [{"text": t} for t in texts])
    srsly.write_jsonl(safe, [{"text": t} for t in others])
    runs = [
        (["index", corpus, "-o", index], "indexed 3 documents"),
        (["assess", index, released, "-o", tmp_path / "assess.jsonl", "--arity", "2"], "assessed 1 documents"),
        (["protect", index, released, "-o", tmp_path / "protected.jsonl", "--arity", "2"], "1 documents protected"),
        (["evaluate", index, "--original", corpus, "--deidentified", released, "--protected", tmp_path / "protected.jsonl",
          "--k", "2", "--arity", "1", "--no-engine", "--no-semantic", "-o", tmp_path / "evaluation"], "evaluated 1 documents"),
        (["setanon", baskets, "--k", "3", "-o", tmp_path / "release.jsonl"], "k=3 verified"),
        (["anonymize-table", table, "-H", f"age={hierarchy}", "--k", "2", "-o", tmp_path / "t.csv"], "rows suppressed"),
        (["train-redactor", "--sensitive", sensitive, "--safe", safe, "--method", "logreg", "-o", tmp_path / "r"], "trained logreg"),
    ]
    for args, summary in runs:
        result = delink(*args)
        assert result.returncode == 0, (args, result.stderr)
        assert result.stdout == "", (args, result.stdout)
        assert summary in result.stderr, (args, result.stderr)
    assert json.loads((tmp_path / "protected.jsonl").read_text().splitlines()[0])["protected"] is True


def test_data_commands_keep_stdout_for_data(tmp_path: Path, delink: Callable[..., Outcome]) -> None:
    """`privacy-level --json` prints the report itself: stdout parses as JSON, nothing else on it."""
    table = tmp_path / "t.csv"
    table.write_text("age;disease\n" + "".join(f"{a};{d}\n" for a, d in zip([1, 2, 3, 4], ["flu", "cold", "flu", "cold"])))
    result = delink("privacy-level", table, table, "--qi", "age", "--sensitive", "disease", "--json")
    assert result.returncode == 0, result.stderr
    assert "privacy_level" in json.loads(result.stdout)["overall"]
