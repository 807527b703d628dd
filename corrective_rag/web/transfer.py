"""One bounded HTTP transfer: the whole exchange, body included, ends by a deadline.

Socket timeouts restart with every byte, so a server sending one byte every few seconds never
trips them. :func:`bounded` runs the exchange in a worker thread and waits for it, at most until
``end`` (or until the enclosing call scope's deadline, ``Budget.max_seconds``); when the wait is
cut short, by the deadline or by the scope's cancellation (Ctrl-C), the response's socket is shut
down so the worker's blocked read ends too.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from corrective_rag.calls import scope
from corrective_rag.calls.abandon import Abandonable
from corrective_rag.errors import Cancelled, SearchError

__all__ = ["Transfer", "TransferTimeout", "bounded", "end_of"]

T = TypeVar("T")
_POLL = 0.05  # seconds between checks of cancellation while a transfer runs


class TransferTimeout(SearchError):
    """The transfer did not end by its deadline."""


def end_of(seconds: float) -> tuple[float, bool]:
    """``time.monotonic()`` in ``seconds``, or the call scope's deadline if sooner.

    Returns:
        The end, and whether it is the scope's (the run's ``Budget.max_seconds``).
    """
    own = time.monotonic() + seconds
    run = scope.deadline()
    if run is not None and run < own:
        return run, True
    return own, False


class Transfer(Abandonable, Generic[T]):
    """A transfer in a worker thread; the work registers its open response with :meth:`attach`."""

    def __init__(self) -> None:
        super().__init__()
        self.done: threading.Event = threading.Event()
        self.value: T | None = None
        self.error: BaseException | None = None


def bounded(work: Callable[[Transfer[T]], T], end: float, what: str) -> T:
    """``work(transfer)`` run in a worker thread, given up at ``end`` (``time.monotonic()``).

    Raises:
        TransferTimeout: ``end`` passed first (the worker is abandoned, its socket shut).
        Cancelled: the enclosing call scope was cancelled.
        BaseException: whatever ``work`` raised.
    """
    transfer: Transfer[T] = Transfer()
    context = contextvars.copy_context()  # the scope travels into the worker

    def run() -> None:
        try:
            transfer.value = context.run(work, transfer)
        except BaseException as exc:  # handed to the waiting thread, which decides
            transfer.error = exc
        finally:
            transfer.done.set()

    scope.raise_if_cancelled()
    worker = threading.Thread(target=run, name="crag-web-transfer", daemon=True)
    worker.start()  # daemon: an abandoned transfer never keeps the process alive
    while not transfer.done.wait(max(0.0, min(_POLL, end - time.monotonic()))):
        if scope.cancelled():
            transfer.abandon()
            raise Cancelled(f"{what}: cancelled")
        if time.monotonic() >= end:
            transfer.abandon()
            raise TransferTimeout(f"{what}: no complete answer before the deadline")
    if transfer.error is not None:
        raise transfer.error
    return transfer.value  # type: ignore[return-value]
