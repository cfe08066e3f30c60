#!/usr/bin/env bash
# A normal install must work, not only the editable one, and be fast on its first run: in a fresh
# venv, build a clean clone the way docs/install.md says (`pip wheel --no-deps -w dist .`, with pip's
# build isolation: the build environment holds [build-system] requires alone, and setup.py compiles
# the kernels' cache there), install the wheel with its runtime dependencies alone (the core),
# timing the install and measuring the venv, and run the README's quickstart from a temporary
# folder outside the checkout (index -> assess -> protect -> a saved pipeline spacy.load-ed back),
# timing each first run; a first run that compiles (the shipped cache did not fit) fails.
# Any failure stops CI with the step that failed.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/delink-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT
step() { echo "wheel smoke: $*" >&2; }

step "a fresh venv and a clean clone of the last commit (git clone)"
python -m venv "$work/venv"
venv="$work/venv/bin"
git clone --quiet "$repo" "$work/clone"
[ -z "$(git -C "$repo" status --porcelain --untracked-files=no)" ] || step "note: uncommitted changes are not in the clone (commit them to test them)"
step "building the wheel as docs/install.md says: pip wheel --no-deps -w dist . (build isolation)"
build_started=$SECONDS
(cd "$work/clone" && DELINK_PRIME_KERNELS=require "$venv/python" -m pip wheel --quiet --no-deps -w "$work/dist" .)
step "built in $((SECONDS - build_started)) s"
wheel=("$work"/dist/spacy_delink-*.whl)
[ "${#wheel[@]}" -eq 1 ] && [ -f "${wheel[0]}" ] || { step "expected one wheel, found: ${wheel[*]}"; exit 1; }
cached="$(python -c "import sys, zipfile; print(sum(n.endswith('.nbc') for n in zipfile.ZipFile(sys.argv[1]).namelist()))" "${wheel[0]}")"
listed="$(python -c "import json, sys; print(sum(len(s) for k in json.load(open(sys.argv[1])).values() for s in k.values()))" "$repo/spacy_delink/_prime_signatures.json")"
[ "$cached" -ge "$listed" ] || { step "the wheel holds $cached cached kernel signatures, fewer than the $listed listed: setup.py did not prime them all"; exit 1; }
step "the wheel holds numba's cache of $cached kernel signatures ($listed listed)"

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

step "installing ${wheel[0]##*/} into that venv (the core: no extra)"
install_started=$SECONDS
"$venv/python" -m pip install --quiet "${wheel[0]}"
install_seconds=$((SECONDS - install_started))
venv_mb=$(($(du -sk "$work/venv" | cut -f1) / 1024))
step "core install: ${install_seconds} s, venv ${venv_mb} MB (issue 25's target: half of 859 MB and of 136 s)"
for module in torch scipy sklearn matplotlib highspy; do
    if "$venv/python" -c "import $module" 2>/dev/null; then
        step "$module was installed, but only an extra needs it (docs/install.md)"; exit 1
    fi
done

step "every module imports with the core alone, or names its extra (companions load lazily)"
(cd "$work" && "$venv/python" - <<'PY'
import importlib
import pkgutil

import spacy_delink
from spacy_delink.extras import MissingExtra

needs_extra = {}
for module in pkgutil.walk_packages(spacy_delink.__path__, "spacy_delink.", onerror=lambda name: None):
    try:
        importlib.import_module(module.name)
    except MissingExtra as missing:
        needs_extra[module.name] = str(missing).split("pip install ")[-1]
companions = {"spacy_delink.setvalued", "spacy_delink.redaction.privacy", "spacy_delink.redaction.baselines",
              "spacy_delink.redaction.evaluation"}
server = {f"spacy_delink.serve.{name}" for name in ("answer", "app", "gate", "limits", "metrics", "middleware", "openapi", "protocol", "schema", "service")}  # not client
assert set(needs_extra) <= companions | server, needs_extra
print(f"wheel smoke: {len(needs_extra)} companion and server modules ask for their extra: {sorted(set(needs_extra.values()))}")
PY
)

mkdir "$work/run"
cp -r "$repo/samples" "$work/run/samples"
cd "$work/run"
export PATH="$venv:$PATH"
step "delink --version: $(delink --version)"
[ "$(python -m spacy_delink --version)" = "$(delink --version)" ]
first_run() {  # the command's wall seconds; a compile (the shipped cache did not fit) stops the smoke test
    local started=$SECONDS
    if ! "$@" 2>"$work/stderr"; then cat "$work/stderr" >&2; step "$2 failed"; exit 1; fi
    cat "$work/stderr" >&2
    local took=$((SECONDS - started))
    if grep -q "note: compiling spacy-delink's kernels" "$work/stderr"; then
        step "delink $2 compiled its kernels on its first run: the wheel's cache did not fit (issue 36: a wheel built the usual way must not)"
        exit 1
    fi
    first_runs+=("$2: ${took} s")
}
first_runs=()
step "delink index (first run)"
first_run delink index samples/corpus.jsonl --output index
[ -f index.key ] || { step "no key file index.key beside the index"; exit 1; }
step "delink assess --arity 3 (first run)"
first_run delink assess index samples/deidentified.jsonl --arity 3 --output assess.jsonl --html report.html
step "delink protect --arity 3, offline Mask model (first run)"
first_run delink protect index samples/deidentified.jsonl --arity 3 --output protected.jsonl
step "first runs after the install, from the shipped cache: ${first_runs[*]} (issue 25's target: 10 s each)"
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
