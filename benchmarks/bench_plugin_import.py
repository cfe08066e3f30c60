"""What an installed spacy-delink costs every spaCy user: ``spacy.blank("en")`` with and without it.

spaCy imports the module behind every installed factory and scorer entry point whenever it
builds a ``Language``. This times ``spacy.blank("en")`` in fresh processes, alternating two
cases in one run, and lists what the plugin made spaCy import:

* ``plain``: spaCy as installed, with spacy-delink's entry points hidden;
* ``plugin``: the entry points this checkout declares in pyproject.toml (as installing it
  registers them), shadowing whatever version is installed.

Prints JSON: the median of ``--runs`` processes per case of ``spacy.blank("en")`` after
``import spacy`` (where spaCy loads the entry points: the import itself is the same in
both cases and only adds noise), their difference (target: at most 50 ms) and the modules
only the plugin case imported. ``--check`` (run by .ci/run) exits 1 when the plugin imports
numba, llvmlite, an extra's package or a numba-using module of ours; the time is reported,
not enforced there, as a busy CI machine's medians move by more than the limit.

    python benchmarks/bench_plugin_import.py --runs 10 > benchmarks/results/plugin_import.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_MS = 50.0
#: Third-party modules the plugin must never bring into a spaCy process.
FORBIDDEN = ("numba", "llvmlite", "scipy", "sklearn", "matplotlib", "torch", "highspy", "fcntl")

#: Run in a fresh process: hide or shadow spacy-delink, then time spacy.blank and list modules.
CHILD = """
import importlib.metadata, json, sys, time
hide = sys.argv[1] == "plain"
installed = importlib.metadata.distributions
if hide:
    importlib.metadata.distributions = lambda **params: (
        d for d in installed(**params) if (d.metadata["Name"] or "").lower().replace("_", "-") != "spacy-delink")
import spacy
before = set(sys.modules)
start = time.perf_counter()
nlp = spacy.blank("en")
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "modules": sorted(set(sys.modules) - before)}))
"""


def checkout_metadata(folder: Path) -> Path:
    """A ``spacy_delink`` dist-info in ``folder`` with this checkout's entry points (put it first on sys.path).

    ``importlib.metadata`` keeps the first distribution of a name on ``sys.path``, so this one
    shadows an installed spacy-delink whose entry points may be older than the checkout's.
    """
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    info = folder / f"spacy_delink-{project['version']}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: spacy-delink\nVersion: {project['version']}\n")
    groups = [
        "\n".join([f"[{group}]", *(f"{name} = {target}" for name, target in entries.items())])
        for group, entries in project["entry-points"].items()
    ]
    (info / "entry_points.txt").write_text("\n\n".join(groups) + "\n")
    return folder


def blank_in_fresh_process(case: str, metadata: Path) -> dict[str, object]:
    """``spacy.blank("en")`` in a new interpreter: seconds and the modules it imported."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(metadata), str(ROOT)])}
    result = subprocess.run(
        [sys.executable, "-c", CHILD, case], capture_output=True, text=True, env=env, cwd=metadata, timeout=300
    )
    if result.returncode != 0:
        raise SystemExit(f"bench_plugin_import: the {case} case failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def offending(modules: list[str]) -> list[str]:
    """Modules the plugin must not import: the forbidden packages, and ours that define kernels."""
    ours = [m for m in modules if m.startswith("spacy_delink")]
    kernels = [m for m in ours if (ROOT / (m.replace(".", "/") + ".py")).is_file()
               and "import numba" in (ROOT / (m.replace(".", "/") + ".py")).read_text(encoding="utf-8")]
    return sorted({m for m in modules if m.split(".")[0] in FORBIDDEN} | set(kernels))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="fresh processes per case (median reported)")
    parser.add_argument("--check", action="store_true", help="exit 1 when the plugin imports a forbidden module")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="delink-plugin-") as folder:
        metadata = checkout_metadata(Path(folder))
        blank_in_fresh_process("plugin", metadata)  # warm the file-system cache for both cases alike
        times: dict[str, list[float]] = {"plain": [], "plugin": []}
        modules: dict[str, set[str]] = {"plain": set(), "plugin": set()}
        for _ in range(args.runs):
            for case in ("plain", "plugin"):  # alternated, so machine load falls on both
                seen = blank_in_fresh_process(case, metadata)
                times[case].append(float(seen["seconds"]))  # type: ignore[arg-type]
                modules[case].update(seen["modules"])  # type: ignore[arg-type]
    median = {case: statistics.median(values) * 1000 for case, values in times.items()}
    added = sorted(modules["plugin"] - modules["plain"])
    report = {
        "runs": args.runs,
        "median_ms": {case: round(value, 1) for case, value in median.items()},
        "plugin_cost_ms": round(median["plugin"] - median["plain"], 1),
        "limit_ms": LIMIT_MS,
        "modules_added_by_plugin": added,
        "forbidden_imports": offending(added),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }
    print(json.dumps(report, indent=1))
    if args.check and report["forbidden_imports"]:
        sys.exit(f"bench_plugin_import: spacy.blank imports {report['forbidden_imports']} because of the plugin; "
                 "import them inside the factories of spacy_delink/plugin.py")


if __name__ == "__main__":
    main()
