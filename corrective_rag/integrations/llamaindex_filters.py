"""The store's chroma-style ``where`` for a LlamaIndex index (extra ``[llamaindex]``).

:func:`to_metadata_filters` translates it into LlamaIndex ``MetadataFilters`` for a vector
store to apply with its own semantics; for LlamaIndex's in-memory store, whose semantics differ
from the stores' (``True == 1``, no nesting), :func:`matching_node_ids` selects the nodes as
the stores would (:func:`~corrective_rag.integrations.bridge.where_matches`), and the search is
restricted to them. Used by :class:`~corrective_rag.integrations.llamaindex.LlamaIndexRetriever`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from corrective_rag.integrations import MissingExtraError

try:
    from llama_index.core.indices.vector_store.base import VectorStoreIndex
    from llama_index.core.vector_stores.simple import SimpleVectorStore
    from llama_index.core.vector_stores.types import (
        FilterCondition,
        FilterOperator,
        MetadataFilter,
        MetadataFilters,
    )
except (
    ImportError
) as _missing:  # pragma: no cover - exercised in a subprocess without the framework
    raise MissingExtraError(
        "corrective_rag.integrations.llamaindex needs llama-index-core: "
        "pip install 'corrective_rag[llamaindex]'"
    ) from _missing

from corrective_rag.integrations.bridge import where_matches

__all__ = ["in_memory_index", "matching_node_ids", "to_metadata_filters"]

_OPERATORS = {
    "$eq": FilterOperator.EQ,
    "$ne": FilterOperator.NE,
    "$gt": FilterOperator.GT,
    "$gte": FilterOperator.GTE,
    "$lt": FilterOperator.LT,
    "$lte": FilterOperator.LTE,
    "$in": FilterOperator.IN,
    "$nin": FilterOperator.NIN,
}


def to_metadata_filters(where: Mapping[str, Any]) -> MetadataFilters:
    """LlamaIndex ``MetadataFilters`` for the store's chroma-style ``where``.

    ``$and`` / ``$or`` become filters with that condition, flat where each part is one clause
    (LlamaIndex's in-memory store refuses nested filters: a :class:`StoreError` then); each
    vector store applies them with its own semantics (LlamaIndex's in-memory store, unlike
    chroma, lets ``$ne`` / ``$nin`` match documents without the field).

    Raises:
        InputError: the filter is not one the stores accept (see
            :func:`~corrective_rag.integrations.bridge.where_matches`).
    """
    where_matches(where, {})  # the same checks, and the same errors, as the stores'
    if len(where) == 1 and next(iter(where)) in ("$and", "$or"):
        ((key, value),) = where.items()
        condition = FilterCondition.AND if key == "$and" else FilterCondition.OR
        return MetadataFilters(
            filters=[_single(to_metadata_filters(p)) for p in value], condition=condition
        )
    parts: list[MetadataFilter | MetadataFilters] = []
    for key, value in where.items():
        if key in ("$and", "$or"):
            parts.append(to_metadata_filters({key: value}))
        elif isinstance(value, Mapping):
            ((op, operand),) = value.items()
            operand = list(operand) if op in ("$in", "$nin") else operand
            parts.append(MetadataFilter(key=key, value=operand, operator=_OPERATORS[op]))
        else:
            parts.append(MetadataFilter(key=key, value=value, operator=FilterOperator.EQ))
    return MetadataFilters(filters=parts, condition=FilterCondition.AND)


def in_memory_index(index: Any) -> TypeGuard[VectorStoreIndex]:
    """Whether ``index`` is a vector index in LlamaIndex's own in-memory store."""
    return isinstance(index, VectorStoreIndex) and isinstance(index.vector_store, SimpleVectorStore)


def matching_node_ids(index: Any, where: Mapping[str, Any]) -> list[str]:
    """The ids of the index's nodes whose metadata pass ``where``, read as the stores read it.

    LlamaIndex's in-memory store has its own filter semantics (``True == 1``, no nesting), so
    the bridge selects the nodes itself and restricts the search to them.
    """
    where_matches(where, {})  # an invalid filter fails here, not per node
    nodes = index.docstore.docs
    return [node_id for node_id, node in nodes.items() if where_matches(where, node.metadata)]


def _single(filters: MetadataFilters) -> MetadataFilter | MetadataFilters:
    """A group of one clause as that clause: stores that refuse nesting take ``$or`` of fields."""
    if len(filters.filters) == 1:
        return filters.filters[0]
    return filters
