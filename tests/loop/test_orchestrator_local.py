"""The corrective loop with the local judge: verdicts depend on the run's own inputs only."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from corrective_rag.evaluate.local import LocalEvaluator
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.rewrite.local import LocalRewriter
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.types import Document, RunResult

QUESTION = (
    "What government position was held by the woman who portrayed Corliss Archer in the film "
    "Kiss and Tell?"
)
CORPUS = [
    Document(
        "kiss",
        "Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley Temple "
        "as Corliss Archer.",
        {"title": "Kiss and Tell (1945 film)"},
    ),
    Document(
        "temple",
        "Shirley Temple Black was an American actress, singer and diplomat who served as Chief "
        "of Protocol of the United States.",
        {"title": "Shirley Temple"},
    ),
    Document(
        "meet",
        "Meet Corliss Archer is an American television sitcom that aired on CBS in 1951.",
        {"title": "Meet Corliss Archer"},
    ),
    Document(
        "archer-radio",
        "Corliss Archer is a fictional teenage girl created by F. Hugh Herbert for radio.",
        {"title": "Corliss Archer"},
    ),
    Document(
        "protocol",
        "The Chief of Protocol of the United States advises the President on diplomatic protocol.",
        {"title": "Chief of Protocol of the United States"},
    ),
    Document("honey", "Bees turn flower nectar into honey.", {"title": "Honey"}),
    Document("nile", "The Nile flows north into the Mediterranean Sea.", {"title": "Nile"}),
]


def _verdicts(result: RunResult) -> list[tuple[str, object, object, object]]:
    return [
        (v.document_id, v.relevant, v.score, v.confidence)
        for record in result.history
        for v in record.verdicts
    ]


def test_local_judge_gives_the_same_verdicts_on_reruns_and_across_threads(
    embedder: SentenceTransformerEmbedder,
) -> None:
    """One orchestrator run again, after other calls, and from 16 threads at once, judges every
    document alike."""
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add(CORPUS)
        loop = CorrectiveRAGOrchestrator(
            store,
            LocalEvaluator(embedder, idf=store.idf),
            LocalRewriter(idf=store.idf),
            top_k=2,
            max_iterations=3,
            min_relevant=10,
        )
        first = loop.run(QUESTION)
        # another caller judges a page outside the corpus that restates the question
        loop.evaluator.evaluate(QUESTION, [Document("elsewhere", QUESTION, {"title": "Kiss"})])
        again = loop.run(QUESTION)
        with ThreadPoolExecutor(max_workers=16) as pool:
            parallel = list(pool.map(lambda _: loop.run(QUESTION), range(16)))
    assert len(first.history) > 1  # later iterations are judged beside earlier documents
    expected = _verdicts(first)
    assert expected == _verdicts(again)
    assert [expected] * 16 == [_verdicts(r) for r in parallel]
