"""The release comparison must time the versions it names (benchmarks/bench_protect_versions.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import bench_protect_versions as versions


def test_a_checkout_in_the_working_directory_shadows_an_installed_package(tmp_path: Path) -> None:
    """The hazard: ``python -m`` started in a checkout imports the checkout, whatever is installed."""
    checkout = tmp_path / "checkout"
    (checkout / "spacy_delink").mkdir(parents=True)
    (checkout / "spacy_delink" / "__init__.py").write_text("")
    origin = versions.package_origin(Path(sys.executable), checkout)
    assert origin == (checkout / "spacy_delink").resolve() or origin == checkout / "spacy_delink"
    with pytest.raises(SystemExit, match="imports spacy_delink from .*checkout.*nothing was timed"):
        versions.check_origin("baseline", origin, tmp_path / "venv")
    versions.check_origin("current", origin, checkout)  # where it was expected: accepted


@pytest.mark.parametrize("stream", ["stdout", "stderr"])  # the release printed its summary to stdout
def test_protect_runs_in_the_given_folder_not_the_callers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: str) -> None:
    seen: list[dict[str, Any]] = []
    output = tmp_path / "out.jsonl"

    def fake_run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        seen.append(kwargs)
        output.write_text('{"protected": true}\n{"protected": false}\n', encoding="utf-8")
        summary = "protect: 2doc\n127 documents protected; failures: none; 2.5 s -> out.jsonl\n"
        return subprocess.CompletedProcess(command, 0, summary if stream == "stdout" else "", summary if stream == "stderr" else "")

    monkeypatch.setattr(versions.subprocess, "run", fake_run)
    usage = iter([SimpleNamespace(ru_utime=1.0, ru_stime=0.5), SimpleNamespace(ru_utime=3.25, ru_stime=0.75)])
    monkeypatch.setattr(versions.resource, "getrusage", lambda who: next(usage))  # the children's CPU before and after
    work = tmp_path / "work"
    result = versions.timed_protect(Path("python"), tmp_path / "index", tmp_path / "in.jsonl", output, 2, 3, work, {"X": "1"})
    assert [call["cwd"] for call in seen] == [work]
    assert seen[0]["env"] == {"X": "1"}
    assert result["job_seconds"] == 2.5
    assert (result["documents"], result["protected"]) == (2, 1)
    assert result["cpu_seconds"] == 2.5  # (3.25 + 0.75) - (1.0 + 0.5): user and system time of the children
