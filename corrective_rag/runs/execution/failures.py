"""Telling a run whose LLM calls all failed from a run that worked, and what the user must fix.

A run whose every LLM call failed (no server, a wrong key, a wrong URL) still returns a
:class:`~corrective_rag.types.RunResult`, with ungraded verdicts and a failed rewrite: recorded,
never counted as relevant. For the command line and the batch it must not look like success,
so :func:`llm_failure` says when that happened and :func:`permanent_failure` whether a retry can
ever help (HTTP 401, 403, 404, unknown model: no).
"""

from __future__ import annotations

import re

from corrective_rag.types import RunResult

__all__ = ["LLM_ERROR_PREFIXES", "llm_failure", "permanent_failure"]

# How the evaluators, rewriters and the orchestrator word a call that got no usable HTTP answer
# (an unreadable reply is a different thing: the server answered, a rerun would not help).
LLM_ERROR_PREFIXES = ("llm error:", "evaluator failed:", "rewriter failed:")
_STATUS = re.compile(r"\(HTTP (\d{3})\)")


def _call_failed(text: str | None) -> bool:
    return bool(text) and str(text).startswith(LLM_ERROR_PREFIXES)


def llm_failure(result: RunResult) -> str | None:
    """The first failure's message when the run made LLM calls and every one of them failed.

    ``None`` when any call gave an answer (a graded verdict, a rewrite, an unreadable reply) or
    when the run made no LLM call at all (the offline evaluator and rewriter).
    """
    failed: list[str] = []
    for record in result.history:
        for verdict in record.verdicts:
            if verdict.graded or not _call_failed(verdict.error):
                return None
            failed.append(str(verdict.error))
        rewrite = record.rewrite
        if rewrite is not None:
            if rewrite.query is not None or not _call_failed(rewrite.rejected):
                return None
            failed.append(str(rewrite.rejected))
    return failed[0] if failed else None


def permanent_failure(message: str) -> tuple[int, str] | None:
    """``(status, what to fix)`` when ``message`` records an HTTP failure no retry can fix."""
    from corrective_rag.llm.failures import permanent_hint

    match = _STATUS.search(message)
    if match is None:
        return None
    status = int(match.group(1))
    hint = permanent_hint(status, message)
    return None if hint is None else (status, hint)
