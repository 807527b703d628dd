"""One query of a batch run into its results line, whatever happens inside it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from corrective_rag.errors import Cancelled, LLMError
from corrective_rag.observe.logs import get_logger
from corrective_rag.runs.execution.failures import llm_failure
from corrective_rag.runs.execution.queries import Query
from corrective_rag.runs.records.results import error_line, ok_line
from corrective_rag.types import RunResult

__all__ = [
    "INTERRUPTED",
    "Finished",
    "RunOne",
    "Runners",
    "attempt",
    "interrupted_line",
]

log: Any = get_logger(__name__)

RunOne: TypeAlias = Callable[[str], RunResult]

INTERRUPTED = "interrupted"  # error type of a query cut short by Ctrl-C; resume runs it again


class Runners:
    """Hands each worker thread its own callable, built once per thread by the factory."""

    def __init__(self, run_one: RunOne | None, factory: Callable[[], RunOne] | None) -> None:
        self._shared = run_one
        self._factory = factory
        self._local = threading.local()

    def get(self) -> RunOne:
        """This thread's runner: the shared one, or the factory's, built on first use."""
        if self._shared is not None:
            return self._shared
        runner: RunOne | None = getattr(self._local, "runner", None)
        if runner is None:
            assert self._factory is not None  # checked in run_batch
            runner = self._factory()
            self._local.runner = runner
        return runner


@dataclass(frozen=True, slots=True)
class Finished:
    """A query's results line, with its result while this process still holds it.

    The batch's summary is made from the results themselves rather than from the file read
    back at the end: decoding a line costs about as much as the query's own bookkeeping.
    """

    line: dict[str, Any]
    result: RunResult | None = None


def attempt(runners: Runners, q: Query) -> Finished:
    """Run one query: its ok line with its result, or its error line.

    An error line when it raised or every LLM call failed.
    """
    start = time.perf_counter()
    try:
        result = runners.get()(q.query)
        if not isinstance(result, RunResult):
            raise TypeError(f"run_one returned {type(result).__name__}, not RunResult")
        failure = llm_failure(result)
        if failure is not None:  # not a success: an error line, so that resume runs it again
            raise LLMError(f"every LLM call of this query failed: {failure}")
        return Finished(ok_line(q.id, q.query, result, time.perf_counter() - start), result)
    except Exception as exc:  # one query's failure must not stop the batch
        if not isinstance(exc, Cancelled):
            log.warning("batch_query_failed", id=q.id, error=type(exc).__name__, message=str(exc))
        return Finished(error_line(q.id, q.query, exc, time.perf_counter() - start))


def interrupted_line(q: Query, seconds: float) -> dict[str, Any]:
    """The error line of a query that was running when the batch was stopped (rerun on resume)."""
    line = error_line(q.id, q.query, Cancelled("interrupted before it finished"), seconds)
    line["error"]["type"] = INTERRUPTED
    return line
