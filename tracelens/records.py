"""Records: the frozen types that results and tables are made of, in one place.

Analysis results, the model's tables and the loader's chunks are `msgspec.Struct`s: a Struct class is built in C
when its module is imported (a frozen dataclass is built in Python, many times slower: docs/benchmarks.md), and
msgspec encodes it natively; so are the page data, the hypotheses and the loader's other records. The dataclasses
left are listed, each with its reason, in tests/test_record_kinds.py. The functions here take either kind, so a
renderer or the cache need not know which one a value is.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeGuard, TypeVar

import msgspec

T = TypeVar("T")


def is_record(value: object) -> bool:
    """Whether `value` is a record instance (a Struct or a dataclass instance, not a class)."""
    if isinstance(value, msgspec.Struct):
        return True
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def is_record_type(value: object) -> TypeGuard[type]:
    """Whether `value` is a record class (a Struct or dataclass type)."""
    if not isinstance(value, type):
        return False
    return issubclass(value, msgspec.Struct) or dataclasses.is_dataclass(value)


def field_names(value: object) -> tuple[str, ...]:
    """The record's field names, in declaration order (`value`: an instance or a record class)."""
    if isinstance(value, msgspec.Struct) or (isinstance(value, type) and issubclass(value, msgspec.Struct)):
        return tuple(value.__struct_fields__)
    return tuple(f.name for f in dataclasses.fields(value))  # type: ignore[arg-type]


def replace(record: T, **changes: Any) -> T:
    """A copy of `record` with `changes` applied (the record is not modified)."""
    if isinstance(record, msgspec.Struct):
        return msgspec.structs.replace(record, **changes)
    return dataclasses.replace(record, **changes)  # type: ignore[type-var]


def shallow_dict(record: object) -> dict[str, Any]:
    """`{field: value}` of one record, values as they are (not converted)."""
    return {name: getattr(record, name) for name in field_names(record)}
