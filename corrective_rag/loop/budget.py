"""Run budgets: limits on LLM calls, tokens, cost and wall time, each optional.

The orchestrator checks the budget before every phase and never starts a phase once a limit is
reached; where a phase's call count is predictable (documents per evaluator call) it also caps the
work sent so that the call limit is not overshot. Running out is a stop reason, not an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from corrective_rag.errors import ConfigError
from corrective_rag.inputs import check_int, is_int, is_number
from corrective_rag.types import Usage

# Budget: its home is corrective_rag
__all__ = ["documents_per_call"]


def _check_limit(name: str, value: object, *, integral: bool) -> None:
    if value is None:
        return
    if not (is_int(value) if integral else is_number(value)):
        kind = "an int" if integral else "a number"
        raise ConfigError(f"budget {name} must be {kind} or None, got {value!r}")
    number = float(value)  # type: ignore[arg-type]  # checked numeric just above
    if math.isnan(number) or number <= 0:
        raise ConfigError(f"budget {name} must be > 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits for one run; ``None`` means unlimited.

    Attributes:
        max_llm_calls: LLM calls over all phases (grading, rewriting, refinement, generation).
        max_tokens: prompt plus completion tokens over all phases.
        max_cost_usd: summed cost as reported by the components.
        max_seconds: wall time of the run.
    """

    max_llm_calls: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        _check_limit("max_llm_calls", self.max_llm_calls, integral=True)
        _check_limit("max_tokens", self.max_tokens, integral=True)
        _check_limit("max_cost_usd", self.max_cost_usd, integral=False)
        _check_limit("max_seconds", self.max_seconds, integral=False)

    def exhausted(self, usage: Usage, seconds: float) -> str | None:
        """Return which limit ``usage`` after ``seconds`` has reached, or ``None``."""
        if self.max_llm_calls is not None and usage.llm_calls >= self.max_llm_calls:
            return f"max_llm_calls: {usage.llm_calls} of {self.max_llm_calls} calls used"
        if self.max_tokens is not None and usage.total_tokens >= self.max_tokens:
            return f"max_tokens: {usage.total_tokens} of {self.max_tokens} tokens used"
        if self.max_cost_usd is not None and usage.cost_usd >= self.max_cost_usd:
            return f"max_cost_usd: {usage.cost_usd:.6f} of {self.max_cost_usd} USD spent"
        if self.max_seconds is not None and seconds >= self.max_seconds:
            return f"max_seconds: {seconds:.3f} of {self.max_seconds} s elapsed"
        return None

    def calls_left(self, usage: Usage) -> int | None:
        """LLM calls still allowed after ``usage``; ``None`` when calls are unlimited."""
        if self.max_llm_calls is None:
            return None
        return max(0, self.max_llm_calls - usage.llm_calls)

    def documents_left(self, usage: Usage, per_call: int | None) -> int | None:
        """Documents an evaluator judging ``per_call`` per LLM call may still be sent.

        ``None`` when the budget does not cap them: calls are unlimited, or the evaluator makes
        no LLM calls (``per_call`` is ``None``).
        """
        calls = self.calls_left(usage)
        if calls is None or per_call is None:
            return None
        return calls * per_call


def documents_per_call(evaluator: Any) -> int | None:
    """Check and return an evaluator's ``documents_per_call`` (``None``: it makes no LLM calls).

    The attribute is part of the :class:`~corrective_rag.protocols.Evaluator` contract: every
    evaluator declares it, so a budget is never guessed.

    Raises:
        ConfigError: the attribute is missing, or is not an int >= 1 or ``None``.
    """
    if not hasattr(evaluator, "documents_per_call"):
        raise ConfigError(
            "evaluator must declare documents_per_call: documents judged per LLM call "
            "(an int >= 1), or None when it makes no LLM calls"
        )
    per_call = evaluator.documents_per_call
    if per_call is None:
        return None
    return check_int(per_call, "evaluator.documents_per_call", minimum=1, optional=True)
