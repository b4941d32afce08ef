"""The model's serialization: any model record (a `Trace` and every table in it) to plain data and back.

Contract: `to_plain(obj)` returns `(arrays, values)`: `arrays` maps dotted field paths to numpy arrays of plain
(non-object) dtypes, `values` is a JSON-able tree mirroring the record's fields (arrays appear in it as
`True`, an absent optional array as `None`). `from_plain(cls, arrays, values)` rebuilds an equal object: same
field values and types, same array dtypes and shapes. Both walk the record's fields and their type
hints, recursing into nested records and tuples of them, so a field added to a model class is carried
without anyone listing it; a field of a type this module cannot carry raises `TypeError` (a test builds every
model class from real traces and round-trips it).

Carried types: nested records (`tracelens.records`: msgspec Structs, dataclasses); numpy arrays
(`npt.NDArray[...]`); object arrays of `bytes`-or-`None` (the raw argument columns), stored as row indexes,
offsets and one byte blob; `X | None`; `tuple[X, ...]`; `Path`; `int` (any size), `float` (NaN and
infinities included), `str`, `bool`; `dict[str, Any]` and `Any` holding JSON values.
"""

from __future__ import annotations

import functools
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from tracelens.records import field_names, is_record_type

Arrays = dict[str, np.ndarray]
T = TypeVar("T")
_NONE_TYPE = type(None)


def to_plain(obj: object) -> tuple[Arrays, dict[str, Any]]:
    """`obj` (a record instance) as arrays and JSON-able values; see the module docstring."""
    arrays: Arrays = {}
    values = _encode(type(obj), obj, "", arrays)
    return arrays, values


def from_plain(cls: type[T], arrays: Arrays, values: dict[str, Any]) -> T:
    """The `cls` instance that `to_plain` turned into `arrays` and `values`. Raises `KeyError`, `TypeError` or
    `ValueError` when they do not describe one."""
    result: T = _decode(cls, values, "", arrays)
    return result


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _optional_arm(hint: Any) -> Any | None:
    """`X` for a hint `X | None`, else None."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        arms = [arm for arm in typing.get_args(hint) if arm is not _NONE_TYPE]
        if len(arms) == 1 and len(typing.get_args(hint)) == 2:
            return arms[0]
    return None


def _is_array(hint: Any) -> bool:
    return typing.get_origin(hint) is np.ndarray or hint is np.ndarray


def _encode(hint: Any, value: Any, name: str, arrays: Arrays) -> Any:
    if is_record_type(hint):
        if type(value) is not hint:
            raise TypeError(f"{name or 'value'}: expected {hint.__name__}, got {type(value).__name__}")
        hints = _hints(typing.cast(type, hint))
        return {
            field: _encode(hints[field], getattr(value, field), _join(name, field), arrays)
            for field in field_names(hint)
        }
    arm = _optional_arm(hint)
    if arm is not None:
        return None if value is None else _encode(arm, value, name, arrays)
    if _is_array(hint):
        if not isinstance(value, np.ndarray):
            raise TypeError(f"{name}: expected a numpy array, got {type(value).__name__}")
        if value.dtype == object:
            arrays.update(_pack_bytes(name, value))
        else:
            arrays[name] = value
        return True
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if len(args) != 2 or args[1] is not Ellipsis or type(value) is not tuple:
            raise TypeError(f"{name}: only tuple[X, ...] fields holding tuples are carried, not {hint}")
        return [_encode(args[0], item, f"{name}[]", arrays) for item in value]
    if hint is Path:
        if not isinstance(value, Path):
            raise TypeError(f"{name}: expected a Path, got {type(value).__name__}")
        return str(value)
    if hint in (int, float, str, bool):
        if type(value) is not hint:
            raise TypeError(f"{name}: expected {hint.__name__}, got {type(value).__name__}")
        return value
    if hint is Any or typing.get_origin(hint) is dict:
        _check_json(value, name)
        return value
    raise TypeError(f"{name}: fields of type {hint} cannot be serialized")


def _decode(hint: Any, value: Any, name: str, arrays: Arrays) -> Any:
    if is_record_type(hint):
        if not isinstance(value, dict):
            raise TypeError(f"{name}: expected an object")
        hints = _hints(hint)
        fields = {field: _decode(hints[field], value[field], _join(name, field), arrays) for field in field_names(hint)}
        return hint(**fields)
    arm = _optional_arm(hint)
    if arm is not None:
        return None if value is None else _decode(arm, value, name, arrays)
    if _is_array(hint):
        if value is not True:
            raise TypeError(f"{name}: expected an array marker")
        if name in arrays:
            return arrays[name]
        return _unpack_bytes(name, arrays)
    if typing.get_origin(hint) is tuple:
        if not isinstance(value, list):
            raise TypeError(f"{name}: expected a list")
        item_hint = typing.get_args(hint)[0]
        if item_hint is str and all(type(item) is str for item in value):
            return tuple(value)  # the common case (names), without a call per item
        return tuple(_decode(item_hint, item, f"{name}[]", arrays) for item in value)
    if hint is Path:
        if not isinstance(value, str):
            raise TypeError(f"{name}: expected a path string")
        return Path(value)
    if hint in (int, float, str, bool):
        if type(value) is not hint:
            raise TypeError(f"{name}: expected {hint.__name__}, got {type(value).__name__}")
        return value
    if hint is Any or typing.get_origin(hint) is dict:
        return value
    raise TypeError(f"{name}: fields of type {hint} cannot be deserialized")


def _check_json(value: Any, name: str) -> None:
    """Raise `TypeError` unless `value` is made of JSON values only (dicts with str keys, lists, str, int,
    float, bool, None): anything else (a tuple, a numpy scalar) would not come back the same."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not all(type(key) is str for key in item):
                raise TypeError(f"{name}: a dict with keys that are not strings")
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
        elif item is not None and type(item) not in (str, int, float, bool):
            raise TypeError(f"{name}: {type(item).__name__} is not a JSON value")


def _pack_bytes(name: str, column: np.ndarray) -> Arrays:
    """An object column of bytes-or-None as (rows holding bytes, their offsets into one blob, the blob)."""
    rows = np.flatnonzero(column != None)  # noqa: E711 (elementwise on an object array)
    values = column[rows].tolist()
    try:
        blob = np.frombuffer(b"".join(values), dtype=np.uint8)
    except TypeError:
        raise TypeError(f"{name}: object arrays must hold bytes or None") from None
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    return {
        f"{name}#n": np.array([column.size], dtype=np.int64),
        f"{name}#rows": rows.astype(np.int64),
        f"{name}#offsets": offsets,
        f"{name}#blob": blob,
    }


def _unpack_bytes(name: str, arrays: Arrays) -> np.ndarray:
    n = int(arrays[f"{name}#n"][0])
    rows = arrays[f"{name}#rows"]
    offsets = arrays[f"{name}#offsets"].tolist()
    blob = arrays[f"{name}#blob"].tobytes()
    if len(offsets) != rows.size + 1 or (rows.size and (int(rows.max()) >= n or int(rows.min()) < 0)):
        raise ValueError(f"{name}: inconsistent byte column")
    out = np.empty(n, dtype=object)  # None in every row (cheaper than np.full)
    if rows.size:
        holder = np.empty(rows.size, dtype=object)
        holder[:] = [blob[offsets[i] : offsets[i + 1]] for i in range(rows.size)]
        out[rows] = holder
    return out
