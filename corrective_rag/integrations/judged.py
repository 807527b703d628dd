"""The loop the framework retrievers wrap, with the judge a profile declares (no framework here).

``CorrectiveRetriever.from_profile`` (LangChain and LlamaIndex alike) builds its orchestrator
through :func:`judged_loop`: the evaluator is the one the
:class:`~corrective_rag.evaluate.profile.JudgeProfile` declares, checked against the chat model's
name and the loop's call mode, so that a framework application runs the judge ``judge-check``
measured, at its threshold, and not the default one.
"""

from __future__ import annotations

from typing import Any

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.kinds import judge_kind
from corrective_rag.evaluate.profile import JudgeProfile
from corrective_rag.loop.callmode import CallMode
from corrective_rag.protocols import ChatModel, Retriever, Rewriter

__all__ = ["judged_loop"]


def judged_loop(
    profile: JudgeProfile,
    retriever: Retriever,
    chat: ChatModel | None = None,
    *,
    model: str | None = None,
    rewriter: Rewriter | None = None,
    call_mode: CallMode = "one-call",
    **options: Any,
) -> Any:
    """The corrective loop (``CorrectiveRAGOrchestrator``) judging with ``profile``.

    Args:
        profile: the judge to run (e.g. ``JudgeProfile.read(path, model=...)``).
        retriever: the loop's corpus (e.g. a ``LangChainRetriever``).
        chat: the chat model the judge (and, unless ``rewriter``, the rewriter) calls.
        model: the model ``chat`` talks to, checked against the profile's (default: its
            ``model`` attribute).
        rewriter: the rewriter (default: ``LLMRewriter(chat)``, or ``LocalRewriter()`` with no
            chat model).
        call_mode: the loop's call mode, checked against the profile's call shape.
        options: the orchestrator's other keywords (``policy`` defaults to the one the profile
            was measured under).

    Raises:
        ConfigError: the profile does not fit (another model, prompt or call shape), or its
            judge needs a chat model and none was given.
    """
    from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator

    if not isinstance(profile, JudgeProfile):
        raise ConfigError(f"profile must be a JudgeProfile, got {profile!r}")
    needs_chat = judge_kind(profile.kind).needs_chat
    evaluator = profile.evaluator(
        chat=chat if needs_chat else None, call_mode=call_mode, model=model
    )
    if rewriter is None:
        if chat is not None:
            from corrective_rag.rewrite.llm import LLMRewriter

            rewriter = LLMRewriter(chat)
        else:
            from corrective_rag.rewrite.local import LocalRewriter

            rewriter = LocalRewriter()
    options.setdefault("policy", profile.policy)
    return CorrectiveRAGOrchestrator(retriever, evaluator, rewriter, call_mode=call_mode, **options)
