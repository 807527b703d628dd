"""CRAG's corrective action and the fallback source (Yan et al. 2024).

:func:`correct` takes the iteration's CRAG action from the local step's verdicts
(:func:`~corrective_rag.evaluate.policy.crag_action`) and, with a ``fallback`` retriever, asks it
when the action is not *correct*: *ambiguous* supplements the local documents with the
fallback's judged ones, *incorrect* replaces them. A fallback that asks to wait, or fails
however, costs the iteration its fallback, never the run (:func:`_ask`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from corrective_rag.errors import Cancelled, SearchError, SearchSkippedError
from corrective_rag.evaluate.policy import crag_action
from corrective_rag.loop.state import Parts, RunState, Step
from corrective_rag.loop.step import judge_source
from corrective_rag.protocols import Retriever
from corrective_rag.types import CragAction, FallbackMode

__all__ = ["Corrected", "correct"]


@dataclass(frozen=True, slots=True)
class Corrected:
    """The iteration's CRAG action, how the fallback was used, and the steps that count."""

    action: CragAction
    fallback: FallbackMode | None  # None: the fallback was not asked
    steps: list[Step]  # the local step, then the fallback's


def correct(
    parts: Parts, st: RunState, local: Step, lanes: Mapping[str, str], index: int
) -> Corrected:
    """CRAG's action on the local step, and the fallback's step when the action asks for one.

    With the fallback's step, *incorrect* drops the local step's kept documents (whatever the
    filter said); a fallback that returned nothing leaves them.
    """
    action = crag_action(local.verdicts, parts.policy)
    if parts.fallback is None or action is CragAction.CORRECT or st.spent():
        return Corrected(action, None, [local])
    extra, mode = _ask(parts, st, parts.fallback, lanes, index)
    if extra is None:
        return Corrected(action, mode, [local])
    if not extra.hits:  # nothing to replace the local results with
        return Corrected(action, FallbackMode.EMPTY, [local, extra])
    if action is CragAction.INCORRECT:
        local.dropped.extend(local.kept)
        local.kept.clear()
        return Corrected(action, FallbackMode.REPLACED, [local, extra])
    return Corrected(action, FallbackMode.SUPPLEMENTED, [local, extra])


def _ask(
    parts: Parts, st: RunState, fallback: Retriever, lanes: Mapping[str, str], index: int
) -> tuple[Step | None, FallbackMode | None]:
    """The fallback's step, or ``None`` and why not (skipped, failed)."""
    try:
        return judge_source(parts, st, fallback, lanes), None
    except Cancelled:
        raise  # Ctrl-C ends the run, as it does during an LLM call
    except SearchSkippedError as exc:
        st.log.info("fallback_skipped", iteration=index, reason=str(exc))
        return None, FallbackMode.SKIPPED
    except Exception as exc:
        # A fallback that failed, however (a web search past its retries, an answer of an
        # unexpected kind), costs this iteration its fallback, not the run: the local results
        # stand, and the record says so.
        error = str(exc) if isinstance(exc, SearchError) else f"{type(exc).__name__}: {exc}"
        st.log.warning("fallback_failed", iteration=index, error=error)
        return None, FallbackMode.FAILED
