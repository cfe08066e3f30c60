"""The rewriter ``delink protect``, ``delink serve`` and ``protect_texts`` use: from a shipped or given spaCy config.

The command's own settings (index, k, arity, readings, ...) always win over the config's, and
a config override may not set them, so what a record says it was protected under stays true.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import spacy
from thinc.api import ConfigValidationError

from ..components.rewriter import FACTORY, DelinkRewriter
from ..errors import InputError

#: Configs shipped with the package, by the short name ``--config`` accepts.
SHIPPED_CONFIGS = {"mask": "rewriter_mask.cfg", "openai": "rewriter_openai.cfg", "local": "rewriter_local.cfg"}
SHIPPED_CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


def resolve_config(config: Path) -> Path:
    """A config file path, or the short name of one shipped in ``spacy_delink/configs``."""
    if config.is_file():
        return config
    shipped = SHIPPED_CONFIGS.get(str(config))
    if shipped is not None:
        return SHIPPED_CONFIG_DIR / shipped
    names = ", ".join(SHIPPED_CONFIGS)
    raise InputError(f"config {config} not found; pass an existing file or a shipped config name ({names})")


def load_rewriter(
    index: Path,
    k: int,
    arity: int,
    config: Optional[Path],
    key_file: Optional[Path],
    require_llm: bool = False,
    flagging: Optional[str] = None,
    config_overrides: Optional[dict[str, Any]] = None,
    threads: Optional[int] = None,
    readings: Optional[Sequence[str]] = None,
    retrieval: int = 0,
) -> DelinkRewriter:
    """The rewriter from a spaCy config (its ``delink_rewriter`` component) or the Mask default.

    ``flagging`` overrides the component's flagging strategy (docs/flagging.md) when given,
    ``threads`` the documents it masks at once;
    ``config_overrides`` sets other values of the config (``section.key``), never the ones
    the command sets itself, so what a record says it was protected under stays true. A
    value given as text (the command line's) is read as ``read_override`` says.
    """
    settings: dict[str, Any] = {
        "index": str(index), "k": k, "arity": arity, "key_file": str(key_file) if key_file else None,
        "require_llm": require_llm,
    }
    if flagging is not None:
        settings["flagging"] = flagging
    if threads is not None:
        settings["threads"] = threads
    if readings is not None:
        settings["readings"] = list(readings)
    if retrieval:
        settings["retrieval"] = retrieval
    config_overrides = config_overrides or {}
    if config is None:
        if config_overrides:
            raise InputError("config overrides (--section.key value) change a config's values and need --config (e.g. --config openai; docs/llm.md)")
        if require_llm:
            raise InputError("--require-llm needs a config with an LLM model, e.g. --config openai (docs/llm.md)")
        nlp = spacy.blank("en")
        rewriter = nlp.add_pipe(FACTORY, config=settings)
    else:
        config = resolve_config(config)
        try:
            loaded = spacy.util.load_config(config, interpolate=True)
            names = [n for n, c in loaded.get("components", {}).items() if c.get("factory") == FACTORY]
            if not names:
                raise InputError(f"{config}: no component with factory = \"{FACTORY}\"; see spacy_delink/configs/rewriter_openai.cfg")
            overrides = {f"components.{names[0]}.{key}": value for key, value in settings.items()}
            typed = {key: read_override(value, _configured(config, loaded, key, overrides)) for key, value in config_overrides.items()}
            overrides = {**typed, **overrides}
            nlp = spacy.util.load_model_from_config(spacy.util.load_config(config, overrides=overrides), auto_fill=True)
        except ConfigValidationError as err:
            details = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors) or str(err)
            raise InputError(f"{config}: invalid configuration ({details}); see spacy_delink/configs/rewriter_openai.cfg") from None
        rewriter = nlp.get_pipe(names[0])
    assert isinstance(rewriter, DelinkRewriter)
    rewriter.initialize()
    return rewriter


def _configured(config: Path, loaded: dict[str, Any], key: str, set_by_command: dict[str, Any]) -> Any:
    """The config's value at ``key``; a key the config lacks (a typo would be added silently) or one the command sets itself is refused."""
    if key in set_by_command:
        name = key.rsplit(".", 1)[1]
        option = "the INDEX argument" if name == "index" else "--" + name.replace("_", "-")
        raise InputError(f"config override {key}: this command sets it; use {option} instead")
    *sections, name = key.split(".")
    node: Any = loaded
    for depth, section in enumerate(sections):
        node = node.get(section) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            raise InputError(f"config override {key}: {config} has no [{'.'.join(sections[: depth + 1])}] section")
    if name not in node:
        raise InputError(f"config override {key}: [{'.'.join(sections)}] of {config} has no {name!r}; check the spelling")
    return node[name]


def read_override(value: Any, configured: Any) -> Any:
    """A config override given as text, read as spaCy's CLI reads one (JSON, else text), except that a
    setting holding text keeps the text (a model named ``500`` stays ``"500"``; ``null`` still unsets it).

    A value that is not text (from Python) is taken as it is.
    """
    if not isinstance(value, str) or (isinstance(configured, str) and value != "null"):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


@dataclass(frozen=True)
class RewriterSpec:
    """How to load the rewriter (``load_rewriter``'s arguments), so each worker process loads its own."""

    index: str
    k: int
    arity: int
    config: Optional[str] = None
    key_file: Optional[str] = None
    require_llm: bool = False
    flagging: Optional[str] = None
    #: ``config_overrides`` as canonical JSON (hashable).
    overrides: str = "{}"
    threads: Optional[int] = None
    readings: Optional[tuple[str, ...]] = None
    retrieval: int = 0

    @classmethod
    def of(
        cls, index: Path, k: int, arity: int, config: Optional[Path], key_file: Optional[Path], require_llm: bool,
        flagging: Optional[str], overrides: dict[str, Any], threads: Optional[int] = None,
        readings: Optional[Sequence[str]] = None, retrieval: int = 0,
    ) -> "RewriterSpec":
        """The spec of ``load_rewriter``'s arguments, with paths made absolute for the workers."""
        return cls(
            str(index.absolute()), k, arity, str(config.absolute()) if config is not None and config.is_file() else (str(config) if config else None),
            str(key_file.absolute()) if key_file else None, require_llm, flagging, json.dumps(overrides, sort_keys=True), threads,
            tuple(readings) if readings is not None else None, retrieval,
        )

    def load(self) -> DelinkRewriter:
        return load_rewriter(
            Path(self.index), self.k, self.arity, Path(self.config) if self.config else None,
            Path(self.key_file) if self.key_file else None, require_llm=self.require_llm, flagging=self.flagging,
            config_overrides=json.loads(self.overrides), threads=self.threads, readings=self.readings, retrieval=self.retrieval,
        )
