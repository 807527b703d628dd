"""Answer generation from the kept documents, with citations and a support check.

The generator is :class:`corrective_rag.LLMGenerator` (its home is the root).
"""

__all__: list[str] = []
