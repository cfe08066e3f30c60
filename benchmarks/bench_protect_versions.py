"""`delink protect` of this checkout against an earlier release, in one run, on TAB.

Issue 12 measured protect at arity 3 on the 127 TAB test documents with the first release;
this reruns that release and the current code on the same documents, alternating, so the
two see the same machine load. The baseline is installed from git (``--baseline REV``)
into a throwaway virtual environment that shares this interpreter's packages, without
touching the checkout. Prints JSON.

    python benchmarks/bench_protect_versions.py --baseline b15ae15 [--tab-dir ../shared/data/tab]
        [--k 2] [--arity 3] [--deidentification manual] [--rounds 1]
"""
from __future__ import annotations

import argparse
import json
import re
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


def run(command: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{completed.stderr[-3000:]}")
    return completed


def install_baseline(revision: str, work: Path) -> Path:
    """A venv (sharing this interpreter's packages) with spacy-delink at ``revision``; its python."""
    tree = work / "baseline-tree"
    run(["git", "worktree", "add", "--detach", str(tree), revision], cwd=ROOT)
    try:
        venv = work / "baseline-venv"
        run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)])
        python = venv / "bin" / "python"
        run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(tree)])
        site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
        if (tree / "configs").is_dir() and not (site / "spacy_delink" / "configs").is_dir():
            # Releases before the package-data fix looked for their few-shot examples beside the package.
            shutil.copytree(tree / "configs", site / "configs", dirs_exist_ok=True)
        return python
    finally:
        run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)


def timed_protect(python: Path, index: Path, source: Path, output: Path, k: int, arity: int) -> dict[str, Any]:
    output.unlink(missing_ok=True)
    started = time.perf_counter()
    log = run([str(python), "-m", "spacy_delink", "protect", str(index), str(source), "-o", str(output),
               "--k", str(k), "--arity", str(arity)]).stderr
    wall = time.perf_counter() - started
    job = [float(m.group("job")) for m in SUMMARY.finditer(log)]
    records = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    return {
        "job_seconds": job[-1] if job else None,
        "wall_seconds": round(wall, 2),
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
    args = parser.parse_args()
    if not args.tab_dir.is_dir():
        raise SystemExit(f"{args.tab_dir}: no TAB data; pass --tab-dir")
    with tempfile.TemporaryDirectory(prefix="delink-versions-") as folder:
        work = Path(folder)
        run([sys.executable, "-m", "spacy_delink.evaluate.tab", str(args.tab_dir), str(work / "tab")])
        source = work / "tab" / f"deidentified-{args.deidentification}.jsonl"
        pythons = {"baseline": install_baseline(args.baseline, work), "current": Path(sys.executable)}
        for name, python in pythons.items():
            run([str(python), "-m", "spacy_delink", "index", str(work / "tab" / "corpus.jsonl"), "-o", str(work / name / "index")])
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in pythons}
        for _ in range(args.rounds):
            for name, python in pythons.items():
                runs[name].append(timed_protect(python, work / name / "index", source, work / name / "out.jsonl", args.k, args.arity))
    best = {name: min(r["job_seconds"] for r in results) for name, results in runs.items()}
    print(json.dumps({
        "baseline": args.baseline,
        "set": f"TAB test, {args.deidentification} de-identification",
        "k": args.k,
        "arity": args.arity,
        "model": "Mask (offline), default settings of each version",
        "runs": runs,
        "speedup": round(best["baseline"] / best["current"], 2),
    }, indent=2))


if __name__ == "__main__":
    main()
