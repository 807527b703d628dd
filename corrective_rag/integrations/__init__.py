"""Adapters between corrective_rag and the RAG frameworks people already use.

Each framework has its own module, imported only when asked for, so that installing
corrective_rag without an extra imports no framework::

    corrective_rag.integrations.langchain    pip install 'corrective_rag[langchain]'
    corrective_rag.integrations.llamaindex   pip install 'corrective_rag[llamaindex]'

Both go both ways: the loop as the framework's retriever, and the framework's retriever and
chat model as the loop's :class:`~corrective_rag.protocols.Retriever` and
:class:`~corrective_rag.protocols.ChatModel`. See docs/integrations.md.
"""

from __future__ import annotations

from corrective_rag.errors import ConfigError as _ConfigError

__all__ = ["MissingExtraError"]


class MissingExtraError(_ConfigError, ImportError):
    """An integration was imported without its framework: the message names the extra.

    Both a :class:`~corrective_rag.errors.ConfigError` (ours) and an ``ImportError`` (so the
    usual ``except ImportError`` around optional imports still works).
    """
