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
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

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


# The writers refuse NaN and infinities (``allow_nan=False``), and no count or index a run
# records comes near 2**63 (the int64 range of every JSON reader that is not Python's).
_INT_LIMIT = 2**63

# data, where -> the value; InputError naming ``where`` when data does not fit
Convert = Callable[[Any, str], Any]


def _finite(data: int | float, where: str) -> float:
    """``data`` as a finite float, or InputError (a 400-digit integer overflows a float)."""
    try:
        number = float(data)
    except OverflowError as exc:
        raise InputError(f"{where}: number out of range ({len(str(data))} digits)") from exc
    if not math.isfinite(number):
        raise InputError(f"{where}: expected a finite number, got {data!r}")
    return number


def _as_is(data: Any, where: str) -> Any:
    return data


def _as_float(data: Any, where: str) -> float:
    if not is_number(data):
        raise InputError(f"{where}: expected a number, got {data!r}")
    return _finite(data, where)


def _as_int(data: Any, where: str) -> Any:
    if not is_int(data):
        raise InputError(f"{where}: expected an integer, got {data!r}")
    if not -_INT_LIMIT <= data < _INT_LIMIT:
        raise InputError(f"{where}: integer out of range ({len(str(data))} digits)")
    return data


def _as_mapping(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise InputError(f"{where}: expected an object, got {type(data).__name__}")
    return dict(data)


def _as_list(data: Any, where: str) -> list[Any] | tuple[Any, ...]:
    if not isinstance(data, list | tuple):
        raise InputError(f"{where}: expected a list, got {type(data).__name__}")
    return data


@functools.cache
def _converter(tp: Any) -> Convert:
    """How a value of type hint ``tp`` is read back, worked out once per hint.

    Reading a results file converts tens of thousands of values; asking ``typing`` what each
    hint is for every value took most of the time (about 1.6 ms per batch line).
    """
    origin = typing.get_origin(tp)
    if tp is Any:
        return _as_is
    if origin in (typing.Union, types.UnionType):
        return _union(tp)
    if origin is tuple:
        return _tuple(typing.get_args(tp))
    if origin in (Mapping, dict) or tp in (Mapping, dict):
        return _as_mapping
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return functools.partial(_from_where, tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return functools.partial(_member, tp)
    if tp is float:
        return _as_float
    if tp is int:
        return _as_int
    if tp in (str, bool):
        return functools.partial(_exactly, tp)
    return _as_is


def _union(tp: Any) -> Convert:
    args = typing.get_args(tp)
    nullable = type(None) in args
    options = [_converter(arg) for arg in args if arg is not type(None)]

    def convert(data: Any, where: str) -> Any:
        if data is None and nullable:
            return None
        if len(options) == 1:  # ``X | None``: X's own message says what is wrong
            return options[0](data, where)
        errors = []
        for option in options:
            try:
                return option(data, where)
            except (InputError, TypeError, ValueError) as exc:
                errors.append(str(exc))
        raise InputError(f"{where}: {data!r} matches none of {tp}: {'; '.join(errors)}")

    return convert


def _tuple(args: tuple[Any, ...]) -> Convert:
    if len(args) == 2 and args[1] is Ellipsis:
        item = _converter(args[0])

        def each(data: Any, where: str) -> tuple[Any, ...]:
            return tuple(item(v, f"{where}[{i}]") for i, v in enumerate(_as_list(data, where)))

        return each
    items = [_converter(arg) for arg in args]

    def fixed(data: Any, where: str) -> tuple[Any, ...]:
        pairs = zip(items, _as_list(data, where), strict=False)
        return tuple(convert(v, f"{where}[{i}]") for i, (convert, v) in enumerate(pairs))

    return fixed


def _member(kind: type[enum.Enum], data: Any, where: str) -> enum.Enum:
    try:
        return kind(data)
    except ValueError as exc:
        raise InputError(f"{where}: {data!r} is not a valid {kind.__name__}") from exc


def _exactly(kind: type, data: Any, where: str) -> Any:
    if not isinstance(data, kind):
        raise InputError(f"{where}: expected {kind.__name__}, got {data!r}")
    return data


def _from_where(cls: type[T], data: Any, where: str) -> T:
    return from_dict(cls, data, where=where)


@functools.cache
def _plan(cls: Any) -> tuple[tuple[str, Convert, bool], ...]:
    """Each field of dataclass ``cls``: its name, how it is read, and whether it is required."""
    hints = typing.get_type_hints(cls)
    return tuple(
        (
            f.name,
            _converter(hints[f.name]),
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in dataclasses.fields(cls)
    )


def from_dict(cls: type[T], data: Any, *, where: str = "") -> T:
    """Rebuild a dataclass value of type ``cls`` from its :func:`to_dict` form.

    Raises:
        InputError: when ``data`` does not have the shape of ``cls`` (names the path).
    """
    where = where or cls.__name__
    if not isinstance(data, Mapping):
        raise InputError(f"{where}: expected an object, got {type(data).__name__}")
    kwargs: dict[str, Any] = {}
    data = _upgrade(cls, data)
    for name, convert, required in _plan(cls):  # type: ignore[arg-type]  # types hash
        if name in data:
            kwargs[name] = convert(data[name], f"{where}.{name}")
        elif required:
            raise InputError(f"{where}: missing field {name!r}")
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
