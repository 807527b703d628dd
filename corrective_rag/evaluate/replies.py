"""A grading reply read into verdicts: for the ids sent only, conflicts left out, cut replies kept.

What :class:`~corrective_rag.evaluate.llm.LLMEvaluator` does with one reply to a grading call:
the verdict objects it holds (each read by
:func:`~corrective_rag.evaluate.normalise.normalise_verdict`), accepted only for an id that was
sent, an id answered twice differently left out (one of the two may be forged by a document),
the complete verdicts of a reply cut at its token limit kept (lenient mode); the proposed next
query; and the token probabilities of each verdict's ``relevant`` value, recorded or deciding.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from corrective_rag.errors import VerdictParseError
from corrective_rag.evaluate.logprobs import value_probabilities
from corrective_rag.evaluate.normalise import normalise_verdict
from corrective_rag.evaluate.scoring import recorded, with_probability
from corrective_rag.llm import prompts
from corrective_rag.llm.jsonparse import complete_items, parse_json_object
from corrective_rag.observe.logs import get_logger
from corrective_rag.types import ChatReply, Proposal, Verdict

__all__ = ["read_proposal", "read_verdicts", "with_probabilities"]

log: Any = get_logger(__name__)


def read_verdicts(
    text: str, ids: Sequence[str], *, strict: bool
) -> tuple[dict[str, Verdict], set[str]]:
    """Verdicts for the sent ``ids`` found in ``text``, and the ids answered in conflict.

    Unknown ids are dropped; an id answered twice differently is left out and returned
    among the conflicts. Lenient (not ``strict``): a reply cut short still yields its complete
    verdicts.

    Raises:
        VerdictParseError: the reply holds no verdict list (or, ``strict``, is no strict JSON).
    """
    items = _items(text, len(ids), strict=strict)
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


def _items(text: str, sent: int, *, strict: bool) -> list[Any]:
    """The reply's verdict objects; in lenient mode, the complete ones of a cut reply."""
    failure: VerdictParseError | None = None
    try:
        obj: dict[str, Any] | None = parse_json_object(text, strict=strict)
    except VerdictParseError as exc:
        if strict:
            raise
        obj, failure = None, exc
    items: Any = None if obj is None else obj.get("verdicts")
    if items is None and not strict:
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


def read_proposal(text: str, verdicts: Iterable[Verdict]) -> Proposal | None:
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
    said = " ".join(lacking.split())[: prompts.REASONING_CHARS] if isinstance(lacking, str) else ""
    return Proposal(" ".join(query.split()), "; ".join(dict.fromkeys(missing)) or said)


def with_probabilities(
    found: dict[str, Verdict], reply: ChatReply, *, score_by: str, threshold: float
) -> dict[str, Verdict]:
    """``found`` with the reply's token probabilities: recorded, or deciding (``score_by``).

    A verdict whose probability cannot be read soundly keeps its written fields; a reply with
    no token probabilities leaves ``found`` as it is.
    """
    if not reply.logprobs:
        return found
    probabilities = value_probabilities(reply.text, reply.logprobs)
    by_probability = score_by == "probability"
    out: dict[str, Verdict] = {}
    for doc_id, verdict in found.items():
        p = probabilities.get(doc_id)
        if p is None:
            out[doc_id] = verdict
        elif by_probability:
            out[doc_id] = with_probability(verdict, p, threshold)
        else:
            out[doc_id] = recorded(verdict, p)
    return out
