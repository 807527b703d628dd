r"""The tokens every part compares: BM25's terms, the drift guard's and the local judge's.

The tokenizer is deliberately simple and documented, so BM25 scores can be reproduced with
``rank_bm25`` over the same tokens: lower-case, Unicode word characters (``\\w+``, with the
combining marks inside a word: the vowel signs of Devanagari, Bengali or Thai are marks, and
``\\w`` alone cut their words into single letters), English stop words removed, and a light
plural/suffix folding (``s``, ``es``, ``ies``) so that "parsers" and "parser" meet.
"""

from __future__ import annotations

import functools
import re
import unicodedata

# STOPWORDS, content_terms, tokenize: their home is corrective_rag.text
__all__: list[str] = []


def _mark_ranges(limit: int = 0x30000) -> str:
    """A regex class body for the combining marks (Mn, Mc, Me) below ``limit``."""
    ranges: list[tuple[int, int]] = []
    for cp in range(limit):
        if unicodedata.category(chr(cp)) in ("Mn", "Mc", "Me"):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    return "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)


# A word starts with a word character and runs on through word characters and combining marks.
_WORD = re.compile(rf"\w[\w{_mark_ranges()}]*")

# A compact English stop list (articles, pronouns, auxiliaries, prepositions, question words):
# words that carry no topic, whose BM25 weight is noise and whose overlap proves no relevance.
STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "s",
        "t",
        "d",
        "ll",
        "m",
        "o",
        "re",
        "ve",
        "y",
    ]
)


# The loop tokenizes the same question, queries and documents at every step (the rewriters, the
# drift guard, the local judge): each distinct text is tokenized once. Bounded, so that indexing a
# large folder (each text seen once) cannot grow it; words repeat far more than texts.
_TEXTS_CACHED = 4096
_WORDS_CACHED = 1 << 16


@functools.lru_cache(maxsize=_WORDS_CACHED)
def _fold(word: str) -> str:
    """Fold common English plural endings; keep short words and numbers as they are."""
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    r"""Split ``text`` into BM25 tokens: lower-cased ``\\w+`` words, stop words dropped, folded."""
    return list(_tokens(text)) if type(text) is str else _split(text)


def content_terms(text: str) -> frozenset[str]:
    """The set of content tokens of ``text`` (what the drift guard and overlap checks compare)."""
    return _terms(text) if type(text) is str else frozenset(_split(text))


def _split(text: str) -> list[str]:
    return [_fold(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


@functools.lru_cache(maxsize=_TEXTS_CACHED)
def _tokens(text: str) -> tuple[str, ...]:
    """``tokenize`` of one text, kept: tokens are pure in the text."""
    return tuple(_split(text))


@functools.lru_cache(maxsize=_TEXTS_CACHED)
def _terms(text: str) -> frozenset[str]:
    return frozenset(_tokens(text))
