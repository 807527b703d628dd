"""OpenAI-compatible chat client, its prices, JSON parsing, prompts and a local server.

The client itself is :class:`corrective_rag.OpenAIChatClient`; its deadlines and retries
(:class:`~corrective_rag.calls.settings.Timeouts`, :class:`~corrective_rag.calls.settings.Retries`)
are every outgoing call's and are imported from :mod:`corrective_rag.calls`.
"""

from corrective_rag.llm.local_server import LocalLlamaServer, smollm2_path
from corrective_rag.llm.pricing import Pricing

__all__ = [
    "LocalLlamaServer",
    "Pricing",
    "smollm2_path",
]
