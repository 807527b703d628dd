"""What the MCP tools and resources return: their output schemas and the bounded values in them.

Every field carries a description, which the SDK publishes in the tools' output schemas, so an
agent reads what each one means without the docs. Every value is bounded whatever the run held:
at most :data:`MAX_DOCUMENTS` documents, each text cut at :data:`MAX_SHOWN_CHARS` characters
(``truncated``), each reasoning at :data:`MAX_REASONING_CHARS`, and the question and final query
echoed back at :data:`MAX_ECHO_CHARS`, so that one call cannot flood an agent's context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field
from typing_extensions import TypedDict  # pydantic reads a TypedDict's schema from this one

from corrective_rag.errors import CUT_BARE, cut_text

if TYPE_CHECKING:
    from corrective_rag.types import KeptDocument, RunResult

__all__ = [
    "MAX_DOCUMENTS",
    "MAX_ECHO_CHARS",
    "MAX_SHOWN_CHARS",
    "RUNS_URI",
    "AnswerOut",
    "DocumentOut",
    "SearchOut",
    "VerdictOut",
    "answer_fields",
    "run_entry",
    "summary",
]

MAX_DOCUMENTS = 20  # kept documents returned by one call (top_k is capped the same)
MAX_SHOWN_CHARS = 2000  # of one document's text: ~500 tokens, a chunk and then some
MAX_REASONING_CHARS = 300  # of a verdict's reasoning
MAX_ECHO_CHARS = 500  # of the question and final query echoed back in a result
RUNS_URI = "corrective-rag://runs"

STOP_REASONS = (
    "enough_relevant, kept_unconfident, iteration_cap, no_progress, rewrite_failed or "
    "budget_exhausted"
)


class VerdictOut(TypedDict):
    """Why the judge kept a document: relevant, score and confidence in 0..1, a short reason."""

    relevant: Annotated[
        bool | None, Field(description="The judge's decision (null: it could not decide).")
    ]
    score: Annotated[
        float | None, Field(description="How relevant the judge found it, 0..1 (null: none).")
    ]
    confidence: Annotated[
        float | None, Field(description="How sure the judge was of its decision, 0..1.")
    ]
    label: Annotated[
        str | None, Field(description="The judge's graded label: high, medium or low (null: none).")
    ]
    reasoning: Annotated[
        str, Field(description=f"The judge's reason, cut at {MAX_REASONING_CHARS} characters.")
    ]


class DocumentOut(TypedDict):
    """A kept document: its id (cite it), text (cut when ``truncated``), source file, verdict."""

    id: Annotated[str, Field(description="The document's id in the store: cite it.")]
    text: Annotated[
        str, Field(description=f"The document's text, cut at {MAX_SHOWN_CHARS} characters.")
    ]
    truncated: Annotated[bool, Field(description="True when the text was cut.")]
    source: Annotated[
        str | None, Field(description="The file or page the document came from, if known.")
    ]
    iteration: Annotated[
        int, Field(description="The loop's iteration (1, 2, ...) that retrieved and kept it.")
    ]
    verdict: Annotated[VerdictOut, Field(description="How the judge graded it.")]


class SearchOut(TypedDict):
    """What the search tool returns: the kept documents, best first, and how the run ended."""

    run_id: Annotated[
        str,
        Field(
            description=f"The run's id: its whole record is {RUNS_URI}/<run_id> for this client."
        ),
    ]
    question: Annotated[
        str, Field(description=f"The question searched, cut at {MAX_ECHO_CHARS} characters.")
    ]
    final_query: Annotated[
        str,
        Field(
            description="The last query the loop retrieved with (the question, or its rewrite), "
            f"cut at {MAX_ECHO_CHARS} characters."
        ),
    ]
    stop_reason: Annotated[str, Field(description=f"Why the loop stopped: {STOP_REASONS}.")]
    stop_detail: Annotated[
        str, Field(description=f"The stop in words, cut at {MAX_REASONING_CHARS} characters.")
    ]
    iterations: Annotated[
        int, Field(description="How many retrieve-judge-rewrite iterations the loop ran.")
    ]
    kept: Annotated[
        int, Field(description="How many documents the run kept in all (documents holds the best).")
    ]
    documents: Annotated[
        list[DocumentOut],
        Field(description=f"The kept documents, best first: at most top_k ({MAX_DOCUMENTS})."),
    ]


class AnswerOut(SearchOut):
    """What the answer tool returns: the search's fields, the answer and the ids it cites."""

    answer: Annotated[str, Field(description="The answer, written from the kept documents only.")]
    cited_ids: Annotated[list[str], Field(description="The ids of the documents the answer cites.")]
    abstained: Annotated[
        bool, Field(description="True when the documents did not hold the answer.")
    ]
    supported: Annotated[
        bool | None,
        Field(
            description="Whether a check found the answer supported by the documents "
            "(null: no check ran)."
        ),
    ]


def _cut(text: str, limit: int) -> tuple[str, bool]:
    return cut_text(text, limit, CUT_BARE), len(text) > limit


def _document(kept: KeptDocument) -> DocumentOut:
    """One kept document as the tools return it: bounded text, its verdict, where it came from."""
    text, truncated = _cut(kept.document.text, MAX_SHOWN_CHARS)
    verdict = kept.verdict
    source = kept.document.metadata.get("source")
    return {
        "id": kept.document.id,
        "text": text,
        "truncated": truncated,
        "source": source if isinstance(source, str) else None,
        "iteration": kept.iteration,
        "verdict": {
            "relevant": verdict.relevant,
            "score": verdict.score,
            "confidence": verdict.confidence,
            "label": verdict.label.value if verdict.label is not None else None,
            "reasoning": _cut(verdict.reasoning, MAX_REASONING_CHARS)[0],
        },
    }


def summary(result: RunResult, top_k: int | None = None) -> SearchOut:
    """What every tool returns about a run: its id, how it ended and the kept documents.

    At most ``top_k`` (default :data:`MAX_DOCUMENTS`) documents, best first; the question and
    final query are cut at :data:`MAX_ECHO_CHARS` so that a result is bounded for any input.
    """
    return {
        "run_id": result.run_id,
        "question": _cut(result.question, MAX_ECHO_CHARS)[0],
        "final_query": _cut(result.final_query, MAX_ECHO_CHARS)[0],
        "stop_reason": result.stop_reason.value,
        "stop_detail": _cut(result.stop_detail, MAX_REASONING_CHARS)[0],
        "iterations": result.iterations,
        "kept": len(result.kept),
        "documents": [_document(k) for k in result.kept[: top_k or MAX_DOCUMENTS]],
    }


def answer_fields(result: RunResult) -> dict[str, Any]:
    """The fields the answer tool adds to :func:`summary`: the answer and what it cites."""
    answer = result.answer
    if answer is None:  # pragma: no cover - the answer tool always sets one
        raise ValueError("the run holds no answer")
    return {
        "answer": answer.text,
        "cited_ids": list(answer.cited_ids),
        "abstained": answer.abstained,
        "supported": answer.supported,
    }


def run_entry(result: RunResult) -> dict[str, Any]:
    """One line of ``corrective-rag://runs``: id, where to read it, question (cut), how it ended."""
    return {
        "run_id": result.run_id,
        "uri": f"{RUNS_URI}/{result.run_id}",
        "question": _cut(result.question, MAX_ECHO_CHARS)[0],
        "stop_reason": result.stop_reason.value,
        "kept_ids": list(result.kept_ids),
        "answered": result.answer is not None,
        "started_at": result.started_at,
    }
