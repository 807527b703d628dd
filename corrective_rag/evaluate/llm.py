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
from corrective_rag.evaluate.logprobs import takes_logprobs, value_probabilities
from corrective_rag.evaluate.normalise import normalise_verdict
from corrective_rag.evaluate.scoring import (
    SCORE_BY,
    asked_logprobs,
    check_threshold,
    recorded,
    with_probability,
)
from corrective_rag.inputs import check_int, check_query
from corrective_rag.llm import prompts
from corrective_rag.llm.jsonparse import complete_items, parse_json_object
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

# The reply's reserve follows the schema's caps on free text (a token per 3 characters at most,
# for English): a verdict is ~40 tokens of keys, id and numbers plus reasoning and missing; a
# proposal adds next_query. A reply cut at the reserve keeps its complete verdicts.
_REPLY_TOKENS_BASE = 60
_REPLY_TOKENS_PER_DOC = 40 + 2 * -(-prompts.REASONING_CHARS // 3)
_REPLY_TOKENS_PROPOSAL = 20 + -(-prompts.QUERY_CHARS // 3)
_QUESTION_TOKENS = 256  # a question up to this long leaves documents_per_call true
_BLOCK_TOKENS = 12  # the <document id=...> tag around a document, beside its id
_SPLIT_STATUSES = (400, 413)  # a batch too long for the context: singles may still fit
_FAILED = Usage(llm_calls=1, failed_calls=1)
_SIZES_KEPT = 4096  # documents whose cut text and token count an evaluator keeps


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
        self._system_tokens: dict[bool, int] = {}
        self._sizes: dict[tuple[str, str, int], tuple[str, int]] = {}
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

    # -- batch sizing ------------------------------------------------------------------------

    def _fixed_tokens(self, question_tokens: int, *, propose: bool, exact: bool = True) -> int:
        """Tokens of a call that do not depend on its documents: prompts and reply reserve.

        Not ``exact``: the system prompt is estimated from its length (at most a token per three
        characters of English), so that sizing a batch in advance does not load tiktoken.
        """
        system = prompts.grader_messages("", [], propose=propose)[0]["content"]
        if not exact:
            system_tokens = len(system) // 3
        else:
            if propose not in self._system_tokens:
                self._system_tokens[propose] = self.counter.count(system)
            system_tokens = self._system_tokens[propose]
        reply = _REPLY_TOKENS_BASE + (_REPLY_TOKENS_PROPOSAL if propose else 0)
        return system_tokens + 16 + question_tokens + reply  # 16: roles, "Question:", ...

    @property
    def documents_per_call(self) -> int:
        """Documents judged per call while that many are left (the Evaluator protocol).

        Those of ``max_doc_tokens`` that fit ``context_tokens`` beside a question of up to 256
        tokens and a proposal (unless ``propose=False``), capped by ``batch_size``.
        """
        propose = self.propose is not False
        room = self.context_tokens - self._fixed_tokens(
            _QUESTION_TOKENS, propose=propose, exact=False
        )
        fit = room // (self.max_doc_tokens + _BLOCK_TOKENS + _REPLY_TOKENS_PER_DOC)
        return fit if self.batch_size is None else min(fit, self.batch_size)

    def _batches(
        self, question: str, items: Sequence[_Item], *, propose: bool
    ) -> list[list[_Item]]:
        """Pack ``items`` in order into batches whose calls fit the context budget."""
        fixed = self._fixed_tokens(self.counter.count(question), propose=propose)
        room = self.context_tokens - fixed
        cap = self.batch_size or len(items)
        batches: list[list[_Item]] = []
        used = room  # forces a first batch
        for item in items:
            need = item.tokens + _REPLY_TOKENS_PER_DOC
            if not batches or len(batches[-1]) >= cap or used + need > room:
                batches.append([])
                used = 0
            batches[-1].append(item)
            used += need
        return batches

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
                text, tokens = self._sized(doc)
                pending.append(_Item(doc, text, key, tokens))
        # A document shaped like an injection is graded in a call of its own: a model that obeys
        # it can then misjudge that document only, never the others of its batch. It is screened
        # as a reader sees it (soft hyphens, zero-width and fullwidth forms undone).
        alone = [[item] for item in pending if _flagged(item)]
        if alone:
            log.warning("documents_graded_alone", document_ids=[b[0].document.id for b in alone])
        shared = [item for item in pending if not _flagged(item)]
        batches = self._batches(question, shared, propose=propose) + alone
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

    def _sized(self, doc: Document) -> tuple[str, int]:
        """``doc``'s text cut to ``max_doc_tokens`` and its block's tokens, once per text.

        The loop sends a question's documents again (a verdict cache of 0, a batch of questions
        over one corpus): tiktoken runs once per distinct (id, text, cap).
        """
        key = (doc.id, doc.text, self.max_doc_tokens)
        sized = self._sizes.get(key)
        if sized is None:
            text = self.counter.truncate(doc.text, self.max_doc_tokens)
            tokens = self.counter.count(text) + self.counter.count(doc.id) + _BLOCK_TOKENS
            if len(self._sizes) >= _SIZES_KEPT:
                self._sizes.clear()
            sized = self._sizes[key] = (text, tokens)
        return sized

    # -- one call ----------------------------------------------------------------------------

    def _call(self, question: str, items: Sequence[_Item], *, propose: bool) -> ChatReply:
        reply = self.chat.complete(
            prompts.grader_messages(
                question, [(i.document.id, i.text) for i in items], propose=propose
            ),
            json_schema=prompts.verdict_schema(propose=propose),
            max_tokens=_reply_tokens(len(items), propose=propose),
            **({} if self.logprobs is None else {"logprobs": self.logprobs}),
        )
        charge(reply.usage)  # what a strict failure later in this evaluate call must still count
        return reply

    def _proposal(self, text: str, verdicts: Iterable[Verdict]) -> Proposal | None:
        """The reply's ``next_query``, or ``None`` when it has no usable one.

        What it is for (``Proposal.lacking``) is what the relevant verdicts say is missing, or
        a ``lacking`` the model wrote on its own.
        """
        try:
            obj = parse_json_object(text, strict=False)
        except VerdictParseError:
            return None
        query, lacking = obj.get("next_query"), obj.get("lacking")
        if not isinstance(query, str) or not query.strip():
            return None
        missing = [m for v in verdicts if v.relevant for m in v.missing]
        said = (
            " ".join(lacking.split())[: prompts.REASONING_CHARS] if isinstance(lacking, str) else ""
        )
        return Proposal(" ".join(query.split()), "; ".join(dict.fromkeys(missing)) or said)

    def _probable(self, found: dict[str, Verdict], reply: ChatReply) -> dict[str, Verdict]:
        """``found`` with the reply's token probabilities: recorded, or deciding (``score_by``).

        A verdict whose probability cannot be read soundly keeps its written fields.
        """
        if self.logprobs is None or not reply.logprobs:
            return found
        probabilities = value_probabilities(reply.text, reply.logprobs)
        by_probability = self.score_by == "probability"
        out: dict[str, Verdict] = {}
        for doc_id, verdict in found.items():
            p = probabilities.get(doc_id)
            if p is None:
                out[doc_id] = verdict
            elif by_probability:
                out[doc_id] = with_probability(verdict, p, self.threshold)
            else:
                out[doc_id] = recorded(verdict, p)
        return out

    def _parse(self, text: str, ids: Sequence[str]) -> tuple[dict[str, Verdict], set[str]]:
        """Verdicts for the sent ``ids`` found in ``text``, and the ids answered in conflict.

        Unknown ids are dropped; an id answered twice differently is left out and returned
        among the conflicts. Lenient: a reply cut short still yields its complete verdicts.
        """
        items = self._items(text, len(ids))
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
        return {k: v for k, v in found.items() if k not in conflicts}, conflicts

    def _items(self, text: str, sent: int) -> list[Any]:
        """The reply's verdict objects; in lenient mode, the complete ones of a cut reply."""
        failure: VerdictParseError | None = None
        try:
            obj: dict[str, Any] | None = parse_json_object(text, strict=self.strict)
        except VerdictParseError as exc:
            if self.strict:
                raise
            obj, failure = None, exc
        items: Any = None if obj is None else obj.get("verdicts")
        if items is None and not self.strict:
            # A reply cut at its token limit is no JSON (and its lenient parse may find one
            # inner verdict object instead): keep the verdicts it finished.
            items = complete_items(text, "verdicts") or None
            if items:
                log.info("verdicts_salvaged", kept=len(items), sent=sent)
        bare = obj is not None and any(k in obj for k in ("relevant", "score", "label"))
        if items is None and bare and sent == 1:
            items = [obj]  # a single bare verdict object
        if items is None and failure is not None:
            raise failure
        if not isinstance(items, list):
            raise VerdictParseError("reply has no 'verdicts' list", raw=text)
        return items

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
            found, conflicts = self._parse(reply.text, ids)
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
        proposal = self._proposal(reply.text, found.values()) if propose else None
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
            found, _ = self._parse(text, ids)
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


def _reply_tokens(documents: int, *, propose: bool) -> int:
    """Tokens reserved for a grading reply: follows the prompt's caps on its free text."""
    return (
        _REPLY_TOKENS_BASE
        + _REPLY_TOKENS_PER_DOC * documents
        + (_REPLY_TOKENS_PROPOSAL if propose else 0)
    )
