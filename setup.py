"""The wheel ships numba's cache of the package's kernels, so a first run does not compile.

setuptools reads everything else from pyproject.toml. After ``build_py`` has copied the
package into the build folder, each kernel is compiled there for the signatures the sample
quickstart calls it with (``spacy_delink/_prime.py`` and its list), and numba writes its
cache beside the copied sources (``__pycache__/*.nbi``, ``*.nbc``), which the wheel then
holds. numba keys each entry by the source's content, the signature, the CPU and numba's
version: where they do not match, the kernels compile once, announced (``spacy_delink/_kernels.py``).

Compiling needs numpy and numba only, which ``[build-system] requires`` lists, so the usual
isolated builds (``pip wheel .``, ``python -m build``, ``pip install .``) prime the cache.
The kernels' modules also import spaCy and other runtime dependencies for their Python code,
which priming never runs: where the build environment lacks one, an import made by the
package's own code gets a placeholder module instead (``PRIME_SCRIPT``). A kernel that does
not compile is named in a warning; ``DELINK_PRIME_KERNELS=require`` makes that fail the build
instead, ``=skip`` skips priming. Editable installs never prime: numba caches beside the
checkout's own sources.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

#: Run with the build folder first on the path: compile every listed kernel signature there.
PRIME_SCRIPT = r"""
import importlib.abc
import importlib.machinery
import sys
import types
from pathlib import Path

build = Path(sys.argv[1])


class Placeholder:
    # Any object of a module the build environment lacks: attributes, calls, subscripts,
    # base classes and decorators all give placeholders, so module-level code runs.
    def __init__(self, name):
        self._name = name

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Placeholder(f"{self._name}.{name}")

    def __call__(self, *args, **kwargs):
        return Placeholder(f"{self._name}()")

    def __getitem__(self, key):
        return self

    def __iter__(self):
        return iter(())

    def __mro_entries__(self, bases):
        return (object,)


class PlaceholderModule(types.ModuleType):
    __all__ = []

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Placeholder(f"{self.__name__}.{name}")


def imported_by_the_package():
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not (frame.f_code.co_filename.startswith("<frozen importlib") or name.startswith("importlib")):
            return name == "spacy_delink" or name.startswith("spacy_delink.")
        frame = frame.f_back
    return False


class PlaceholderFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    # Last on sys.meta_path: only a module that no finder found, imported by the package's own code
    # (numba's own optional imports still fail as they should).
    def find_spec(self, name, path, target=None):
        parent = sys.modules.get(name.rpartition(".")[0])
        if isinstance(parent, PlaceholderModule) or (not name.startswith("spacy_delink") and imported_by_the_package()):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = PlaceholderModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


sys.meta_path.append(PlaceholderFinder())
from spacy_delink import _kernels, _prime

_kernels.LISTENER.announced = True  # no note, and no note marker in the wheel: the build compiles by design

if build not in Path(_prime.__file__).resolve().parents:  # an installed copy would be primed instead
    sys.exit(f"priming imported spacy_delink from {_prime.__file__}, not from the build folder {build}")
listed = _prime.json.loads(_prime.SIGNATURES.read_text("utf-8"))
failed = _prime.compile_listed(listed)
stubbed = sorted(name for name, module in sys.modules.items() if isinstance(module, PlaceholderModule) and "." not in name)
count = sum(len(signatures) for kernels in listed.values() for signatures in kernels.values())
print(f"spacy-delink: {count - len(failed)} of {count} kernel signatures compiled"
      + (f" (placeholders for {', '.join(stubbed)}, absent from the build environment)" if stubbed else ""), file=sys.stderr)
if failed:
    sys.exit("spacy-delink: could not compile: " + "; ".join(failed))
"""


def prime_kernel_cache(build_lib: Path) -> None:
    """Compile the listed kernel signatures on the package copy in ``build_lib``; numba caches beside it."""
    build_lib = build_lib.resolve()  # the subprocess runs elsewhere
    mode = os.environ.get("DELINK_PRIME_KERNELS", "auto")
    if mode == "skip":
        return
    missing = [name for name in ("numpy", "numba") if not _importable(name)]
    problem = f"{', '.join(missing)} not importable in the build environment" if missing else None
    if problem is None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(build_lib), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            "PYTHONDONTWRITEBYTECODE": "1",  # the wheel gets numba's cache, not the build's .pyc files
        }
        env.pop("NUMBA_CACHE_DIR", None)  # numba must cache in-tree, beside the sources the wheel holds
        env.pop("NUMBA_DISABLE_JIT", None)
        print("spacy-delink: priming numba's kernel cache (the signatures of the sample quickstart)", file=sys.stderr)
        done = subprocess.run([sys.executable, "-c", PRIME_SCRIPT, str(build_lib)], cwd=build_lib, env=env,
                              stdout=subprocess.DEVNULL)
        problem = None if done.returncode == 0 else "priming failed (the lines above say why)"
    if problem is not None:
        message = f"spacy-delink: the wheel's kernel cache is incomplete or absent ({problem}); a first run will compile"
        if mode == "require":
            sys.exit(f"error: {message} (DELINK_PRIME_KERNELS=require)")
        print(f"warning: {message}", file=sys.stderr)


def _importable(name: str) -> bool:
    from importlib.util import find_spec

    return find_spec(name) is not None


class BuildWithKernelCache(build_py):
    """``build_py``, then the kernel cache written into the build folder (not for editable installs)."""

    def run(self) -> None:
        super().run()
        if not getattr(self, "editable_mode", False):
            prime_kernel_cache(Path(self.build_lib))


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import PRIME_SCRIPT from it
    setup(cmdclass={"build_py": BuildWithKernelCache})
