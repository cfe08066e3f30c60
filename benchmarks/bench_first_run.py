"""A newcomer's first ten minutes: install the wheel into a fresh venv, then the quickstart, first and again.

Builds the wheel (with its kernel cache: ``setup.py``), creates a fresh venv, installs the
wheel with its runtime dependencies only (the core), and times ``delink index``, ``delink
assess --arity 3`` and ``delink protect --arity 3`` on the shipped sample: the first run of
each after the install, then a warm run. Also reports the install time, the venv's size,
whether a first run printed the compile note, and the same first run with the shipped cache
removed (what a CPU the cache does not match pays, announced on one line).

Prints JSON. Targets (issue 25): each first run at most 10 s on a 2-core machine; the venv
half of 859 MB, the install half of 2 min 16 s. Bounded: every step has a timeout.

    python benchmarks/bench_first_run.py > benchmarks/results/first_run.json
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
NOTE_START = "note: compiling spacy-delink's kernels"
#: The quickstart, as the README gives it.
COMMANDS = {
    "index": ["index", str(SAMPLES / "corpus.jsonl"), "--output", "index"],
    "assess": ["assess", "index", str(SAMPLES / "deidentified.jsonl"), "--arity", "3", "--output", "assess.jsonl"],
    "protect": ["protect", "index", str(SAMPLES / "deidentified.jsonl"), "--arity", "3", "--output", "protected.jsonl"],
}
OUTPUTS = ("index", "index.key", "index.ids.json", "assess.jsonl", "protected.jsonl")


def run(command: list[str], timeout: int, **kwargs: object) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Wall seconds and the finished process; a failure stops the benchmark with its output."""
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)  # type: ignore[call-overload]
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"bench_first_run: {' '.join(command)} failed:\n{result.stdout}\n{result.stderr}")
    return seconds, result


def folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 1e6


def quickstart(delink: Path, folder: Path, timeout: int) -> dict[str, dict[str, object]]:
    """Wall and CPU seconds of each command, in a clean ``folder``, and whether it announced a compile."""
    for name in OUTPUTS:
        target = folder / name
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    times: dict[str, dict[str, object]] = {}
    for name, argv in COMMANDS.items():
        before = os.times()
        seconds, result = run([str(delink), *argv], timeout, cwd=folder)
        after = os.times()
        cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
        times[name] = {"wall_s": round(seconds, 2), "cpu_s": round(cpu, 2), "compile_note": NOTE_START in result.stderr}
    return times


def remove_kernel_cache(venv: Path) -> int:
    """Delete the shipped numba cache from the installed package; the count of files removed."""
    package = next(venv.glob("lib/python*/site-packages/spacy_delink"))
    files = [f for f in package.rglob("*") if f.suffix in (".nbi", ".nbc")]
    for file in files:
        file.unlink()
    return len(files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", type=Path, help="an already built wheel (default: build one with its kernel cache)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds any one step may take")
    parser.add_argument("--no-cold", action="store_true", help="skip the run with the shipped cache removed")
    args = parser.parse_args()
    report: dict[str, object] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    with tempfile.TemporaryDirectory(prefix="delink-first-run-") as scratch:
        work = Path(scratch)
        if args.wheel:
            wheel = args.wheel.resolve()
        else:
            seconds, _ = run(
                [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir",
                 str(work / "dist"), str(ROOT)],
                args.timeout, env={**os.environ, "DELINK_PRIME_KERNELS": "require"},
            )
            report["wheel_build_s"] = round(seconds, 1)
            wheel = next((work / "dist").glob("spacy_delink-*.whl"))
            for leftover in ("build", "spacy_delink.egg-info"):
                shutil.rmtree(ROOT / leftover, ignore_errors=True)
        report["wheel_mb"] = round(wheel.stat().st_size / 1e6, 2)
        venv = work / "venv"
        run([sys.executable, "-m", "venv", str(venv)], args.timeout)
        seconds, _ = run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)], args.timeout)
        report["install_s"] = round(seconds, 1)
        report["venv_mb"] = round(folder_mb(venv), 1)
        folder = work / "run"
        folder.mkdir()
        delink = venv / "bin" / "delink"
        report["first_run"] = quickstart(delink, folder, args.timeout)
        report["warm_run"] = quickstart(delink, folder, args.timeout)
        if not args.no_cold:
            report["cache_files_shipped"] = remove_kernel_cache(venv)
            report["first_run_without_shipped_cache"] = quickstart(delink, folder, args.timeout)
        report["load_average_1min_at_end"] = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
