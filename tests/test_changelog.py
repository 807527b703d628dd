"""CHANGELOG.md keeps Keep a Changelog's form: one section per release, each heading once."""

from __future__ import annotations

import re
from pathlib import Path

CHANGELOG = Path(__file__).resolve().parent.parent / "CHANGELOG.md"
HEADINGS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")


def _sections() -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in CHANGELOG.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            current = line[3:]
            assert current not in sections, f"release {current} twice"
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    return sections


def test_each_release_has_each_heading_at_most_once_in_order() -> None:
    """No release repeats Added/Changed/Fixed...; the headings are the six of the form."""
    for release, lines in _sections().items():
        found = [line[4:] for line in lines if line.startswith("### ")]
        assert set(found) <= set(HEADINGS), release
        assert sorted(found, key=HEADINGS.index) == found, release


def test_one_line_per_change() -> None:
    """Every entry is one bullet line: no continuation lines, no paragraphs under a heading."""
    for release, lines in _sections().items():
        body = [line for line in lines if line.strip() and not line.startswith("### ")]
        assert [] == [line for line in body if not line.startswith("- ")], release


def test_releases_are_unreleased_or_versioned() -> None:
    """Section titles are [Unreleased] or [x.y.z] - date."""
    pattern = re.compile(r"\[Unreleased\]|\[\d+\.\d+\.\d+\] - \d{4}-\d{2}-\d{2}")
    assert [] == [title for title in _sections() if not pattern.fullmatch(title)]
