"""The embedding model's own tokenizer, for sizing chunks the way the model reads them."""

from __future__ import annotations

import os
import threading
from typing import Any

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.inputs import read_bounded_text, surrogate_at
from corrective_rag.models.source import DEFAULT_MODEL, model_config, model_source
from corrective_rag.models.tokens import TokenWindow, token_windows

__all__ = ["ModelTokenizer", "load_tokenizer"]

# tokenizer.json of the largest multilingual vocabularies is 20-35 MB
MAX_TOKENIZER_BYTES = 64 << 20


class ModelTokenizer:
    """The embedding model's own tokenizer, for sizing chunks the way the model reads them.

    Loads only ``tokenizer.json`` (the ``tokenizers`` library, no torch), lazily on first use.
    A model folder's ``sentence_bert_config.json`` gives ``max_tokens`` (the model's
    ``max_seq_length``); a hub name is resolved through ``transformers`` (needs the files).

    Args:
        model: a sentence-transformers model name or folder; ``None`` is the offline default.
    """

    def __init__(self, model: str | None = None) -> None:
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise ConfigError("model must be a non-empty string or None")
        self.name: str = model or DEFAULT_MODEL
        self._tokenizer: Any = None
        self._max_tokens: int | None = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._tokenizer is None:
                self._tokenizer, self._max_tokens = load_tokenizer(model_source(self.name))
            return self._tokenizer

    @property
    def max_tokens(self) -> int:
        """How many tokens the model reads, special tokens included (``max_seq_length``)."""
        self._load()
        assert self._max_tokens is not None  # set together with the tokenizer
        return self._max_tokens

    @property
    def special_tokens(self) -> int:
        """Tokens the model adds around every text ([CLS] and [SEP] for BERT models)."""
        return int(self._load().num_special_tokens_to_add(False))

    def count(self, text: str) -> int:
        """Tokens the model reads for ``text``, special tokens included."""
        return len(self._load().encode(text, add_special_tokens=True).ids)

    def windows(self, text: str, size: int, overlap: int) -> list[TokenWindow]:
        """Split ``text`` into windows the model reads whole: ``size`` counts special tokens.

        Consecutive windows share ``overlap`` tokens; offsets are character offsets into
        ``text``, so ``text[w.start:w.end] == w.text``.
        """
        body = size - self.special_tokens
        if body <= 0:
            raise ConfigError(f"window size must exceed {self.special_tokens}, got {size}")
        if not 0 <= overlap < body:
            raise ConfigError(f"overlap must be in 0..{body - 1}, got {overlap} for size {size}")
        position = surrogate_at(text)
        if position is not None:  # the tokenizer would fail with a bare TypeError
            raise InputError(f"text is not valid Unicode (lone surrogate at character {position})")
        offsets = self._load().encode(text, add_special_tokens=False).offsets
        return token_windows(text, [start for start, _ in offsets], body, overlap)


def load_tokenizer(source: str) -> tuple[Any, int]:
    """A ``tokenizers.Tokenizer`` without padding or truncation, and the model's max length."""
    from tokenizers import Tokenizer

    max_tokens: int | None = None
    try:
        if os.path.isdir(source):
            path = os.path.join(source, "tokenizer.json")
            definition = read_bounded_text(path, max_bytes=MAX_TOKENIZER_BYTES, error=ConfigError)
            try:
                tokenizer = Tokenizer.from_str(definition)
            except Exception as exc:  # tokenizers' own error: nesting, types, missing fields
                raise ConfigError(f"{path}: not a tokenizer definition ({exc})") from None
            if os.path.lexists(os.path.join(source, "sentence_bert_config.json")):
                max_tokens = model_config(source, "sentence_bert_config.json").get("max_seq_length")
        else:
            from transformers import AutoTokenizer

            loaded = AutoTokenizer.from_pretrained(source)
            tokenizer = loaded.backend_tokenizer
            max_tokens = getattr(loaded, "model_max_length", None)
    except ConfigError:  # a model file refused: its one line says which and why
        raise
    except Exception as exc:
        raise ConfigError(f"could not load the tokenizer of {source!r}: {exc}") from exc
    tokenizer.no_padding()
    tokenizer.no_truncation()
    # 512 is BERT's position limit: the bound when a model states none (or a huge sentinel)
    if not isinstance(max_tokens, int) or not 0 < max_tokens <= 100_000:
        max_tokens = 512
    return tokenizer, max_tokens
