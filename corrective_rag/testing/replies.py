"""The scripted server's default replies: corrective_rag's own prompts answered by word overlap."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from corrective_rag.llm import prompts
from corrective_rag.text import content_terms

__all__ = ["default_reply"]


def _question(user: str) -> str:
    first = user.split("\n", 1)[0]
    for prefix in ("Question: ", "Original question: "):
        if first.startswith(prefix):
            return first[len(prefix) :]
    return first


def _overlap(question: str, text: str) -> float:
    wanted = content_terms(question)
    return len(wanted & content_terms(text)) / len(wanted) if wanted else 0.0


def default_reply(request: Mapping[str, Any]) -> str:
    """Answer corrective_rag's own prompts deterministically from word overlap.

    Grading: a document is relevant when it holds at least half the question's content terms;
    its score is that fraction; asked to propose too, the next query is the first rewrite the
    rewriter would make. Rewriting: the question plus a numbered suffix (the queries tried).
    Answering: cite the overlapping documents. Support check: "fully" when every answer term is
    in a document.
    """
    messages = request.get("messages") or []
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    user = next((m["content"] for m in messages if m.get("role") == "user"), "")
    question = _question(user)
    docs = prompts.parse_document_blocks(user)
    if system.startswith(prompts.GRADER_SYSTEM[:40]):
        verdicts = []
        for doc_id, text in docs:
            score = round(_overlap(question, text), 2)
            verdicts.append(
                {
                    "id": doc_id,
                    "relevant": score >= 0.5,
                    "score": score,
                    "confidence": 0.9,
                    "reasoning": f"shares {score:.0%} of the question's terms",
                    "missing": None,  # relevant when it holds the terms: nothing missing
                }
            )
        if prompts.PROPOSE_RULE not in system:
            return json.dumps({"verdicts": verdicts})
        return json.dumps({"verdicts": verdicts, "next_query": f"{question} background 1"})
    if system.startswith(prompts.REWRITER_SYSTEM[:40]):
        tried = user.count("\n- ")
        return json.dumps({"query": f"{question} background {tried}", "rationale": "broaden"})
    if system.startswith(prompts.GENERATOR_SYSTEM[:40]):
        cited = [d for d in docs if _overlap(question, d[1]) >= 0.5]
        if not cited:
            return json.dumps(
                {"answer": "The documents do not say.", "cited_ids": [], "abstain": True}
            )
        answer = cited[0][1].split(". ")[0].strip()
        return json.dumps({"answer": answer, "cited_ids": [d[0] for d in cited], "abstain": False})
    if system.startswith(prompts.SUPPORT_SYSTEM[:40]):
        answer = user.rsplit("Answer to check:\n", 1)[-1]
        known = content_terms(" ".join(t for _, t in docs))
        support = "fully" if content_terms(answer) <= known else "no"
        return json.dumps({"support": support, "reasoning": "term check"})
    return "ok"
