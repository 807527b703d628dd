"""Knowledge refinement (CRAG decompose-then-recompose).

Kept documents are decomposed into strips (one or a few sentences, with character offsets), each
strip is judged by the evaluator as a pseudo-document against the original question, and only the
strips the filter policy keeps are recomposed, in document order, for the generator.

Refinement runs after the loop has finished: an evaluator that fails there (the model down, a
strict evaluator's unreadable reply) must not lose the run. The failure becomes
:attr:`Refinement.error`, with every strip ungraded and what was spent charged, like a failed
grading call inside the loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from corrective_rag.errors import LLMError, VerdictParseError
from corrective_rag.evaluate.policy import Decision, FilterPolicy, decide
from corrective_rag.inputs import check_int
from corrective_rag.llm.spent import spent_before
from corrective_rag.observe.spans import stage
from corrective_rag.protocols import Evaluator
from corrective_rag.text.lexical import sentence_spans
from corrective_rag.types import Document, Strip, Usage, Verdict

__all__ = ["Refinement", "recompose", "refine", "split_strips"]


@dataclass(frozen=True, slots=True)
class Refinement:
    """What refinement produced: kept strips in document order, every strip verdict, usage.

    ``error`` says why the evaluator failed (then no strip is kept), or is ``None``.
    """

    strips: tuple[Strip, ...]
    verdicts: tuple[Verdict, ...]
    usage: Usage
    error: str | None = None


def split_strips(document: Document, *, sentences: int = 1) -> list[tuple[int, int]]:
    """Split a document into ``(start, end)`` character spans of ``sentences`` sentences each."""
    check_int(sentences, "sentences per strip", minimum=1)
    spans = sentence_spans(document.text)
    return [
        (spans[i][0], spans[min(i + sentences, len(spans)) - 1][1])
        for i in range(0, len(spans), sentences)
    ]


def refine(
    question: str,
    documents: Sequence[Document],
    evaluator: Evaluator,
    policy: FilterPolicy,
    *,
    sentences: int = 1,
    max_strips: int | None = None,
) -> Refinement:
    """Judge the strips of ``documents`` against ``question``; keep those ``policy`` keeps.

    Args:
        question: the user's original question.
        documents: the kept documents, best first.
        evaluator: judges strips as pseudo-documents (ids ``strip-N``).
        policy: decides which strips are kept.
        sentences: sentences per strip.
        max_strips: send at most this many strips (budget cap); the rest are not judged.
    """
    pieces: list[tuple[Document, int, int]] = [
        (doc, s, e) for doc in documents for s, e in split_strips(doc, sentences=sentences)
    ]
    if max_strips is not None:
        pieces = pieces[: max(0, max_strips)]
    if not pieces:
        return Refinement((), (), Usage())
    pseudo = [
        Document(f"strip-{n}", doc.text[s:e], {"source_id": doc.id, "start": s, "end": e})
        for n, (doc, s, e) in enumerate(pieces)
    ]
    try:
        with stage("refine"):
            evaluation = evaluator.evaluate(question, pseudo)
    except (LLMError, VerdictParseError) as exc:
        error = f"evaluator failed: {exc}"
        ungraded = tuple(Verdict.ungraded(d.id, error) for d in pseudo)
        return Refinement((), ungraded, spent_before(exc) + Usage(failed_calls=1), error)
    by_id = {v.document_id: v for v in evaluation.verdicts}
    verdicts = []
    strips = []
    for strip_doc, (doc, s, e) in zip(pseudo, pieces, strict=True):
        verdict = by_id.get(strip_doc.id) or Verdict.ungraded(
            strip_doc.id, "evaluator returned no verdict for this strip"
        )
        verdicts.append(verdict)
        if decide(verdict, policy) is Decision.KEEP and verdict.score is not None:
            strips.append(Strip(doc.id, s, e, doc.text[s:e], verdict.score))
    order = {doc.id: i for i, doc in enumerate(documents)}
    strips.sort(key=lambda st: (order[st.document_id], st.start))
    return Refinement(tuple(strips), tuple(verdicts), evaluation.usage)


def recompose(strips: Sequence[Strip], documents: Sequence[Document]) -> list[Document]:
    """Join each document's kept strips into one document with the source id (for citation)."""
    out = []
    for doc in documents:
        texts = [st.text for st in strips if st.document_id == doc.id]
        if texts:
            out.append(Document(doc.id, " ... ".join(texts), doc.metadata))
    return out
