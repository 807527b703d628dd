"""``LLMEvaluator``: grades documents against the question with a chat model, in parallel batches.

Per ``evaluate`` call: cached verdicts are reused; the other documents are truncated to
``max_doc_tokens`` and packed, in order, into as few calls as the model's context budget allows
(the prompt counted with tiktoken, plus the reply's reserve; ``batch_size`` can cap the documents
per call), batches in parallel: one iteration's documents usually make one call. With
``propose`` the grading call also returns what the documents still lack and a proposed next
query (:class:`~corrective_rag.types.Proposal`), which the loop checks instead of making a
rewriting call. A verdict is accepted
only for an id that was sent in that call (others are ignored and logged); an id answered twice
with different verdicts is treated as unanswered, since one of the two may be forged by a
document. A document that looks like an injection (delimiter tags, verdict-shaped JSON, "ignore
previous instructions") is graded in a call of its own. A reply cut at its token limit keeps the
verdicts it finished; ids a reply left out are asked again once, together, in one call for exactly
them; ids answered in conflict and every document of an unreadable batch are asked again one per
call.
What still fails becomes ``Verdict.ungraded`` (lenient) or raises (strict); it is never counted as
relevant or irrelevant.

How many documents a call holds is :mod:`corrective_rag.evaluate.sizing`; how one reply is read
into verdicts, :mod:`corrective_rag.evaluate.replies`; here, the calls made and asked again.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from corrective_rag.calls.proposals import proposals_wanted
from corrective_rag.errors import (
    ConfigError,
    InputError,
    LLMError,
    LLMResponseError,
    VerdictParseError,
)
from corrective_rag.evaluate.cache import CacheKey, VerdictCache, cache_key
from corrective_rag.evaluate.logprobs import takes_logprobs
from corrective_rag.evaluate.replies import read_proposal, read_verdicts, with_probabilities
from corrective_rag.evaluate.scoring import (
    SCORE_BY,
    asked_logprobs,
    check_threshold,
)
from corrective_rag.evaluate.sizing import CallSizes, documents_fitting, reply_tokens
from corrective_rag.inputs import check_int, check_query
from corrective_rag.llm import prompts
from corrective_rag.llm.parallel import parallel_map
from corrective_rag.llm.spent import attach_spent, charge, metering
from corrective_rag.models.tokens import TiktokenCounter
from corrective_rag.observe.logs import get_logger
from corrective_rag.protocols import ChatModel
from corrective_rag.text.screening import screen_form
from corrective_rag.types import ChatReply, Document, Evaluation, Proposal, Usage, Verdict

if TYPE_CHECKING:
    from corrective_rag.evaluate.check.plain import JudgeCheck

# LLMEvaluator: its home is corrective_rag
__all__: list[str] = []

log: Any = get_logger(__name__)

_SPLIT_STATUSES = (400, 413)  # a batch too long for the context: singles may still fit
_FAILED = Usage(llm_calls=1, failed_calls=1)


@dataclass(frozen=True, slots=True)
class _Item:
    document: Document
    text: str  # truncated
    key: CacheKey
    tokens: int  # of the text's document block in the prompt


def _flagged(item: _Item) -> bool:
    """The injection screen, on the text as a reader sees it (see text/screening.py)."""
    return _screened(item.text)


@lru_cache(maxsize=4096)
def _screened(text: str) -> bool:
    """The screen of one text, kept: the loop sends the same documents again (pure in ``text``)."""
    return prompts.looks_injected(screen_form(text))


class LLMEvaluator:
    """An :class:`~corrective_rag.protocols.Evaluator` backed by a chat model.

    Args:
        chat: the chat model (e.g. :class:`~corrective_rag.llm.client.OpenAIChatClient`).
        batch_size: at most this many documents per call (1 grades one per call); ``None``: as
            many as fit ``context_tokens``.
        max_doc_tokens: each document is cut to this many tokens before it enters a prompt.
        context_tokens: the model's context budget: a call's prompt (counted with
            ``token_counter``) plus the tokens reserved for its reply stay within it.
        propose: judge and propose: the grading call also returns what the documents lack and a
            next query (``Evaluation.proposal``), which the loop can check instead of making a
            rewriting call. ``None`` (the default): when the calling context asks for it
            (:func:`~corrective_rag.calls.proposals.proposals_wanted`: the loop's one-call mode
            does, through any wrapper), not when called directly. ``True`` / ``False`` is kept
            in either mode.
        strict: strict JSON, and failures raise instead of becoming ungraded verdicts.
        max_workers: batches graded at the same time.
        cache: verdict cache; None makes a private one (pass ``VerdictCache(0)`` to disable).
        token_counter: counts and truncates document tokens (default cl100k_base).
        model_name: model part of the cache key (default ``chat.model`` or the class name).
        logprobs: ask the server for the reply's token probabilities, as OpenAI's API does: a
            bool says whether to ask (``True``: with 5 alternatives per token), an int 0..20 is
            the number of alternatives (``top_logprobs``; 0 asks for the tokens alone, which
            reads no probability); ``None`` or ``False``: never asked. Asked in the grading
            call itself (no extra call). The probability the model put on each verdict's
            ``relevant`` value being ``true`` (:mod:`~corrective_rag.evaluate.logprobs`) is
            recorded as ``Verdict.probability``; whether it decides is ``score_by``'s.
        score_by: ``"verbal"`` (the default): the verdicts are the ones the model wrote, the
            probability only recorded beside them. ``"probability"``: each verdict whose
            probability can be read is decided by it at ``threshold``
            (:mod:`~corrective_rag.evaluate.scoring`: relevant from P = ``threshold``,
            confidence the chance it is right, ``Verdict.score_source="logprob"``); the others
            keep their written fields. Measure which is better for your model with
            ``corrective-rag judge-check --compare`` and run what it chose
            (:class:`~corrective_rag.evaluate.profile.JudgeProfile`).
        threshold: P(true) from which a probability verdict is relevant (``judge-check`` fits
            it; 0.5 by default). Read only with ``score_by="probability"``.
    """

    def __init__(
        self,
        chat: ChatModel,
        *,
        batch_size: int | None = None,
        max_doc_tokens: int = 400,
        context_tokens: int = 8192,
        propose: bool | None = None,
        strict: bool = False,
        max_workers: int = 4,
        cache: VerdictCache | None = None,
        token_counter: TiktokenCounter | None = None,
        model_name: str | None = None,
        logprobs: bool | int | None = True,
        score_by: str = "verbal",
        threshold: float = 0.5,
    ) -> None:
        if not callable(getattr(chat, "complete", None)):
            raise ConfigError("chat must have a complete(messages, ...) method")
        for name, value in (
            ("batch_size", 1 if batch_size is None else batch_size),
            ("max_doc_tokens", max_doc_tokens),
            ("context_tokens", context_tokens),
            ("max_workers", max_workers),
        ):
            check_int(value, name, minimum=1)
        self.chat: ChatModel = chat
        self.batch_size: int | None = batch_size
        self.max_doc_tokens: int = max_doc_tokens
        self.context_tokens: int = context_tokens
        self.propose: bool | None = propose if propose is None else bool(propose)
        self.strict: bool = bool(strict)
        self.max_workers: int = max_workers
        self.cache: VerdictCache = cache if cache is not None else VerdictCache()
        self.counter: TiktokenCounter = token_counter or TiktokenCounter()
        self.model_name: str = model_name or str(getattr(chat, "model", "") or type(chat).__name__)
        top = asked_logprobs(logprobs)
        if score_by not in SCORE_BY:
            raise ConfigError(f"score_by must be one of {', '.join(SCORE_BY)}, got {score_by!r}")
        if score_by == "probability" and top is None:
            raise ConfigError("score_by='probability' needs logprobs (True or 1..20)")
        check_threshold(threshold)
        # A chat model written before `logprobs` joined ChatModel.complete is called without.
        self.logprobs: int | None = top if top is not None and takes_logprobs(chat) else None
        self.score_by: str = score_by
        self.threshold: float = float(threshold)
        # a probability verdict is another verdict, and a verbal one with its probability
        # recorded differs from one without: cached apart (beside the call shape)
        self._scored = (
            ""
            if self.logprobs is None
            else "+p"
            if score_by == "verbal"
            else f"+logprob@{self.threshold:.6f}"
        )
        self._sizing = CallSizes()
        if self.documents_per_call < 1:
            raise ConfigError(
                f"max_doc_tokens={max_doc_tokens} leaves no room for one document in "
                f"context_tokens={context_tokens}"
            )

    def _proposes(self) -> bool:
        """Whether this evaluate call proposes: ``propose`` as given, else as the context asks."""
        return self.propose if self.propose is not None else proposals_wanted()

    def check(self, *, min_agreement: float = 0.7, max_seconds: float | None = 300.0) -> JudgeCheck:
        """Grade pairs with known answers: can this model judge? (:func:`.check_judge`).

        Graded as the loop grades (the default one-call loop's call, with proposals, unless
        ``propose=False``), afresh (this evaluator's cache is neither read nor filled), within
        ``max_seconds`` in all (``check.plain.CHECK_SECONDS``; ``None``: only the calls' own
        timeouts); counted as the ``general`` policy keeps.
        """
        from corrective_rag.evaluate.check.plain import check_judge

        fresh = copy.copy(self)
        fresh.cache = VerdictCache(0)
        if fresh.propose is None:  # the loop's default call mode proposes
            fresh.propose = True
        return check_judge(fresh, min_agreement=min_agreement, max_seconds=max_seconds)

    @property
    def documents_per_call(self) -> int:
        """Documents judged per call while that many are left (the Evaluator protocol).

        Those of ``max_doc_tokens`` that fit ``context_tokens`` beside a question of up to 256
        tokens and a proposal (unless ``propose=False``), capped by ``batch_size``.
        """
        return documents_fitting(
            self.context_tokens,
            self.max_doc_tokens,
            self.batch_size,
            propose=self.propose is not False,
        )

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
        # the call shape (proposing or not, and its schema) is in the key: a verdict graded in
        # one call mode is never served to the other
        propose = self._proposes()
        shape = prompts.verdict_shape(propose=propose)
        for doc in docs:
            key = cache_key(question, doc.text, self.model_name, shape + self._scored)
            cached = self.cache.get(key, doc.id)
            if cached is not None:
                verdicts[doc.id] = cached
            else:
                text, tokens = self._sizing.sized(self.counter, doc, self.max_doc_tokens)
                pending.append(_Item(doc, text, key, tokens))
        # A document shaped like an injection is graded in a call of its own: a model that obeys
        # it can then misjudge that document only, never the others of its batch. It is screened
        # as a reader sees it (soft hyphens, zero-width and fullwidth forms undone).
        alone = [[item] for item in pending if _flagged(item)]
        if alone:
            log.warning("documents_graded_alone", document_ids=[b[0].document.id for b in alone])
        shared = [item for item in pending if not _flagged(item)]
        batches = self._sizing.batches(
            self.counter,
            question,
            shared,
            lambda item: item.tokens,
            context_tokens=self.context_tokens,
            batch_size=self.batch_size,
            propose=propose,
        )
        batches += alone
        usage = Usage()
        with metering() as meter:
            try:
                results = parallel_map(
                    lambda batch: self._grade_batch(question, batch, propose=propose),
                    batches,
                    max_workers=self.max_workers,
                )
            except (LLMError, VerdictParseError) as exc:  # strict: the caller charges the spend
                attach_spent(exc, meter.total)
                raise
        # The best-ranked batch's proposal: its documents came first in the retriever's order.
        # None when any document of this call was flagged: the model read it (alone, but in the
        # same run), and a next query is the one thing an injection wants to steer.
        proposal = None if alone else next((p for _, _, p in results if p is not None), None)
        for graded, spent, _ in results:
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
            proposal=proposal.query if proposal else None,
        )
        return Evaluation(ordered, usage, proposal)

    # -- one call ----------------------------------------------------------------------------

    def _call(self, question: str, items: Sequence[_Item], *, propose: bool) -> ChatReply:
        reply = self.chat.complete(
            prompts.grader_messages(
                question, [(i.document.id, i.text) for i in items], propose=propose
            ),
            json_schema=prompts.verdict_schema(propose=propose),
            max_tokens=reply_tokens(len(items), propose=propose),
            **({} if self.logprobs is None else {"logprobs": self.logprobs}),
        )
        charge(reply.usage)  # what a strict failure later in this evaluate call must still count
        return reply

    def _probable(self, found: dict[str, Verdict], reply: ChatReply) -> dict[str, Verdict]:
        """``found`` with the reply's token probabilities, when this evaluator asks for them."""
        if self.logprobs is None:
            return found
        return with_probabilities(found, reply, score_by=self.score_by, threshold=self.threshold)

    # -- batches and singles -----------------------------------------------------------------

    def _grade_batch(
        self, question: str, batch: Sequence[_Item], *, propose: bool
    ) -> tuple[dict[str, Verdict], Usage, Proposal | None]:
        """Grade one batch; what its reply leaves out is asked again once, then ungraded.

        Ids missing from a reply that answered others (left out, or cut off by the token limit)
        are asked again together, in one call for exactly them; ids answered in conflict, and
        every id of a reply with no usable verdict, are asked again one per call (the same batch
        would get the same reply). A batch of a document graded alone (injection-shaped) never
        proposes: its text could steer the proposal.
        """
        shape = propose
        propose = propose and not _flagged(batch[0])
        if len(batch) == 1 and not propose:
            return (*self._grade_singles(question, batch, shape=shape), None)
        ids = [i.document.id for i in batch]
        try:
            reply = self._call(question, batch, propose=propose)
        except LLMError as exc:
            if isinstance(exc, LLMResponseError) and exc.status in _SPLIT_STATUSES:
                singles, more = self._grade_singles(question, batch, shape=shape)
                return singles, _FAILED + more, None
            if self.strict:
                raise
            error = f"llm error: {exc}"
            return {i: Verdict.ungraded(i, error) for i in ids}, _FAILED, None
        usage = reply.usage
        try:
            found, conflicts = read_verdicts(reply.text, ids, strict=self.strict)
            found = self._probable(found, reply)
        except VerdictParseError as exc:
            log.warning("batch_unparseable", documents=len(ids), error=str(exc))
            found, conflicts = {}, set()
            usage += Usage(failed_calls=1)
        missing = [i for i in batch if i.document.id not in found]
        if missing:
            log.info(
                "verdicts_missing",
                document_ids=[i.document.id for i in missing],
                cut=reply.finish_reason == "length",
            )
            rest = [i for i in missing if i.document.id not in conflicts]
            groups = [[i] for i in missing if i.document.id in conflicts]
            groups += [rest] if found and rest else [[i] for i in rest]
            for graded, more in parallel_map(
                lambda group: self._grade_group(question, group, shape=shape),
                groups,
                max_workers=self.max_workers,
            ):
                found.update(graded)
                usage += more
        proposal = read_proposal(reply.text, found.values()) if propose else None
        return found, usage, proposal

    def _grade_singles(
        self, question: str, items: Sequence[_Item], *, shape: bool
    ) -> tuple[dict[str, Verdict], Usage]:
        results = parallel_map(
            lambda item: self._grade_group(question, [item], shape=shape),
            items,
            max_workers=self.max_workers,
        )
        usage = Usage()
        found: dict[str, Verdict] = {}
        for graded, spent in results:
            usage += spent
            found.update(graded)
        return found, usage

    def _grade_group(
        self, question: str, items: Sequence[_Item], *, shape: bool
    ) -> tuple[dict[str, Verdict], Usage]:
        """One call for exactly ``items``; what its reply lacks becomes ungraded.

        A proposing evaluator asks in the proposing shape (its proposal is not read), so that the
        call starts with the same instructions and question as the question's other calls and a
        server's prefix cache reuses them; a document graded alone for its injection shape is
        asked without a proposal.
        """
        ids = [i.document.id for i in items]
        shape = shape and not any(_flagged(i) for i in items)
        try:
            reply = self._call(question, items, propose=shape)
        except LLMError as exc:
            if self.strict:
                raise
            return {i: Verdict.ungraded(i, f"llm error: {exc}") for i in ids}, _FAILED
        text, usage = reply.text, reply.usage
        try:
            found, _ = read_verdicts(text, ids, strict=self.strict)
            found = self._probable(found, reply)
        except VerdictParseError as exc:
            if self.strict:
                raise
            error = f"unparseable reply: {exc}"
            ungraded = {i: Verdict.ungraded(i, error, raw=text) for i in ids}
            return ungraded, usage + Usage(failed_calls=1)
        left = [i for i in ids if i not in found]
        if left:
            error = "reply holds no usable verdict for this document"
            if self.strict:
                raise VerdictParseError(f"{left[0]!r}: {error}", raw=text)
            found.update({i: Verdict.ungraded(i, error, raw=text) for i in left})
            if len(left) == len(ids):
                usage += Usage(failed_calls=1)
        return found, usage
