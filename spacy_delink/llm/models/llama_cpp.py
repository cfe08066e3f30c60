"""``spacy_delink.LlamaCpp.v1``: a GGUF model run in this process by llama-cpp-python, no server.

For text that must not leave the machine and no server to run: the model file is
checked when the pipeline is initialized (``DelinkRewriter.initialize``, which ``delink
protect`` runs before any work) and read on the first prompt, never when the config is
built (so ``spacy init fill-config`` and ``spacy.load`` cost nothing); the chat template
comes from the GGUF file itself, as llama-cpp-python's chat completion reads it.

Decoding is constrained to the answer's JSON schema when the prompt carries one
(``spacy_delink.Rewrite.v1``'s prompts do: their items' ids and spans in order, each
replacement a bounded string): a small model then cannot answer malformed JSON, skip a
span or run on to ``max_tokens``. Its replacements are still checked like any other.

Prompts run one after another (llama.cpp evaluates one sequence at a time here); the
shared opening of the prompts (instructions and examples) is evaluated once and reused
from llama.cpp's cache by the prompts after it.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from spacy_llm.registry import registry

from ...errors import InputError
from ...extras import require_extra

logger = logging.getLogger("spacy_delink.llm")

#: The first four bytes of every GGUF file.
GGUF_MAGIC = b"GGUF"


def check_gguf(model_path: str) -> Path:
    """``model_path`` as a Path, or one clear line saying why it is not a GGUF model file."""
    path = Path(model_path).expanduser()
    if not model_path:
        raise InputError(
            "model.model_path is empty; set it to a GGUF model file (with --config local: --llm.model_path PATH; docs/llm.md)"
        )
    if not path.is_file():
        raise InputError(f"model.model_path {path} not found; set it to a GGUF model file (docs/llm.md)")
    with path.open("rb") as handle:
        if handle.read(4) != GGUF_MAGIC:
            raise InputError(f"model.model_path {path} is not a GGUF file (llama.cpp's model format); convert or download a .gguf")
    return path


class LlamaCppModel:
    """Answers each prompt as one user message with llama.cpp in process (see module docstring)."""

    def __init__(
        self,
        model_path: str,
        n_ctx: int,
        n_threads: int,
        seed: int,
        temperature: float,
        max_tokens: int,
        constrain: bool,
    ) -> None:
        if n_ctx < 1 or max_tokens < 1 or n_threads < 0:
            raise InputError("model.n_ctx and model.max_tokens must be >= 1 and model.n_threads >= 0 (0 = llama.cpp's default)")
        self.model_path = model_path
        #: What the answer cache and logs name this model by.
        self.name = str(Path(model_path).expanduser().resolve()) if model_path else ""
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.seed = seed
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.constrain = constrain
        self.stats: Counter[str] = Counter()
        self._llama: Any = None
        self._lock = threading.Lock()

    @property
    def context_length(self) -> int:
        return self.n_ctx

    def check(self) -> Path:
        """The model file, or one clear line on why it cannot be used (no file, not a GGUF, the extra missing)."""
        path = check_gguf(self.model_path)
        require_extra("local", "spacy_delink.LlamaCpp.v1")
        return path

    def _loaded(self) -> Any:
        """The llama.cpp model, read from ``model_path`` on first use."""
        if self._llama is None:
            path = self.check()
            import llama_cpp

            started = time.perf_counter()
            self._llama = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads or None,
                seed=self.seed,
                verbose=False,
            )
            threads = getattr(self._llama, "n_threads", None) or self.n_threads
            logger.info("loaded %s in %.1f s; %s thread(s) (model.n_threads)", path.name, time.perf_counter() - started, threads)
        return self._llama

    def __call__(self, prompts: Iterable[Iterable[str]]) -> Iterable[Iterable[str]]:
        """Every prompt of the batch, one after another, answers in order."""
        nested = [list(doc_prompts) for doc_prompts in prompts]
        if not any(nested):
            return [[] for _ in nested]
        with self._lock:  # one llama.cpp context: one prompt at a time, also from several threads
            llama = self._loaded()
            result: List[List[str]] = [[self._complete(llama, prompt) for prompt in doc_prompts] for doc_prompts in nested]
        return result

    def _complete(self, llama: Any, prompt: str) -> str:
        """One answer; '' (counted as ``failed_...``) when llama.cpp fails on this prompt."""
        schema: Optional[Dict[str, Any]] = getattr(prompt, "answer_schema", None) if self.constrain else None
        options: Dict[str, Any] = {}
        if schema is not None:
            options["response_format"] = {"type": "json_object", "schema": schema}
            self.stats["constrained"] += 1
        self.stats["calls"] += 1
        try:
            answer = llama.create_chat_completion(
                messages=[{"role": "user", "content": str(prompt)}],
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                seed=self.seed,
                **options,
            )
        except ValueError as err:  # llama-cpp-python's error for a prompt longer than n_ctx
            self.stats["failed_context"] += 1
            logger.warning("llama.cpp could not answer a prompt (%s); raise model.n_ctx or lower task.spans_per_prompt", err)
            return ""
        self.stats["completion_tokens"] += int(answer["usage"]["completion_tokens"])
        self.stats["prompt_tokens"] += int(answer["usage"]["prompt_tokens"])
        if answer["choices"][0].get("finish_reason") == "length":
            self.stats["truncated"] += 1
        return str(answer["choices"][0]["message"]["content"] or "")

    def __getstate__(self) -> Dict[str, Any]:
        return {**self.__dict__, "_llama": None, "_lock": None}  # each process loads its own

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


@registry.llm_models("spacy_delink.LlamaCpp.v1")
def make_llama_cpp(
    model_path: str,
    n_ctx: int = 4096,
    n_threads: int = 0,
    seed: int = 0,
    temperature: float = 0.0,
    max_tokens: int = 1024,
    constrain: bool = True,
) -> LlamaCppModel:
    """A GGUF model in process; ``constrain``: decode under the prompt's answer schema (llama.cpp grammar)."""
    return LlamaCppModel(model_path, n_ctx, n_threads, seed, temperature, max_tokens, constrain)
