#!/usr/bin/env bash
# A normal install must work, not only the editable one: build the wheel, install it with its
# runtime dependencies into a fresh venv, and run the README's quickstart from a temporary
# folder outside the checkout (index -> assess -> protect -> a saved pipeline spacy.load-ed back).
# Any failure stops CI with the step that failed.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/delink-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT
step() { echo "wheel smoke: $*" >&2; }

step "building the wheel"
python -m pip wheel --quiet --no-deps --wheel-dir "$work/dist" "$repo"
wheel=("$work"/dist/spacy_delink-*.whl)
[ "${#wheel[@]}" -eq 1 ] && [ -f "${wheel[0]}" ] || { step "expected one wheel, found: ${wheel[*]}"; exit 1; }

step "every file of spacy_delink/ is in the wheel (package data included)"
python - "$repo" "${wheel[0]}" <<'PY'
import sys
import zipfile
from pathlib import Path

repo, wheel = Path(sys.argv[1]), sys.argv[2]
source = {
    path.relative_to(repo).as_posix()
    for path in (repo / "spacy_delink").rglob("*")
    if path.is_file() and "__pycache__" not in path.parts
}
missing = sorted(source - set(zipfile.ZipFile(wheel).namelist()))
if missing:
    sys.exit(f"wheel smoke: the wheel lacks {missing}; add them to [tool.setuptools.package-data]")
PY

step "installing ${wheel[0]##*/} into a fresh venv"
python -m venv "$work/venv"
venv="$work/venv/bin"
"$venv/python" -m pip install --quiet "${wheel[0]}"
if "$venv/python" -c "import torch" 2>/dev/null; then
    step "torch was installed, but it is only a dependency of the [redaction] extra"; exit 1
fi

step "every module imports with the runtime dependencies alone (extras load lazily)"
(cd "$work" && "$venv/python" - <<'PY'
import importlib
import pkgutil

import spacy_delink

for module in pkgutil.walk_packages(spacy_delink.__path__, "spacy_delink."):
    importlib.import_module(module.name)
PY
)

mkdir "$work/run"
cp -r "$repo/samples" "$work/run/samples"
cd "$work/run"
export PATH="$venv:$PATH"
step "delink --version: $(delink --version)"
[ "$(python -m spacy_delink --version)" = "$(delink --version)" ]
step "delink index"
delink index samples/corpus.jsonl --output index
[ -f index.key ] || { step "no key file index.key beside the index"; exit 1; }
step "delink assess --arity 3"
delink assess index samples/deidentified.jsonl --arity 3 --output assess.jsonl --html report.html
step "delink protect --arity 3 (offline Mask model)"
delink protect index samples/deidentified.jsonl --arity 3 --output protected.jsonl
python - <<'PY'
import json
from pathlib import Path

sources = [json.loads(line) for line in Path("samples/deidentified.jsonl").read_text("utf-8").splitlines()]
assessed = [json.loads(line) for line in Path("assess.jsonl").read_text("utf-8").splitlines()]
protected = [json.loads(line) for line in Path("protected.jsonl").read_text("utf-8").splitlines()]
ids = [record["id"] for record in sources]
assert [r["id"] for r in assessed] == ids, "assess.jsonl: one record per input, in input order"
assert all(r["anonymity"] == 1 and (r["ngrams"] or r["combination_linkable"]) for r in assessed), "every sample document is singled out"
assert Path("report.html").stat().st_size > 0, "empty HTML report"
assert sorted(r["id"] for r in protected) == sorted(ids), "protected.jsonl: one record per input"
assert all(r["protected"] and r["linkage_risk_after"] == 0.0 for r in protected), "an output is not protected"
PY
step "a pipeline saved with nlp.to_disk and loaded with spacy.load"
python "$repo/.ci/wheel_pipeline.py" "$repo"

step "the README's main path, spacy project run all, with the runtime dependencies alone"
python - "$repo" "$work/project" <<'PY'
import shutil
import sys
from pathlib import Path

repo, target = Path(sys.argv[1]), Path(sys.argv[2])
# what a clone holds that the workflow may read; not the package source (the wheel runs), nor outputs
left_out = {".git", ".ci", "spacy_delink", "tests", "benchmarks", "build", "dist", "training", "metrics",
            "assets", "corpus", "project.lock", ".mypy_cache", ".hypothesis", ".benchmarks", ".pytest_cache"}
shutil.copytree(repo, target, ignore=lambda folder, names: {
    n for n in names if (Path(folder) == repo and n in left_out) or n == "__pycache__" or n.endswith(".egg-info")})
PY
(cd "$work/project" && spacy project run all && [ -s metrics/protected.jsonl ] && [ -s metrics/report.html ])
step "ok"
