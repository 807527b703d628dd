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
    return structlog.wrap_logger(logging.getLogger(name))
