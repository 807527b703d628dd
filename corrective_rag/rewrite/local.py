"""A local rewriter with no LLM: pseudo-relevance feedback from the judged documents.

The next query is built from what the kept documents say that the question does not: named
phrases (a multi-hop question's bridge entity is named beside the question's own words in the
first relevant paragraph), titles and informative terms, plus the question's terms that no kept
document covers yet. Terms that only rejected documents contain are left out (they pull the search
off topic), and phrases already tried are not proposed again. The result supplements the original
question, which the orchestrator always searches too; it passes the same drift guard as the LLM
rewriter. Until a document is kept there is nothing to learn from, and it proposes nothing: the
loop then judges the question's own next-best hits.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.observe.logs import get_logger
from corrective_rag.rewrite.guard import check_rewrite
from corrective_rag.text import content_terms, tokenize
from corrective_rag.text.lexical import (
    check_idf,
    coverage,
    name_phrases,
    names_phrase,
    phrase_form,
    split_sentences,
    term_weights,
)
from corrective_rag.types import Judged, Rewrite, RewriteRequest

# LocalRewriter: its home is corrective_rag
__all__ = ["NOTHING_KEPT", "document_title"]

NOTHING_KEPT = "no document kept yet: nothing to learn a new query from"

log: Any = get_logger(__name__)

# A named phrase of two or more words is worth more than a loose term: it is specific and
# retrieves by title. One capitalised word ("American", "None", a sentence's first word) is no
# phrase: it is scored as a term.
_PHRASE_BONUS = 1.5
# How much a candidate loses for appearing in every rejected document (linearly less for fewer).
_REJECTED_PENALTY = 0.5
_MAX_NAMES = 2  # the question's own still-unfound names carried into the query
# A name rarely has more content words than this ("Chief of Protocol of the United States"
# has four); a longer capitalised run or title is a heading, which a person would not type.
_MAX_PHRASE_TERMS = 4
# Month and weekday names (and their short forms) as the tokenizer writes them: a date in a
# document is rarely what a question is about.
_CALENDAR = re.compile(
    r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec"
    r"|january|february|march|april|june|july|august|september|october|november|december"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
)


@dataclass(frozen=True, slots=True)
class _Candidate:
    text: str
    terms: frozenset[str]
    score: float
    source: str  # id of the relevant document it came from (the strongest one)


class LocalRewriter:
    """Proposes the next query from the kept documents and the question's unmatched terms.

    Args:
        idf: optional ``term -> idf`` (for example the hybrid store's ``idf``); without it the
            document frequency among the judged documents stands in.
        max_new_terms: how many new phrases or terms to add.
        max_missing_terms: how many of the question's still-unmatched terms to carry.
    """

    @property
    def reads_proposals(self) -> bool:
        """``False``: it never reads the grading call's proposal (so none is asked for)."""
        return False

    @property
    def writes_feedback_query(self) -> bool:
        """``True``: its rewrites are the kept documents' term query already.

        So the loop adds no free feedback lane beside them (:class:`~corrective_rag.protocols.
        FeedbackRewriter`).
        """
        return True

    def __init__(
        self,
        *,
        idf: Callable[[str], float] | None = None,
        max_new_terms: int = 3,
        max_missing_terms: int = 4,
    ) -> None:
        if max_new_terms < 1:
            raise ConfigError(f"max_new_terms must be >= 1, got {max_new_terms}")
        if max_missing_terms < 0:
            raise ConfigError(f"max_missing_terms must be >= 0, got {max_missing_terms}")
        self.idf: Callable[[str], float] | None = check_idf(idf)
        self.max_new_terms = max_new_terms
        self.max_missing_terms = max_missing_terms

    def rewrite(self, request: RewriteRequest) -> Rewrite:
        """Return the next query, or ``Rewrite(query=None, rejected=...)`` if none passes."""
        if not isinstance(request, RewriteRequest):
            raise InputError("rewrite() takes a RewriteRequest")
        if not request.question.strip():
            raise InputError("question must be a non-empty string")
        # what the filter policy kept, never a verdict's own "relevant": a relevant verdict the
        # policy dropped (unsure) is no ground to build a query on, nor to name in a rationale
        relevant = list(request.kept())
        if not relevant:
            # With nothing kept there are no new words to learn; a query of the question's own
            # unmatched words searches less than the question does (on Cranfield, "effected
            # region" for a question on heat transfer). The loop then judges the question's
            # next-best hits instead, what a single search would judge.
            return Rewrite(None, rejected=NOTHING_KEPT)
        rejected = list(request.dropped())
        idf = self.idf or _judged_idf(request.judged)
        question_weights = term_weights(content_terms(request.question), idf)
        missing = _unmatched(question_weights, relevant)
        tried_terms = [content_terms(q) for q in request.tried_queries]
        candidates = _candidates(question_weights, relevant, rejected, idf, tried_terms)
        names = _unresolved_names(request.question, relevant)[:_MAX_NAMES]
        named = set().union(*(content_terms(n) for n in names))
        keep = [*names, *[t for t in missing if t not in named][: self.max_missing_terms]]
        if not keep:  # every question term is covered: anchor the query on the heaviest ones
            keep = list(sorted(question_weights, key=lambda t: -question_weights[t])[:2])
        if focus := _unfound(question_weights, request.question, request.judged, relevant):
            # an entity of the question that no search has reached yet (the second thing a
            # comparison question names): search it alone, without terms from the first
            # document, which would pull the search back to what was already found
            focus_terms = set().union(*(content_terms(f) for f in focus))
            rest = [t for t in missing if t not in focus_terms][: self.max_missing_terms]
            candidate = " ".join([*focus, *rest])
            if check_rewrite(candidate, request.question, request.tried_queries) is None:
                log.debug("local_rewrite", query=candidate, unfound=focus)
                rationale = f"searched what no relevant document mentions: {', '.join(focus)}"
                return Rewrite(candidate, rationale=rationale)
        candidate = ""
        reason: str | None = "no new term in the kept documents and no unmatched term"
        # Slide over the ranked candidates until the drift guard accepts one combination.
        for start in range(max(len(candidates), 1)):
            added = candidates[start : start + self.max_new_terms]
            candidate = " ".join([*(c.text for c in added), *keep])
            reason = check_rewrite(candidate, request.question, request.tried_queries)
            if reason is None:
                rationale = _rationale(added, names, keep[len(names) :], bool(missing))
                log.debug("local_rewrite", query=candidate, added=[c.text for c in added])
                return Rewrite(candidate, rationale=rationale)
        return Rewrite(None, rejected=reason, candidate=candidate or None)


def _unresolved_names(question: str, relevant: Sequence[Judged]) -> list[str]:
    """Names in the question that no relevant document has as its title (not found yet)."""
    # a document without a title is about no name: its id or path is never read as words
    titles = [content_terms(document_title(j)) for j in relevant]
    return [
        name
        for name in name_phrases(question)
        # one word ("Soviet", "American") is rarely a name worth a search of its own
        if len(terms := content_terms(name)) > 1 and not any(terms <= title for title in titles)
    ]


def document_title(item: Judged) -> str:
    """The document's title, ``""`` when it has none (an id is not a title)."""
    title = item.document.metadata.get("title")
    return title if isinstance(title, str) else ""


def _unfound(
    weights: dict[str, float], question: str, judged: Sequence[Judged], kept: Sequence[Judged]
) -> list[str]:
    """The question's names that the search has not reached: entities still to find.

    A name counts when it holds a rare term that no judged document contains (rare: weighing at
    least the mean of the question terms the judged documents do contain), or when it has two
    or more words and no relevant document mentions it: the second thing a comparison question
    names. A name a relevant document mentions ("Corliss Archer" in the film's paragraph) is
    found, and a missing rare word outside names ("timeframe") is most often answered in other
    words, so neither counts.
    """
    seen: set[str] = set()
    for item in judged:
        seen.update(tokenize(item.document.text))
    found = [w for t, w in weights.items() if t in seen]
    if not found:
        return []
    floor = sum(found) / len(found)
    rare = {t for t, w in weights.items() if t not in seen and w >= floor}
    relevant = [phrase_form(j.document.text) for j in kept]
    return [
        n
        for n in name_phrases(question)
        if content_terms(n) & rare
        or (
            len(content_terms(n)) > 1
            and not any(names_phrase(form, phrase_form(n).strip()) for form in relevant)
        )
    ]


def _judged_idf(judged: Sequence[Judged]) -> Callable[[str], float]:
    """Smoothed idf over the judged documents, for when no corpus idf was given."""
    frequency: dict[str, int] = {}
    for item in judged:
        for term in set(tokenize(item.document.text)):
            frequency[term] = frequency.get(term, 0) + 1
    total = len(judged)
    return lambda term: math.log(1.0 + (total + 1) / (frequency.get(term, 0) + 0.5))


def _unmatched(weights: dict[str, float], relevant: Sequence[Judged]) -> tuple[str, ...]:
    """Question terms no relevant document covers, or that an evaluator flagged as missing."""
    covered: set[str] = set()
    for item in relevant:
        covered.update(tokenize(item.document.text))
    still = coverage(weights, covered).missing
    flagged: set[str] = set()
    for item in relevant:  # an evaluator may name what is missing in its own words
        for missing in item.verdict.missing:
            flagged.update(content_terms(missing))
    extra = [t for t in sorted(weights, key=lambda t: -weights[t]) if t in flagged]
    return tuple(dict.fromkeys([*still, *extra]))


def _candidates(
    question_weights: dict[str, float],
    relevant: Sequence[Judged],
    rejected: Sequence[Judged],
    idf: Callable[[str], float],
    tried_terms: Sequence[frozenset[str]],
) -> list[_Candidate]:
    """New phrases and terms from the relevant documents, best first."""
    question_terms = set(question_weights)
    rejected_terms = [frozenset(tokenize(j.document.text)) for j in rejected]
    found: dict[frozenset[str], _Candidate] = {}

    def offer(text: str, terms: frozenset[str], weight: float, source: str) -> None:
        if not terms or terms <= question_terms or len(terms) > _MAX_PHRASE_TERMS:
            return  # a whole paper title or heading is not a search phrase; a name is
        if any(terms <= tried for tried in tried_terms):
            return  # already searched for: proposing it again cannot find anything new
        specificity = sum(max(idf(t), 0.0) for t in terms) / len(terms)
        in_rejected = sum(terms <= r for r in rejected_terms) / max(len(rejected_terms), 1)
        score = weight * specificity * (1.0 - _REJECTED_PENALTY * in_rejected)
        previous = found.get(terms)
        total = score + (previous.score if previous else 0.0)
        found[terms] = _Candidate(text, terms, total, previous.source if previous else source)

    for item in relevant:
        document = item.document
        strength = item.verdict.score if item.verdict.score is not None else 1.0
        title = document_title(item).split(" (")[0]
        own = content_terms(title)
        if own:
            offer(title, own, strength, document.id)
        for sentence in split_sentences(document.text):
            terms = tokenize(sentence)
            share = coverage(question_weights, terms).share
            if share == 0.0:
                # a sentence sharing no word with the question (a credit line, a copyright
                # notice, a changelog date) is not what the question is about
                continue
            # Names beside the question's own words are the likeliest bridge to the next hop;
            # the document's own name (or a longer form of it) finds only the document itself.
            near = 1.0 + share
            for phrase in name_phrases(sentence):
                phrase_terms = content_terms(phrase)
                if len(phrase_terms) < 2 or not _typed(phrase_terms, question_terms):
                    # one capitalised word is as often a sentence's first word ("Tool for
                    # measuring ...") or a literal ("None") as a name: it competes as a term
                    continue
                if not (own and (own <= phrase_terms or phrase_terms <= own)):
                    offer(phrase, phrase_terms, strength * near * _PHRASE_BONUS, document.id)
            for term in sorted(set(terms) - question_terms):  # sorted: same sums every run
                if _typed(frozenset([term]), question_terms):
                    offer(term, frozenset([term]), strength * near / len(terms), document.id)
    ranked = sorted(found.values(), key=lambda c: (-c.score, c.text))
    chosen: list[_Candidate] = []
    for cand in ranked:  # a term already inside a chosen phrase adds nothing
        if not any(cand.terms <= c.terms or c.terms <= cand.terms for c in chosen):
            chosen.append(cand)
    return chosen


def _typed(terms: frozenset[str], question_terms: set[str]) -> bool:
    """Whether a person would type ``terms`` into a search for the question.

    Numbers, years, dates and single letters (a command-line flag's "n") are left out unless
    the question holds them: a document's dates and version numbers say when it was written,
    not what the question is about.
    """
    if not all(t in question_terms for t in terms if _odd(t)):
        return False
    # a word in a script the question is not written in (a name's native spelling beside its
    # English one) is not what the person asking would type
    return _scripts(terms) <= _scripts(question_terms)


# Every rewrite scans every term of every kept document's sentences: what a term is (odd, its
# scripts) is worked out once per distinct term (both are pure in the term).
_TERMS_CACHED = 1 << 16


@lru_cache(maxsize=_TERMS_CACHED)
def _odd(term: str) -> bool:
    """A number, a year, a date or a single letter: nothing a person types unless asked."""
    return len(term) < 2 or any(c.isdigit() for c in term) or bool(_CALENDAR.fullmatch(term))


def _scripts(terms: Iterable[str]) -> frozenset[str]:
    """The writing systems of the letters in ``terms`` ("LATIN", "BENGALI", "CJK", ...)."""
    return frozenset().union(*(_term_scripts(t) for t in terms))


@lru_cache(maxsize=_TERMS_CACHED)
def _term_scripts(term: str) -> frozenset[str]:
    return frozenset(unicodedata.name(c, "UNKNOWN").split(" ")[0] for c in term if c.isalpha())


def _rationale(
    added: Sequence[_Candidate], names: Sequence[str], keep: Sequence[str], unmatched: bool
) -> str:
    parts = []
    if names:
        parts.append(f"searched the question's names no kept document is about: {', '.join(names)}")
    if added:
        parts.append(
            "added " + ", ".join(f"{c.text!r} (from kept document {c.source!r})" for c in added)
        )
    if keep:
        label = "kept the question's unmatched terms" if unmatched else "kept question terms"
        parts.append(f"{label}: {', '.join(keep)}")
    return "; ".join(parts)
