"""Title links: documents whose title another judged document names, and how much that counts.

A multi-hop question's second paragraph is about a bridge entity the question never names; the
first paragraph names it. :func:`title_links` finds who names whom, :func:`naming_cosine` how
close the naming sentence is to the question, and :func:`link_features` turns the links into
the local evaluator's ``linked`` and ``bridge*`` features.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from corrective_rag.evaluate.local_features import LocalFeatures
from corrective_rag.text import tokenize
from corrective_rag.text.lexical import complement, names_phrase, phrase_form, title_phrase
from corrective_rag.types import Document

__all__ = ["link_features", "naming_cosine", "title_links"]


def link_features(
    weights: dict[str, float],
    documents: Sequence[Document],
    direct: list[LocalFeatures],
    scores: list[float],
    earlier: list[tuple[Document, LocalFeatures, float]],
) -> list[LocalFeatures]:
    """Credit each document with the documents naming its title, weighed by how on topic they are.

    The namers are the other documents of the batch and those judged earlier for the same
    question (the loop sends a multi-hop question's second paragraph in a later call than
    the first one that names it). ``linked`` is the best namer's direct score; ``bridge`` is
    that less the document's own direct score's share (a link lifts a document unlike the
    question, a bridge, more than one that already looks like it, a sibling page);
    ``bridge_sentence`` weighs each namer by how close its naming sentence is to the question;
    ``bridge_complement`` by how much of what the namer lacks of the question (by ``weights``)
    the document covers: the second paragraph of a multi-hop question holds the rest of it;
    ``bridge_top`` counts only the best document judged for the question so far as a namer (the
    first hop names the second; a lesser document naming it is most often a sibling's mention);
    ``bridge_depth`` is ``linked`` times how far the document's own direct evidence lies below
    even odds, in logits: a bridge paragraph is expected to look unlike the question, so a link
    offsets part of the penalty the gaps give it, however deep, where ``bridge`` saturates.
    """
    pool = [*documents, *(doc for doc, _, _ in earlier)]
    pool_features = [*direct, *(feat for _, feat, _ in earlier)]
    pool_scores = [*scores, *(score for _, _, score in earlier)]
    forms = [phrase_form(d.text) for d in pool]
    # only the batch's documents get features: their namers, not the whole pool's links
    links = [_namers(i, doc, forms) for i, doc in enumerate(documents)]
    terms: dict[int, frozenset[str]] = {}

    def terms_of(i: int) -> frozenset[str]:
        if i not in terms:
            terms[i] = frozenset(tokenize(pool[i].text))
        return terms[i]

    top = max(range(len(pool)), key=lambda j: pool_scores[j])
    found = []
    for i, (doc, feat, own, js) in enumerate(zip(documents, direct, scores, links, strict=True)):
        linked = max((pool_scores[j] for j in js), default=0.0)
        title = title_phrase(doc.metadata.get("title"))
        said = max(
            (pool_scores[j] * naming_cosine(title, pool_features[j]) for j in js), default=0.0
        )
        adds = max(
            (pool_scores[j] * complement(weights, terms_of(j), terms_of(i)) for j in js),
            default=0.0,
        )
        found.append(
            replace(
                feat,
                linked=linked,
                bridge=linked * (1.0 - own),
                bridge_sentence=said * (1.0 - own),
                bridge_complement=adds,
                bridge_top=(1.0 - own) * (top in js),
                bridge_depth=linked * _depth(own),
            )
        )
    return found


def _depth(probability: float) -> float:
    """How far below even odds ``probability`` is, in logits (0.0 at or above 0.5)."""
    p = min(max(probability, 1e-6), 1.0 - 1e-6)
    return max(0.0, -math.log(p / (1.0 - p)))


def naming_cosine(title: str, namer: LocalFeatures) -> float:
    """The best question cosine among ``namer``'s sentences naming ``title`` (0.0: none does).

    ``title`` is a :func:`~corrective_rag.text.lexical.title_phrase`; a namer whose mention
    straddles a sentence break, or lies past the compared sentences, counts 0.0.
    """
    return max(
        (
            max(cosine, 0.0)
            for sentence, cosine in namer.sentences
            if names_phrase(phrase_form(sentence), title)
        ),
        default=0.0,
    )


def title_links(documents: Sequence[Document]) -> list[tuple[int, ...]]:
    """For each document, the indices of the other documents whose text names its title.

    The title is taken from ``metadata["title"]`` without its qualifier (see
    :func:`~corrective_rag.text.lexical.title_phrase`) and matched as whole words, case and
    HTML entities aside; documents without a title link to nothing.
    """
    forms = [phrase_form(d.text) for d in documents]
    return [_namers(i, doc, forms) for i, doc in enumerate(documents)]


def _namers(i: int, document: Document, forms: Sequence[str]) -> tuple[int, ...]:
    """Indices of the :func:`phrase_form` texts, but ``i``, that name ``document``'s title."""
    core = title_phrase(document.metadata.get("title"))
    if not core:
        return ()
    return tuple(j for j, form in enumerate(forms) if j != i and names_phrase(form, core))
