"""The progress bar of ``index``: chunks written, with an estimated total and an ETA.

The number of chunks a corpus makes is known only once it is read, and reading a large file
takes as long as tokenizing it. The total is therefore estimated from how far into the input
the reading is (bytes of the files read so far, and the character offset into the current
text file) and refined at every write: the bar's ETA is tqdm's, over that total. Until a first
estimate exists (a single JSONL file being read), the bar counts chunks without a total.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from corrective_rag.types import Document

__all__ = ["ChunkProgress"]


class ChunkProgress:
    """A tqdm bar in chunks whose total is estimated from the bytes read.

    Args:
        total_bytes: the size of every input file together (0: no estimate, no total).
        disable: show nothing (``--no-progress``).
    """

    def __init__(self, total_bytes: int, *, disable: bool = False) -> None:
        self.total_bytes = total_bytes
        self.disable = disable
        self._bar: Any = None
        self._read = 0  # chunks read so far
        self._done_bytes = 0  # bytes of the files read whole
        self._position = 0  # character offset into the file being read
        self._source: str | None = None

    def track(self, documents: Iterable[Document]) -> Iterator[Document]:
        """Pass ``documents`` through, noting how far into the input each one lies."""
        for doc in documents:
            source = str(doc.metadata.get("source", ""))
            if source != self._source:
                if self._source is not None:
                    self._done_bytes += _size(self._source, self._position)
                self._source, self._position = source, 0
            end = doc.metadata.get("end")
            # In a text file ``end`` is an offset into the file; in a JSONL file it is one into
            # the record, so such a file counts only once it has been read whole.
            if isinstance(end, int) and "line" not in doc.metadata:
                self._position = max(self._position, end)
            self._read += 1
            yield doc

    def estimate(self) -> int | None:
        """The estimated number of chunks the whole input makes, or None while unknown."""
        seen = self._done_bytes + self._position
        if not self.total_bytes or not seen or not self._read:
            return None
        return max(self._read, round(self._read * self.total_bytes / seen))

    def update(self, written: int) -> None:
        """``written`` more chunks were stored."""
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(unit="chunk", file=sys.stderr, disable=self.disable)
        total = self.estimate()
        if total is not None:
            self._bar.total = max(total, self._bar.n + written)
        self._bar.update(written)

    def close(self) -> None:
        """Close the bar (its total set to what was written, so that it ends at 100%)."""
        if self._bar is not None:
            self._bar.total = self._bar.n
            self._bar.refresh()
            self._bar.close()


def _size(source: str, position: int) -> int:
    """The size of file ``source`` (its last offset read when it cannot be measured)."""
    try:
        return os.path.getsize(source)
    except OSError:
        return position
