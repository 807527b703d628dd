"""How many documents a grading call holds: the prompt's tokens, the reply's reserve, the packing.

A grading call's tokens are a fixed part (the system prompt, the question, the reply's reserve
for a proposal) and, per document, its block in the prompt (its text cut to ``max_doc_tokens``,
its id and tag) and the reply's reserve for its verdict. Documents are packed, in order, into as
few calls as fit the model's context budget (``batch_size`` can cap the documents per call).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from corrective_rag.llm import prompts
from corrective_rag.models.tokens import TiktokenCounter
from corrective_rag.types import Document

__all__ = ["CallSizes", "documents_fitting", "reply_tokens"]

T = TypeVar("T")

# The reply's reserve follows the schema's caps on free text (a token per 3 characters at most,
# for English): a verdict is ~40 tokens of keys, id and numbers plus reasoning and missing; a
# proposal adds next_query. A reply cut at the reserve keeps its complete verdicts.
_REPLY_TOKENS_BASE = 60
_REPLY_TOKENS_PER_DOC = 40 + 2 * -(-prompts.REASONING_CHARS // 3)
_REPLY_TOKENS_PROPOSAL = 20 + -(-prompts.QUERY_CHARS // 3)
_QUESTION_TOKENS = 256  # a question up to this long leaves documents_per_call true
_BLOCK_TOKENS = 12  # the <document id=...> tag around a document, beside its id
_SIZES_KEPT = 4096  # documents whose cut text and token count an evaluator keeps


def reply_tokens(documents: int, *, propose: bool) -> int:
    """Tokens reserved for a grading reply: follows the prompt's caps on its free text."""
    return (
        _REPLY_TOKENS_BASE
        + _REPLY_TOKENS_PER_DOC * documents
        + (_REPLY_TOKENS_PROPOSAL if propose else 0)
    )


def _system_prompt(propose: bool) -> str:
    return prompts.grader_messages("", [], propose=propose)[0]["content"]


def _fixed(system_tokens: int, question_tokens: int, *, propose: bool) -> int:
    """Tokens of a call that do not depend on its documents: prompts and reply reserve."""
    reply = _REPLY_TOKENS_BASE + (_REPLY_TOKENS_PROPOSAL if propose else 0)
    return system_tokens + 16 + question_tokens + reply  # 16: roles, "Question:", ...


def documents_fitting(
    context_tokens: int, max_doc_tokens: int, batch_size: int | None, *, propose: bool
) -> int:
    """Documents of ``max_doc_tokens`` that one call holds beside a question of up to 256 tokens.

    The system prompt is estimated from its length (at most a token per three characters of
    English), so that sizing a batch in advance does not load tiktoken; capped by ``batch_size``.
    """
    fixed = _fixed(len(_system_prompt(propose)) // 3, _QUESTION_TOKENS, propose=propose)
    fit = (context_tokens - fixed) // (max_doc_tokens + _BLOCK_TOKENS + _REPLY_TOKENS_PER_DOC)
    return fit if batch_size is None else min(fit, batch_size)


class CallSizes:
    """One evaluator's token counts of its grading calls, kept between calls.

    The system prompt is counted once per call shape; a document's cut text and block tokens
    once per distinct (id, text, cap): the loop sends a question's documents again (a verdict
    cache of 0, a batch of questions over one corpus).
    """

    def __init__(self) -> None:
        self._system_tokens: dict[bool, int] = {}
        self._sizes: dict[tuple[str, str, int], tuple[str, int]] = {}

    def sized(
        self, counter: TiktokenCounter, doc: Document, max_doc_tokens: int
    ) -> tuple[str, int]:
        """``doc``'s text cut to ``max_doc_tokens``, and its block's tokens in the prompt."""
        key = (doc.id, doc.text, max_doc_tokens)
        sized = self._sizes.get(key)
        if sized is None:
            text = counter.truncate(doc.text, max_doc_tokens)
            tokens = counter.count(prompts.document_block(doc.id, text))  # as written
            if len(self._sizes) >= _SIZES_KEPT:
                self._sizes.clear()
            sized = self._sizes[key] = (text, tokens)
        return sized

    def batches(
        self,
        counter: TiktokenCounter,
        question: str,
        items: Sequence[T],
        tokens: Callable[[T], int],
        *,
        context_tokens: int,
        batch_size: int | None,
        propose: bool,
    ) -> list[list[T]]:
        """Pack ``items`` (each of ``tokens(item)``) in order into calls that fit the budget."""
        if propose not in self._system_tokens:
            self._system_tokens[propose] = counter.count(_system_prompt(propose))
        fixed = _fixed(self._system_tokens[propose], counter.count(question), propose=propose)
        room = context_tokens - fixed
        cap = batch_size or len(items)
        batches: list[list[T]] = []
        used = room  # forces a first batch
        for item in items:
            need = tokens(item) + _REPLY_TOKENS_PER_DOC
            if not batches or len(batches[-1]) >= cap or used + need > room:
                batches.append([])
                used = 0
            batches[-1].append(item)
            used += need
        return batches
