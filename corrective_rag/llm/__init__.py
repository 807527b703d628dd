"""OpenAI-compatible chat client, its settings, JSON parsing, prompts and a local server."""

from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.llm.local_server import LocalLlamaServer, smollm2_path
from corrective_rag.llm.settings import Pricing, Retries, Timeouts

__all__ = [
    "LocalLlamaServer",
    "OpenAIChatClient",
    "Pricing",
    "Retries",
    "Timeouts",
    "smollm2_path",
]
