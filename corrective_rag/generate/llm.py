"""``LLMGenerator``: answers from the kept documents only, citing their ids, or abstains.

With ``support_check`` (Self-RAG's ISSUP, Asai et al. 2023) a second call asks whether the answer
is fully supported by the documents; when it is not, the answer is regenerated once under a
stricter instruction and checked again. ``Answer.supported`` and ``Answer.regenerated`` record
what happened; ``supported`` is None when no check ran or the check itself failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from corrective_rag.errors import ConfigError, InputError, LLMError, VerdictParseError
from corrective_rag.llm import prompts
from corrective_rag.llm.jsonparse import parse_json_object
from corrective_rag.llm.spent import attach_spent, charge, metering
from corrective_rag.observe.logs import get_logger
from corrective_rag.observe.spans import stage
from corrective_rag.protocols import ChatModel
from corrective_rag.types import Answer, Document, Usage

# LLMGenerator: its home is corrective_rag
__all__ = ["ABSTAIN_TEXT"]

log: Any = get_logger(__name__)

ABSTAIN_TEXT = "The documents given do not answer this question."
_SUPPORT_TOKENS = 150


class LLMGenerator:
    """A :class:`~corrective_rag.protocols.Generator` backed by a chat model.

    Args:
        chat: the chat model.
        support_check: run the ISSUP support check and regenerate once when unsupported.
        max_answer_tokens: cap on the answer's length.
        strict: strict JSON for the answer (a non-JSON answer raises ``VerdictParseError``);
            lenient mode takes a non-JSON reply as the answer text with no citations.

    LLM errors while answering propagate (``LLMError``); a failed support check only leaves
    ``supported`` None.
    """

    def __init__(
        self,
        chat: ChatModel,
        *,
        support_check: bool = True,
        max_answer_tokens: int = 512,
        strict: bool = False,
    ) -> None:
        if not callable(getattr(chat, "complete", None)):
            raise ConfigError("chat must have a complete(messages, ...) method")
        if not isinstance(max_answer_tokens, int) or max_answer_tokens < 1:
            raise ConfigError(f"max_answer_tokens must be an int >= 1, got {max_answer_tokens!r}")
        self.chat = chat
        self.support_check: bool = bool(support_check)
        self.max_answer_tokens = max_answer_tokens
        self.strict: bool = bool(strict)

    def generate(self, question: str, documents: Sequence[Document]) -> Answer:
        """Answer ``question`` from ``documents`` only, or abstain.

        Raises:
            InputError: empty question or non-documents.
            LLMError: the answering call failed.
            VerdictParseError: strict mode and the answer was not JSON.
        """
        if not isinstance(question, str) or not question.strip():
            raise InputError("question must be a non-empty string")
        docs = list(documents)
        if not all(isinstance(d, Document) for d in docs):
            raise InputError("documents must be Document instances")
        if not docs:
            return Answer(text=ABSTAIN_TEXT, abstained=True)
        with metering() as meter:
            try:
                return self._generate(question, docs)
            except (LLMError, VerdictParseError) as exc:  # the caller charges what was spent
                attach_spent(exc, meter.total)
                raise

    def _generate(self, question: str, docs: list[Document]) -> Answer:
        answer = self._answer(question, docs, strict_rule=False)
        if not self.support_check or answer.abstained:
            return answer
        supported, usage = self._supported(question, answer.text, docs)
        if supported is not False:
            return replace(answer, supported=supported, usage=answer.usage + usage)
        log.info("answer_unsupported_regenerating")
        second = self._answer(question, docs, strict_rule=True)
        usage += answer.usage + second.usage
        if second.abstained:
            return replace(second, supported=None, regenerated=True, usage=usage)
        supported, more = self._supported(question, second.text, docs)
        return replace(second, supported=supported, regenerated=True, usage=usage + more)

    def _answer(self, question: str, docs: list[Document], *, strict_rule: bool) -> Answer:
        ids = [d.id for d in docs]
        reply = self.chat.complete(
            prompts.generator_messages(question, docs, strict=strict_rule),
            json_schema=prompts.answer_schema(ids),
            max_tokens=self.max_answer_tokens,
        )
        charge(reply.usage)
        try:
            obj = parse_json_object(reply.text, strict=self.strict)
        except VerdictParseError:
            if self.strict:
                raise
            text = reply.text.strip()
            return Answer(text=text or ABSTAIN_TEXT, abstained=not text, usage=reply.usage)
        text = str(obj.get("answer") or "").strip()
        raw_cited = obj.get("cited_ids") or []
        cited_list = [str(c) for c in raw_cited] if isinstance(raw_cited, list) else []
        unknown = [c for c in cited_list if c not in ids]
        if unknown:
            log.warning("answer_cites_unknown_ids", document_ids=unknown[:10])
        cited = tuple(dict.fromkeys(c for c in cited_list if c in ids))
        abstained = obj.get("abstain") is True or not text
        return Answer(
            text=text or ABSTAIN_TEXT,
            cited_ids=() if abstained else cited,
            abstained=abstained,
            usage=reply.usage,
        )

    def _supported(
        self, question: str, answer: str, docs: list[Document]
    ) -> tuple[bool | None, Usage]:
        try:
            with stage("check"):  # named apart from the answer's own call in a trace
                reply = self.chat.complete(
                    prompts.support_messages(question, answer, docs),
                    json_schema=prompts.support_schema(),
                    max_tokens=_SUPPORT_TOKENS,
                )
        except LLMError as exc:
            log.warning("support_check_failed", error=str(exc))
            return None, Usage(llm_calls=1, failed_calls=1)
        charge(reply.usage)
        try:
            level = str(parse_json_object(reply.text, strict=self.strict).get("support", ""))
        except VerdictParseError as exc:
            log.warning("support_check_unparseable", error=str(exc))
            return None, reply.usage + Usage(failed_calls=1)
        level = level.strip().lower()
        if level not in ("fully", "partially", "no"):
            return None, reply.usage + Usage(failed_calls=1)
        return level == "fully", reply.usage
