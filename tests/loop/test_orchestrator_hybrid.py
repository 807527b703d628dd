from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.testing.fakes import ScriptedEvaluator, ScriptedRewriter
from corrective_rag.types import Document, StopReason

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
    before not again: the store remembers the question's runs from iteration 1."""
    counting = _CountingEmbedder(embedder)
    with HybridStore.in_memory(embedder=counting) as store:
        store.add(CORPUS)
        counting.calls.clear()  # the documents' own embedding
        orch = CorrectiveRAGOrchestrator(
            store,
            ScriptedEvaluator(RELEVANT, default=0.05),
            ScriptedRewriter(["nectar honey stomach foragers"]),
            top_k=2,
            max_iterations=4,
        )
        result = orch.run(QUESTION)
    assert 2 == result.iterations
    assert [[QUESTION], ["nectar honey stomach foragers"]] == counting.calls
