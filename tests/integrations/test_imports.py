"""Each integration says which extra it needs when its framework is not installed."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("module", "framework", "extra"),
    [
        ("corrective_rag.integrations.langchain", "langchain_core", "langchain"),
        ("corrective_rag.integrations.llamaindex", "llama_index", "llamaindex"),
    ],
)
def test_a_missing_framework_names_the_extra(module, framework, extra):
    """Without the framework, importing the adapter raises an ImportError that is also our
    ConfigError and says what to install."""
    code = (
        f"import sys; sys.modules[{framework!r}] = None\n"  # what an uninstalled package gives
        "from corrective_rag.errors import ConfigError\n"
        "try:\n"
        f"    import {module}\n"
        "except ImportError as exc:\n"
        "    print(isinstance(exc, ConfigError), exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("True ")
    assert f"pip install 'corrective_rag[{extra}]'" in out.stdout
