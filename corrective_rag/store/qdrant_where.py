"""Translate the store's chroma-style ``where`` filters into Qdrant filters.

The same filter a user gives :class:`~corrective_rag.store.hybrid.HybridStore` works on
the Qdrant backend (:class:`~corrective_rag.store.qdrant.QdrantBackend`)::

    {"lang": "en"}                                   field equals a value
    {"year": {"$gte": 2020}}                         $eq $ne $gt $gte $lt $lte $in $nin
    {"$and": [{...}, {...}]}, {"$or": [{...}, ...]}  nested freely

Metadata lives under the point's ``metadata`` payload key. The semantics are the contract's
(:mod:`~corrective_rag.store.backend`): a number equals a stored number of the same value, int
or float (Qdrant's integer match misses a stored float, so numbers are matched as the range
``[v, v]``); a bool only a bool; ``$ne`` and ``$nin`` are plain negations, so documents
without the field match them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from corrective_rag.errors import InputError
from corrective_rag.store.checks import filter_scalar

__all__ = ["METADATA_KEY", "to_qdrant_filter"]

METADATA_KEY = "metadata"
_RANGES = {"$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}


def to_qdrant_filter(where: Mapping[str, Any]) -> Any:
    """A ``qdrant_client.models.Filter`` equal to the chroma-style ``where``.

    Raises:
        InputError: an unknown operator, an empty ``$and``/``$or``, or a value that is not a
            str, int, float or bool (or a list of them for ``$in``/``$nin``).
    """
    from qdrant_client import models

    if not isinstance(where, Mapping) or not where:
        raise InputError(f"invalid metadata filter {where!r}: expected a non-empty mapping")
    return models.Filter(must=[_clause(key, value, where) for key, value in where.items()])


def _clause(key: str, value: Any, where: Mapping[str, Any]) -> Any:
    from qdrant_client import models

    if key in ("$and", "$or"):
        if not isinstance(value, Sequence) or isinstance(value, str) or not value:
            raise InputError(f"invalid metadata filter {where!r}: {key} needs a non-empty list")
        parts = [to_qdrant_filter(part) for part in value]
        return models.Filter(must=parts) if key == "$and" else models.Filter(should=parts)
    if key.startswith("$"):
        raise InputError(f"invalid metadata filter {where!r}: unknown operator {key!r}")
    field = f"{METADATA_KEY}.{key}"
    if not isinstance(value, Mapping):
        return _equals(field, filter_scalar(value, where))
    if len(value) != 1:
        raise InputError(f"invalid metadata filter {where!r}: one operator per field")
    ((op, operand),) = value.items()
    if op == "$eq":
        return _equals(field, filter_scalar(operand, where))
    if op == "$ne":
        return models.Filter(must_not=[_equals(field, filter_scalar(operand, where))])
    if op in _RANGES:
        number = filter_scalar(operand, where)
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise InputError(f"invalid metadata filter {where!r}: {op} needs a number")
        return models.FieldCondition(key=field, range=models.Range(**{_RANGES[op]: number}))
    if op in ("$in", "$nin"):
        if not isinstance(operand, Sequence) or isinstance(operand, str) or not operand:
            raise InputError(f"invalid metadata filter {where!r}: {op} needs a non-empty list")
        values = list(dict.fromkeys((type(v), filter_scalar(v, where)) for v in operand))
        texts = [v for _, v in values if isinstance(v, str)]
        # the strings in one MatchAny; numbers and bools each need their own condition
        any_of = models.Filter(
            should=[_equals(field, v) for _, v in values if not isinstance(v, str)]
            + (
                [models.FieldCondition(key=field, match=models.MatchAny(any=texts))]
                if texts
                else []
            )
        )
        if op == "$in":
            return any_of
        return models.Filter(must_not=[any_of])
    raise InputError(f"invalid metadata filter {where!r}: unknown operator {op!r}")


def _equals(field: str, value: Any) -> Any:
    from qdrant_client import models

    if isinstance(value, int | float) and not isinstance(value, bool):  # int or float stored
        return models.FieldCondition(key=field, range=models.Range(gte=value, lte=value))
    return models.FieldCondition(key=field, match=models.MatchValue(value=value))
