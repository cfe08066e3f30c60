"""The wheel ships numba's cache of the package's kernels, so a first run does not compile.

setuptools reads everything else from pyproject.toml. After ``build_py`` has copied the
package into the build folder, the sample quickstart (index, assess, protect, evaluate on
our own index, the three components in a pipeline) runs against that copy, and numba writes its cache beside the
copied sources (``__pycache__/*.nbi``, ``*.nbc``), which the wheel then holds. numba keys
each entry by the source's content, the signature and the CPU: on another CPU the entries
do not match and the kernels compile once, announced (``spacy_delink/_kernels.py``).

Priming needs the runtime dependencies in the build environment: build with
``pip wheel --no-build-isolation`` (or ``python -m build --no-isolation``) from an
environment with the package's dependencies. ``DELINK_PRIME_KERNELS=require`` makes a build
that cannot prime fail instead of shipping a wheel without the cache; ``=skip`` skips it.
Editable installs never prime: numba caches beside the checkout's own sources.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
#: The quickstart on the shipped sample: every kernel the text core's first run calls.
PRIME_SCRIPT = """
import importlib.metadata
import json
import sys
from pathlib import Path

samples, build = Path(sys.argv[1]), Path(sys.argv[2])
import spacy_delink

if build not in Path(spacy_delink.__file__).resolve().parents:  # an installed copy would be primed instead
    sys.exit(f"priming imported spacy_delink from {spacy_delink.__file__}, not from the build folder {build}")
# An installed spacy-delink may declare other entry points than this build: hide them (spaCy loads them all)
# and register this build's factories directly.
_installed = importlib.metadata.distributions
importlib.metadata.distributions = lambda **params: (
    d for d in _installed(**params) if (d.metadata["Name"] or "").lower().replace("_", "-") != "spacy-delink"
)
import spacy
import spacy_delink.plugin  # noqa: F401
from spacy_delink.cli import main


def delink(*argv):
    try:
        main(list(argv))
    except SystemExit as done:
        if done.code:
            raise


delink("index", str(samples / "corpus.jsonl"), "--output", "index")
for arity in ("1", "3"):
    delink("assess", "index", str(samples / "deidentified.jsonl"), "--arity", arity, "--output", f"assess{arity}.jsonl",
           "--html", f"report{arity}.html")
    delink("protect", "index", str(samples / "deidentified.jsonl"), "--arity", arity, "--output", f"protected{arity}.jsonl")
delink("evaluate", "index", "--original", str(samples / "corpus.jsonl"), "--deidentified", str(samples / "deidentified.jsonl"),
       "--protected", "protected3.jsonl", "--output", "evaluation", "--no-engine", "--no-semantic")
texts = [json.loads(line)["text"] for line in (samples / "deidentified.jsonl").read_text("utf-8").splitlines()]
nlp = spacy.blank("en")
nlp.add_pipe("delink_risk", config={"index": "index"})
nlp.add_pipe("delink_combinations", config={"index": "index", "arity": 3})
nlp.add_pipe("delink_rewriter", config={"index": "index", "arity": 3})
for doc in nlp.pipe(texts):
    assert doc._.delink_protected, doc.text[:60]
"""


def prime_kernel_cache(build_lib: Path) -> None:
    """Run the sample quickstart on the package copy in ``build_lib``; numba caches beside it."""
    build_lib = build_lib.resolve()  # the subprocess runs elsewhere
    mode = os.environ.get("DELINK_PRIME_KERNELS", "auto")
    if mode == "skip":
        return
    samples = ROOT / "samples"
    missing = [name for name in ("numba", "spacy", "typer") if not _importable(name)]
    if missing or not samples.is_dir():
        why = f"{', '.join(missing)} not importable here" if missing else f"no {samples}"
        message = (
            f"spacy-delink: the wheel ships no kernel cache ({why}; build with --no-build-isolation "
            "in an environment with the dependencies); a first run will compile the kernels"
        )
        if mode == "require":
            sys.exit(f"error: {message} (DELINK_PRIME_KERNELS=require)")
        print(f"warning: {message}", file=sys.stderr)
        return
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(build_lib), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "PYTHONDONTWRITEBYTECODE": "1",  # the wheel gets numba's cache, not the build's .pyc files
    }
    env.pop("NUMBA_CACHE_DIR", None)  # numba must cache in-tree, beside the sources the wheel holds
    for name in ("NUMBA_DISABLE_JIT", "DELINK_KEY_FILE"):  # compiled kernels; the sample index's own key
        env.pop(name, None)
    with tempfile.TemporaryDirectory(prefix="delink-prime-") as work:
        print("spacy-delink: priming numba's kernel cache on the sample quickstart", file=sys.stderr)
        subprocess.run([sys.executable, "-c", PRIME_SCRIPT, str(samples), str(build_lib)], cwd=work, env=env, check=True,
                       stdout=subprocess.DEVNULL)


def _importable(name: str) -> bool:
    from importlib.util import find_spec

    return find_spec(name) is not None


class BuildWithKernelCache(build_py):
    """``build_py``, then the kernel cache written into the build folder (not for editable installs)."""

    def run(self) -> None:
        super().run()
        if not getattr(self, "editable_mode", False):
            prime_kernel_cache(Path(self.build_lib))


setup(cmdclass={"build_py": BuildWithKernelCache})
