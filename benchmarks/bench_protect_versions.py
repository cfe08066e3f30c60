"""`delink protect` of this checkout against an earlier release, in one run, on TAB.

Issue 12 measured protect at arity 3 on the 127 TAB test documents with the first release;
this reruns that release and the current code on the same documents, alternating, so the
two see the same machine load. The baseline is installed from git (``--baseline REV``)
into a throwaway virtual environment that shares this interpreter's packages, without
touching the checkout. Every command runs in that temporary folder, never in the caller's:
``python -m`` puts the working directory first on the import path, so a run started in the
checkout would import the checkout for both versions. Each version's import origin is
checked before anything is timed and reported with the figures. Prints JSON: per run the
job's own seconds (from its summary line), the wall seconds, the CPU seconds of the whole
process (user + system, all its threads) and the load average.

    python benchmarks/bench_protect_versions.py --baseline b15ae15 [--tab-dir ../shared/data/tab]
        [--k 2] [--arity 3] [--deidentification manual] [--rounds 1] [--blas-threads N]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: The closing line of `delink protect` ends "...; <seconds> s -> <output>" in every version.
SUMMARY = re.compile(r"; (?P<job>[0-9.]+) s ->")


#: Variables that set the thread count of the BLAS libraries numpy may use (``--blas-threads``).
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in ``cwd``, which is never left to the caller's working directory (module docstring)."""
    completed = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{completed.stderr[-3000:]}")
    return completed


def package_origin(python: Path, cwd: Path) -> Path:
    """The spacy_delink package folder that ``python`` imports when started in ``cwd``."""
    return Path(run([str(python), "-c", "import spacy_delink; print(spacy_delink.__file__)"], cwd).stdout.strip()).parent


def check_origin(name: str, origin: Path, expected: Path) -> None:
    """Refuse to time a version that does not import from where it was installed."""
    if not origin.resolve().is_relative_to(expected.resolve()):
        raise SystemExit(f"the {name} version imports spacy_delink from {origin}, not from {expected}; nothing was timed")


def install_baseline(revision: str, work: Path) -> Path:
    """A venv (sharing this interpreter's packages) with spacy-delink at ``revision``; its python."""
    tree = work / "baseline-tree"
    run(["git", "worktree", "add", "--detach", str(tree), revision], cwd=ROOT)
    try:
        venv = work / "baseline-venv"
        run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], work)
        python = venv / "bin" / "python"
        # With its dependencies: what the release needs and this environment lacks goes into the venv.
        run([str(python), "-m", "pip", "install", "--quiet", str(tree)], work)
        site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], work).stdout.strip())
        if (tree / "configs").is_dir() and not (site / "spacy_delink" / "configs").is_dir():
            # Releases before the package-data fix looked for their few-shot examples beside the package.
            shutil.copytree(tree / "configs", site / "configs", dirs_exist_ok=True)
        return python
    finally:
        run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)


def timed_protect(
    python: Path, index: Path, source: Path, output: Path, k: int, arity: int, work: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    output.unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = run([str(python), "-m", "spacy_delink", "protect", str(index), str(source), "-o", str(output),
                "--k", str(k), "--arity", str(arity)], work, env)
    log = done.stdout + done.stderr  # the release printed its summary to stdout, later versions to stderr
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    job = [float(m.group("job")) for m in SUMMARY.finditer(log)]
    if not job:
        raise SystemExit(f"{python}: no summary line ending '; <seconds> s -> <output>' in the output of protect:\n{log[-2000:]}")
    records = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    return {
        "job_seconds": job[-1],
        "wall_seconds": round(wall, 2),
        "cpu_seconds": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 2),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "documents": len(records),
        "protected": sum(record.get("protected") is True for record in records),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="b15ae15", help="git revision of the release to compare with")
    parser.add_argument("--tab-dir", type=Path, default=ROOT.parent / "shared" / "data" / "tab")
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--arity", type=int, default=3)
    parser.add_argument("--deidentification", choices=["manual", "presidio"], default="manual")
    parser.add_argument("--rounds", type=int, default=1, help="alternating runs of each version")
    parser.add_argument("--blas-threads", type=int, default=None,
                        help="threads of the BLAS libraries in both versions [default: each library's own]")
    args = parser.parse_args()
    if not args.tab_dir.is_dir():
        raise SystemExit(f"{args.tab_dir}: no TAB data; pass --tab-dir")
    with tempfile.TemporaryDirectory(prefix="delink-versions-") as folder:
        work = Path(folder)
        env = dict(os.environ)
        if args.blas_threads is not None:
            env.update({name: str(args.blas_threads) for name in BLAS_THREADS})
        run([sys.executable, "-m", "spacy_delink", "tab-convert", str(args.tab_dir), str(work / "tab")], work)
        source = work / "tab" / f"deidentified-{args.deidentification}.jsonl"
        baseline = install_baseline(args.baseline, work)
        pythons = {"baseline": baseline, "current": Path(sys.executable)}
        origins = {name: package_origin(python, work) for name, python in pythons.items()}
        check_origin("baseline", origins["baseline"], baseline.parents[1])
        check_origin("current", origins["current"], ROOT)
        for name, python in pythons.items():
            run([str(python), "-m", "spacy_delink", "index", str(work / "tab" / "corpus.jsonl"), "-o", str(work / name / "index")], work)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in pythons}
        for _ in range(args.rounds):
            for name, python in pythons.items():
                runs[name].append(
                    timed_protect(python, work / name / "index", source, work / name / "out.jsonl", args.k, args.arity, work, env)
                )
    best = {name: min(r["job_seconds"] for r in results) for name, results in runs.items()}
    best_cpu = {name: min(r["cpu_seconds"] for r in results) for name, results in runs.items()}
    print(json.dumps({
        "baseline": args.baseline,
        "set": f"TAB test, {args.deidentification} de-identification",
        "k": args.k,
        "arity": args.arity,
        "model": "Mask (offline), default settings of each version",
        "blas_threads": args.blas_threads,
        "imported_from": {name: str(origin) for name, origin in origins.items()},
        "runs": runs,
        "speedup": round(best["baseline"] / best["current"], 2),
        "cpu_speedup": round(best_cpu["baseline"] / best_cpu["current"], 2),
    }, indent=2))


if __name__ == "__main__":
    main()
