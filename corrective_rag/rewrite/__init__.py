"""Rewriters (LLM and local) that propose the next query from the evaluator's feedback.

The rewriters are :class:`corrective_rag.LLMRewriter` and :class:`corrective_rag.LocalRewriter`
(their home is the root); here: the drift guard every rewrite passes, :func:`check_rewrite`.
"""

from corrective_rag.rewrite.guard import check_rewrite

__all__ = ["check_rewrite"]
