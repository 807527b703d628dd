from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.generate.llm import LLMGenerator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.budget import Budget
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.testing import ScriptedLLMServer
from corrective_rag.testing.fakes import ListRetriever
from corrective_rag.types import Document, StopReason

QUESTION = "How do honey bees make honey from nectar?"

CORPUS = [
    Document("bees", "Honey bees make honey from flower nectar they collect."),
    Document("hive", "Bees store nectar in wax cells, where honey ripens."),
    Document("nectar", "Nectar becomes honey as bees fan it and add enzymes."),
    Document("wasp", "Wasps hunt insects and build paper nests."),
    Document("bread", "Bread dough rises with yeast."),
]


def test_loop_over_a_real_http_llm_endpoint() -> None:
    """Over HTTP, every grading prompt carries the original question, each document is graded
    once, and the answer cites kept documents."""
    with ScriptedLLMServer() as server:
        chat = OpenAIChatClient(server.base_url, "scripted")
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(CORPUS),
            LLMEvaluator(chat, batch_size=2, max_workers=1),
            LLMRewriter(chat),
            generator=LLMGenerator(chat),
            top_k=2,
            max_iterations=3,
            budget=Budget(max_llm_calls=30),
        )
        result = orch.run(QUESTION)
        prompts = [m["content"] for r in server.requests for m in r["messages"]]
    assert StopReason.ENOUGH_RELEVANT == result.stop_reason
    graded = [v.document_id for rec in result.history for v in rec.verdicts]
    assert len(graded) == len(set(graded))
    assert {"bees", "hive", "nectar"} == set(result.kept_ids)
    assert result.answer is not None and not result.answer.abstained
    assert set(result.answer.cited_ids) <= set(result.kept_ids)
    assert result.usage.total.llm_calls == len(server.requests)
    asked = [p.split("\n", 1)[0] for p in prompts if p.startswith("Question: ")]
    assert 2 <= len(asked)
    assert {f"Question: {QUESTION}"} == set(asked)
