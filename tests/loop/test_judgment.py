"""The default path keeps its judgment: reasons and what is missing in one-call mode, one call
per iteration whoever wraps what, and a call mode fixed at construction."""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from corrective_rag.calls.proposals import asking_proposals, proposals_wanted
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.llm import prompts
from corrective_rag.llm.client import OpenAIChatClient, Retries
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.testing import ListRetriever, ScriptedLLMServer
from corrective_rag.testing.schema_fit import fit_to_schema
from corrective_rag.types import Document, Evaluation, Rewrite, RewriteRequest, StopReason

PARSIFAL_OR_MANON = "Is Parsifal an opera in three acts, and who wrote Manon?"
PARSIFAL = [
    Document("p1", "Parsifal is an opera in three acts by Richard Wagner, first performed 1882."),
    Document("p2", "Wagner's Parsifal, in three acts, premiered at the Bayreuth Festival."),
]
MANON = Document("m1", "Manon is an opera by Jules Massenet to a libretto after Prevost.")


def chat(server: ScriptedLLMServer) -> OpenAIChatClient:
    return OpenAIChatClient(server.base_url, "scripted", retries=Retries(max_retries=0))


def honest_judge(request: Mapping[str, Any]) -> str:
    """A judge that says what each Parsifal document lacks, in the shape of either call."""
    user = request["messages"][-1]["content"]
    docs = prompts.parse_document_blocks(user)
    verdicts = [
        {
            "id": doc_id,
            "relevant": True,
            "score": 0.9,
            "confidence": 0.9,
            "reasoning": "names the opera and its acts" if "Parsifal" in text else "Manon",
            "missing": "who wrote Manon" if "Parsifal" in text else None,
            "off_schema": "a key no schema allows",
        }
        for doc_id, text in docs
    ]
    reply: dict[str, Any] = {"verdicts": verdicts}
    if prompts.PROPOSE_RULE in request["messages"][0]["content"]:
        reply.update(lacking="who wrote Manon", next_query="Manon opera composer")
    if request["messages"][0]["content"].startswith(prompts.REWRITER_SYSTEM[:40]):
        reply = {"query": "Manon opera composer", "rationale": "the second part"}
    return json.dumps(reply)


def parsifal_run(call_mode: str) -> tuple[Any, ScriptedLLMServer]:
    with ScriptedLLMServer(honest_judge, obey_schema=True) as srv:
        client = chat(srv)
        rag = CorrectiveRAGOrchestrator(
            ListRetriever(PARSIFAL),
            LLMEvaluator(client, cache=VerdictCache(0)),
            LLMRewriter(client),
            min_relevant=2,
            max_iterations=3,
            call_mode=call_mode,  # type: ignore[arg-type]
        )
        return rag.run(PARSIFAL_OR_MANON), srv


@pytest.mark.parametrize("call_mode", ["one-call", "two-call"])
def test_an_unanswered_part_keeps_the_run_from_stopping_enough_relevant(call_mode: str) -> None:
    """Two Parsifal documents, each missing who wrote Manon: no success after one iteration,
    in either call mode, from a server that sends only what its schema allows."""
    result, _ = parsifal_run(call_mode)
    assert StopReason.ENOUGH_RELEVANT != result.stop_reason
    assert 1 < result.iterations or StopReason.NO_PROGRESS == result.stop_reason
    first = result.history[0]
    assert all(v.missing == ("who wrote Manon",) for v in first.verdicts)
    assert all(v.reasoning == "names the opera and its acts" for v in first.verdicts)


def test_every_kept_document_says_why_it_was_kept() -> None:
    """One-call mode, schema-honest server: each kept document's verdict has a reasoning."""
    result, srv = parsifal_run("one-call")
    assert result.kept
    assert all(k.verdict.reasoning for k in result.kept)
    assert all("off_schema" not in r["messages"][0]["content"] for r in srv.requests)


def test_the_scripted_server_sends_only_what_the_schema_allows() -> None:
    """Keys a closed schema forbids are dropped and strings cut; obey_schema=False breaks it."""
    schema = prompts.verdict_schema(propose=True)
    reply = json.loads(
        honest_judge(
            {
                "messages": [
                    {
                        "role": "system",
                        "content": prompts.grader_messages("q", [], propose=True)[0]["content"],
                    },
                    {
                        "role": "user",
                        "content": "Question: q\n" + prompts.document_block("a", "Parsifal"),
                    },
                ]
            }
        )
    )
    reply["verdicts"][0]["reasoning"] = "x" * 1000
    fitted = fit_to_schema(reply, schema)
    assert "off_schema" not in fitted["verdicts"][0]
    assert prompts.REASONING_CHARS == len(fitted["verdicts"][0]["reasoning"])
    assert "next_query" in fitted
    with ScriptedLLMServer(honest_judge, obey_schema=False) as srv:
        evaluator = LLMEvaluator(chat(srv), propose=True, cache=VerdictCache(0))
        evaluator.evaluate(PARSIFAL_OR_MANON, PARSIFAL)
        request = srv.requests[0]
    assert "off_schema" in srv.reply(request)  # the breaking mode sends what it was scripted


class LoggingEvaluator:
    """A user's logging wrapper: forwards evaluate and documents_per_call, nothing else."""

    def __init__(self, inner: LLMEvaluator) -> None:
        self.inner = inner
        self.calls = 0

    @property
    def documents_per_call(self) -> int | None:
        return self.inner.documents_per_call

    def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
        self.calls += 1
        return self.inner.evaluate(question, documents)


class LoggingRewriter:
    """A user's logging wrapper around a rewriter: forwards rewrite only."""

    def __init__(self, inner: LLMRewriter) -> None:
        self.inner = inner
        self.calls = 0

    def rewrite(self, request: RewriteRequest) -> Rewrite:
        self.calls += 1
        return self.inner.rewrite(request)


DOCS = [Document(f"d{i}", f"Volcanoes form magma chambers, study {i}.") for i in range(12)]


def wandering_judge(request: Mapping[str, Any]) -> str:
    """Relevant to nothing; proposes a fresh query each call, so every iteration runs."""
    docs = prompts.parse_document_blocks(request["messages"][-1]["content"])
    verdicts = [
        {
            "id": i,
            "relevant": False,
            "score": 0.1,
            "confidence": 0.9,
            "reasoning": "off",
            "missing": "x",
        }
        for i, _ in docs
    ]
    first = docs[0][0] if docs else "none"
    reply = {"verdicts": verdicts, "lacking": "x", "next_query": f"magma source {first}"}
    if request["messages"][0]["content"].startswith(prompts.REWRITER_SYSTEM[:40]):
        reply = {"query": f"magma source {first} again", "rationale": "r"}
    return json.dumps(reply)


@pytest.mark.parametrize("wrap", ["evaluator", "rewriter", "both", "neither"])
def test_logging_wrappers_keep_one_call_per_iteration(wrap: str) -> None:
    """Wrapped evaluator, rewriter or both: 3 iterations cost 3 calls in one-call mode."""
    with ScriptedLLMServer(wandering_judge) as srv:
        client = chat(srv)
        evaluator: Any = LLMEvaluator(client, cache=VerdictCache(0))
        rewriter: Any = LLMRewriter(client)
        if wrap in ("evaluator", "both"):
            evaluator = LoggingEvaluator(evaluator)
        if wrap in ("rewriter", "both"):
            rewriter = LoggingRewriter(rewriter)
        rag = CorrectiveRAGOrchestrator(
            ListRetriever(DOCS), evaluator, rewriter, top_k=2, max_iterations=3
        )
        result = rag.run("How do volcanoes form magma chambers?")
        names = [r["response_format"]["json_schema"]["name"] for r in srv.requests]
    assert 3 == result.iterations
    assert ["verdicts"] * 3 == names  # no rewriting call
    assert 3 == result.usage.total.llm_calls


def test_two_call_mode_through_wrappers_makes_its_rewriting_calls() -> None:
    """The wrappers carry two-call mode too: the grading call does not propose."""
    with ScriptedLLMServer(wandering_judge) as srv:
        client = chat(srv)
        rag = CorrectiveRAGOrchestrator(
            ListRetriever(DOCS),
            LoggingEvaluator(LLMEvaluator(client, cache=VerdictCache(0))),
            LoggingRewriter(LLMRewriter(client)),
            top_k=2,
            max_iterations=2,
            call_mode="two-call",
        )
        rag.run("How do volcanoes form magma chambers?")
        names = [r["response_format"]["json_schema"]["name"] for r in srv.requests]
    assert ["verdicts", "rewrite", "verdicts"] == names


def test_the_call_mode_is_read_only() -> None:
    """Setting call_mode after construction is refused, not accepted and ignored."""
    with ScriptedLLMServer() as srv:
        client = chat(srv)
        rag = CorrectiveRAGOrchestrator(
            ListRetriever(DOCS), LLMEvaluator(client), LLMRewriter(client)
        )
        with pytest.raises(ConfigError, match="fixed"):
            rag.call_mode = "two-call"  # type: ignore[misc]
    assert "one-call" == rag.call_mode


def test_a_rewriter_on_another_model_in_one_call_mode_is_warned_of() -> None:
    """LLMRewriter(other_chat) would sit idle in one-call mode: a UserWarning says so."""
    with ScriptedLLMServer() as grader, ScriptedLLMServer() as other:
        evaluator = LLMEvaluator(chat(grader))
        with pytest.warns(UserWarning, match="two-call"):
            CorrectiveRAGOrchestrator(ListRetriever(DOCS), evaluator, LLMRewriter(chat(other)))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            CorrectiveRAGOrchestrator(
                ListRetriever(DOCS), evaluator, LLMRewriter(chat(other)), call_mode="two-call"
            )
            CorrectiveRAGOrchestrator(ListRetriever(DOCS), evaluator, LLMRewriter(chat(grader)))


def test_proposals_are_asked_only_inside_the_grading_context() -> None:
    """The request is scoped: outside the loop's grading context nothing proposes."""
    assert proposals_wanted() is False
    with asking_proposals(True):
        assert proposals_wanted() is True
        with asking_proposals(False):
            assert proposals_wanted() is False
        assert proposals_wanted() is True
    assert proposals_wanted() is False


def test_a_proposals_lacking_is_what_the_relevant_verdicts_miss() -> None:
    """Proposal.lacking gathers the relevant verdicts' missing once each, in order."""
    with ScriptedLLMServer(honest_judge) as srv:
        evaluator = LLMEvaluator(chat(srv), propose=True, cache=VerdictCache(0))
        evaluation = evaluator.evaluate(PARSIFAL_OR_MANON, PARSIFAL)
    assert evaluation.proposal is not None
    assert "who wrote Manon" == evaluation.proposal.lacking


def test_a_new_rewrite_gets_its_probe_with_one_slot() -> None:
    """top_k=1: a rewrite never judged before takes the one slot; after a miss, the question."""
    from corrective_rag.loop.lanes import take_turns
    from corrective_rag.types import Hit, LegScore

    def hit(doc_id: str, lane: str, rank: int) -> Hit:
        return Hit(Document(doc_id, doc_id), 1.0 / rank, rank, (LegScore(lane, rank, 1.0),))

    hits = [hit("q2", "question", 1), hit("r1", "rewrite", 1), hit("f1", "feedback", 1)]
    assert {"r1": "rewrite"} == take_turns(hits, {}, 1, fused=True, record={"question": (1, 1)})
    missed = {"question": (1, 1), "rewrite": (0, 1), "feedback": (0, 1)}
    assert {"q2": "question"} == take_turns(hits, {}, 1, fused=True, record=missed)
    two = take_turns(hits, {}, 2, fused=True, record={"question": (1, 1)})
    assert {"q2": "question", "r1": "rewrite"} == two  # the rewrite's probe before feedback's


class ManyOnly:
    """A user retriever with its own retrieve_many, declaring only the protocol's keywords."""

    def __init__(self) -> None:
        self.inner = ListRetriever(DOCS)
        self.batches = 0

    def retrieve(self, query: str, *, top_k: int = 10, where: Any = None) -> list[Any]:
        return self.inner.retrieve(query, top_k=top_k, where=where)

    def retrieve_many(
        self, queries: Sequence[str], *, top_k: int = 10, where: Any = None
    ) -> list[list[Any]]:
        self.batches += 1
        return [self.inner.retrieve(q, top_k=top_k, where=where) for q in queries]


def test_a_users_retrieve_many_gets_only_the_declared_keywords() -> None:
    """A later iteration searches two queries through the user's retrieve_many, no crash."""
    retriever = ManyOnly()
    with ScriptedLLMServer(wandering_judge) as srv:
        client = chat(srv)
        rag = CorrectiveRAGOrchestrator(
            retriever, LLMEvaluator(client), LLMRewriter(client), top_k=2, max_iterations=3
        )
        result = rag.run("How do volcanoes form magma chambers?")
    assert 3 == result.iterations
    assert retriever.batches >= 2
