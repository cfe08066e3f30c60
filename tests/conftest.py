"""Shared fixtures and helpers: the location of ../shared/data, optional pieces that CI requires,
the hypothesis profiles, index builders, the protection check, and the in-process CLI."""
from __future__ import annotations

import importlib
import itertools
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, NoReturn, Sequence

import pytest
import srsly
from hypothesis import settings

import spec_oracle
from spacy_delink.cli import main
from spacy_delink.errors import InputError
from spacy_delink.linkage.attack import detect
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder, open_index
from spacy_delink.linkage.readings import DEFAULT_READINGS
from spacy_delink.linkage.tokenize import LinkageRules

# Property tests draw the same examples on every machine and run by default (no example
# database, no deadline): a verdict must not depend on the machine, its load or an earlier run.
# DELINK_HYPOTHESIS_PROFILE=nightly draws new random examples on each run, ten times
# as many (``examples``), for a scheduled run that looks further than the pull-request one.
PROFILES = {"delink": 1, "nightly": 10}
settings.register_profile("delink", derandomize=True, database=None, deadline=None)
settings.register_profile("nightly", derandomize=False, database=None, deadline=None, print_blob=True)
PROFILE = os.environ.get("DELINK_HYPOTHESIS_PROFILE", "") or "delink"


def pytest_configure(config: pytest.Config) -> None:
    """Load the hypothesis profile before any test module is collected (``examples`` reads it there)."""
    if PROFILE not in PROFILES:
        raise pytest.UsageError(f"DELINK_HYPOTHESIS_PROFILE={PROFILE!r} is not a profile; choose from {', '.join(PROFILES)}")
    settings.load_profile(PROFILE)


def examples(count: int) -> int:
    """A property test's ``max_examples``: ``count`` by default, more under the nightly profile.

    A test's own ``max_examples`` wins over any profile's, so the scale is applied here."""
    return count * PROFILES[PROFILE]


SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def required(variable: str) -> bool:
    """Whether CI's ``variable`` (DELINK_REQUIRE_DATA, DELINK_REQUIRE_ORACLE, DELINK_REQUIRE_LLM) is set.

    Read at each call, so a test of the gate can set it."""
    return os.environ.get(variable, "") not in ("", "0")


def unavailable(reason: str, variable: str) -> NoReturn:
    """Skip the calling test for a missing optional piece, or fail it where ``variable`` requires the piece (CI)."""
    if required(variable):
        pytest.fail(f"{reason}; {variable}=1 requires it", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def shared_path(*parts: str) -> Path:
    """Path under ../shared/data, skipping the calling test when it is absent (failing it under DELINK_REQUIRE_DATA=1).

    CI sets DELINK_REQUIRE_DATA=1: the independent checks on real documents live there."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        unavailable(f"shared data not available: {path} (tests read ../shared/data beside the checkout)", "DELINK_REQUIRE_DATA")
    return path


def require_module(name: str, reason: str) -> ModuleType:
    """``name`` imported, else the calling test (or module) skipped, or failed under DELINK_REQUIRE_ORACLE=1.

    CI sets it: the oracle's engines (ICU, tantivy) come with the test extra, and a cross-check
    that silently skipped would let the package's tables drift from them unseen."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        unavailable(f"{name} is not importable ({err}): {reason}", "DELINK_REQUIRE_ORACLE")


def build_index(folder: Path, corpus: Sequence[str], max_n: int = 8, **builder: Any) -> CorpusIndex:
    """``corpus`` (documents d0, d1, ...) indexed in ``folder / "index"`` (replaced if there) and opened.

    ``builder``: more IndexBuilder settings (readings, shards, ...); the index holds every
    reading by default, as the product builds it."""
    out = folder / "index"
    IndexBuilder(LinkageRules(max_n=max_n), progress=False, **builder).build([(f"d{i}", t) for i, t in enumerate(corpus)], out, overwrite=True)
    return CorpusIndex(out)


def replay(source: str, edits: Sequence[dict[str, Any]], originals: bool = False) -> str:
    """The output rebuilt from ``source`` and its edits, pass by pass (offsets refer to the text
    before their pass), each edit's ``original`` checked against the text it replaces where it is
    there (the component keeps it with keep_source); ``originals``: every edit must carry it."""
    text = source
    for _, group in itertools.groupby(edits, key=lambda e: e["pass"]):
        for edit in sorted(group, key=lambda e: e["start"], reverse=True):
            if originals or "original" in edit:
                assert text[edit["start"] : edit["end"]] == edit["original"], edit
            text = text[: edit["start"]] + edit["replacement"] + text[edit["end"] :]
    return text


def assert_file_refused(load: Callable[[Path], Any], path: Path, content: str | None, message: str) -> None:
    """``load`` refuses ``path``, written with ``content`` (None: absent), with an InputError matching ``message``."""
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        load(path)


@pytest.fixture(scope="module")
def index_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the index of the test module's ``CORPUS`` (a list of texts), built once per module."""
    return build_index(tmp_path_factory.mktemp(request.module.__name__), request.module.CORPUS).path


@pytest.fixture(scope="module")
def corpus_index(index_path: Path) -> CorpusIndex:
    """The test module's ``CORPUS``, indexed once per module and opened (for tests that only read it)."""
    return CorpusIndex(index_path)


def assert_protected(
    corpus: Sequence[str], text: str, k: int, arity: int = 1, *, index: CorpusIndex | Path, max_n: int = 8,
    readings: Sequence[str] = DEFAULT_READINGS,
) -> None:
    """SPEC §7 under each of ``readings`` (by default every reading the product checks): by the
    independent oracle (tests/spec_oracle.py) on ``corpus`` and by the package's own ``detect`` on
    ``index``, the index of ``corpus`` (opened, or its folder). Either saying "linkable" fails the test."""
    readings = tuple(readings)
    assert spec_oracle.protected(list(corpus), text, k, max_n, arity, readings=readings), f"the oracle finds {text!r} linkable under {readings}"
    opened = open_index(index) if isinstance(index, Path) else index
    assert detect(opened, text, k, arity, readings=readings).protected, f"detect finds {text!r} linkable under {readings}"


@pytest.fixture
def shared_data() -> Path:
    return shared_path()



def write_files(root: Path, files: dict[str, str]) -> None:
    """Write each ``relative path: text`` under ``root``, making its folders: a test's small file tree."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

@dataclass
class Outcome:
    """What one run of the console entry point gave: exit status and both streams."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


@pytest.fixture
def delink(capsys: pytest.CaptureFixture[str]) -> Callable[..., Outcome]:
    """Run the console entry point (`main`) in-process, with its exit status and output."""

    def run(*args: Any) -> Outcome:
        capsys.readouterr()
        try:
            main([str(arg) for arg in args])
            code: Any = 0
        except SystemExit as exit_:
            code = exit_.code
        captured = capsys.readouterr()
        return Outcome(code if isinstance(code, int) else 1, captured.out, captured.err)

    return run


#: A small collection for the command-line tests, and two documents to check against it.
SAMPLE_CORPUS = [
    {"id": "a", "text": "The applicant's farm near the river Mura was sold."},
    {"id": "b", "text": "The applicant's farm was sold in 1994."},
    {"id": "c", "text": "The farm near the river was sold."},
]
SAMPLE_INPUTS = [{"id": 1, "text": "Her farm near the river Mura."}, {"id": 2, "text": "The farm was sold."}]


@pytest.fixture
def index(tmp_path: Path, delink: Callable[..., Outcome]) -> Path:
    """The index of ``SAMPLE_CORPUS`` (written to ``corpus.jsonl``), built by `delink index`."""
    corpus = tmp_path / "corpus.jsonl"
    srsly.write_jsonl(corpus, SAMPLE_CORPUS)
    result = delink("index", corpus, "-o", tmp_path / "index")
    assert result.returncode == 0, result.stderr
    return tmp_path / "index"


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """``SAMPLE_INPUTS`` as ``in.jsonl``."""
    path = tmp_path / "in.jsonl"
    srsly.write_jsonl(path, SAMPLE_INPUTS)
    return path


# The TAB test-bed loader is shared with the benchmarks and lives beside them.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.fixture(autouse=True)
def _no_progress_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off a terminal a long command writes a progress line every 10 s: no stderr check may depend on a command's speed.

    A test of the progress lines sets ``DELINK_PROGRESS`` itself.
    """
    monkeypatch.setenv("DELINK_PROGRESS", "none")
