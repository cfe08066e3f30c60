"""Every kernel's first compile is announced, once, before it starts (spacy_delink/_kernels.py)."""
from __future__ import annotations

import importlib
import pkgutil
from types import SimpleNamespace

import numba as nb
import pytest
from numba.core.registry import CPUDispatcher

import spacy_delink
from spacy_delink import _kernels


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
def fresh_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_kernels.LISTENER, "announced", False)


def _compile_event(module: str) -> SimpleNamespace:
    return SimpleNamespace(data={"dispatcher": SimpleNamespace(py_func=SimpleNamespace(__module__=module))})


def test_the_note_is_one_line_for_the_first_of_our_compiles_only(fresh_note: None, capsys: pytest.CaptureFixture[str]) -> None:
    _kernels.LISTENER.on_start(_compile_event("someone_else.kernels"))
    assert capsys.readouterr().err == ""
    for module in ("spacy_delink.linkage.tokenize", "spacy_delink.linkage.index.codec"):
        _kernels.LISTENER.on_start(_compile_event(module))
    assert capsys.readouterr().err == _kernels.NOTE + "\n"


def test_a_real_compile_of_a_package_kernel_prints_the_note_before_it(fresh_note: None, capsys: pytest.CaptureFixture[str]) -> None:
    def add_one(x: int) -> int:
        return x + 1

    add_one.__module__ = "spacy_delink.compile_probe"  # compiled fresh: no cache, as on a CPU the wheel did not prime
    assert nb.njit(add_one)(41) == 42
    assert capsys.readouterr().err == _kernels.NOTE + "\n"
