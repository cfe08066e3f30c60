"""Public names that load on first access (PEP 562), for packages whose modules are costly to import.

spaCy imports every installed plugin's factory modules whenever it builds a ``Language``, and
``delink --help`` should not wait for scikit-learn either: a package lists its public names
with the submodule each lives in, and a name's module is imported the first time it is read.
"""
from __future__ import annotations

import sys
from importlib import import_module
from typing import Any, Callable


def lazy_exports(package: str, exports: dict[str, str], extra: tuple[str, ...] = ()) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``, whose name ``n`` lives in ``package.exports[n]``."""
    names = sorted([*exports, *extra])

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)  # later reads skip this function
        return value

    def __dir__() -> list[str]:
        return names

    return __getattr__, __dir__, names
