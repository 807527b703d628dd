"""Rewriters (LLM and local) that propose the next query from the evaluator's feedback."""

from corrective_rag.rewrite.guard import check_rewrite
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.rewrite.local import LocalRewriter

__all__ = [
    "LLMRewriter",
    "LocalRewriter",
    "check_rewrite",
]
