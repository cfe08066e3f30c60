"""The CI scripts fail where they must: a real-model check that cannot run is a red CI, never a green one."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_llm_script_fails_when_llama_cpp_python_cannot_be_built(tmp_path: Path) -> None:
    """``python -m pip install llama-cpp-python`` failing (no compiler, no CMake, a broken build) stops .ci/llm.sh non-zero."""
    fake = tmp_path / "python"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1 $2 $3" = "-m pip install" ]; then echo "error: Failed building wheel for llama-cpp-python" >&2; exit 1; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    fake.chmod(0o755)
    environment = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    finished = subprocess.run(["bash", str(ROOT / ".ci" / "llm.sh")], capture_output=True, text=True, env=environment, timeout=60)
    assert finished.returncode != 0, finished.stderr
    assert "Failed building wheel for llama-cpp-python" in finished.stderr  # the build's own output is shown
    assert "could not be installed" in finished.stderr and "real-model tests" not in finished.stderr  # nothing after it ran
