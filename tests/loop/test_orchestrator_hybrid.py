from typing import Any

import pytest

from corrective_rag.errors import ConfigError
from corrective_rag.loop.lanes import Lanes
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.testing.fakes import ScriptedEvaluator, ScriptedRewriter
from corrective_rag.types import Document, RunResult, StopReason

QUESTION = "How do bees make honey?"

CORPUS = [
    Document("honey", "Bees turn flower nectar into honey by evaporation and enzymes."),
    Document("hive", "Worker bees store honey in wax cells of the hive."),
    Document("nectar", "Foragers carry nectar back to the colony in a honey stomach."),
    Document("wasp", "Wasps build paper nests and hunt other insects."),
    Document("bread", "Sourdough bread rises thanks to wild yeast."),
    Document("river", "The Nile flows north into the Mediterranean Sea."),
]

RELEVANT = {"honey": 0.95, "hive": 0.8, "nectar": 0.85}


def test_loop_runs_on_the_real_hybrid_store(embedder: SentenceTransformerEmbedder) -> None:
    """Over a real HybridStore the loop fuses question and rewrite, judges each document once
    and stops when enough relevant documents are kept."""
    evaluator = ScriptedEvaluator(RELEVANT, default=0.05)
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add(CORPUS)
        orch = CorrectiveRAGOrchestrator(
            store,
            evaluator,
            ScriptedRewriter(["nectar honey stomach foragers"]),
            top_k=2,
            max_iterations=4,
        )
        result = orch.run(QUESTION)
    assert StopReason.ENOUGH_RELEVANT == result.stop_reason
    assert set(RELEVANT) == set(result.kept_ids)
    judged = [doc_id for _, doc_id in evaluator.evaluated]
    assert len(judged) == len(set(judged))
    assert 2 == result.iterations
    assert ("honey", "hive") == result.history[1].skipped_ids
    first_legs = {leg.leg for r in result.history[0].retrieved for leg in r.legs}
    assert {"bm25", "dense"} == first_legs
    later_legs = {leg.leg for r in result.history[1].retrieved for leg in r.legs}
    assert {"question", "rewrite"} == later_legs


class _CountingEmbedder:
    """The real embedder, keeping the texts of every ``embed`` call (one entry per call)."""

    def __init__(self, inner: SentenceTransformerEmbedder) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.calls.append(list(texts))
        return self.inner.embed(texts)


def test_an_iteration_embeds_all_its_queries_in_one_batch(
    embedder: SentenceTransformerEmbedder,
) -> None:
    """The queries searched in one iteration are embedded in one call, and a query searched
    before not again: the store remembers the question's runs from iteration 1 (every lane on
    both legs here: by default a model's rewrite is not embedded at all, below)."""
    result, calls = _counted_run(
        embedder,
        CORPUS,
        QUESTION,
        ScriptedEvaluator(RELEVANT, default=0.05),
        ScriptedRewriter(["nectar honey stomach foragers"]),
        max_iterations=4,
        lanes=Lanes(lexical=()),
    )
    assert 2 == result.iterations
    assert [[QUESTION], ["nectar honey stomach foragers"]] == calls


def _counted_run(
    embedder: SentenceTransformerEmbedder,
    corpus: list[Document],
    question: str,
    *parts: Any,
    **options: Any,
) -> tuple[RunResult, list[list[str]]]:
    """A run (top_k 2) over a real hybrid store of ``corpus``, and the texts of each embed call."""
    counting = _CountingEmbedder(embedder)
    with HybridStore.in_memory(embedder=counting) as store:
        store.add(corpus)
        counting.calls.clear()  # the documents' own embedding
        where = options.pop("where", None)
        orch = CorrectiveRAGOrchestrator(store, *parts, top_k=2, **options)
        result = orch.run(question, where=where)
    return result, counting.calls


# A kept document that names a new entity (the Hawaiian Volcano Observatory): the feedback lane.
VOLCANOES = "How do volcanoes form magma chambers?"
TOPIC = {"topic": "volcanoes"}
FEEDBACK_CORPUS = [
    Document(
        "k",
        "Volcanoes form magma chambers under Kilauea, says the Hawaiian Volcano Observatory.",
        TOPIC,
    ),
    Document("o", "The Hawaiian Volcano Observatory monitors eruptions on the Big Island.", TOPIC),
    *(Document(f"v{i}", f"Volcanoes and magma chambers, note {i}.", TOPIC) for i in range(6)),
]


def _hybrid_run(
    embedder: SentenceTransformerEmbedder, lanes: Lanes, **options: Any
) -> tuple[list[list[str]], str, RunResult]:
    """A run over a real hybrid store: the texts of each embed call, the feedback lane's text
    (iteration 2's) and the result."""
    options.setdefault("max_iterations", 2)
    result, calls = _counted_run(
        embedder,
        FEEDBACK_CORPUS,
        VOLCANOES,
        ScriptedEvaluator({"k": 0.9}),
        ScriptedRewriter(["magma chamber depth survey", "eruption survey records"]),
        lanes=lanes,
        **options,
    )
    [feedback] = [q for q in result.history[1].searched if "Observatory" in q]
    return calls, feedback, result


def test_the_feedback_lane_is_searched_by_bm25_alone_on_the_hybrid_store(
    embedder: SentenceTransformerEmbedder,
) -> None:
    """Lanes() searches a model's rewrite and the feedback lane by BM25 alone: only the question
    is embedded; Lanes(lexical=()) embeds every lane, Lanes(lexical=("feedback",)) the rewrite."""
    calls, _, _ = _hybrid_run(embedder, Lanes())
    assert [[VOLCANOES]] == calls
    calls, _, _ = _hybrid_run(embedder, Lanes(lexical=("feedback",)))
    assert [[VOLCANOES], ["magma chamber depth survey"]] == calls
    for wrong in (42, "feedback", ("feedback", "web")):
        with pytest.raises(ConfigError):
            Lanes(lexical=wrong)  # type: ignore[arg-type]


def test_an_iteration_embeds_its_new_query_texts_in_one_call(
    embedder: SentenceTransformerEmbedder,
) -> None:
    """With every lane on both legs, iteration 2 embeds its rewrite and feedback lane together,
    in one call of the embedder, and not the question again."""
    calls, feedback, _ = _hybrid_run(embedder, Lanes(lexical=()))
    assert [[VOLCANOES], ["magma chamber depth survey", feedback]] == calls


def test_no_text_is_embedded_twice_in_a_run_even_where_the_store_remembers_no_search(
    embedder: SentenceTransformerEmbedder,
) -> None:
    """A search with a filter is not in the store's memo, yet the question searched at each of
    three iterations is embedded once: the run keeps its query embeddings by text."""
    calls, _, result = _hybrid_run(
        embedder, Lanes(lexical=()), max_iterations=3, where={"topic": "volcanoes"}
    )
    assert 3 == result.iterations
    assert all(VOLCANOES in searched for searched in (r.searched for r in result.history))
    embedded = [text for call in calls for text in call]
    assert sorted(set(embedded)) == sorted(embedded)
    assert VOLCANOES == embedded[0]
