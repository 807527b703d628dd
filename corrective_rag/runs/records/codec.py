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
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from corrective_rag.errors import InputError
from corrective_rag.inputs import is_int, is_number
from corrective_rag.types import RunResult, Verdict, missing_items

__all__ = ["from_dict", "to_dict"]

T = TypeVar("T")


# Values returned as they are, by exact type: most of a run's values are these.
_SCALARS = frozenset({str, int, float, bool, type(None)})


@functools.cache
def _field_names(kind: type) -> tuple[str, ...] | None:
    """The field names of dataclass type ``kind``, or None for any other type (once per type)."""
    if dataclasses.is_dataclass(kind):
        return tuple(f.name for f in dataclasses.fields(kind))
    return None


def to_dict(value: Any) -> Any:
    """Turn a dataclass value (recursively) into JSON-ready dicts, lists and scalars.

    Every batch line goes through here: the fields of each type are looked up once, not per
    value (about a third of the time of the generic walk).
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    names = _field_names(kind)  # type: ignore[arg-type]  # every type is hashable
    if names is not None:
        return {name: to_dict(getattr(value, name)) for name in names}
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


# The writers refuse NaN and infinities (``allow_nan=False``), and no count or index a run
# records comes near 2**63 (the int64 range of every JSON reader that is not Python's).
_INT_LIMIT = 2**63


def _finite(data: int | float, where: str) -> float:
    """``data`` as a finite float, or InputError (a 400-digit integer overflows a float)."""
    try:
        number = float(data)
    except OverflowError as exc:
        raise InputError(f"{where}: number out of range ({len(str(data))} digits)") from exc
    if not math.isfinite(number):
        raise InputError(f"{where}: expected a finite number, got {data!r}")
    return number


def _convert(tp: Any, data: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return data
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if data is None and type(None) in args:
            return None
        options = [arg for arg in args if arg is not type(None)]
        if len(options) == 1:  # ``X | None``: X's own message says what is wrong
            return _convert(options[0], data, where)
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
        return _finite(data, where)
    if tp is int:
        if not is_int(data):
            raise InputError(f"{where}: expected an integer, got {data!r}")
        if not -_INT_LIMIT <= data < _INT_LIMIT:
            raise InputError(f"{where}: integer out of range ({len(str(data))} digits)")
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
    try:
        value = cls(**kwargs)
    except (ValueError, TypeError) as exc:  # InputError too: a value's own check, e.g. a range
        raise InputError(f"{where}: {exc}") from exc
    _check(value, where)
    return value


def _check(value: Any, where: str) -> None:
    """What readers rely on beyond each field's type: a run's iterations are numbered 1..n."""
    if isinstance(value, RunResult):
        for position, rec in enumerate(value.history, start=1):
            if rec.index != position:
                raise InputError(
                    f"{where}.history[{position - 1}]: iteration index {rec.index}, "
                    f"expected {position} (iterations are numbered 1..n in order)"
                )


def _upgrade(cls: Any, data: Mapping[str, Any]) -> Mapping[str, Any]:
    """Older results files: a verdict's ``missing`` was free text (or null), now a list of terms."""
    if cls is Verdict and isinstance(data.get("missing"), str | None):
        return {**data, "missing": list(missing_items(data.get("missing")))}
    return data
