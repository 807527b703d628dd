"""Lexical evidence for the local evaluator and rewriter: sentences, term weights, coverage, names.

Pure functions over strings; no model, no I/O.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from corrective_rag.errors import ConfigError
from corrective_rag.text.tokens import STOPWORDS, tokenize

__all__ = [
    "Coverage",
    "bm25_scores",
    "check_idf",
    "complement",
    "coverage",
    "name_phrases",
    "names_phrase",
    "phrase_form",
    "sentence_spans",
    "split_sentences",
    "term_weights",
    "title_phrase",
]

# A sentence ends at . ! or ? (optionally closed by quotes or brackets) followed by space and an
# upper-case letter, digit, quote or bracket, or at a blank line; this keeps "U.S. Navy",
# "e.g. this" and "3.5 m" mostly whole, which is all sentence features and refinement strips need.
_SENTENCE_END = re.compile(r"(?<=[.!?])([\"')\]]*)\s+(?=[\"'(\[A-Z0-9])|\n\s*\n")
MIN_SENTENCE_CHARS = 20  # shorter fragments ("Fig. 3.") carry no evidence of their own
# A part ending in a short capitalised word or an initial ("St.", "Dr.", "J.", "U.S.") was most
# likely cut at an abbreviation, not at the end of a sentence.
_ABBREVIATION_END = re.compile(r"(?:\b[A-Z][a-z]{0,2}|(?:[A-Z]\.)+[A-Z])\.$")

# Floor for a term's weight: BM25 idf is near zero (or negative) for terms in most documents;
# such a term still counts a little, so coverage stays defined for questions made only of them.
MIN_TERM_WEIGHT = 0.1

# A name is a run of capitalised words, optionally joined by these lower-case connectors
# ("Bank of America", "Charles de Gaulle"); "and" is left out because lists of names
# ("Temple and Archer") are more common than names containing it.
_CONNECTORS = frozenset(["of", "the", "de", "da", "di", "du", "van", "von", "la", "le"])
_WORD = re.compile(r"\w+", re.UNICODE)
_WORD_OR_PUNCT = re.compile(r"[\w'&.-]+|[^\w\s]", re.UNICODE)
# The loop asks for the sentences, names and phrase form of the same documents and question at
# every step (the local judge, both rewriters): each distinct text is read once (they are pure).
_TEXTS_CACHED = 4096


def sentence_spans(text: str, *, min_chars: int = 0) -> list[tuple[int, int]]:
    """Split ``text`` into sentences as ``(start, end)`` character offsets, whitespace trimmed.

    A sentence cut at an abbreviation ("St.", "U.S.") or shorter than ``min_chars`` is joined
    with the one after it, so ``text[start:end]`` may span several boundaries.
    """
    raw: list[tuple[int, int]] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        # closing quotes and brackets stay with the sentence they close
        raw.append((start, match.start() + len(match.group(1) or "")))
        start = match.end()
    raw.append((start, len(text)))
    spans: list[tuple[int, int]] = []
    for span_start, span_end in raw:
        piece = text[span_start:span_end]
        s = span_start + len(piece) - len(piece.lstrip())
        e = span_end - (len(piece) - len(piece.rstrip()))
        if e <= s:
            continue
        if spans:
            last = text[spans[-1][0] : spans[-1][1]]
            if len(last) < min_chars or _ABBREVIATION_END.search(last):
                spans[-1] = (spans[-1][0], e)
                continue
        spans.append((s, e))
    return spans


def split_sentences(text: str, *, limit: int = 20) -> list[str]:
    """Split ``text`` into at most ``limit`` sentences, merging fragments that are too short."""
    if type(text) is not str:
        return _sentences(text, limit)
    return list(_kept_sentences(text, limit))


@lru_cache(maxsize=_TEXTS_CACHED)
def _kept_sentences(text: str, limit: int) -> tuple[str, ...]:
    return tuple(_sentences(text, limit))


def _sentences(text: str, limit: int) -> list[str]:
    spans = sentence_spans(text, min_chars=MIN_SENTENCE_CHARS)
    return [text[s:e] for s, e in spans[:limit]]


def check_idf(idf: object) -> Callable[[str], float] | None:
    """Return ``idf`` if it is ``None`` or callable; raise ``ConfigError`` otherwise."""
    if idf is not None and not callable(idf):
        raise ConfigError("idf must be a callable term -> float")
    return idf


def term_weights(
    terms: Iterable[str], idf: Callable[[str], float] | None = None
) -> dict[str, float]:
    """Weight each term by a positive idf, or 1.0 each without one.

    ``idf`` is read as BM25's, ``log((N - n + 0.5) / (n + 0.5))``, which is 0 for a term in half
    the documents and negative above that: in a small corpus (a user's folder of a few files)
    most of a question's words would weigh nothing and one rare word would decide. The weight is
    its softplus, ``log(1 + (N - n + 0.5) / (n + 0.5))`` (Lucene's BM25 idf): the same for rare
    terms, positive for common ones (floored at ``MIN_TERM_WEIGHT``). The terms are sorted, so
    that sums over the weights do not depend on the order a set of terms happened to iterate in
    (Python's string hashing differs between runs).
    """
    ordered = sorted(set(terms))
    if idf is None:
        return dict.fromkeys(ordered, 1.0)
    return {t: max(_softplus(float(idf(t))), MIN_TERM_WEIGHT) for t in ordered}


def _softplus(x: float) -> float:
    """``log(1 + exp(x))`` without overflow."""
    return x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))


@dataclass(frozen=True, slots=True)
class Coverage:
    """How much of a question's weighted content terms a text contains."""

    share: float  # weighted share of the question's terms found, 0..1
    matched: tuple[str, ...]  # heaviest first
    missing: tuple[str, ...]  # heaviest first


def coverage(weights: Mapping[str, float], text_terms: Iterable[str]) -> Coverage:
    """Weighted share of the terms in ``weights`` that occur in ``text_terms``."""
    present = set(text_terms)
    order = sorted(weights, key=lambda t: (-weights[t], t))
    matched = tuple(t for t in order if t in present)
    missing = tuple(t for t in order if t not in present)
    total = sum(weights.values())
    share = sum(weights[t] for t in matched) / total if total > 0 else 0.0
    return Coverage(min(max(share, 0.0), 1.0), matched, missing)


BM25_K1 = 1.2  # BM25's usual term-frequency saturation
BM25_B = 0.75  # and length normalisation


def bm25_scores(
    weights: Mapping[str, float],
    counts: Sequence[Mapping[str, int]],
    lengths: Sequence[int],
) -> list[float]:
    """BM25 of each text for the terms in ``weights`` (their idf), lengths relative to the texts'.

    ``counts[i]`` holds how often each weighted term occurs in text ``i`` and ``lengths[i]`` its
    length in terms. The average length is the given texts' own, so that scores compare the
    texts with one another (the local judge divides by the best of them).
    """
    if len(counts) != len(lengths):
        raise ConfigError("counts and lengths must have the same length")
    if not lengths:
        return []
    average = max(sum(lengths) / len(lengths), 1.0)
    scores = []
    for found, length in zip(counts, lengths, strict=True):
        norm = BM25_K1 * (1.0 - BM25_B + BM25_B * length / average)
        scores.append(
            sum(
                w * f * (BM25_K1 + 1.0) / (f + norm)
                for t, w in weights.items()
                if (f := found.get(t, 0)) > 0
            )
        )
    return scores


def complement(
    weights: Mapping[str, float], known_terms: Iterable[str], text_terms: Iterable[str]
) -> float:
    """Weighted share of the terms in ``weights`` missing from ``known_terms`` that a text has.

    What a second document adds to a first: on a multi-hop question, the paragraph about the
    bridge entity covers what the paragraph naming it did not. ``0.0`` when nothing is missing.
    """
    known, present = set(known_terms), set(text_terms)
    rest = {t: w for t, w in weights.items() if t not in known}
    total = sum(rest.values())
    return sum(w for t, w in rest.items() if t in present) / total if total > 0 else 0.0


def name_phrases(text: str) -> list[str]:
    """Capitalised phrases (likely named entities) in ``text``, in order of first appearance.

    A phrase is a run of capitalised words on one line, possibly joined by a connector word; a
    single capitalised stop word ("The", "In") is not a phrase, and phrases lose leading and
    trailing connectors.
    """
    return list(_names(text)) if type(text) is str else _name_phrases(text)


@lru_cache(maxsize=_TEXTS_CACHED)
def _names(text: str) -> tuple[str, ...]:
    return tuple(_name_phrases(text))


def _name_phrases(text: str) -> list[str]:
    phrases: list[str] = []
    run: list[str] = []

    def flush() -> None:
        while run and run[-1].lower() in _CONNECTORS:
            run.pop()
        while run and run[0].lower() in STOPWORDS | _CONNECTORS:
            run.pop(0)
        if run and tokenize(" ".join(run)):
            phrase = " ".join(run).strip(".")
            if phrase and phrase not in phrases:
                phrases.append(phrase)
        run.clear()

    for line in text.splitlines():
        for word in _WORD_OR_PUNCT.findall(line):
            if word[0].isupper() or (word[0].isdigit() and run):
                run.append(word)
                if word.endswith(".") and not re.fullmatch(r"(?:[A-Z]\.)+", word):
                    flush()  # a capitalised word ending a sentence ends the phrase too
            elif run and word.lower() in _CONNECTORS:
                run.append(word)
            else:
                flush()
        flush()  # nor does a name run on past its line (a title, and the text's first word)
    return phrases


def phrase_form(text: str) -> str:
    """``text`` reduced for phrase matching: HTML entities decoded, lower-cased, words only.

    An ampersand reads "and". The result is padded with spaces, so that
    ``f" {phrase} " in form`` matches whole words.
    """
    return _phrase_form(text) if type(text) is str else _form(text)


@lru_cache(maxsize=_TEXTS_CACHED)
def _phrase_form(text: str) -> str:
    return _form(text)


def _form(text: str) -> str:
    text = html.unescape(text).lower().replace("&", " and ")
    return f" {' '.join(_WORD.findall(text))} "


def title_phrase(title: object) -> str:
    """The matchable core of a document title, in :func:`phrase_form` (``""`` if it has none).

    A qualifier is dropped, in parentheses or after a comma as encyclopedias write them ("Kiss
    and Tell (1945 film)" is named by "Kiss and Tell", "Boston, Lincolnshire" by "Boston"), and a
    title of stop words only names nothing.
    """
    if not isinstance(title, str):
        return ""
    core = phrase_form(title.split(" (")[0].split(", ")[0]).strip()
    return core if tokenize(core) else ""


def names_phrase(form: str, phrase: str) -> bool:
    """Whether a :func:`phrase_form` text contains ``phrase`` (a :func:`title_phrase`) as words."""
    return bool(phrase) and f" {phrase} " in form
