"""What a number, date, age, duration, percentage or ordinal may be generalized to, most specific first.

Found with spaCy's own tools: the blank English or German tokenizer, token attributes
(``like_num``, ``shape``, ``is_currency``) and a ``Matcher`` over them; values are read
from the matched tokens, never guessed from free text. A candidate's ``forms`` run from
the most specific generalization to the least (a date: month → year → decade), each a
true statement about the original (a coarser one, never another one); the caller keeps
the first that detection finds protected (``generalize.choose``). Identifiers (``no. 466``,
``Article 6``, ``§ 1``) are never generalized: they are names, not quantities.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Dict, List, Optional, Sequence

import spacy
from spacy.lang.de.stop_words import STOP_WORDS as GERMAN_STOP_WORDS
from spacy.lang.en.stop_words import STOP_WORDS as ENGLISH_STOP_WORDS
from spacy.language import Language
from spacy.matcher import Matcher
from spacy.tokens import Span, Token
from spacy.util import filter_spans

LANGUAGES = ("en", "de")
KINDS = ("date", "amount", "number", "percentage", "age", "duration", "ordinal")

MONTHS: Dict[str, Dict[str, int]] = {
    "en": {
        **{name: i for i, name in enumerate(
            ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"], 1)},
        **{name: i for i, name in enumerate(
            ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1)},
        "sept": 9,
    },
    "de": {
        **{name: i for i, name in enumerate(
            ["januar", "februar", "märz", "april", "mai", "juni", "juli", "august", "september", "oktober", "november", "dezember"], 1)},
        "jänner": 1, "feber": 2,
    },
}
MONTH_NAMES = {
    "en": ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"],
    "de": ["Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober", "November", "Dezember"],
}
#: Prepositions that travel with a date (so "on 12 March 1995" can become "in March 1995").
DATE_PREPOSITIONS = {
    "en": ["in", "on", "since", "until", "till", "by", "from", "before", "after", "during"],
    "de": ["am", "im", "in", "seit", "bis", "vor", "nach", "ab"],
}
#: ISO 4217 codes of the currencies court texts name (current and pre-euro), read before an amount.
CURRENCY_CODES = [
    "eur", "usd", "gbp", "chf", "dem", "ats", "frf", "itl", "esp", "nlg", "bef", "pte", "grd", "fim", "iep", "hrk", "sit",
    "trl", "try", "pln", "czk", "skk", "huf", "ron", "rol", "bgn", "rub", "uah", "sek", "nok", "dkk", "ltl", "lvl", "eek",
    "mkd", "rsd", "bam", "gel", "amd", "azn", "mdl", "byn", "jpy", "cad", "aud",
]
CURRENCY_WORDS = [
    "euro", "euros", "dollar", "dollars", "pound", "pounds", "franc", "francs", "mark", "marks", "deutschmark", "deutschmarks",
    "kuna", "kunas", "tolar", "tolars", "lira", "liras", "lire", "schilling", "schillings", "zloty", "zlotys", "forint", "forints",
    "koruna", "korunas", "crowns", "roubles", "rubles", "hryvnia", "hryvnias", "lei", "leva", "dinars", "franken", "mark",
]
SCALES = {"en": {"thousand": 3, "million": 6, "billion": 9}, "de": {"tausend": 3, "million": 6, "millionen": 6, "mio.": 6, "milliarde": 9, "milliarden": 9, "mrd.": 9}}
PERCENT_WORDS = ["%", "percent", "per", "prozent"]
#: A number right after one of these is an identifier (a law, an article, a case), not a quantity.
IDENTIFIER_WORDS = [
    "no", "no.", "nos", "nos.", "nr", "nr.", "number", "article", "articles", "art", "art.", "§", "§§", "section", "sections",
    "rule", "rules", "paragraph", "paragraphs", "para", "para.", "paras", "law", "act", "case", "application", "applications",
    "room", "page", "pages", "p.", "pp.", "chapter", "item", "annex", "protocol", "ziffer", "absatz", "abs.", "gesetz", "seite",
    "s.", "az.", "aktenzeichen", "nummer",
]
DURATION_UNITS = {
    "en": {"hour": "hours", "hours": "hours", "day": "days", "days": "days", "week": "weeks", "weeks": "weeks",
           "month": "months", "months": "months", "year": "years", "years": "years"},
    "de": {"stunde": "Stunden", "stunden": "Stunden", "tag": "Tage", "tage": "Tage", "tagen": "Tagen", "woche": "Wochen",
           "wochen": "Wochen", "monat": "Monate", "monate": "Monate", "monaten": "Monaten", "jahr": "Jahre", "jahre": "Jahre",
           "jahren": "Jahren"},
}
#: Units whose German form is dative plural, after which a quantifier takes -n ("vielen Jahren").
GERMAN_DATIVE_UNITS = {"Tagen", "Monaten", "Jahren"}
DECADE_WORDS = {
    "en": {10: "teens", 20: "twenties", 30: "thirties", 40: "forties", 50: "fifties", 60: "sixties", 70: "seventies", 80: "eighties", 90: "nineties"},
    "de": {20: "Zwanzigern", 30: "Dreißigern", 40: "Vierzigern", 50: "Fünfzigern", 60: "Sechzigern", 70: "Siebzigern", 80: "Achtzigern", 90: "Neunzigern"},
}
WORDS = {
    "en": {"about": "about", "between": "between", "and": "and", "less_half": "less than half", "more_half": "more than half",
           "few": "a few", "several": "several", "many": "many", "later": "a later", "age": "in their {decade}"},
    "de": {"about": "etwa", "between": "zwischen", "and": "und", "less_half": "weniger als die Hälfte",
           "more_half": "mehr als die Hälfte", "few": "wenige", "several": "mehrere", "many": "viele", "later": "ein späteres",
           "age": "in den {decade}"},
}


@dataclass(frozen=True)
class Candidate:
    """A stretch of text and what it may become, most specific first."""

    start: int
    end: int
    kind: str
    forms: tuple[str, ...]
    #: Where the value itself starts (after a preposition that travels with it): what must be flagged to be generalized.
    value_start: int


def guess_language(text: str) -> str:
    """English or German, by which of spaCy's stop-word lists the text's words fall in more often."""
    words = [w.lower() for w in text.split()]
    german = sum(w in GERMAN_STOP_WORDS and w not in ENGLISH_STOP_WORDS for w in words)
    english = sum(w in ENGLISH_STOP_WORDS and w not in GERMAN_STOP_WORDS for w in words)
    return "de" if german > english else "en"


# -- reading values ---------------------------------------------------------------------

def number_value(text: str, lang: str) -> Optional[float]:
    """The value of a digit string in the language's notation ("12,345.5" / "12.345,5"), else None."""
    group, decimal = (",", ".") if lang == "en" else (".", ",")
    digits = text.replace(group, "").replace(decimal, ".")
    if not digits.replace(".", "", 1).isdigit():
        return None
    return float(digits)


def format_number(value: float, lang: str) -> str:
    """``value`` in the language's notation, without trailing zeros."""
    text = f"{value:,.2f}".rstrip("0").rstrip(".") if value != int(value) else f"{int(value):,}"
    return text if lang == "en" else text.translate(str.maketrans(",.", ".,"))


def round_significant(value: float, digits: int) -> float:
    if value <= 0:
        return value
    return round(value, digits - 1 - int(math.floor(math.log10(value))))


def quantity_forms(value: float, lang: str, head: str = "", tail: str = "") -> List[str]:
    """Rounded to two, then one significant figure ("about …"), then the decade range ("between … and …").

    ``head`` (a currency before the number) and ``tail`` (scale word, currency or noun
    after it) stay as written: "about EUR 12,000", "between 10,000 and 100,000 euros".
    """
    words = WORDS[lang]
    forms = []
    for digits in (2, 1):
        rounded = round_significant(value, digits)
        if rounded != value:
            forms.append(f"{words['about']} {head}{format_number(rounded, lang)}{tail}")
    low = 10 ** int(math.floor(math.log10(value))) if value >= 1 else 0
    if low and low != value:  # "between 10,000 and 100,000" for exactly 10,000 is true but says no less
        forms.append(f"{words['between']} {head}{format_number(low, lang)} {words['and']} {format_number(low * 10, lang)}{tail}")
    return list(dict.fromkeys(forms))


# -- the Matcher ------------------------------------------------------------------------

def _day(lang: str) -> List[Dict]:
    if lang == "en":
        return [{"TEXT": {"REGEX": r"^(?:[12]?\d|3[01])(?:st|nd|rd|th)?$"}}]
    return [{"TEXT": {"REGEX": r"^(?:[12]?\d|3[01])\.?$"}}, {"ORTH": ".", "OP": "?"}]


def _patterns(lang: str) -> Dict[str, List[List[Dict]]]:
    prep = {"LOWER": {"IN": DATE_PREPOSITIONS[lang]}, "OP": "?"}
    month = {"LOWER": {"IN": list(MONTHS[lang])}}
    year = {"SHAPE": "dddd"}
    number = {"LIKE_NUM": True, "TEXT": {"REGEX": r"^\d[\d.,]*$"}}
    scale = {"LOWER": {"IN": list(SCALES[lang])}, "OP": "?"}
    currency: List[Dict[str, Any]] = [{"LOWER": {"IN": CURRENCY_CODES}}, {"IS_CURRENCY": True}]
    units = list(DURATION_UNITS[lang])
    of = [{"LOWER": "of", "OP": "?"}] if lang == "en" else []
    comma = {"ORTH": ",", "OP": "?"}
    patterns: Dict[str, List[List[Dict]]] = {
        "date": [
            [prep, {"LOWER": "the", "OP": "?"}, *_day(lang), *of, month, comma, year],
            [prep, month, year],
            [prep, {"SHAPE": {"IN": ["dd.dd.dddd", "d.dd.dddd", "dd.d.dddd", "d.d.dddd", "dd/dd/dddd", "d/dd/dddd", "dd/d/dddd", "d/d/dddd"]}}],
            [prep, year, {"ORTH": "-"}, {"SHAPE": "dd"}, {"ORTH": "-"}, {"SHAPE": "dd"}],
            [prep, {"LOWER": {"IN": ["jahr", "jahre"]}, "OP": "?"}, year],
        ],
        "amount": [
            *[[c, number, scale] for c in currency],
            [number, scale, {"LOWER": {"IN": CURRENCY_WORDS + CURRENCY_CODES}}],
        ],
        "percentage": [[number, {"LOWER": {"IN": PERCENT_WORDS}}, {"LOWER": "cent", "OP": "?"}]],
        "duration": [[number, {"LOWER": {"IN": units}}]],
        "number": [[{**number, "SHAPE": {"NOT_IN": ["dddd"]}}, scale, {"IS_LOWER": True, "IS_ALPHA": True, "IS_STOP": False}]],
    }
    if lang == "en":
        patterns["age"] = [
            [{"LOWER": "aged"}, number],
            [{"LOWER": "at"}, {"LOWER": "the"}, {"LOWER": "age"}, {"LOWER": "of"}, number],
            [number, {"LOWER": {"IN": ["years", "year"]}}, {"LOWER": "old"}],
            [number, {"LOWER": "years"}, {"LOWER": "of"}, {"LOWER": "age"}],
        ]
        patterns["ordinal"] = [[{"LOWER": {"IN": ["the", "its", "his", "her", "their"]}}, {"TEXT": {"REGEX": r"^\d+(?:st|nd|rd|th)$"}}]]
    else:
        patterns["age"] = [
            [number, {"LOWER": {"IN": ["jahre", "jahr"]}}, {"LOWER": "alt"}],
            [{"LOWER": "im"}, {"LOWER": "alter"}, {"LOWER": "von"}, number, {"LOWER": {"IN": ["jahren", "jahre"]}, "OP": "?"}],
        ]
    return patterns


@lru_cache(maxsize=None)
def _pipeline(lang: str) -> tuple[Language, Matcher]:
    nlp = spacy.blank(lang)
    nlp.max_length = 1 << 40  # only the tokenizer runs: no parser or NER memory to guard
    matcher = Matcher(nlp.vocab)
    for kind, patterns in _patterns(lang).items():
        matcher.add(kind, patterns)
    return nlp, matcher


# -- forms per kind ---------------------------------------------------------------------

def _at_sentence_start(text: str, start: int) -> bool:
    """Whether only whitespace after a sentence's end, a line break or the text's start comes before ``start``."""
    i = start - 1
    while i >= 0 and text[i].isspace():
        if text[i] == "\n":
            return True
        i -= 1
    return i < 0 or text[i] in ".!?"


def _capitalize(form: str) -> str:
    return form[:1].upper() + form[1:]


def _date_forms(span: Span, lang: str) -> List[str]:
    tokens = list(span)
    prep = tokens[0].lower_ if tokens[0].lower_ in DATE_PREPOSITIONS[lang] else None
    words = tokens[1:] if prep else tokens
    text = "".join(t.text_with_ws for t in words).strip()
    year: Optional[int] = None
    month: Optional[int] = None
    day = False
    for token in words:
        if token.shape_ == "dddd" and year is None:
            year = int(token.text)
        elif token.lower_ in MONTHS[lang]:
            month = MONTHS[lang][token.lower_]
            day = day or any(t.like_num and t.i < token.i for t in words)
    if year is None:  # a numeric date: 12.03.1995 (day first), 12/03/1995 (either order)
        parts = text.replace("/", ".").split(".")
        year, day = int(parts[-1]), True
        month = int(parts[1]) if "." in text and 1 <= int(parts[1]) <= 12 else None
    elif any(t.orth_ == "-" for t in words):  # ISO 1995-03-12
        month, day = int(words[2].text), True
    if month is not None and not 1 <= month <= 12:
        month = None
    if not 1000 <= year <= 2099:
        return []
    forms = []
    if lang == "en":
        coarse = "in" if prep == "on" else prep
        lead = f"{coarse} " if coarse else ""
        if day and month:
            forms.append(f"{lead}{MONTH_NAMES[lang][month - 1]} {year}")
        if day or month:
            forms.append(f"{lead}{year}")
        forms.append(f"{lead}the {year // 10 * 10}s")
    else:
        if day and month:
            forms.append(f"{'im ' if prep in (None, 'am', 'im') else prep + ' '}{MONTH_NAMES[lang][month - 1]} {year}")
        if day or month:
            forms.append(f"{'' if prep in (None, 'am', 'im', 'in') else prep + ' '}{year}".strip())
        decade = f"{year // 10 * 10}er-Jahren"
        forms.append({None: f"in den {decade}", "am": f"in den {decade}", "im": f"in den {decade}", "in": f"in den {decade}",
                      "bis": f"bis in die {year // 10 * 10}er-Jahre"}.get(prep, f"{prep} den {decade}"))
    return forms


def _scaled(tokens: Sequence[Token], lang: str) -> Optional[tuple[float, str, str]]:
    """(value, the number as written, the scale word or "") of the first number among ``tokens``."""
    for position, token in enumerate(tokens):
        if token.like_num and token.text[:1].isdigit():
            value = number_value(token.text, lang)
            following = tokens[position + 1].lower_ if position + 1 < len(tokens) else ""
            return None if value is None else (value, token.text, tokens[position + 1].text if following in SCALES[lang] else "")
    return None


def _quantity_forms(span: Span, lang: str) -> List[str]:
    """An amount or a count: the number (with its scale word) rounded, then a range; currency and noun stay."""
    found = _scaled(list(span), lang)
    if found is None:
        return []
    value, written, scale = found
    if value < 10 and not scale:
        return []
    head, _, tail = span.text.partition(written)
    return quantity_forms(value, lang, head, tail)


def _percentage_forms(span: Span, lang: str) -> List[str]:
    value = number_value(span[0].text, lang)
    if value is None or value > 100:
        return []
    words, tail = WORDS[lang], span.text[len(span[0].text):]
    forms = []
    rounded = round(value, -1)
    if rounded != value and rounded > 0:
        forms.append(f"{words['about']} {format_number(rounded, lang)}{tail}")
    if value != 50:
        forms.append(words["less_half"] if value < 50 else words["more_half"])
    return forms


def _age_forms(span: Span, lang: str) -> List[str]:
    number = next(t for t in span if t.like_num)
    value = number_value(number.text, lang)
    if value is None or value != int(value) or not 13 <= value < 100:
        return []
    decade = DECADE_WORDS[lang].get(10 if value < 20 else int(value) // 10 * 10)
    return [WORDS[lang]["age"].format(decade=decade)] if decade else []


def _duration_forms(span: Span, lang: str) -> List[str]:
    value = number_value(span[0].text, lang)
    if value is None or value != int(value) or value < 2:
        return []
    words = WORDS[lang]
    unit = DURATION_UNITS[lang][span[1].lower_]
    forms = []
    rounded = round_significant(value, 1)
    if value >= 10 and rounded != value:
        forms.append(f"{words['about']} {format_number(rounded, lang)} {unit}")
    quantifier = words["few"] if value <= 3 else words["several"] if value < 10 else words["many"]
    if unit in GERMAN_DATIVE_UNITS:  # "seit 11 Jahren" → "seit vielen Jahren"
        quantifier += "n"
    forms.append(f"{quantifier} {unit}")
    return forms


def _ordinal_forms(span: Span, lang: str) -> List[str]:
    digits = span[1].text.rstrip("stndrh")
    following = span.doc[span.end].lower_ if span.end < len(span.doc) else ""
    if (not digits.isdigit() or int(digits) < 2 or following in ("century", "centuries", "floor", "birthday")
            or not following.isalpha() or following in ENGLISH_STOP_WORDS):  # "the 4th of March": a day, not a rank
        return []
    return [WORDS[lang]["later"]]


FORMS: Dict[str, Callable[[Span, str], List[str]]] = {
    "date": _date_forms, "amount": _quantity_forms, "number": _quantity_forms, "percentage": _percentage_forms,
    "age": _age_forms, "duration": _duration_forms, "ordinal": _ordinal_forms,
}


def _is_identifier(span: Span) -> bool:
    """A number right after "no.", "Article", "§" …, or glued to "/" (12345/98): an identifier."""
    doc = span.doc
    before = doc[span.start - 1] if span.start > 0 else None
    after = doc[span.end] if span.end < len(doc) else None
    return (before is not None and before.lower_ in IDENTIFIER_WORDS) or (after is not None and after.text in ("/",) and not after.whitespace_)


#: Characters read on each side of a range ``candidates`` is asked about (a date's preposition, an amount's currency).
MARGIN = 60


def _windows(text: str, within: Sequence[tuple[int, int]]) -> List[tuple[int, int]]:
    """The ranges widened by ``MARGIN`` to the nearest whitespace, merged."""
    merged: List[List[int]] = []
    for start, end in sorted(within):
        left = text.rfind(" ", 0, max(0, start - MARGIN)) + 1
        right = text.find(" ", min(len(text), end + MARGIN))
        right = len(text) if right < 0 else right
        if merged and left <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], right)
        else:
            merged.append([left, right])
    return [(a, b) for a, b in merged]


def candidates(text: str, lang: Optional[str] = None, within: Optional[Sequence[tuple[int, int]]] = None) -> List[Candidate]:
    """Every generalizable stretch of ``text`` (the longest where matches overlap), in order, with its forms.

    ``within``: read only around these character ranges (a long document's flagged spans), not the whole text.
    """
    lang = lang if lang in LANGUAGES else guess_language(text[:100_000])
    nlp, matcher = _pipeline(lang)
    found = []
    for offset, stop in [(0, len(text))] if within is None else _windows(text, within):
        doc = nlp.make_doc(text[offset:stop])
        spans = filter_spans([Span(doc, start, end, label=match_id) for match_id, start, end in matcher(doc)])
        for span in spans:
            if _is_identifier(span):
                continue
            forms = FORMS[span.label_](span, lang)
            start = offset + span.start_char
            forms = [_capitalize(form) for form in forms] if _at_sentence_start(text, start) else forms
            forms = [form for form in dict.fromkeys(forms) if form != span.text]
            if forms:
                prep = span.label_ == "date" and span[0].lower_ in DATE_PREPOSITIONS[lang]
                value_start = offset + (span[1].idx if prep else span.start_char)
                found.append(Candidate(start, offset + span.end_char, span.label_, tuple(forms), value_start))
    return found
