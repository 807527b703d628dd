"""``LLMEvaluator``: grades documents against the question with a chat model, in parallel batches.

Per ``evaluate`` call: cached verdicts are reused; the other documents are truncated to
``max_doc_tokens`` and graded ``batch_size`` per call, batches in parallel. A verdict is accepted
only for an id that was sent in that call (others are ignored and logged); an id answered twice
with different verdicts is treated as unanswered, since one of the two may be forged by a
document. A document that looks like an injection (delimiter tags, verdict-shaped JSON, "ignore
previous instructions") is graded in a call of its own. Unanswered ids and every document of an
unreadable batch are graded again one per call.
What still fails becomes ``Verdict.ungraded`` (lenient) or raises (strict); it is never counted as
relevant or irrelevant.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from corrective_rag.errors import (
    ConfigError,
    InputError,
    LLMError,
    LLMResponseError,
    VerdictParseError,
)
from corrective_rag.evaluate.cache import CacheKey, VerdictCache, cache_key
from corrective_rag.evaluate.normalise import normalise_verdict
from corrective_rag.inputs import check_query
from corrective_rag.llm import prompts
from corrective_rag.llm.jsonparse import parse_json_object
from corrective_rag.models.tokens import TiktokenCounter
from corrective_rag.parallel import parallel_map
from corrective_rag.protocols import ChatModel
from corrective_rag.types import Document, Evaluation, Usage, Verdict

__all__ = ["LLMEvaluator"]

log = structlog.get_logger(__name__)

_REPLY_TOKENS_BASE, _REPLY_TOKENS_PER_DOC = 60, 160  # a verdict with a sentence of reasoning
_SPLIT_STATUSES = (400, 413)  # a batch too long for the context: singles may still fit
_FAILED = Usage(llm_calls=1, failed_calls=1)


@dataclass(frozen=True, slots=True)
class _Item:
    document: Document
    text: str  # truncated
    key: CacheKey


class LLMEvaluator:
    """An :class:`~corrective_rag.protocols.Evaluator` backed by a chat model.

    Args:
        chat: the chat model (e.g. :class:`~corrective_rag.llm.client.OpenAIChatClient`).
        batch_size: documents graded per call (1 grades one per call).
        max_doc_tokens: each document is cut to this many tokens before it enters a prompt.
        strict: strict JSON, and failures raise instead of becoming ungraded verdicts.
        max_workers: batches graded at the same time.
        cache: verdict cache; None makes a private one (pass ``VerdictCache(0)`` to disable).
        token_counter: counts and truncates document tokens (default cl100k_base).
        model_name: model part of the cache key (default ``chat.model`` or the class name).
    """

    def __init__(
        self,
        chat: ChatModel,
        *,
        batch_size: int = 4,
        max_doc_tokens: int = 400,
        strict: bool = False,
        max_workers: int = 4,
        cache: VerdictCache | None = None,
        token_counter: TiktokenCounter | None = None,
        model_name: str | None = None,
    ) -> None:
        if not callable(getattr(chat, "complete", None)):
            raise ConfigError("chat must have a complete(messages, ...) method")
        for name, value in (
            ("batch_size", batch_size),
            ("max_doc_tokens", max_doc_tokens),
            ("max_workers", max_workers),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be an int >= 1, got {value!r}")
        self.chat = chat
        self.batch_size = batch_size
        self.max_doc_tokens = max_doc_tokens
        self.strict = bool(strict)
        self.max_workers = max_workers
        self.cache = cache if cache is not None else VerdictCache()
        self.counter = token_counter or TiktokenCounter()
        self.model_name = model_name or str(getattr(chat, "model", "") or type(chat).__name__)

    def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
        """Return one verdict per document, in order, with the usage of every call made.

        Raises:
            InputError: empty question, non-documents or repeated ids.
            VerdictParseError, LLMError: only in strict mode, when a document cannot be graded.
        """
        check_query(question, what="question")
        if isinstance(documents, str | bytes | Document) or not isinstance(documents, Iterable):
            raise InputError("documents must be a sequence of Document")
        docs = list(documents)
        if not all(isinstance(d, Document) for d in docs):
            raise InputError("documents must be Document instances")
        ids = [d.id for d in docs]
        if len(set(ids)) != len(ids):
            raise InputError("document ids repeat within one evaluate call")
        verdicts: dict[str, Verdict] = {}
        pending: list[_Item] = []
        for doc in docs:
            key = cache_key(question, doc.text, self.model_name, prompts.PROMPT_VERSION)
            cached = self.cache.get(key, doc.id)
            if cached is not None:
                verdicts[doc.id] = cached
            else:
                text = self.counter.truncate(doc.text, self.max_doc_tokens)
                pending.append(_Item(doc, text, key))
        # A document shaped like an injection is graded in a call of its own: a model that obeys
        # it can then misjudge that document only, never the others of its batch.
        alone = [[item] for item in pending if prompts.looks_injected(item.text)]
        if alone:
            log.warning("documents_graded_alone", document_ids=[b[0].document.id for b in alone])
        shared = [item for item in pending if not prompts.looks_injected(item.text)]
        batches = alone + [
            shared[i : i + self.batch_size] for i in range(0, len(shared), self.batch_size)
        ]
        usage = Usage()
        results = parallel_map(
            lambda batch: self._grade_batch(question, batch), batches, max_workers=self.max_workers
        )
        for graded, spent in results:
            usage += spent
            verdicts.update(graded)
        for item in pending:
            self.cache.put(item.key, verdicts[item.document.id])
        ordered = tuple(verdicts[i] for i in ids)
        log.info(
            "evaluation_finished",
            documents=len(ids),
            cached=len(ids) - len(pending),
            llm_calls=usage.llm_calls,
            ungraded=sum(1 for v in ordered if not v.graded),
        )
        return Evaluation(ordered, usage)

    @property
    def documents_per_call(self) -> int:
        """Documents judged per LLM call: the batch size (see the Evaluator protocol)."""
        return self.batch_size

    # -- one call ----------------------------------------------------------------------------

    def _call(self, question: str, items: Sequence[_Item]) -> tuple[str, Usage]:
        ids = [i.document.id for i in items]
        reply = self.chat.complete(
            prompts.grader_messages(question, [(i.document.id, i.text) for i in items]),
            json_schema=prompts.verdict_schema(ids),
            max_tokens=_REPLY_TOKENS_BASE + _REPLY_TOKENS_PER_DOC * len(items),
        )
        return reply.text, reply.usage

    def _parse(self, text: str, ids: Sequence[str]) -> dict[str, Verdict]:
        """Verdicts for the sent ``ids`` found in ``text`` (unknown and conflicting ids dropped)."""
        obj = parse_json_object(text, strict=self.strict)
        items: Any = obj.get("verdicts")
        if (
            items is None
            and len(ids) == 1
            and any(k in obj for k in ("relevant", "score", "label"))
        ):
            items = [obj]  # a single bare verdict object
        if not isinstance(items, list):
            raise VerdictParseError("reply has no 'verdicts' list", raw=text)
        found: dict[str, Verdict] = {}
        conflicts: set[str] = set()
        for item in items:
            if not isinstance(item, dict):
                continue
            doc_id = item.get("id", item.get("document_id", item.get("doc_id")))
            if doc_id is None and len(ids) == 1:
                doc_id = ids[0]
            if doc_id not in ids:
                log.warning("verdict_unknown_id", document_id=str(doc_id)[:80], sent=len(ids))
                continue
            doc_id = str(doc_id)
            try:
                verdict = normalise_verdict(doc_id, item, raw=text)
            except VerdictParseError as exc:
                log.warning("verdict_unusable", document_id=doc_id, error=str(exc))
                continue
            if doc_id in found and found[doc_id] != verdict:
                conflicts.add(doc_id)
            found[doc_id] = verdict
        if conflicts:
            log.warning("verdict_conflicting_ids", document_ids=sorted(conflicts))
        return {k: v for k, v in found.items() if k not in conflicts}

    # -- batches and singles -----------------------------------------------------------------

    def _grade_batch(
        self, question: str, batch: Sequence[_Item]
    ) -> tuple[dict[str, Verdict], Usage]:
        if len(batch) == 1:
            return self._grade_singles(question, batch)
        ids = [i.document.id for i in batch]
        try:
            text, usage = self._call(question, batch)
        except LLMError as exc:
            if isinstance(exc, LLMResponseError) and exc.status in _SPLIT_STATUSES:
                singles, more = self._grade_singles(question, batch)
                return singles, _FAILED + more
            if self.strict:
                raise
            error = f"llm error: {exc}"
            return {i: Verdict.ungraded(i, error) for i in ids}, _FAILED
        try:
            found = self._parse(text, ids)
        except VerdictParseError as exc:
            log.warning("batch_unparseable", documents=len(ids), error=str(exc))
            singles, more = self._grade_singles(question, batch)
            return singles, usage + Usage(failed_calls=1) + more
        missing = [i for i in batch if i.document.id not in found]
        if missing:
            log.info("verdicts_missing", document_ids=[i.document.id for i in missing])
            singles, more = self._grade_singles(question, missing)
            found.update(singles)
            usage += more
        return found, usage

    def _grade_singles(
        self, question: str, items: Sequence[_Item]
    ) -> tuple[dict[str, Verdict], Usage]:
        results = parallel_map(
            lambda item: self._grade_one(question, item), items, max_workers=self.max_workers
        )
        usage = Usage()
        for _, spent in results:
            usage += spent
        return {v.document_id: v for v, _ in results}, usage

    def _grade_one(self, question: str, item: _Item) -> tuple[Verdict, Usage]:
        doc_id = item.document.id
        try:
            text, usage = self._call(question, [item])
        except LLMError as exc:
            if self.strict:
                raise
            return Verdict.ungraded(doc_id, f"llm error: {exc}"), _FAILED
        try:
            found = self._parse(text, [doc_id])
        except VerdictParseError as exc:
            if self.strict:
                raise
            return Verdict.ungraded(doc_id, f"unparseable reply: {exc}", raw=text), usage + Usage(
                failed_calls=1
            )
        if doc_id not in found:
            error = "reply holds no usable verdict for this document"
            if self.strict:
                raise VerdictParseError(f"{doc_id!r}: {error}", raw=text)
            return Verdict.ungraded(doc_id, error, raw=text), usage + Usage(failed_calls=1)
        return found[doc_id], usage
