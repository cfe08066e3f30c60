"""What a new user meets first (issue 25): secure defaults, honest summaries, spaCy's override
syntax, progress that suits the stream, and a help page that puts the text commands first."""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Callable

import pytest
import srsly

from conftest import Outcome
from spacy_delink.claims import THREAT_MODEL_ARITY, CheckedUnder
from spacy_delink.cli.protect import model_notes

REPO = Path(__file__).resolve().parents[1]



# -- secure by default, honest in words -------------------------------------------------------


def test_the_settings_are_worded_in_one_place() -> None:
    assert str(CheckedUnder(2, 3, "idx")) == "k=2, arity 3, exact, search and gap readings, index idx"
    assert str(CheckedUnder(2, 3, "idx", ("exact",))) == "k=2, arity 3, exact reading, index idx"
    assert "search reading" in str(CheckedUnder(2, 3, "idx", ("exact",)).unchecked) and CheckedUnder(2, 3, "idx").unchecked is None
    assert CheckedUnder(2, 3, "idx").unchecked is None
    assert CheckedUnder(5, 1, "idx").unchecked == (
        "Combinations of phrases were not checked (arity 1); the threat model's setting is arity 3."
    )
    assert CheckedUnder(2, 2, "idx").unchecked == (
        "Combinations of more than 2 phrases were not checked (arity 2); the threat model's setting is arity 3."
    )


def test_assess_and_protect_check_the_threat_models_arity_by_default(
    tmp_path: Path, index: Path, inputs: Path, delink: Callable[..., Outcome]
) -> None:
    assessed = delink("assess", index, inputs, "-o", tmp_path / "a.jsonl")
    assert assessed.returncode == 0, assessed.stderr
    assert {record["arity"] for record in srsly.read_jsonl(tmp_path / "a.jsonl")} == {THREAT_MODEL_ARITY}
    assert f"under k=2, arity 3, exact, search and gap readings, index {index}:" in assessed.stderr and "not checked" not in assessed.stderr
    protected = delink("protect", index, inputs, "-o", tmp_path / "p.jsonl")
    assert protected.returncode == 0, protected.stderr
    assert {r["protected_under"]["arity"] for r in srsly.read_jsonl(tmp_path / "p.jsonl")} == {THREAT_MODEL_ARITY}
    assert protected.stderr.startswith(f"2 documents protected under k=2, arity 3, exact, search and gap readings, index {index} (0 already done, 0 redone, 0 skipped)")
    assert re.search(r"; [0-9.]+ s per document; [0-9.]+ s -> ", protected.stderr), protected.stderr
    assert "not checked" not in protected.stderr


def test_protect_shows_the_models_notes_while_it_runs_and_only_then(capsys: pytest.CaptureFixture[str]) -> None:
    """A local model's load time and threads (``LlamaCpp.v1`` logs them) reach the user as a ``note:`` line."""
    llm_logger = logging.getLogger("spacy_delink.llm")
    with model_notes():
        llm_logger.info("loaded model.gguf in 1.2 s; 2 thread(s) (model.n_threads)")
    llm_logger.info("after the run: not shown")
    assert capsys.readouterr().err == "note: loaded model.gguf in 1.2 s; 2 thread(s) (model.n_threads)\n"


def test_a_run_below_the_threat_models_arity_says_what_it_did_not_check(
    tmp_path: Path, index: Path, inputs: Path, delink: Callable[..., Outcome]
) -> None:
    sentence = "Combinations of phrases were not checked (arity 1); the threat model's setting is arity 3."
    for command in ("assess", "protect"):
        result = delink(command, index, inputs, "-o", tmp_path / f"{command}.jsonl", "--k", "3", "--arity", "1")
        assert result.returncode == 0, result.stderr
        assert "k=3, arity 1, exact, search and gap readings, index" in result.stderr_lines[0] and result.stderr_lines[1] == sentence, result.stderr
    deidentified = tmp_path / "deid.jsonl"
    srsly.write_jsonl(deidentified, [{"id": "a", "text": "The applicant's farm near the river [REDACTED] was sold."}])
    evaluated = delink(
        "evaluate", index, "--original", tmp_path / "corpus.jsonl", "--deidentified", deidentified, "-o", tmp_path / "ev",
        "--k", "2", "--arity", "1,2", "--no-engine", "--no-semantic",
    )
    assert evaluated.returncode == 0, evaluated.stderr
    assert f"k=2, arity 2, exact, search and gap readings, index {index}: linkable" in evaluated.stderr
    assert evaluated.stderr_lines[-1] == (
        "Combinations of more than 2 phrases were not checked (arity 2); the threat model's setting is arity 3."
    )


def test_no_summary_says_protected_without_its_settings() -> None:
    """Every message of the commands that calls documents protected names the settings' words beside it."""
    claims = [
        (module.name, line.strip())
        for module in sorted((REPO / "spacy_delink" / "cli").glob("*.py"))
        for line in module.read_text(encoding="utf-8").splitlines()
        if re.search(r'f".*\bprotected\b', line)
    ]
    assert claims == [("protect.py", claims[0][1])] and "protected under {checked}" in claims[0][1], claims


def test_components_default_to_the_threat_models_arity() -> None:
    import spacy

    nlp = spacy.blank("en")
    for factory in ("delink_rewriter", "delink_combinations"):
        assert nlp.get_factory_meta(factory).default_config["arity"] == THREAT_MODEL_ARITY
    for shipped in (REPO / "spacy_delink" / "configs").glob("*.cfg"):
        assert spacy.util.load_config(shipped)["components"]["delink_rewriter"]["arity"] == THREAT_MODEL_ARITY


# -- spaCy's config overrides -----------------------------------------------------------------


@pytest.mark.parametrize("given", [
    ("--set", "components.delink_rewriter.model.name=500"),
    ("--components.delink_rewriter.model.name", "500"),
    ("--components.delink_rewriter.model.name=500",),
])
def test_overrides_keep_text_settings_text(
    given: tuple[str, ...], tmp_path: Path, index: Path, inputs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--set llm.model=500` was read as the integer 500; every spelling now gives the model the name "500"."""
    from spacy_delink.rewrite import config

    loaded: dict[str, object] = {}
    real = config.load_rewriter

    def spy(*args: object, **kwargs: object) -> object:
        rewriter = real(*args, **kwargs)  # type: ignore[arg-type]
        loaded["name"] = rewriter.model.name  # type: ignore[attr-defined]
        loaded["max_passes"] = rewriter.max_passes
        raise SystemExit(0)

    monkeypatch.setattr(config, "load_rewriter", spy)
    from spacy_delink.cli import main

    with pytest.raises(SystemExit):
        main(["protect", str(index), str(inputs), "-o", str(tmp_path / "o.jsonl"), "--config", "openai", *given,
              "--components.delink_rewriter.max_passes", "2"])
    assert loaded == {"name": "500", "max_passes": 2}


def test_read_override_reads_as_spacy_except_text_stays_text() -> None:
    from spacy_delink.rewrite.config import read_override

    assert read_override("500", "llama3.1:8b") == "500"
    assert read_override("null", "auto") is None  # a text setting can still be unset
    assert read_override("2", 5) == 2 and read_override("0.5", None) == 0.5 and read_override("true", False) is True
    assert read_override("[1, 2]", None) == [1, 2] and read_override("gpt-4o", None) == "gpt-4o"
    assert read_override(7, "text") == 7  # values from Python are taken as they are


@pytest.mark.parametrize(("args", "status", "message"), [
    (["--arty", "3"], 2, "no such option: --arty"),
    (["stray"], 2, "unexpected argument 'stray'"),
    (["--set", "llm.model"], 2, "expected SECTION.KEY=VALUE"),
    (["--set", "model=x"], 2, "expected SECTION.KEY=VALUE"),
    (["--set", "llm.=x"], 2, "expected SECTION.KEY=VALUE"),
    (["--llm.model", "a", "--llm.model=b"], 2, "given twice"),
    (["--nosuch.key", "1"], 1, "no [nosuch] section"),
    (["--components.delink_rewriter.k", "5"], 1, "use --k instead"),
    (["--components.delink_rewriter.index", "x"], 1, "use the INDEX argument instead"),
])
def test_bad_overrides_are_one_line(
    args: list[str], status: int, message: str, tmp_path: Path, index: Path, inputs: Path, delink: Callable[..., Outcome]
) -> None:
    result = delink("protect", index, inputs, "-o", tmp_path / "o.jsonl", "--config", "openai", *args)
    assert result.returncode == status and len(result.stderr_lines) == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_overrides_need_a_config(tmp_path: Path, index: Path, inputs: Path, delink: Callable[..., Outcome]) -> None:
    result = delink("protect", index, inputs, "-o", tmp_path / "o.jsonl", "--components.delink_rewriter.max_passes", "1")
    assert result.returncode == 1 and "need --config" in result.stderr


# -- progress ---------------------------------------------------------------------------------


def test_progress_is_a_line_at_a_time_off_a_terminal(
    tmp_path: Path, index: Path, inputs: Path, monkeypatch: pytest.MonkeyPatch, delink: Callable[..., Outcome]
) -> None:
    monkeypatch.setenv("DELINK_PROGRESS", "0")  # a line at every step instead of every 10 s
    result = delink("assess", index, inputs, "-o", tmp_path / "a.jsonl")
    assert result.returncode == 0 and "\r" not in result.stderr
    assert re.match(r"assess: 1/2 docs \(50%\), \d+ s$", result.stderr_lines[0]), result.stderr
    assert re.match(r"assess: 2/2 docs \(100%\), \d+ s$", result.stderr_lines[1])
    result = delink("protect", index, inputs, "-o", tmp_path / "p.jsonl", "--batch-size", "1")
    assert [line.split(",")[0] for line in result.stderr_lines[:2]] == ["protect: 1/2 docs (50%)", "protect: 2/2 docs (100%)"]
    result = delink("index", tmp_path / "corpus.jsonl", "-o", tmp_path / "i2")
    assert "tokenizing: 3/3 docs (100%)" in result.stderr and "counting n-grams: 8/8 levels (100%)" in result.stderr
    monkeypatch.setenv("DELINK_PROGRESS", "none")
    result = delink("assess", index, inputs, "-o", tmp_path / "a.jsonl")
    assert result.stderr.startswith("assessed 2 documents")
    monkeypatch.setenv("DELINK_PROGRESS", "often")
    result = delink("assess", index, inputs, "-o", tmp_path / "a.jsonl")
    assert result.returncode == 1 and "$DELINK_PROGRESS='often'" in result.stderr


def test_input_lines_are_counted_for_the_total(tmp_path: Path) -> None:
    import gzip

    from spacy_delink.progress import count_lines

    plain = tmp_path / "a.jsonl"
    plain.write_bytes(b'{"id": 1}\n{"id": 2}\n{"id": 3}')  # no newline at the end
    packed = tmp_path / "b.jsonl.gz"
    packed.write_bytes(gzip.compress(b'{"id": 1}\n{"id": 2}\n'))
    assert count_lines([plain, packed]) == 5
    assert count_lines([plain, tmp_path]) is None and count_lines(["-"]) is None
    assert count_lines(["https://example.org/x.jsonl"]) is None
    broken = tmp_path / "c.jsonl.gz"
    broken.write_bytes(b"not gzip")
    assert count_lines([broken]) is None  # the reader reports it, with its line


# -- help -------------------------------------------------------------------------------------


def test_help_lists_the_text_commands_first_and_the_companions_in_their_own_panel(delink: Callable[..., Outcome]) -> None:
    result = delink("--help")
    assert result.returncode == 0
    text, companions = result.stdout.split("Companion methods (docs/companions.md):")
    listed = re.findall(r"^  ([a-z-]+)  ", text.split("Commands:")[1], re.MULTILINE)
    assert listed[:5] == ["index", "assess", "protect", "evaluate", "compact"]
    assert set(re.findall(r"^  ([a-z-]+)  ", companions, re.MULTILINE)) == {
        "privacy-level", "anonymize-table", "setanon", "train-redactor", "redaction-privacy",
    }
