"""The docs and CHANGELOG name only files and modules that exist (moves are said as moves)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "CHANGELOG.md", ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# a line that says a name moved or went away may name the old one
_HISTORY = re.compile(r"\b(moved|removed|renamed|formerly|was called|no longer)\b")
_PATH = re.compile(r"`((?:tests|benchmarks|scripts|corrective_rag)/[\w/.-]+\.py)")
_MODULE = re.compile(r"`(corrective_rag(?:\.\w+)+)")
_SHORT = re.compile(r"`((?:calls|llm|loop|runs|store|evaluate|rewrite|text|models|web)\.\w+)\.\w+`")


def _named(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for line in page.read_text(encoding="utf-8").splitlines():
            if not _HISTORY.search(line):
                found += [(page.name, name) for name in pattern.findall(line)]
    return found


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 1, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(value, attribute):
                return False
            value = getattr(value, attribute)
        return True
    return False


def test_every_named_file_exists() -> None:
    """A test, benchmark, script or module file a page names is where it says."""
    assert [] == [(page, path) for page, path in _named(_PATH) if not (ROOT / path).is_file()]


def _span_attribute(page: str, dotted: str) -> bool:
    """docs/tracing.md names spans and span keys ``corrective_rag.<key>``, each in spans.py."""
    key = dotted.removeprefix("corrective_rag.")
    source = (ROOT / "corrective_rag" / "observe" / "spans.py").read_text(encoding="utf-8")
    # a name ending in "." is the start of a key: "llm.token_count." of "llm.token_count.total"
    if dotted.endswith("."):
        return page == "tracing.md" and f'"{dotted}' in source
    return page == "tracing.md" and (f'"{key}"' in source or f'"{dotted}"' in source)


def test_every_named_module_imports() -> None:
    """A dotted corrective_rag name a page gives is a module, one of its members or a span key."""
    assert [] == [
        (page, name)
        for page, name in _named(_MODULE)
        if not _resolves(name) and not _span_attribute(page, name)
    ]


def test_every_short_module_name_imports() -> None:
    """A short ``part.module.member`` name (``calls.scope.call_scope``) names a real module."""
    missing = [
        (page, name)
        for page, name in _named(_SHORT)
        # OpenInference's span keys (``llm.token_count.prompt``) look like short module names
        if not _resolves(f"corrective_rag.{name}") and not _span_attribute(page, f"{name}.")
    ]
    assert [] == missing
