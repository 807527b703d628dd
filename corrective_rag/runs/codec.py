"""Lossless conversion between the package's frozen dataclasses and JSON-ready dicts.

The JSON form is defined by the dataclass fields themselves: a dataclass becomes an object with
one key per field, an enum its value, a tuple a list, a mapping an object. ``from_dict`` walks the
type hints to rebuild the exact values, so ``from_dict(T, to_dict(x)) == x`` for every value type
in :mod:`corrective_rag.types`.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from corrective_rag.errors import InputError
from corrective_rag.inputs import is_int, is_number
from corrective_rag.types import Verdict, missing_items

__all__ = ["from_dict", "to_dict"]

T = TypeVar("T")


def to_dict(value: Any) -> Any:
    """Turn a dataclass value (recursively) into JSON-ready dicts, lists and scalars."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_dict(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [to_dict(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): to_dict(v) for k, v in value.items()}
    return value


@functools.cache
def _hints(cls: Any) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _convert(tp: Any, data: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return data
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if data is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, data, where)
            except (InputError, TypeError, ValueError) as exc:
                errors.append(str(exc))
        raise InputError(f"{where}: {data!r} matches none of {tp}: {'; '.join(errors)}")
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(data, list | tuple):
            raise InputError(f"{where}: expected a list, got {type(data).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(data))
        return tuple(
            _convert(a, v, f"{where}[{i}]")
            for i, (a, v) in enumerate(zip(args, data, strict=False))
        )
    if origin in (Mapping, dict) or tp in (Mapping, dict):
        if not isinstance(data, Mapping):
            raise InputError(f"{where}: expected an object, got {type(data).__name__}")
        return dict(data)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return from_dict(tp, data, where=where)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError as exc:
            raise InputError(f"{where}: {data!r} is not a valid {tp.__name__}") from exc
    if tp is float:
        if not is_number(data):
            raise InputError(f"{where}: expected a number, got {data!r}")
        return float(data)
    if tp is int:
        if not is_int(data):
            raise InputError(f"{where}: expected an integer, got {data!r}")
        return data
    if tp in (str, bool):
        if not isinstance(data, tp):
            raise InputError(f"{where}: expected {tp.__name__}, got {data!r}")
        return data
    return data


def from_dict(cls: type[T], data: Any, *, where: str = "") -> T:
    """Rebuild a dataclass value of type ``cls`` from its :func:`to_dict` form.

    Raises:
        InputError: when ``data`` does not have the shape of ``cls`` (names the path).
    """
    where = where or cls.__name__
    if not isinstance(data, Mapping):
        raise InputError(f"{where}: expected an object, got {type(data).__name__}")
    hints = _hints(cast(Any, cls))
    kwargs: dict[str, Any] = {}
    data = _upgrade(cls, data)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise InputError(f"{where}: missing field {f.name!r}")
    return cls(**kwargs)


def _upgrade(cls: Any, data: Mapping[str, Any]) -> Mapping[str, Any]:
    """Older results files: a verdict's ``missing`` was free text (or null), now a list of terms."""
    if cls is Verdict and isinstance(data.get("missing"), str | None):
        return {**data, "missing": list(missing_items(data.get("missing")))}
    return data
