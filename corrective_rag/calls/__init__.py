"""What every outgoing call shares, whoever makes it (the LLM client, the web search client).

``settings``: :class:`Timeouts` and :class:`Retries`; ``scope``: :func:`call_scope`, the
deadline and cancel event that reach every call in flight (``Budget.max_seconds``, Ctrl-C,
a cancelled ``arun``).
"""

from corrective_rag.calls.scope import call_scope
from corrective_rag.calls.settings import Retries, Timeouts, parse_retry_after

__all__ = ["Retries", "Timeouts", "call_scope", "parse_retry_after"]
