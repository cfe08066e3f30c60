"""Every kernel's first compile is announced, once per cache, before it starts (spacy_delink/_kernels.py);
a build with numpy and numba alone writes the cache a first run loads (setup.py, spacy_delink/_prime.py)."""
from __future__ import annotations

import importlib
import importlib.util
import json
import os
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numba as nb
import pytest
from numba.core.registry import CPUDispatcher

import spacy_delink
from spacy_delink import _kernels, _prime

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"


def _kernel_modules() -> dict[str, list[str]]:
    """Module name -> the numba kernels it defines, for every module of the package."""
    found: dict[str, list[str]] = {}
    for info in pkgutil.walk_packages(spacy_delink.__path__, "spacy_delink."):
        module = importlib.import_module(info.name)
        kernels = [name for name, value in vars(module).items()
                   if isinstance(value, CPUDispatcher) and value.py_func.__module__ == info.name]
        if kernels:
            found[info.name] = kernels
    return found


def test_every_module_with_kernels_installs_the_note_and_caches_them() -> None:
    modules = _kernel_modules()
    assert len(modules) >= 10
    for name, kernels in modules.items():
        module = importlib.import_module(name)
        assert getattr(module, "_kernels", None) is _kernels, f"{name} defines kernels but does not import spacy_delink._kernels"
        for kernel in kernels:
            assert getattr(module, kernel)._cache.__class__.__name__ == "FunctionCache", f"{name}.{kernel} lacks cache=True"


@pytest.fixture
def fresh_note(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(_kernels.LISTENER, "announced", False)
    monkeypatch.setattr(_kernels, "note_marker", lambda dispatcher: tmp_path / "note.nbm")  # a cache never announced


def _compile_event(module: str) -> SimpleNamespace:
    return SimpleNamespace(data={"dispatcher": SimpleNamespace(py_func=SimpleNamespace(__module__=module))})


def test_the_note_is_one_line_for_the_first_of_our_compiles_only(fresh_note: None, capsys: pytest.CaptureFixture[str]) -> None:
    _kernels.LISTENER.on_start(_compile_event("someone_else.kernels"))
    assert capsys.readouterr().err == ""
    for module in ("spacy_delink.linkage.tokenize", "spacy_delink.linkage.index.lookup"):
        _kernels.LISTENER.on_start(_compile_event(module))
    assert capsys.readouterr().err == _kernels.NOTE + "\n"


def test_a_real_compile_of_a_package_kernel_prints_the_note_before_it(fresh_note: None, capsys: pytest.CaptureFixture[str]) -> None:
    def add_one(x: int) -> int:
        return x + 1

    add_one.__module__ = "spacy_delink.compile_probe"  # compiled fresh: no cache, as on a CPU the wheel did not prime
    assert nb.njit(add_one)(41) == 42
    assert capsys.readouterr().err == _kernels.NOTE + "\n"


def _clean_env(**extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in ("NUMBA_CACHE_DIR", "NUMBA_DISABLE_JIT")}
    return {**env, **extra}


PROBE = """
import importlib.util
import sys

import numba as nb

import spacy_delink._kernels

spec = importlib.util.spec_from_file_location("spacy_delink.compile_probe", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(module.add_one(float(sys.argv[2]) if "." in sys.argv[2] else int(sys.argv[2])))
"""


def test_the_note_is_shown_once_per_cache_not_once_per_command(tmp_path: Path) -> None:
    """Issue 36: each of the first four commands after an install printed the note; the first one alone does."""
    probe = tmp_path / "probe.py"
    probe.write_text("import numba as nb\n\n\n@nb.njit(cache=True)\ndef add_one(x):\n    return x + 1\n", "utf-8")

    def command(argument: str, cache: Path) -> str:
        done = subprocess.run([sys.executable, "-c", PROBE, str(probe), argument], capture_output=True, text=True,
                              env=_clean_env(NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT)), timeout=600, check=True)
        return done.stderr

    cache, other_cache = tmp_path / "cache", tmp_path / "other-cache"
    assert _kernels.NOTE in command("41", cache)  # compiles add_one(int64): the first compile for this cache
    assert _kernels.NOTE not in command("41.5", cache)  # compiles add_one(float64): same cache, said already
    assert _kernels.NOTE in command("41", other_cache)  # another cache folder compiles afresh: said again


def test_the_list_holds_every_signature_the_quickstart_calls_a_kernel_with(tmp_path: Path) -> None:
    """A kernel or a call changed without re-recording the list would compile on a first run of the wheel."""
    done = subprocess.run([sys.executable, "-m", "spacy_delink._prime", "--print", str(SAMPLES)], capture_output=True,
                          text=True, env=_clean_env(PYTHONPATH=str(ROOT)), cwd=tmp_path, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    used = json.loads(done.stdout.splitlines()[-1])
    listed = json.loads(_prime.SIGNATURES.read_text("utf-8"))
    missing = [f"{module}.{kernel}{signature}" for module, kernels in used.items() for kernel, signatures in kernels.items()
               for signature in signatures if signature not in listed.get(module, {}).get(kernel, [])]
    assert len(used) >= 10
    assert not missing, f"re-record with python -m spacy_delink._prime --write samples: {missing[:5]}"


def test_types_round_trip_through_the_list() -> None:
    from numba import types

    for numba_type in (types.uint64, types.boolean, types.float64, types.int16, types.literal(32), types.literal(False),
                       types.Array(types.uint32, 1, "C", readonly=True), types.Array(types.int64, 3, "C")):
        assert _prime.decode_type(json.loads(json.dumps(_prime.encode_type(numba_type)))) == numba_type
    with pytest.raises(_prime.UnlistableType):
        _prime.encode_type(types.unicode_type)


def _setup_module() -> object:
    spec = importlib.util.spec_from_file_location("delink_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # setup() itself runs only as __main__
    return module


def test_a_build_with_numpy_and_numba_alone_writes_the_cache_a_first_run_loads(tmp_path: Path) -> None:
    """Issue 36: a wheel built the usual way (build isolation: the build environment holds build-system.requires
    alone) shipped no kernel cache, as priming ran the quickstart, which needs spaCy; its first runs compiled."""
    build = tmp_path / "build"
    shutil.copytree(ROOT / "spacy_delink", build / "spacy_delink", ignore=shutil.ignore_patterns("__pycache__"))
    isolated = tmp_path / "site"  # numpy, numba and llvmlite, nothing else: what pip's isolated build holds
    isolated.mkdir()
    for name in ("numpy", "numba", "llvmlite"):
        package = Path(importlib.import_module(name).__file__).parent  # type: ignore[arg-type]
        for entry in package.parent.glob(f"{name}*"):  # the package, its .libs folder, its dist-info
            (isolated / entry.name).symlink_to(entry)
    primed = subprocess.run(
        [sys.executable, "-S", "-c", _setup_module().PRIME_SCRIPT, str(build)],  # type: ignore[attr-defined]
        capture_output=True, text=True, cwd=build, timeout=3000,
        env=_clean_env(PYTHONPATH=os.pathsep.join([str(build), str(isolated)]), PYTHONDONTWRITEBYTECODE="1"),
    )
    assert primed.returncode == 0, primed.stderr[-3000:]
    assert "placeholders for" in primed.stderr and "spacy" in primed.stderr, primed.stderr  # spaCy really was absent
    assert not list(build.rglob("*.nbm")), "the build left a compile-note marker in the package"
    work = tmp_path / "run"
    work.mkdir()
    for argv in (["index", str(SAMPLES / "corpus.jsonl"), "--output", "index"],
                 ["assess", "index", str(SAMPLES / "deidentified.jsonl"), "--arity", "3", "--output", "assess.jsonl"]):
        run = subprocess.run([sys.executable, "-m", "spacy_delink", *argv], capture_output=True, text=True, cwd=work,
                             env=_clean_env(PYTHONPATH=str(build)), timeout=1200)
        assert run.returncode == 0, run.stderr[-3000:]
        assert "compiling spacy-delink's kernels" not in run.stderr, f"delink {argv[0]} compiled: the cache did not fit"
