"""What the package tells the outside world while it runs: log events and trace spans.

Both are silent until the application asks (a :class:`logging.NullHandler`; no span without an
OpenTelemetry SDK), and both carry only what is safe to send unless told otherwise:

- :mod:`~corrective_rag.observe.logs`: the structlog loggers every module writes through;
- :mod:`~corrective_rag.observe.spans`: the spans of runs, iterations, searches and LLM calls,
  named as the loop runs (``iteration 2``, ``retrieval rewrite``, ``grade: chat m``);
- :mod:`~corrective_rag.observe.bounds`: the bounds every span attribute is cut to.

An application imports from here what it sets or reads: :func:`capture_content` (contents on
spans), the bounds (:data:`MAX_ATTRIBUTE_CHARS`, ...) and the stages that name LLM spans
(:data:`STAGES`). docs/tracing.md has the spans and their attributes.
"""

from corrective_rag.observe.bounds import (
    MAX_ATTRIBUTE_CHARS,
    MAX_ATTRIBUTE_ITEMS,
    MAX_NUMBERED_ITEMS,
)
from corrective_rag.observe.spans import STAGES, capture_content, content_captured

__all__ = [
    "MAX_ATTRIBUTE_CHARS",
    "MAX_ATTRIBUTE_ITEMS",
    "MAX_NUMBERED_ITEMS",
    "STAGES",
    "capture_content",
    "content_captured",
]
