"""What the command line reads from the environment: the keys it must hide.

The library reads no environment variable; the CLI does, here and in ``commands`` (which key goes
to which component). Kept apart from ``main`` so that ``commands`` and ``main`` need not import
each other.
"""

from __future__ import annotations

import os

__all__ = ["KEY_VARIABLES", "calibration_path", "secrets"]

# Every variable whose value is a credential: hidden from everything the CLI prints, logs and
# writes, whichever component it was given to.
KEY_VARIABLES = ("OPENAI_API_KEY", "TAVILY_API_KEY", "BRAVE_API_KEY", "QDRANT_API_KEY")


def secrets() -> tuple[str, ...]:
    """The configured keys the CLI hides (from :data:`KEY_VARIABLES`)."""
    from corrective_rag.text.secrets import secrets_of

    return secrets_of([os.environ.get(name) for name in KEY_VARIABLES])


def calibration_path(given: str | None = None) -> str:
    """The judge profile file: ``given``, else ``$CORRECTIVE_RAG_CALIBRATION``, else the default.

    The default is ``judge-calibration.json`` under ``$XDG_CONFIG_HOME/corrective-rag`` (or
    ``~/.config/corrective-rag``): where ``judge-check`` writes and every command reads.
    """
    from pathlib import Path

    from corrective_rag.evaluate.profile import PROFILE_FILE

    if given:
        return given
    if os.environ.get("CORRECTIVE_RAG_CALIBRATION"):
        return os.environ["CORRECTIVE_RAG_CALIBRATION"]
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return str(Path(base) / "corrective-rag" / PROFILE_FILE)
