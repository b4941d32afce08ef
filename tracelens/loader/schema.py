"""msgspec schemas for the Kineto / Chrome trace JSON: only the fields the analyses use are decoded.

Unknown keys are ignored; `Input Dims` and friends stay undecoded (`msgspec.Raw`) until an analysis asks.
"""

from __future__ import annotations

import typing
from typing import Any, Union

import msgspec

Number = int | float
NO_RAW = msgspec.Raw()  # default for absent raw fields (empty)


class Args(msgspec.Struct, gc=False):
    """The one declaration of the `args` read from each complete event (`name=` is the JSON key), by type:

    - an integer field (default -1: absent is -1, not None, so columns build without a per-event check; an
      explicit JSON null still decodes to None) is in `INT_ARGS` and fills the `EventTable` column of its name
      as read (`loader.columns`), except the four that `columns.COMBINED_INT_ARGS` combines;
    - a `list[int]` field is in `DIM_ARGS` (the product of its dims fills a column, kernels only);
    - a `msgspec.Raw` field is in `RAW_ARGS` (kept undecoded until an analysis asks) and fills the `EventTable`
      column of its name (`input_type`: `input_types`).

    The C extension's field table (tracelens/_native_fields.h) is generated from these tuples
    (scripts/gen_native_fields.py). Adding an integer argument is its line here and its column in
    `model.events.EventTable` (`tests/test_toys.py` adds one)."""

    external_id: int | None = msgspec.field(default=-1, name="External id")
    external_id_legacy: int | None = msgspec.field(default=-1, name="external id")
    correlation: int | str | None = -1
    sequence_number: int | None = msgspec.field(default=-1, name="Sequence number")
    device: int | str | None = -1
    stream: int | str | None = -1
    bytes: int | str | None = -1
    grid: list[int] | str | None = None
    block: list[int] | str | None = None
    input_dims: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default=NO_RAW, name="Concrete Inputs")
    input_strides: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Strides")


def _args_of_kind(kind: str) -> tuple[str, ...]:
    """The `Args` fields of one kind (`int`, `dims`, `raw`), in declaration order."""
    kinds = {}
    for field in msgspec.structs.fields(Args):
        arms = typing.get_args(field.type) or (field.type,)
        if field.type is msgspec.Raw:
            kinds[field.name] = "raw"
        elif any(typing.get_origin(arm) is list for arm in arms):
            kinds[field.name] = "dims"
        elif int in arms and field.default == -1:
            kinds[field.name] = "int"
        else:
            raise TypeError(f"Args.{field.name}: neither an int (default -1), a list[int] nor a msgspec.Raw field")
    return tuple(name for name, of in kinds.items() if of == kind)


INT_ARGS = _args_of_kind("int")  # external_id, external_id_legacy, correlation, ..., bytes
DIM_ARGS = _args_of_kind("dims")  # grid, block
RAW_ARGS = _args_of_kind("raw")  # input_dims, input_type, concrete_inputs


class _EventFields(msgspec.Struct, gc=False):
    """Fields every event shares; `ph` is declared by the subclasses (a plain field or a union tag)."""

    cat: str = ""
    name: str = ""
    pid: int | str | None = None
    tid: int | str | None = None
    ts: Number | None = None
    dur: Number | None = None
    args: Args | None = None


class Event(_EventFields, gc=False):
    ph: str = ""


class CompleteEvent(_EventFields, gc=False, tag_field="ph", tag="X"):
    """A `ph: "X"` event, for the streaming decoder's tagged union."""


class MemoryArgs(msgspec.Struct, gc=False):
    """The `args` of a `[memory]` instant event (`profile_memory=True`). Integers only (Kineto writes nothing
    else; another type fails validation and the file takes the whole-file path), so the columns build without
    a per-value type check. Absent fields are -1 (as in `Args`; `Bytes` absent counts as 0 bytes, -1 would be
    a free), an explicit JSON null is None."""

    addr: int | None = msgspec.field(default=-1, name="Addr")
    bytes: int | None = msgspec.field(default=0, name="Bytes")  # negative for a free
    total_allocated: int | None = msgspec.field(default=-1, name="Total Allocated")
    total_reserved: int | None = msgspec.field(default=-1, name="Total Reserved")
    device_id: int | None = msgspec.field(default=-1, name="Device Id")
    device_type: int | None = msgspec.field(default=-1, name="Device Type")


class InstantFields(msgspec.Struct, gc=False):
    """Fields of both instant phases (`isinstance` of this picks them out)."""

    name: str = ""
    pid: int | str | None = None
    tid: int | str | None = None
    ts: Number | None = None
    args: MemoryArgs | None = None


class InstantEvent(InstantFields, gc=False, tag_field="ph", tag="i"):
    """A `ph: "i"` event; only `[memory]` ones are kept (`loader.extras`)."""


class LegacyInstantEvent(InstantFields, gc=False, tag_field="ph", tag="I"):
    """A `ph: "I"` event (the older spelling of an instant event)."""


class CounterEvent(msgspec.Struct, gc=False, tag_field="ph", tag="C"):
    """A `ph: "C"` event: each numeric `args` value is a sample of the series of that key."""

    name: str = ""
    pid: int | str | None = None
    ts: Number | None = None
    args: dict[str, Any] | None = None


class MetaArgs(msgspec.Struct, gc=False):
    """The `args` of a metadata (`ph: "M"`) event: `name` (of `thread_name`, `process_name`) and `sort_index` (of
    `thread_sort_index`), kept as raw JSON (any value type decodes; `loader.threads` reads them)."""

    name: msgspec.Raw = NO_RAW
    sort_index: msgspec.Raw = NO_RAW


class MetadataEvent(msgspec.Struct, gc=False, tag_field="ph", tag="M"):
    """A `ph: "M"` event (`thread_name`, `process_name`, `thread_sort_index`, ...): a few per file."""

    name: str = ""
    pid: int | str | None = None
    tid: int | str | None = None
    args: MetaArgs | None = None


# Every other phase of the Chrome trace format decodes to an empty struct (its fields are skipped, not built).
# A phase outside this list fails validation and the loader falls back to the whole-file decoder.
OTHER_PHASES = ("B", "E", "i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "N", "O", "D", "M", "V", "v", "R", "c")
EXTRA_PHASES = ("i", "I", "C", "M")  # typed in `AnyPhaseEventWithExtras`
_SKIPPED = {
    phase: msgspec.defstruct(f"Skipped{index}", [], gc=False, tag_field="ph", tag=phase)
    for index, phase in enumerate(OTHER_PHASES)
}
AnyPhaseEvent = Union[(CompleteEvent, *_SKIPPED.values())]  # type: ignore[valid-type]
# The same union with instant, counter and metadata events typed: the streamed chunks and the whole-file text that
# holds a marker of one (`loader.extras`) are decoded with it.
AnyPhaseEventWithExtras = Union[  # type: ignore[valid-type]
    (
        CompleteEvent,
        InstantEvent,
        LegacyInstantEvent,
        CounterEvent,
        MetadataEvent,
        *(skipped for phase, skipped in _SKIPPED.items() if phase not in EXTRA_PHASES),
    )
]
