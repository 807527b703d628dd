"""The package's loggers: structlog events carried by the standard :mod:`logging` module.

A library that users trust is silent until the application asks (the stdlib ``NullHandler``
convention that requests and httpx follow). Every logger here wraps ``logging.getLogger(name)``
with structlog, so:

- a script that configures nothing prints nothing: the ``corrective_rag`` logger has a
  :class:`logging.NullHandler`, which keeps Python's last-resort handler from printing warnings;
- an application that configures :mod:`logging` (``logging.basicConfig(level=logging.INFO)``)
  gets the events, rendered by structlog's processors, through its own handlers;
- an application that configures structlog (processors, wrapper class, filtering level) gets the
  same structured events, with the same fields, as its own loggers do; only the logger at the end
  of the chain is fixed to the stdlib one, so its handlers decide where the lines go.

The library never calls :func:`structlog.configure`: that belongs to the application (the CLI
does it in ``corrective_rag.cli.main``).
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

ROOT = "corrective_rag"

logging.getLogger(ROOT).addHandler(logging.NullHandler())


def get_logger(name: str) -> Any:
    """A structlog logger for module ``name`` that writes through ``logging.getLogger(name)``.

    The processors and the wrapper class are read from structlog's configuration when the logger
    is first used (and on every ``bind``), so :func:`structlog.testing.capture_logs` and an
    application's later ``structlog.configure`` both apply.
    """
    return _Logger(logging.getLogger(name))


class _Logger:
    """structlog's lazy logger over a stdlib one, that skips what would be dropped unseen.

    Until the application configures structlog, an event runs structlog's default processors
    (a local timestamp, the console renderer: about 0.1 ms) and is then dropped by the stdlib
    logger when its level is not enabled, which is the case for every debug and info event of
    a script that configures nothing. Such an event is skipped before the processors: what
    reaches a handler is the same. Once structlog is configured (``capture_logs`` included),
    every event takes structlog's way, whose processors may keep what logging would drop.
    """

    __slots__ = ("_proxy", "_stdlib")

    def __init__(self, stdlib: logging.Logger) -> None:
        self._stdlib = stdlib
        self._proxy = structlog.wrap_logger(stdlib)

    def _unseen(self, level: int) -> bool:
        return not structlog.is_configured() and not self._stdlib.isEnabledFor(level)

    def debug(self, event: str, **kw: Any) -> Any:
        return None if self._unseen(logging.DEBUG) else self._proxy.debug(event, **kw)

    def info(self, event: str, **kw: Any) -> Any:
        return None if self._unseen(logging.INFO) else self._proxy.info(event, **kw)

    def warning(self, event: str, **kw: Any) -> Any:
        return None if self._unseen(logging.WARNING) else self._proxy.warning(event, **kw)

    def __getattr__(self, name: str) -> Any:  # bind, error, exception, ...: structlog's own
        return getattr(self._proxy, name)
