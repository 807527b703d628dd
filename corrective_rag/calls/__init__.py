"""What every outgoing call shares, whoever makes it (the LLM client, the web search client).

``settings``: :class:`Timeouts` and :class:`Retries`, and :func:`call_settings` that makes both
from the most seconds a call may take; ``scope``: :func:`call_scope`, the deadline and cancel
event that reach every call in flight (``Budget.max_seconds``, Ctrl-C, a cancelled ``arun``);
``body``: a response body read under a size cap.
"""

from corrective_rag.calls.scope import call_scope
from corrective_rag.calls.settings import Retries, Timeouts, call_settings, parse_retry_after

__all__ = ["Retries", "Timeouts", "call_scope", "call_settings", "parse_retry_after"]
