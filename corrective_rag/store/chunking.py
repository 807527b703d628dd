"""Cutting a stream of text into overlapping token windows, holding one block at a time.

A file is read in blocks of :data:`BLOCK_CHARS` characters. Each block, cut at its last
whitespace, is windowed by the tokenizer; the windows that end before the cut are final, and the
text from the first window that reaches the cut is carried into the next block, where windowing
resumes exactly where that window would have started. Memory is bounded by a block plus one
window, whatever the file's size; the windows are those of the whole text except that a token
is never merged across a block's cut (which falls on whitespace, where no tokenizer merges).

Windows are bounded in characters too (:data:`WINDOW_CHARS`, :func:`bounded_windows`): a long
run with no word break (a hex dump) is one unknown token to a WordPiece tokenizer, and would
otherwise be one window of the whole file. A block whose trailing run is longer than the bound is
cut at its end, so every block finishes windows and the work stays linear in the file's size.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from corrective_rag.models.tokens import TokenWindow

__all__ = ["BLOCK_CHARS", "WINDOW_CHARS", "Windower", "bounded_windows", "stream_windows"]

# 256 KB of text per tokenizer call: thousands of windows per block, so the re-tokenized carry
# (under one window) costs < 1%, while a block's tokens and offsets stay a few MB.
BLOCK_CHARS = 1 << 18
# The most characters in one window. 256 model tokens of prose are ~1.3 KB and of code or URLs
# ~3 KB; 8 KB is past any text the model reads in one window, and far below a store's limit.
WINDOW_CHARS = 1 << 13


class Windower(Protocol):
    """Splits a text into token windows (``TiktokenCounter`` and ``ModelTokenizer`` do)."""

    def windows(self, text: str, size: int, overlap: int) -> list[TokenWindow]:
        """Windows of ``size`` tokens sharing ``overlap``, with character offsets into ``text``."""
        ...


def _cut(text: str, max_chars: int) -> int:
    """Where to end a block: before its last whitespace, or at its end when it has none.

    A trailing run of more than ``max_chars`` is no word the tokenizer could merge across the
    cut: the block then ends at its end (the run is cut in characters anyway).
    """
    cut = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t"))
    return cut if cut > 0 and len(text) - cut <= max_chars else len(text)


def bounded_windows(windows: Iterable[TokenWindow], max_chars: int) -> Iterator[TokenWindow]:
    """``windows`` with each longer than ``max_chars`` characters cut into consecutive pieces.

    A piece's token count is its share of the window's, at least 1.
    """
    for w in windows:
        length = w.end - w.start
        if length <= max_chars:
            yield w
            continue
        for start in range(0, length, max_chars):
            end = min(start + max_chars, length)
            tokens = max(1, w.tokens * (end - start) // length)
            yield TokenWindow(w.start + start, w.start + end, w.text[start:end], tokens)


def stream_windows(
    pieces: Iterable[str],
    windower: Windower,
    size: int,
    overlap: int,
    *,
    block_chars: int = BLOCK_CHARS,
    max_chars: int = WINDOW_CHARS,
) -> Iterator[TokenWindow]:
    """Windows over the concatenation of ``pieces``, offsets into that whole text.

    Args:
        pieces: consecutive parts of one text (for example ``iter(lambda: fh.read(N), "")``).
        windower: the tokenizer that sizes windows.
        size: tokens per window, as ``windower.windows`` counts them.
        overlap: tokens shared by consecutive windows.
        block_chars: characters gathered before each tokenizer call.
        max_chars: the most characters in one window (see :func:`bounded_windows`).
    """
    buf = ""
    base = 0  # offset of buf[0] in the whole text
    wanted = block_chars
    for piece in pieces:
        buf += piece
        if len(buf) < wanted:
            continue
        cut = _cut(buf, max_chars)
        windows = list(bounded_windows(windower.windows(buf[:cut], size, overlap), max_chars))
        done = next((k for k, w in enumerate(windows) if w.end >= cut), len(windows))
        for w in windows[:done]:
            yield TokenWindow(base + w.start, base + w.end, w.text, w.tokens)
        restart = windows[done].start if done < len(windows) else cut
        buf = buf[restart:]
        base += restart
        # no window was finished: a window spans more than a block; gather more before retrying
        wanted = len(buf) + block_chars if done == 0 else block_chars
    for w in bounded_windows(windower.windows(buf, size, overlap), max_chars):
        yield TokenWindow(base + w.start, base + w.end, w.text, w.tokens)
