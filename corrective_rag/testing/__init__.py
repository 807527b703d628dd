"""Public test helpers for users' own tests: scripted components and a scripted LLM server."""

from corrective_rag.testing.fakes import (
    ListRetriever,
    ScriptedEvaluator,
    ScriptedGenerator,
    ScriptedRewriter,
)
from corrective_rag.testing.filter_contract import FilterContract
from corrective_rag.testing.hostile import HostileLLMServer
from corrective_rag.testing.server import Fault, FaultChooser, ScriptedLLMServer
from corrective_rag.testing.token_logprobs import TokenScript

__all__ = [
    "Fault",
    "FaultChooser",
    "FilterContract",
    "HostileLLMServer",
    "ListRetriever",
    "ScriptedEvaluator",
    "ScriptedGenerator",
    "ScriptedLLMServer",
    "ScriptedRewriter",
    "TokenScript",
]
