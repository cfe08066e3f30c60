"""A newcomer's first ten minutes: build and install the usual way into a fresh venv, then the quickstart, first and again.

Clones the checkout's last commit into a clean folder and builds it the way a user would
(``--how``: ``pip wheel .``, ``python -m build`` or ``pip install .``, each with pip's build
isolation: the build environment holds ``[build-system] requires`` alone, and ``setup.py``
primes the kernel cache there), installs it with its runtime dependencies only (the core) into
a fresh venv, and times ``delink index``, ``delink assess --arity 3`` and ``delink protect
--arity 3`` on the shipped sample from a folder outside the checkout: the first run of each
after the install, then a warm run. Also reports the install time, the venv's size, whether a
first run printed the compile note, the first/warm ratio of each command (issue 36: within
2x), and the same first run with the shipped cache removed (what a CPU the cache does not
match pays, announced on one line).

Prints JSON. Targets: each first run within 2x of warm (issue 36) and at most 10 s on a
2-core machine (issue 25). Bounded: every step has a timeout.

    python benchmarks/bench_first_run.py --how pip-wheel > benchmarks/results/first_run.json
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
import zipfile
from pathlib import Path
from typing import Any

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


def quickstart(delink: Path, folder: Path, timeout: int) -> dict[str, dict[str, Any]]:
    """Wall and CPU seconds of each command, in a clean ``folder``, and whether it announced a compile."""
    for name in OUTPUTS:
        target = folder / name
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    times: dict[str, dict[str, Any]] = {}
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


#: How the package is built and installed: the commands a user types (build isolation on, as pip's default).
HOW = {
    "pip-wheel": "pip wheel --no-deps -w dist . && pip install dist/*.whl",
    "build": "pip install build && python -m build --outdir dist . && pip install dist/*.whl",
    "pip-install": "pip install .",
}


def build_and_install(how: str, clone: Path, venv: Path, timeout: int, report: dict[str, object]) -> None:
    """Build ``clone`` as ``how`` says, with ``venv``'s own pip, and install it into ``venv``; times in ``report``."""
    python, dist = str(venv / "bin" / "python"), clone.parent / "dist"
    environment = {name: value for name, value in os.environ.items() if name not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    if how == "pip-install":
        seconds, _ = run([python, "-m", "pip", "install", "--quiet", str(clone)], timeout, env=environment)
        report["build_and_install_s"] = round(seconds, 1)
        return
    if how == "pip-wheel":
        seconds, _ = run([python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(dist), str(clone)],
                         timeout, env=environment)
    else:
        run([python, "-m", "pip", "install", "--quiet", "build"], timeout, env=environment)
        seconds, _ = run([python, "-m", "build", "--outdir", str(dist), str(clone)], timeout, env=environment)
    report["wheel_build_s"] = round(seconds, 1)
    wheel = next(dist.glob("spacy_delink-*.whl"))
    report["wheel_mb"] = round(wheel.stat().st_size / 1e6, 2)
    report["wheel_cache_entries"] = sum(name.endswith(".nbc") for name in zipfile.ZipFile(wheel).namelist())
    seconds, _ = run([python, "-m", "pip", "install", "--quiet", str(wheel)], timeout, env=environment)
    report["install_s"] = round(seconds, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--how", choices=sorted(HOW), default="pip-wheel", help="how the clean clone is built and installed")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds any one step may take")
    parser.add_argument("--no-cold", action="store_true", help="skip the run with the shipped cache removed")
    args = parser.parse_args()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    report: dict[str, object] = {
        "cpus": os.cpu_count(), "python": sys.version.split()[0], "commit": commit, "how": HOW[args.how],
        "load_average_1min_at_start": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }
    with tempfile.TemporaryDirectory(prefix="delink-first-run-") as scratch:
        work = Path(scratch)
        clone = work / "clone"
        run(["git", "clone", "--quiet", str(ROOT), str(clone)], args.timeout)
        venv = work / "venv"
        run([sys.executable, "-m", "venv", str(venv)], args.timeout)
        build_and_install(args.how, clone, venv, args.timeout, report)
        report["venv_mb"] = round(folder_mb(venv), 1)
        folder = work / "run"
        folder.mkdir()
        delink = venv / "bin" / "delink"
        first, warm = quickstart(delink, folder, args.timeout), quickstart(delink, folder, args.timeout)
        report["first_run"], report["warm_run"] = first, warm
        ratios = {name: round(first[name]["wall_s"] / warm[name]["wall_s"], 2) for name in COMMANDS}
        report["first_over_warm"], report["within_2x_of_warm"] = ratios, all(ratio <= 2 for ratio in ratios.values())
        if not args.no_cold:
            report["cache_files_shipped"] = remove_kernel_cache(venv)
            report["first_run_without_shipped_cache"] = quickstart(delink, folder, args.timeout)
        report["load_average_1min_at_end"] = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
