"""Never invent, never contradict: what an accepted rewrite may not do to its sentence.

The other checks of ``task`` see echoes, look-alikes and injected content; these see a
changed fact. A rewrite is refused, by the first reason that applies, when it

- ``invented_number``: writes a number (digits, a number word, an ordinal: "first") that
  the sentence does not hold, or once more than it does ("convicted the applicants" →
  "convicted the first applicant" beside "sentenced the first applicant"), unless it is one
  of the generalizer's forms of a number or date the sentence holds ("the 1990s" for 1997,
  ``models.generalize``);
- ``invented_name``: writes a capitalized word the sentence does not hold (in any case): a
  proper noun or a court, not the first word of the sentence;
- ``rarer_word``: writes a word rarer in the collection (document frequency from the
  index, search reading) than the rarest word it replaces: a rewrite must make the text
  more ordinary, and a rare new word is a new fact or a new trail;
- ``negation``: adds or drops a negation, a modal or a hedge ("not", "never", "may",
  "must", "alleged" …): the outcome reversed, an allegation stated as a fact;
- ``broken_sentence``: says a word twice in a row where the sentence does not ("the the"),
  leaves the sentence no longer starting with a capital or ending with its mark, or drops
  or adds a sentence end inside the span ("cattle. In 1995" → "in 1995": "a herd of in 1995")
  or a paragraph end ("the action.¶The trial was set down" → "the action. On down").

Words are compared case-folded; the mask may stand anywhere. The rules are English and
German; they are a floor, not a proof of faithfulness (docs/llm.md shows what passes).
"""
from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING, Callable, Iterator, List, Optional, Sequence

from spacy.lang.de.stop_words import STOP_WORDS as GERMAN_STOP_WORDS
from spacy.lang.en.stop_words import STOP_WORDS as ENGLISH_STOP_WORDS
from spacy.lang.en.lex_attrs import like_num as english_like_num

from ....llm.models.generalize.forms import candidates

if TYPE_CHECKING:
    from ....linkage.index.reader import CorpusIndex

FIDELITY_REASONS = ("invented_number", "invented_name", "rarer_word", "negation", "broken_sentence")
#: Document frequencies of the words of a text, in order (``word_document_frequencies``).
DocumentFrequencies = Callable[[str], List[int]]

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_ORDINAL_WORDS = {
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh", "twelfth",
    "erste", "erster", "ersten", "zweite", "zweiter", "zweiten", "dritte", "dritter", "dritten",
}
#: Negations, modals and hedges, whose every occurrence must survive a rewrite and none be added.
POLARITY_WORDS = {
    # English: negation
    "not", "no", "never", "nor", "neither", "none", "nothing", "nobody", "nowhere", "without", "cannot", "n't", "unless",
    # English: modals and hedges
    "may", "might", "must", "can", "could", "should", "would", "shall", "will", "ought", "alleged", "allegedly", "allege",
    "alleges", "claimed", "claims", "claim", "reportedly", "purportedly", "apparently", "possibly", "probably",
    # German: negation, modals, hedges
    "nicht", "kein", "keine", "keinen", "keinem", "keiner", "keines", "nie", "niemals", "nichts", "niemand", "ohne", "weder",
    "kann", "könnte", "muss", "müsste", "soll", "sollte", "darf", "dürfte", "wird", "würde", "angeblich", "behauptete",
    "vermutlich", "möglicherweise",
}
#: Marks that end a sentence.
_SENTENCE_END = ".!?…:;\"'”’)]"
#: A sentence end with more text after it: its mark (and closing quotes or brackets), a space, a word.
_INNER_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*\s+\S")
#: A paragraph end or line break (one run of them): a rewrite keeps the text's layout.
_LINE_BREAKS = re.compile(r"\s*[\n\r\u2028\u2029]\s*")


def _words(text: str) -> List[str]:
    return _WORD.findall(text)


def _polarity(text: str) -> Counter[str]:
    spelled = re.sub(r"n['’]t\b", " not", text.lower()).replace("cannot", "can not")
    spelled = re.sub(r"\bno\.?\s*(?=\d)", " ", spelled)  # "no. 466" numbers, it does not negate
    return Counter(word for word in _words(spelled) if word in POLARITY_WORDS)


def _numbers(text: str) -> Counter[str]:
    """The numbers of ``text``, each as often as it occurs: digit strings (separators dropped), number words and ordinals case-folded.

    Number words are spaCy's English ``like_num`` (spaCy has none for German) and a few ordinals of both.
    """
    found = Counter(re.sub(r"\D", "", number) for number in _NUMBER.findall(text))
    for word in _words(text.lower()):
        if not any(ch.isdigit() for ch in word) and (english_like_num(word) or word in _ORDINAL_WORDS):
            found[word] += 1
    return found


def _generalizations(sentence: str) -> set[str]:
    """The numbers that the generalizer's forms of the sentence's numbers and dates write (a decade, a rounding)."""
    return {number for candidate in candidates(sentence) for form in candidate.forms for number in _numbers(form)}


def _doubled(text: str) -> Counter[str]:
    words = [w.lower() for w in _words(text)]
    return Counter(a for a, b in zip(words, words[1:]) if a == b)


def _starts_like_a_sentence(text: str) -> bool:
    first = text.lstrip()[:1]
    return not first or first.isupper() or first.isdigit() or not first.isalpha()


class FidelityCheck:
    """The rules above, for one item at a time; ``frequencies`` (from the index) enables ``rarer_word``."""

    def __init__(self, mask: str, frequencies: Optional[DocumentFrequencies] = None, checks: Sequence[str] = FIDELITY_REASONS) -> None:
        self.mask = mask
        self.frequencies = frequencies
        #: The reasons checked (``task.fidelity`` in the config; all by default).
        self.checks = tuple(reason for reason in FIDELITY_REASONS if reason in checks)

    def refusal(self, sentence: str, rewritten: str, span: str, replacement: str) -> Optional[str]:
        """Why ``rewritten`` (``sentence`` with ``span`` replaced by ``replacement``) is refused, or None.

        ``sentence`` is the item's context without its markers: its sentence or window.
        """
        for reason in self._reasons(sentence, rewritten, span, replacement):
            if reason in self.checks:
                return reason
        return None

    def _reasons(self, sentence: str, rewritten: str, span: str, replacement: str) -> Iterator[str]:
        """Every reason that applies, in the order of ``FIDELITY_REASONS`` (lazily: the first one checked wins)."""
        replacement = replacement.replace(self.mask, " ")
        rewritten = rewritten.replace(self.mask, " ")
        held, generalized = _numbers(sentence), _generalizations(sentence)
        if any(count > held[number] and number not in generalized for number, count in _numbers(rewritten).items()):
            yield "invented_number"
        known = {w.lower() for w in _words(sentence)}
        at_start = rewritten.lstrip().startswith(replacement.lstrip()) if replacement.strip() else False
        capitalized = [w for w in _words(replacement) if w[:1].isupper()]
        if at_start and capitalized and _words(replacement)[0] == capitalized[0]:
            capitalized = capitalized[1:]  # a sentence's first word is capitalized anyway
        if any(w.lower() not in known for w in capitalized):
            yield "invented_name"
        if self._rarer(span, replacement, known):
            yield "rarer_word"
        if _polarity(span) != _polarity(replacement):
            yield "negation"
        broken = (
            bool(_doubled(rewritten) - _doubled(sentence))
            or (_starts_like_a_sentence(sentence) and not _starts_like_a_sentence(rewritten))
            or (sentence.rstrip()[-1:] in _SENTENCE_END and rewritten.rstrip()[-1:] not in _SENTENCE_END)
            or len(_INNER_SENTENCE_END.findall(span)) != len(_INNER_SENTENCE_END.findall(replacement))
            or len(_LINE_BREAKS.findall(span)) != len(_LINE_BREAKS.findall(replacement))
        )
        if broken:
            yield "broken_sentence"

    def _rarer(self, span: str, replacement: str, known: set[str]) -> bool:
        """Whether a new word (not in the sentence, not a number, not a stop word) is rarer than the rarest replaced one."""
        if self.frequencies is None:
            return False
        new = [w for w in _words(replacement) if w.lower() not in known and not any(ch.isdigit() for ch in w)
               and w.lower() not in ENGLISH_STOP_WORDS and w.lower() not in GERMAN_STOP_WORDS]
        replaced = [w for w in _words(span) if not any(ch.isdigit() for ch in w)]
        if not new:
            return False
        if not replaced:
            return True  # only numbers replaced: any new word is a new fact
        rarest_replaced = min(self.frequencies(" ".join(replaced)))
        return min(self.frequencies(" ".join(new))) < rarest_replaced


def word_document_frequencies(index: "CorpusIndex", text: str) -> List[int]:
    """Each word's document frequency in the collection (search reading when the index has it), in order."""
    reading = "search" if "search" in index.readings else "exact"
    _, digests = index.tokenize(text, reading)
    if not len(digests):
        return [0]
    _, df = index.levels_of(reading)[1].lookup(digests)
    return [int(d) for d in df]

