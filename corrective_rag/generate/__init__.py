"""Answer generation from the kept documents, with citations and a support check."""

from corrective_rag.generate.llm import LLMGenerator

__all__ = [
    "LLMGenerator",
]
