"""Translate the store's ``where`` filters into ones chromadb reads as the contract says.

The filter language is chromadb's (see :mod:`~corrective_rag.store.backend`), but chromadb 1.x
itself departs from it in three places, all fixed here before a filter reaches it:

* several keys in one mapping, and ``$and``/``$or`` lists of one filter, are refused by
  chromadb: they become a ``$and`` and the filter itself;
* ``$in``/``$nin`` lists must hold values of one Python type for chromadb: a list is sent as
  one chromadb ``$in``/``$nin`` per type it holds (str, bool, int, float), at most four, joined
  by ``$or`` (``$in``) or ``$and`` (``$nin``). (It once became one equality per value, and
  chromadb refuses a ``$or`` of 1,000 and crashes the process on 10,000.)
* chromadb compares a stored integer with a fractional bound truncated (``{"n": 0.5}`` matches
  ``n == 0``, ``{"n": {"$lt": 0.5}}`` misses it): such a bound gets a companion clause on the
  neighbouring integer that makes integers compare by value, while floats still compare with
  the bound itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from corrective_rag.errors import InputError
from corrective_rag.store.checks import filter_scalar

__all__ = ["to_chroma_where"]

_RANGES = ("$gt", "$gte", "$lt", "$lte")
_EXACT = 2.0**53  # floats beyond this are all integers; chromadb compares them as given


def to_chroma_where(where: Mapping[str, Any]) -> dict[str, Any]:
    """The chromadb filter equal, under the contract, to ``where``.

    Raises:
        InputError: an unknown operator, an empty ``$and``/``$or``/``$in``/``$nin`` list, or a
            value that is not a str, int, finite float or bool.
    """
    if not isinstance(where, Mapping) or not where:
        raise InputError(f"invalid metadata filter {where!r}: expected a non-empty mapping")
    return _all([_clause(key, value, where) for key, value in where.items()])


def _all(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return parts[0] if len(parts) == 1 else {"$and": parts}


def _any(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return parts[0] if len(parts) == 1 else {"$or": parts}


def _clause(key: str, value: Any, where: Mapping[str, Any]) -> dict[str, Any]:
    if key in ("$and", "$or"):
        if not isinstance(value, Sequence) or isinstance(value, str) or not value:
            raise InputError(f"invalid metadata filter {where!r}: {key} needs a non-empty list")
        parts = [to_chroma_where(part) for part in value]
        return _all(parts) if key == "$and" else _any(parts)
    if key.startswith("$"):
        raise InputError(f"invalid metadata filter {where!r}: unknown operator {key!r}")
    if not isinstance(value, Mapping):
        return _compare(key, "$eq", filter_scalar(value, where))
    if len(value) != 1:
        raise InputError(f"invalid metadata filter {where!r}: one operator per field")
    ((op, operand),) = value.items()
    if op in ("$in", "$nin"):
        if not isinstance(operand, Sequence) or isinstance(operand, str) or not operand:
            raise InputError(f"invalid metadata filter {where!r}: {op} needs a non-empty list")
        return _listed(key, op, [filter_scalar(v, where) for v in operand])
    if op in _RANGES:
        bound = filter_scalar(operand, where)
        if isinstance(bound, bool) or not isinstance(bound, int | float):
            raise InputError(f"invalid metadata filter {where!r}: {op} needs a number")
        return _compare(key, op, bound)
    if op in ("$eq", "$ne"):
        return _compare(key, op, filter_scalar(operand, where))
    raise InputError(f"invalid metadata filter {where!r}: unknown operator {op!r}")


def _listed(key: str, op: str, values: list[Any]) -> dict[str, Any]:
    """``{key: {op: values}}`` as chromadb reads it: one list per value type, fractions exact."""
    groups: dict[type, list[Any]] = {}
    fractions: list[float] = []
    for kind, value in dict.fromkeys((_kind(v), _kind(v)(v)) for v in values):
        if kind is float and not value.is_integer() and abs(value) < _EXACT:
            fractions.append(value)
        else:
            groups.setdefault(kind, []).append(value)
    inside = op == "$in"
    parts: list[dict[str, Any]] = [{key: {op: group}} for group in groups.values()]
    if fractions:
        # chromadb reads a fraction as trunc(fraction) against stored integers (see _compare):
        # the integers it would wrongly match are taken out of an $in and put back into a $nin
        cuts = sorted({math.trunc(f) for f in fractions})
        plain: dict[str, Any] = {key: {op: fractions}}
        parts.append(
            {"$and": [plain, {key: {"$nin": cuts}}]}
            if inside
            else {"$or": [plain, {key: {"$in": cuts}}]}
        )
    return _any(parts) if inside else _all(parts)


def _kind(value: Any) -> type:
    """The one type chromadb accepts ``value`` as: 1, 1.0 and True are three kinds."""
    for kind in (bool, int, float):
        if isinstance(value, kind):
            return kind
    return str


def _compare(key: str, op: str, value: Any) -> dict[str, Any]:
    """``{key: {op: value}}``, with the integer companion a fractional bound needs."""
    plain = {key: {op: value}}
    if not isinstance(value, float) or value.is_integer() or abs(value) >= _EXACT:
        return plain
    # chromadb reads ``value`` as trunc(value) against stored integers; each companion is an
    # integer clause, right for integers and floats alike, that restores the comparison by value
    low, high, cut = math.floor(value), math.ceil(value), math.trunc(value)
    companion = {
        "$eq": ("$and", {key: {"$ne": cut}}),
        "$ne": ("$or", {key: {"$eq": cut}}),
        "$lt": ("$or", {key: {"$eq": low}}),
        "$lte": ("$and", {key: {"$ne": high}}),
        "$gt": ("$or", {key: {"$eq": high}}),
        "$gte": ("$and", {key: {"$ne": low}}),
    }
    join, extra = companion[op]
    return {join: [plain, extra]}
