"""Order-preserving parallel map on a bounded thread pool (LLM calls are I/O bound)."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from corrective_rag.calls.scope import cancel_current
from corrective_rag.errors import ConfigError

__all__ = ["parallel_map"]

T = TypeVar("T")
R = TypeVar("R")


def parallel_map(fn: Callable[[T], R], items: Iterable[T], *, max_workers: int) -> list[R]:
    """Apply ``fn`` to ``items`` on up to ``max_workers`` threads; results in input order.

    Each call runs in a copy of the caller's context, so a call scope (deadline, cancellation:
    :mod:`corrective_rag.calls.scope`) reaches the worker threads. The first exception raised by
    ``fn`` propagates (after all started calls have finished). A ``KeyboardInterrupt`` while
    waiting cancels the caller's innermost call scope, so that started calls end promptly, and
    drops the calls not yet started.
    """
    work = list(items)
    if max_workers < 1:
        raise ConfigError(f"max_workers must be >= 1, got {max_workers}")
    if len(work) <= 1 or max_workers == 1:
        return [fn(item) for item in work]
    pool = ThreadPoolExecutor(max_workers=min(max_workers, len(work)))
    try:
        futures = [pool.submit(contextvars.copy_context().run, fn, item) for item in work]
        return [f.result() for f in futures]
    except KeyboardInterrupt:
        cancel_current()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
