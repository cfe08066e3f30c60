"""Compile every kernel for the signatures a first run uses, from a list: the wheel's kernel cache.

numba caches a kernel per signature (argument types), beside its source, keyed by the
source's content, the signature, the CPU and numba's version (``_kernels.py``). A build can
write that cache by compiling each kernel for the signatures the sample quickstart calls it
with, without running the quickstart: ``SIGNATURES`` (``_prime_signatures.json``) lists them
as data, and compiling needs numba and numpy only, so an isolated build (``pip wheel .``,
``python -m build``, ``pip install .``) primes the cache too (``setup.py``).

The list is recorded from a real quickstart (:func:`record`, in a fresh process: ``python
-m spacy_delink._prime --write samples``); tests/test_kernel_cache.py checks that it still
holds every signature the quickstart uses, so a new kernel or a changed call is not missed.
Types are written as data (numpy dtype strings, array shape and layout, literals), never
pickled, so a build with another numba version reads the list or stops with one line.
"""
from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from numba import types
from numba.core.registry import CPUDispatcher
from numba.np.numpy_support import as_dtype, from_dtype

SIGNATURES = Path(__file__).with_name("_prime_signatures.json")
PACKAGE = "spacy_delink"


class UnlistableType(ValueError):
    """A kernel argument type the list cannot write down (extend :func:`encode_type`)."""


def encode_type(numba_type: types.Type) -> Any:
    """A JSON value that :func:`decode_type` turns back into ``numba_type``."""
    if isinstance(numba_type, types.Literal):
        return {"literal": numba_type.literal_value}
    if isinstance(numba_type, types.Array):
        return {"array": as_dtype(numba_type.dtype).str, "ndim": numba_type.ndim, "layout": numba_type.layout,
                "readonly": not numba_type.mutable}
    if isinstance(numba_type, (types.Integer, types.Float, types.Boolean)):
        return as_dtype(numba_type).str
    raise UnlistableType(f"cannot list the kernel argument type {numba_type!r}")


def decode_type(value: Any) -> types.Type:
    if isinstance(value, str):
        return from_dtype(np.dtype(value))
    if "literal" in value:
        return types.literal(value["literal"])
    return types.Array(from_dtype(np.dtype(value["array"])), value["ndim"], value["layout"], readonly=value["readonly"])


def record() -> dict[str, dict[str, list[list[Any]]]]:
    """Every signature the kernels of this package were called with in this process: module -> kernel -> signatures."""
    listed: dict[str, dict[str, list[list[Any]]]] = {}
    for kernel in gc.get_objects():
        if isinstance(kernel, CPUDispatcher) and kernel.py_func.__module__.startswith(PACKAGE + "."):
            signatures = sorted(json.dumps([encode_type(t) for t in signature]) for signature in kernel.signatures)
            if signatures:
                by_kernel = listed.setdefault(kernel.py_func.__module__, {})
                by_kernel[kernel.py_func.__qualname__] = [json.loads(s) for s in signatures]
    return {module: dict(sorted(kernels.items())) for module, kernels in sorted(listed.items())}


def compile_listed(listed: dict[str, dict[str, list[list[Any]]]]) -> list[str]:
    """Compile (or load from the cache) each listed kernel for each listed signature; what failed, in words."""
    failed = []
    for module_name, kernels in listed.items():
        try:
            module = importlib.import_module(module_name)
        except Exception as error:  # a build reports every failure at once, then decides
            failed.append(f"{module_name}: import failed: {error!r}")
            continue
        for qualname, signatures in kernels.items():
            kernel: Any = module
            for part in qualname.split("."):
                kernel = getattr(kernel, part, None)
            if not isinstance(kernel, CPUDispatcher):
                failed.append(f"{module_name}.{qualname}: no such kernel")
                continue
            for signature in signatures:
                try:
                    kernel.compile(tuple(decode_type(value) for value in signature))
                except Exception as error:
                    failed.append(f"{module_name}.{qualname}{signature}: {error!r}"[:300])
    return failed


def run_quickstart(samples: Path, folder: Path) -> None:
    """The sample quickstart in this process, in ``folder``: index; assess and protect at arity 1 and 3; evaluate; a pipeline."""
    import spacy

    from .cli import main

    def delink(*argv: str) -> None:
        try:
            main(list(argv))
        except SystemExit as done:
            if done.code:
                raise

    os.chdir(folder)
    deidentified = str(samples / "deidentified.jsonl")
    delink("index", str(samples / "corpus.jsonl"), "--output", "index")
    for arity in ("1", "3"):
        delink("assess", "index", deidentified, "--arity", arity, "--output", f"assess{arity}.jsonl", "--html", f"report{arity}.html")
        delink("protect", "index", deidentified, "--arity", arity, "--output", f"protected{arity}.jsonl")
    delink("evaluate", "index", "--original", str(samples / "corpus.jsonl"), "--deidentified", deidentified,
           "--protected", "protected3.jsonl", "--output", "evaluation", "--no-engine", "--no-semantic")
    texts = [json.loads(line)["text"] for line in Path(deidentified).read_text("utf-8").splitlines()]
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk", config={"index": "index"})
    nlp.add_pipe("delink_combinations", config={"index": "index", "arity": 3})
    nlp.add_pipe("delink_rewriter", config={"index": "index", "arity": 3})
    for doc in nlp.pipe(texts):
        assert doc._.delink_protected, doc.text[:60]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Record the kernels' signatures on the sample quickstart, or compile the listed ones.")
    parser.add_argument("samples", type=Path, nargs="?", help="the samples/ folder (to record)")
    parser.add_argument("--print", action="store_true", help="record the quickstart's signatures in this process; print them as JSON on the last line")
    parser.add_argument("--write", action="store_true",
                        help=f"record them with an empty numba cache (so callees compile and are listed too) into {SIGNATURES.name}")
    args = parser.parse_args(argv)
    if (args.write or args.print) and args.samples is None:
        parser.error("recording needs the samples/ folder")
    if args.write:
        with tempfile.TemporaryDirectory(prefix="delink-record-cache-") as cache:
            printed = subprocess.run([sys.executable, "-m", "spacy_delink._prime", "--print",
                                      str(args.samples.resolve())], env={**os.environ, "NUMBA_CACHE_DIR": cache},
                                     check=True, stdout=subprocess.PIPE, text=True).stdout
        listed = json.loads(printed.splitlines()[-1])  # the commands print their summaries first
        SIGNATURES.write_text(json.dumps(listed, indent=1) + "\n", "utf-8")
    elif args.print:
        with tempfile.TemporaryDirectory(prefix="delink-record-") as folder:
            run_quickstart(args.samples.resolve(), Path(folder))
        sys.stdout.write(json.dumps(record()) + "\n")
    else:
        failed = compile_listed(json.loads(SIGNATURES.read_text("utf-8")))
        if failed:
            sys.exit("could not compile: " + "; ".join(failed))


if __name__ == "__main__":
    main()
