"""The evaluator conformance suite passes every shipped evaluator and fails wrong ones."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.local import DEFAULT_WEIGHTS, LocalEvaluator
from corrective_rag.llm.client import OpenAIChatClient, Retries
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.testing import ScriptedEvaluator, ScriptedLLMServer
from corrective_rag.testing.evaluator_contract import (
    ContractViolation,
    check_evaluator,
    verdict_violations,
)
from corrective_rag.testing.replies import default_reply
from corrective_rag.types import Document, Evaluation, Relevance, Usage, Verdict


def test_the_llm_evaluator_passes() -> None:
    """LLMEvaluator against the scripted server keeps the contract."""
    with ScriptedLLMServer() as server:
        chat = OpenAIChatClient(server.base_url, "scripted", retries=Retries(max_retries=0))
        check_evaluator(LLMEvaluator(chat))


def test_the_llm_evaluator_passes_when_the_model_writes_nan_and_lexical_missing() -> None:
    """A model replying NaN scores, '1/0' and words as missing still yields contract verdicts."""

    def reply(request: Mapping[str, Any]) -> str:
        text = default_reply(request)
        obj = json.loads(text)
        if "verdicts" not in obj:
            return text
        for n, verdict in enumerate(obj["verdicts"]):
            verdict["score"] = ("NaN", "1/0", "7/1")[n % 3]
            verdict["confidence"] = float("inf") if n % 2 else 0.9
        return json.dumps(obj)

    with ScriptedLLMServer(reply=reply) as server:
        chat = OpenAIChatClient(server.base_url, "scripted", retries=Retries(max_retries=0))
        evaluator = LLMEvaluator(chat)
        check_evaluator(evaluator)
        docs = [Document("a", "Ganymede is a moon."), Document("b", "Io is a moon.")]
        verdicts = evaluator.evaluate("Which moon is largest?", docs).verdicts
    assert [False, False] == [v.graded for v in verdicts]


@pytest.mark.parametrize("cap", [None, 1])
def test_the_local_evaluator_passes(embedder: SentenceTransformerEmbedder, cap: int | None) -> None:
    """LocalEvaluator, with and without a cap, keeps the contract."""
    check_evaluator(LocalEvaluator(embedder, weights=replace(DEFAULT_WEIGHTS, cap=cap)))


def test_the_scripted_evaluator_passes() -> None:
    """The scripted evaluator (scores, ready verdicts, ungraded) keeps the contract."""
    check_evaluator(ScriptedEvaluator({"ganymede": 0.9, "titan": None}, default=0.1))
    check_evaluator(
        ScriptedEvaluator(lambda q, d: 0.8, documents_per_call=None, usage_per_call=Usage())
    )


class _Wrong:
    """An evaluator broken in one way, chosen by ``how``."""

    documents_per_call: Any = 1

    def __init__(self, how: str) -> None:
        self.how = how
        if how == "undeclared":
            self.documents_per_call = True

    def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
        verdicts = [Verdict(d.id, True, Relevance.HIGH, 0.9, 0.9) for d in documents]
        if self.how == "keyerror":
            return self._by_id(question, documents)
        if self.how == "reversed":
            verdicts.reverse()
        elif self.how == "dropped" and verdicts:
            verdicts.pop()
        elif self.how == "renamed" and verdicts:
            verdicts[0] = replace(verdicts[0], document_id="someone-else")
        elif self.how == "string-relevant" and verdicts:
            bad = verdicts[0]
            object.__setattr__(bad, "relevant", "false")
        elif self.how == "nan" and verdicts:
            object.__setattr__(verdicts[0], "score", float("nan"))
        elif self.how == "lexical-missing":
            words = set(question.lower().rstrip("?").split())
            verdicts = [
                replace(v, missing=tuple(sorted(w for w in words if w not in d.text.lower())))
                for v, d in zip(verdicts, documents, strict=True)
            ]
        elif self.how == "counted-ungraded" and verdicts:
            ungraded = Verdict.ungraded(documents[0].id, "no grade")
            object.__setattr__(ungraded, "relevant", True)
            verdicts[0] = ungraded
        elif self.how == "dict":
            return Evaluation(tuple({"id": d.id} for d in documents))  # type: ignore[misc]
        usage = Usage(llm_calls=-1) if self.how == "negative-usage" else Usage()
        return Evaluation(tuple(verdicts), usage)

    def _by_id(self, question: str, documents: Sequence[Document]) -> Evaluation:
        """A judge that remembers verdicts by document id and assumes one question's ids."""
        cache: dict[str, Verdict] = self.__dict__.setdefault("cache", {})
        verdicts = []
        for d in documents:
            if d.id not in cache:
                if self.how == "keyerror" and cache:
                    raise KeyError(d.id)  # it assumed one question's ids
                good = any(w in d.text for w in ("Jupiter", "Vienna"))
                label = Relevance.HIGH if good else Relevance.LOW
                cache[d.id] = Verdict(d.id, good, label, 0.9 if good else 0.1, 0.9)
            verdicts.append(cache[d.id])
        return Evaluation(tuple(verdicts))


@pytest.mark.parametrize(
    ("how", "rule"),
    [
        ("undeclared", "documents_per_call"),
        ("reversed", "not the ids given"),
        ("dropped", "not the ids given"),
        ("renamed", "not the ids given"),
        ("string-relevant", "relevant must be a bool"),
        ("nan", "score must be a finite float"),
        ("lexical-missing", "not an unanswered part"),
        ("counted-ungraded", "label must be a Relevance"),
        ("dict", "must be a Verdict"),
        ("negative-usage", "non-negative"),
        ("keyerror", "KeyError"),
    ],
)
def test_a_wrong_evaluator_fails_the_suite(how: str, rule: str) -> None:
    """Each way of breaking the contract is caught and named."""
    with pytest.raises(ContractViolation, match=rule):
        check_evaluator(_Wrong(how))


def test_the_oracle_accepts_graded_and_ungraded_verdicts() -> None:
    """verdict_violations finds nothing in a well-formed graded or ungraded verdict."""
    assert [] == verdict_violations(Verdict("d", False, Relevance.LOW, 0.1, 0.8, missing=("x",)))
    assert [] == verdict_violations(Verdict.ungraded("d", "unparseable reply", raw="{"))
