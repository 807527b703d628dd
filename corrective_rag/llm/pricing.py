"""What a chat client's calls cost: :class:`Pricing`, per million prompt and completion tokens.

Deadlines and retries belong to every outgoing call, web searches too: they live in
:mod:`corrective_rag.calls.settings`.
"""

from __future__ import annotations

from dataclasses import dataclass

from corrective_rag.calls.settings import finite
from corrective_rag.errors import ConfigError

__all__: list[str] = []  # Pricing's home is corrective_rag.llm


@dataclass(frozen=True, slots=True)
class Pricing:
    """US dollars per million prompt and completion tokens (default 0: local or unknown)."""

    prompt_per_million: float = 0.0
    completion_per_million: float = 0.0

    def __post_init__(self) -> None:
        for name in ("prompt_per_million", "completion_per_million"):
            value = getattr(self, name)
            if not finite(value) or value < 0:
                raise ConfigError(f"pricing.{name} must be a number >= 0, got {value!r}")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Cost of a call in US dollars."""
        return (
            prompt_tokens * self.prompt_per_million
            + completion_tokens * self.completion_per_million
        ) / 1e6
