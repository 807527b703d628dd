"""``errors.cut_text``: the one cut of a text to a limit, and its named policies."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corrective_rag.errors import (
    CUT_BARE,
    CUT_LINE,
    CUT_MESSAGE,
    CUT_SPAN,
    CUT_STORED,
    CutPolicy,
    cut_text,
)
from corrective_rag.text.display import cut

WITHIN = [CUT_STORED, CUT_SPAN, CUT_BARE, CUT_LINE]


@pytest.mark.parametrize("policy", [*WITHIN, CUT_MESSAGE])
def test_a_text_within_the_limit_is_kept_whole(policy: CutPolicy) -> None:
    """Every policy keeps a text of at most ``limit`` characters as it is."""
    assert "abc" == cut_text("abc", 3, policy)
    assert "" == cut_text("", 0, policy)


@pytest.mark.parametrize("policy", WITHIN)
@given(text=st.text(max_size=300), limit=st.integers(-5, 200))
def test_within_policies_never_pass_the_limit_and_are_idempotent(
    policy: CutPolicy, text: str, limit: int
) -> None:
    """A ``within`` policy never returns more than the limit, and cutting again changes nothing."""
    once = cut_text(text, limit, policy)
    assert len(once) <= max(limit, 0)
    assert once == cut_text(once, limit, policy)
    mark = policy.marker.format(length=len(text), limit=max(limit, 0))
    kept = once[: len(once) - len(mark)] if mark and once != text and once.endswith(mark) else once
    assert text.startswith(kept)  # the text's start, then the marker as written (if it fit)


def test_a_limit_shorter_than_the_marker_cuts_without_it() -> None:
    """The one rule for a marker that does not fit: the text's first ``limit`` characters."""
    mark = " [... cut: 101 characters]"
    assert mark == cut_text("x" * 101, len(mark), CUT_STORED)
    assert "x" * (len(mark) - 1) == cut_text("x" * 101, len(mark) - 1, CUT_STORED)
    assert "x" * 5 == cut_text("x" * 101, 5, CUT_SPAN)  # not the 20-character marker alone
    assert "" == cut_text("x" * 101, 0, CUT_LINE)


def test_each_policy_marks_as_documented() -> None:
    """The markers: stored and span say the whole length; a message says where it was cut."""
    text = "abcdefghij" * 10
    assert "abcdefghij" * 2 + "… (cut at 20 of 100 characters)" == cut_text(text, 20)
    assert text[:9] + "…" == cut_text(text, 10, CUT_LINE)
    assert text[:10] == cut_text(text, 10, CUT_BARE)
    assert cut_text(text, 40, CUT_SPAN).endswith("…[cut: 100 chars]")
    assert cut_text(text, 40, CUT_STORED).endswith(" [... cut: 100 characters]")


def test_widths_and_a_known_longer_text() -> None:
    """Cut in columns (a wide character takes two); a prefix said to be longer is always cut."""
    wide = "日本語の文章" * 5
    shown = cut_text(wide, 7, CUT_LINE, width=lambda ch: 2 if ch > "\u3000" else 1)
    assert "日本語…" == shown
    assert "ab…" == cut_text("abc", 3, CUT_LINE, length=10)
    assert "abc… (cut at 3 of 10 characters)" == cut_text("abc", 3, length=10)


def test_a_terminal_cell_is_the_line_policy_in_columns() -> None:
    """``text.display.cut`` escapes and joins the line, then cuts it as CUT_LINE does."""
    assert "abcd…" == cut("abcdefgh", 5)
    assert "a b c" == cut("a \n b\t c", 5)
    assert "ab…" == cut("ab" + " " * 10_000 + "cd", 3)
    huge = "x" * 1_000_000
    assert 10 == len(cut(huge, 10))
