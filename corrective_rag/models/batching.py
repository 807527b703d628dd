"""Two small building blocks of the embedder: a size-bounded LRU and group-commit batching.

Generic over what is encoded and what comes back, so that whole texts and texts with their
sentence spans share them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from corrective_rag.errors import ConfigError

__all__ = ["LRU", "Batcher"]

_T = TypeVar("_T")
_R = TypeVar("_R")


class LRU(Generic[_R]):
    """Least recently used results, bounded by the vectors they hold (not thread-safe)."""

    def __init__(self, capacity: int, size: Callable[[_R], int]) -> None:
        self._capacity = capacity
        self._size = size
        self._held = 0
        self._items: OrderedDict[str, _R] = OrderedDict()

    def get(self, key: str) -> _R | None:
        """The result kept for ``key`` (now the most recently used), or ``None``."""
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def update(self, fresh: dict[str, _R]) -> None:
        """Keep ``fresh``, evicting the least recently used results beyond the capacity."""
        for key, value in fresh.items():
            size = self._size(value)
            if size > self._capacity:
                continue  # would evict everything and still not fit
            old = self._items.pop(key, None)
            if old is not None:
                self._held -= self._size(old)
            self._items[key] = value
            self._held += size
        while self._held > self._capacity:
            _, old = self._items.popitem(last=False)
            self._held -= self._size(old)

    def clear(self) -> None:
        """Forget every result."""
        self._items.clear()
        self._held = 0


class _Request(Generic[_T, _R]):
    """Items one caller waits for, and their results (or the error) once encoded."""

    __slots__ = ("done", "error", "texts", "vectors")

    def __init__(self, texts: list[_T]) -> None:
        self.texts = texts
        self.vectors: list[_R] = []
        self.error: BaseException | None = None
        self.done = False


class Batcher(Generic[_T, _R]):
    """Group commit for encoding: concurrent callers' texts go through the model together.

    A caller queues its texts; if no one is encoding, it becomes the leader, takes everything
    queued and encodes it in one call, hands each caller its rows and wakes them. Callers that
    arrive meanwhile wait and are served by the next leader, one of themselves. One caller alone
    encodes at once (no added latency); N callers share forward passes instead of queueing N of
    them, and the model is never used by two threads at a time.
    """

    def __init__(self, encode: Callable[[list[_T]], list[_R]]) -> None:
        self._encode = encode
        self._cond = threading.Condition()
        self._queue: list[_Request[_T, _R]] = []
        self._busy = False

    def encode(self, texts: list[_T]) -> list[_R]:
        """The results for ``texts``, encoded alone or together with other callers' texts."""
        request: _Request[_T, _R] = _Request(texts)
        with self._cond:
            self._queue.append(request)
            while self._busy and not request.done:
                self._cond.wait()
            if not request.done:
                self._busy = True
                batch, self._queue = self._queue, []
        if not request.done:
            self._lead(batch)
        if request.error is not None:
            raise request.error
        return request.vectors

    def _lead(self, batch: list[_Request[_T, _R]]) -> None:
        try:
            vectors = self._encode([t for r in batch for t in r.texts])
            if len(vectors) != sum(len(r.texts) for r in batch):
                raise ConfigError(f"the model returned {len(vectors)} vectors")
            start = 0
            for r in batch:
                r.vectors = vectors[start : start + len(r.texts)]
                start += len(r.texts)
        except BaseException as exc:  # every waiter gets the error, not only the leader
            for r in batch:
                r.error = exc
        finally:
            with self._cond:
                for r in batch:
                    r.done = True
                self._busy = False
                self._cond.notify_all()
