"""What a web retriever already asked, remembered for a while.

One search per query, one fetch per page, however many iterations (and runs) ask again. A run
searches the question in every iteration and the pages of a result in every search that finds
it; asking again costs a paid call or a server's patience and returns the same thing.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Generic, TypeVar

__all__ = ["Memo"]

K = TypeVar("K")
V = TypeVar("V")


class Memo(Generic[K, V]):
    """A thread-safe map whose entries expire after ``seconds``; the oldest go past ``size``."""

    def __init__(self, seconds: float, size: int) -> None:
        self.seconds = seconds
        self.size = size
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> tuple[bool, V | None]:
        """``(True, value)`` if ``key`` was put under ``seconds`` ago, else ``(False, None)``."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return False, None
            if time.monotonic() - item[0] >= self.seconds:
                del self._items[key]
                return False, None
            return True, item[1]

    def put(self, key: K, value: V) -> None:
        """Remember ``value`` for ``key`` (nothing when ``seconds`` is 0)."""
        if self.seconds <= 0:
            return
        with self._lock:
            self._items[key] = (time.monotonic(), value)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
