"""What enters the package from a user: checked values, and files read with bounds.

* :mod:`~corrective_rag.inputs.values`: query text, ids and integer settings, checked where they
  enter, each refusal an :class:`~corrective_rag.errors.InputError` or
  :class:`~corrective_rag.errors.ConfigError` naming the thing.
* :mod:`~corrective_rag.inputs.files`: the one way the package reads a file it did not write
  itself or that anyone could have rewritten (labelled pairs, judge profiles, export records,
  queries, settings): regular files only, bytes bounded as read (never ``st_size``), JSON depth
  bounded, one-line errors naming the file.
"""

from corrective_rag.inputs.files import (
    open_regular,
    read_bounded,
    read_bounded_json,
    read_bounded_lines,
    read_bounded_text,
)
from corrective_rag.inputs.values import (
    MAX_EXACT_INT,
    MAX_QUERY_BYTES,
    check_int,
    check_query,
    control_at,
    inexact_int,
    is_blank,
    is_int,
    is_number,
    surrogate_at,
)

__all__ = [
    "MAX_EXACT_INT",
    "MAX_QUERY_BYTES",
    "check_int",
    "check_query",
    "control_at",
    "inexact_int",
    "is_blank",
    "is_int",
    "is_number",
    "open_regular",
    "read_bounded",
    "read_bounded_json",
    "read_bounded_lines",
    "read_bounded_text",
    "surrogate_at",
]
