"""The shared integer validator every entry point uses."""

from __future__ import annotations

import pytest

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.inputs import check_int, is_int, is_number


def test_check_int_refuses_bools_floats_and_values_out_of_range():
    """True, 2.0 and out-of-range ints raise ConfigError naming the setting and the range."""
    assert 5 == check_int(5, "top_k", minimum=1, maximum=10)
    for bad in (True, 2.0, "3", None, 0, 11):
        with pytest.raises(ConfigError, match=r"top_k must be an int in 1\.\.10, got "):
            check_int(bad, "top_k", minimum=1, maximum=10)


def test_check_int_optional_and_error_class():
    """optional=True lets None through; a file's data raises InputError instead of ConfigError."""
    assert None is check_int(None, "chunk_tokens", minimum=1, optional=True)
    with pytest.raises(ConfigError, match="chunk_tokens must be an int >= 1 or None, got 0"):
        check_int(0, "chunk_tokens", minimum=1, optional=True)
    with pytest.raises(InputError, match="iteration must be an int, got 'x'"):
        check_int("x", "iteration", error=InputError)


def test_predicates_exclude_bool():
    """is_int and is_number say no to bools, which Python counts as ints."""
    assert (True, False, False) == (is_int(3), is_int(True), is_int(3.0))
    assert (True, True, False) == (is_number(3), is_number(float("nan")), is_number(False))
