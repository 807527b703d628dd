"""Foreign failures inside a store turned into the package's own errors.

Callers, such as a batch writing one error line per failed query, then see a
:class:`~corrective_rag.errors.StoreError`, never an httpx, chromadb or qdrant-client exception.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from corrective_rag.errors import ConfigError, CorrectiveRAGError, StoreError

__all__ = ["embedding_failures", "foreign_failures"]


@contextlib.contextmanager
def foreign_failures(what: str) -> Iterator[None]:
    """Raise a foreign failure (server down, connection dropped) as StoreError naming ``what``.

    The package's own errors pass through as they are.
    """
    try:
        yield
    except CorrectiveRAGError:
        raise
    except Exception as exc:
        raise StoreError(f"{what} failed: {type(exc).__name__}: {exc}") from exc


@contextlib.contextmanager
def embedding_failures() -> Iterator[None]:
    """Raise a failure to embed a write's documents (model missing) as StoreError.

    Used before anything is written; ConfigError and StoreError pass through as they are.
    """
    try:
        yield
    except (ConfigError, StoreError):
        raise
    except Exception as exc:
        raise StoreError(f"embedding failed, nothing written: {exc}") from exc
