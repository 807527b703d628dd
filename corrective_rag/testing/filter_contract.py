"""The metadata filter contract, written once: a reference implementation and a suite.

Every store and bridge of the package reads the same chroma-style ``where`` filters, and a
backend a user writes must read them the same way. This module holds the oracle, a pure and
deliberately plain implementation of the filter language (:func:`reference_matches`), edge-case
documents and filters, and :class:`FilterContract`, a suite any backend runs by saying how it
selects ids for a filter::

    from corrective_rag.testing import FilterContract

    class TestMyStoreFilters(FilterContract):
        def select(self, where):
            store = MyStore()                     # holds self.documents
            store.add(self.documents)
            return store.ids(where=where)

The language (chromadb's, whose answers are the reference users see):

* ``{"f": v}`` and ``{"f": {"$eq": v}}``: the document has ``f`` and it equals ``v``. Numbers
  compare by value (``2021`` equals ``2021.0``); a bool equals only a bool (``True`` is not
  ``1``); a string only a string.
* ``$ne`` and ``$nin`` are the negation of ``$eq`` and ``$in``: a document without the field
  matches them (so ``{"incomplete": {"$ne": True}}`` keeps the documents with no such mark).
* ``$in``: equal to one of a non-empty list of values.
* ``$gt`` ``$gte`` ``$lt`` ``$lte``: the operand is a number (not a bool); only documents whose
  value is a number (not a bool) can match.
* ``{"$and": [...]}``, ``{"$or": [...]}``: non-empty lists of filters, nested freely; several
  keys in one mapping must all hold.
* Values are str, int (within +-2**53, ``inputs.MAX_EXACT_INT``: past it chromadb and Qdrant,
  comparing as 64-bit floats, read 2**53 + 1 as 2**53), float (finite) or bool. Anything else
  (an unknown operator, two operators on one field, an empty list, ``None``, NaN, an integer
  past 2**53, a list as a bare value) is refused with
  :class:`~corrective_rag.errors.InputError`.
* Large filters: ``$in``/``$nin`` lists of :data:`LARGE_LIST` values in all, a fraction
  counting twice (:data:`LARGE_FILTERS`, one type or mixed) are answered; past that a backend
  may refuse a filter (:data:`OVERSIZED_FILTERS`) with
  :class:`~corrective_rag.errors.InputError`, never with anything else, and never by taking
  the process down.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from corrective_rag.errors import InputError, cut_text
from corrective_rag.inputs import MAX_EXACT_INT
from corrective_rag.types import Document

# FilterContract: its home is corrective_rag.testing
__all__ = [
    "FILTER_CASES",
    "FILTER_DOCUMENTS",
    "INVALID_FILTERS",
    "ISSUE_FILTERS",
    "LARGE_FILTERS",
    "LARGE_LIST",
    "OVERSIZED_FILTERS",
    "LetterEmbedder",
    "expected_ids",
    "filter_mismatches",
    "large_filter_mismatches",
    "reference_matches",
    "refusal_mismatches",
]


def reference_matches(where: Mapping[str, Any], metadata: Mapping[str, Any]) -> bool:
    """Whether a document with ``metadata`` passes ``where`` (the language of the module).

    Raises:
        InputError: ``where`` is not a filter of the language.
    """
    if not isinstance(where, Mapping) or len(where) == 0:
        raise InputError(f"invalid metadata filter {where!r}: not a non-empty mapping")
    verdicts = []
    for key, condition in where.items():
        if key in ("$and", "$or"):
            verdicts.append(_combine(key, condition, metadata))
        elif not isinstance(key, str) or key.startswith("$"):
            raise InputError(f"invalid metadata filter {where!r}: unknown operator {key!r}")
        else:
            verdicts.append(_test_field(key, condition, metadata))
    return all(verdicts)


def _combine(key: str, parts: Any, metadata: Mapping[str, Any]) -> bool:
    if not isinstance(parts, list | tuple) or len(parts) == 0:
        raise InputError(f"invalid metadata filter: {key} takes a non-empty list, got {parts!r}")
    verdicts = [reference_matches(part, metadata) for part in parts]
    if key == "$and":
        return all(verdicts)
    return any(verdicts)


def _test_field(name: str, condition: Any, metadata: Mapping[str, Any]) -> bool:
    if isinstance(condition, Mapping):
        if len(condition) != 1:
            raise InputError(f"invalid metadata filter: one operator per field, got {condition!r}")
        [(op, operand)] = list(condition.items())
    else:
        op, operand = "$eq", condition
    found = name in metadata
    value = metadata.get(name)
    # operands are checked first: a filter is invalid whatever the document holds
    if op == "$eq":
        wanted = _scalar(operand)
        return found and _equal(value, wanted)
    if op == "$ne":
        wanted = _scalar(operand)
        return not (found and _equal(value, wanted))
    if op == "$in":
        choices = _choices(operand)
        return found and any(_equal(value, choice) for choice in choices)
    if op == "$nin":
        choices = _choices(operand)
        return not (found and any(_equal(value, choice) for choice in choices))
    if op in ("$gt", "$gte", "$lt", "$lte"):
        bound = _scalar(operand)
        if _kind(bound) != "number":
            raise InputError(f"invalid metadata filter: {op} takes a number, got {operand!r}")
        if not found or _kind(value) != "number":
            return False
        if op == "$gt":
            return value > bound
        if op == "$gte":
            return value >= bound
        if op == "$lt":
            return value < bound
        return value <= bound
    raise InputError(f"invalid metadata filter: unknown operator {op!r}")


def _kind(value: Any) -> str:
    """``bool``, ``number`` or ``str``: values of different kinds are never equal."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "str"


def _equal(stored: Any, wanted: Any) -> bool:
    return _kind(stored) == _kind(wanted) and stored == wanted


def _scalar(value: Any) -> Any:
    if not isinstance(value, str | int | float | bool):
        raise InputError(f"invalid metadata filter: {value!r} is not a str, int, float or bool")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"invalid metadata filter: {value!r} is not a finite number")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_EXACT_INT:
        raise InputError(f"invalid metadata filter: {value} is an integer past 2**53")
    return value


def _choices(operand: Any) -> list[Any]:
    if not isinstance(operand, list | tuple) or len(operand) == 0:
        raise InputError(
            f"invalid metadata filter: $in/$nin take a non-empty list, got {operand!r}"
        )
    return [_scalar(choice) for choice in operand]


def expected_ids(where: Mapping[str, Any], documents: Iterable[Document]) -> frozenset[str]:
    """The ids of ``documents`` that pass ``where``, by the reference."""
    return frozenset(d.id for d in documents if reference_matches(where, d.metadata))


# -- the cases ------------------------------------------------------------------------------

# The four documents of issue 32: an int, a float of the same value, a bool, and no field.
FILTER_DOCUMENTS: tuple[Document, ...] = (
    Document("int", "an int year", {"year": 2021, "incomplete": False, "lang": "en", "n": 1}),
    Document("float", "a float year", {"year": 2021.0, "incomplete": True, "lang": "fr", "n": 1.5}),
    Document("bool", "a bool year", {"year": True, "lang": "日本語", "n": 0, "note": "naïve ü"}),
    Document("none", "no year", {"lang": "en", "note": "2021"}),
    Document("text", "a text year", {"year": "2021", "incomplete": True, "n": -3}),
)

# The nine filters of issue 32 (4 of them answered differently by chroma, Qdrant and the bridge),
# and the filter the indexing docs recommend for interrupted chunks.
ISSUE_FILTERS: tuple[Mapping[str, Any], ...] = (
    {"year": 2021},
    {"year": 2021.0},
    {"year": {"$ne": 2021}},
    {"year": {"$nin": [2021, 1999]}},
    {"year": {"$in": [2021.0]}},
    {"year": True},
    {"year": 1},
    {"year": {"$gte": 2021}},
    {"year": {"$ne": True}},
    {"incomplete": {"$ne": True}},
)

FILTER_CASES: tuple[Mapping[str, Any], ...] = (
    *ISSUE_FILTERS,
    {"year": {"$eq": 2021}},
    {"year": "2021"},
    {"year": {"$in": ["2021"]}},
    {"year": {"$in": [2021, "2021", True]}},
    {"year": {"$nin": [True]}},
    {"year": {"$gt": 2020.5}},
    {"year": {"$lt": 2021}},
    {"year": {"$lte": 2021}},
    {"year": {"$gte": 1}},
    {"year": {"$lte": 1}},
    {"n": 1},
    {"n": {"$ne": 1}},
    {"n": {"$gt": 0}},
    {"n": {"$lt": 0.5}},
    {"n": {"$gte": -3}},
    {"incomplete": False},
    {"incomplete": {"$in": [False]}},
    {"incomplete": {"$nin": [True]}},
    {"incomplete": {"$eq": 0}},
    {"lang": "en"},
    {"lang": "日本語"},
    {"lang": {"$ne": "en"}},
    {"lang": {"$in": ["fr", "日本語"]}},
    {"lang": {"$nin": ["en"]}},
    {"note": "naïve ü"},
    {"note": {"$ne": "2021"}},
    {"absent": {"$ne": 1}},
    {"absent": {"$nin": ["x"]}},
    {"absent": "x"},
    {"absent": {"$gte": 0}},
    {"lang": "en", "year": 2021},
    {"lang": "en", "year": {"$ne": 2021}},
    {"$and": [{"lang": "en"}, {"year": {"$ne": 2021}}]},
    {"$or": [{"year": True}, {"note": "2021"}]},
    {"$or": [{"year": {"$gt": 2000}}, {"$and": [{"lang": "en"}, {"incomplete": {"$ne": False}}]}]},
    {"$and": [{"$or": [{"lang": "fr"}, {"n": {"$lt": 0}}]}, {"incomplete": {"$ne": False}}]},
    {"$and": [{"year": 2021}]},
    {"$or": [{"absent": {"$ne": 1}}]},
    {"$and": [{"year": {"$nin": [2021]}}, {"$or": [{"lang": {"$ne": "en"}}, {"n": 1}]}]},
    # integers at the edge of what a 64-bit float holds exactly: accepted, read exactly
    {"n": {"$lt": 2**53}},
    {"year": {"$gt": -(2**53)}},
    {"n": {"$in": [2**53, -(2**53), 1]}},
    {"year": {"$ne": 2**53}},
)

# Filters every backend refuses with InputError.
INVALID_FILTERS: tuple[Any, ...] = (
    {},
    {"$bogus": [{"year": 1}]},
    {"$bogus": 1},
    {"year": {"$like": "20%"}},
    {"year": {"$gte": 2000, "$lte": 2030}},
    {"$or": []},
    {"$and": [{}]},
    {"year": {"$in": []}},
    {"year": {"$nin": "2021"}},
    {"year": [2021]},
    {"year": None},
    {"year": {"$eq": None}},
    {"year": {"$gt": "2000"}},
    {"year": {"$gt": True}},
    {"year": float("nan")},
    {"year": {"$lt": float("inf")}},
    # integers past 2**53, which chromadb and Qdrant read as a neighbour (issue 48 item 8)
    {"year": 2**53 + 1},
    {"n": {"$in": [1, -(2**53) - 1]}},
    {"n": {"$gt": 2**63}},
    {"year": {"$nin": [10**30]}},
)

# The store's bound on the $in/$nin values of one filter (corrective_rag.store.checks); chromadb
# answers 10,000 values in one $in, and crashed on them spelled as 10,000 equalities (issue 41).
LARGE_LIST = 10_000
_MIXED = ["2021", True, 2021.0, 1.5, -3, *range(100_000, 100_000 + LARGE_LIST - 6)]

# Filters with LARGE_LIST values in all (a fraction counts twice: the store adds its integer
# part), which every backend answers as the reference does.
LARGE_FILTERS: tuple[Mapping[str, Any], ...] = (
    {"year": {"$in": [*range(100_000, 100_000 + LARGE_LIST - 1), 2021]}},
    {"year": {"$nin": [*range(100_000, 100_000 + LARGE_LIST - 1), 2021]}},
    {"lang": {"$in": [*(f"x{i}" for i in range(LARGE_LIST - 1)), "fr"]}},
    {"lang": {"$nin": ["fr", *(f"x{i}" for i in range(LARGE_LIST - 1))]}},
    {"n": {"$in": [i + 0.5 for i in range(-LARGE_LIST // 4, LARGE_LIST // 4)]}},
    {"year": {"$in": _MIXED}},
    {"n": {"$nin": _MIXED}},
)

# Filters past the bound, answered as the reference does or refused with InputError: a list
# ten times too long, and the 10,000 equalities an old translation made of a LARGE_LIST $in.
OVERSIZED_FILTERS: tuple[Mapping[str, Any], ...] = (
    {"year": {"$in": [*range(100_000, 100_000 + 10 * LARGE_LIST), 2021]}},
    {"$or": [{"year": {"$eq": v}} for v in [*range(100_000, 100_000 + LARGE_LIST - 1), 2021]]},
)


class LetterEmbedder:
    """Vectors of letter counts, L2-normalised: a store needs vectors, filters never read them.

    It loads no model, so a filter suite over a real store runs in a second.
    """

    def embed(self, texts: Iterable[str]) -> npt.NDArray[np.float32]:
        """One 27-dimensional vector per text (26 letters and everything else)."""
        rows = []
        for text in texts:
            row = np.zeros(27, dtype=np.float32)
            for char in text.lower():
                row[ord(char) - 97 if "a" <= char <= "z" else 26] += 1.0
            row[26] += 1.0  # never the zero vector
            rows.append(row / np.linalg.norm(row))
        return np.asarray(rows, dtype=np.float32).reshape(len(rows), 27)


def filter_mismatches(
    select: Any,
    documents: Iterable[Document] = FILTER_DOCUMENTS,
    cases: Iterable[Mapping[str, Any]] = FILTER_CASES,
) -> list[str]:
    """One line per case where ``select(where)`` differs from the reference (empty: conforms).

    ``select`` returns the ids, among ``documents``, of those the backend finds for ``where``.
    """
    docs = list(documents)
    lines = []
    for where in cases:
        want = expected_ids(where, docs)
        try:
            got = frozenset(select(where))
        except Exception as exc:  # a backend that fails on a valid filter is reported
            lines.append(f"{where!r}: raised {type(exc).__name__}: {exc}")
            continue
        if got != want:
            lines.append(f"{where!r}: expected {sorted(want)}, got {sorted(got)}")
    return lines


def refusal_mismatches(select: Any, invalid: Iterable[Any] = INVALID_FILTERS) -> list[str]:
    """One line per invalid filter that ``select`` does not refuse with InputError."""
    lines = []
    for where in invalid:
        try:
            got = select(where)
        except InputError:
            continue
        except Exception as exc:
            lines.append(f"{where!r}: raised {type(exc).__name__}, not InputError")
            continue
        lines.append(f"{where!r}: accepted, selected {sorted(got)}")
    return lines


def large_filter_mismatches(
    select: Any, documents: Iterable[Document] = FILTER_DOCUMENTS
) -> list[str]:
    """One line per large filter ``select`` reads unlike the reference (empty: conforms).

    Each of :data:`LARGE_FILTERS` must select the reference's ids; each of
    :data:`OVERSIZED_FILTERS` must select them too or raise InputError.
    """
    docs = list(documents)
    lines = []
    for where in (*LARGE_FILTERS, *OVERSIZED_FILTERS):
        shown = _short(where)
        try:
            got = frozenset(select(where))
        except InputError as exc:
            if any(where is big for big in OVERSIZED_FILTERS):
                continue
            lines.append(f"{shown}: refused: {str(exc)[:200]}")
            continue
        except Exception as exc:
            lines.append(f"{shown}: raised {type(exc).__name__}: {str(exc)[:200]}")
            continue
        want = expected_ids(where, docs)
        if got != want:
            lines.append(f"{shown}: expected {sorted(want)}, got {sorted(got)}")
    return lines


def _short(where: Mapping[str, Any]) -> str:
    return cut_text(repr(where), 100)


class FilterContract:
    """The filter suite: subclass it as ``Test...`` and implement :meth:`select`.

    pytest collects the three ``test_`` methods of the subclass; each raises ``AssertionError``
    listing every filter the backend reads differently from :func:`reference_matches`.
    """

    documents: tuple[Document, ...] = FILTER_DOCUMENTS

    def select(self, where: Mapping[str, Any]) -> Iterable[str]:
        """The ids of :attr:`documents` the backend finds for ``where``."""
        raise NotImplementedError

    def test_filters_select_what_the_reference_selects(self) -> None:
        """Every case of :data:`FILTER_CASES` selects the reference's ids."""
        lines = filter_mismatches(self.select, self.documents)
        if lines:
            raise AssertionError("filters read unlike the reference:\n" + "\n".join(lines))

    def test_large_filters_are_answered_or_refused(self) -> None:
        """Large filters select the reference's ids; oversized ones too, or raise InputError."""
        lines = large_filter_mismatches(self.select, self.documents)
        if lines:
            raise AssertionError("large filters read unlike the reference:\n" + "\n".join(lines))

    def test_invalid_filters_are_refused(self) -> None:
        """Every filter of :data:`INVALID_FILTERS` raises InputError."""
        lines = refusal_mismatches(self.select)
        if lines:
            raise AssertionError("invalid filters not refused:\n" + "\n".join(lines))
