"""Ctrl-C for the command line: the first cancels what is in flight, a second exits at once.

:func:`handle_interrupts` installs a SIGINT handler for the duration of a command. The first
Ctrl-C sets :attr:`Interrupts.event` (which LLM calls in a call scope and ``run_batch`` watch)
and, unless the command asked to be told only through the event, raises ``KeyboardInterrupt``
in the main thread. A second Ctrl-C ends the process at once with exit code 130, whatever it
was doing: every results line already written is whole (one ``write`` per line, fsync'd).
SIGTERM (``kill``, ``timeout``, a job scheduler) is handled the same way, so a stopped batch
writes its running queries as ``interrupted`` lines instead of vanishing mid-write.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["EXIT_INTERRUPTED", "Interrupts", "handle_interrupts"]

EXIT_INTERRUPTED = 130  # the shell's convention for SIGINT


class Interrupts:
    """What Ctrl-C has done so far in this command."""

    def __init__(self, prog: str) -> None:
        self.event: threading.Event = threading.Event()
        self.raise_first: bool = True  # False: the first Ctrl-C only sets the event
        self._prog = prog

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        """The SIGINT (and SIGTERM) handler."""
        if self.event.is_set():
            sys.stderr.write(f"{self._prog}: interrupted again: exiting now\n")
            sys.stderr.flush()
            os._exit(EXIT_INTERRUPTED)
        self.event.set()
        sys.stderr.write(f"{self._prog}: interrupting (Ctrl-C again to exit at once)\n")
        sys.stderr.flush()
        if self.raise_first:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def by_event_only(self) -> Iterator[threading.Event]:
        """Within the block the first Ctrl-C only sets the event (for loops that poll it)."""
        self.raise_first = False
        try:
            yield self.event
        finally:
            self.raise_first = True


@contextlib.contextmanager
def handle_interrupts(prog: str) -> Iterator[Interrupts]:
    """Install the SIGINT and SIGTERM handler for the block (main thread only; else a no-op)."""
    interrupts = Interrupts(prog)
    if threading.current_thread() is not threading.main_thread():
        yield interrupts
        return
    previous = {sig: signal.signal(sig, interrupts) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield interrupts
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
