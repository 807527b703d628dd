"""A bounded, thread-safe verdict cache so a document seen again is not graded again.

The key is (question, sha256 of the document text, model, prompt version): the same text under
the same question, model and prompt gets the same verdict; anything else is graded afresh. Only
graded verdicts are stored: a failure is retried next time rather than remembered.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections import OrderedDict

from corrective_rag.errors import ConfigError
from corrective_rag.types import Verdict

# VerdictCache: its home is corrective_rag.evaluate
__all__ = ["CacheKey", "cache_key"]

CacheKey = tuple[str, str, str, str]


def cache_key(question: str, text: str, model: str, prompt_version: str) -> CacheKey:
    """Build the cache key of a document's verdict."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return (question, digest, model, prompt_version)


class VerdictCache:
    """Least-recently-used verdict cache holding at most ``max_entries`` verdicts (0: off)."""

    def __init__(self, max_entries: int = 10_000) -> None:
        if not isinstance(max_entries, int) or max_entries < 0:
            raise ConfigError(f"max_entries must be an int >= 0, got {max_entries!r}")
        self.max_entries = max_entries
        self.hits: int = 0
        self.misses: int = 0
        self._data: OrderedDict[CacheKey, Verdict] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def get(self, key: CacheKey, document_id: str) -> Verdict | None:
        """Return the cached verdict for ``key`` re-labelled with ``document_id``, or None."""
        with self._lock:
            verdict = self._data.get(key)
            if verdict is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
        if verdict.document_id != document_id:
            verdict = dataclasses.replace(verdict, document_id=document_id)
        return verdict

    def put(self, key: CacheKey, verdict: Verdict) -> None:
        """Remember a graded verdict (ungraded ones are ignored)."""
        if not verdict.graded or self.max_entries == 0:
            return
        with self._lock:
            self._data[key] = verdict
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)
