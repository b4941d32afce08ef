"""msgspec schemas for the Kineto / Chrome trace JSON: only the fields the analyses use are decoded.

Unknown keys are ignored; `Input Dims` and friends stay undecoded (`msgspec.Raw`) until an analysis asks.
"""

from __future__ import annotations

import msgspec

Number = int | float
NO_RAW = msgspec.Raw()  # default for absent raw fields (empty)


class Args(msgspec.Struct, gc=False):
    """Selected `args`. Absent integer fields are -1 (not None) so columns build without a per-event check;
    an explicit JSON null still decodes to None."""

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


class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str | None = None
    tid: int | str | None = None
    ts: Number | None = None
    dur: Number | None = None
    args: Args | None = None


class TraceDocument(msgspec.Struct, gc=False):
    traceEvents: list[Event] = []


class LenientDocument(msgspec.Struct, gc=False):
    """Second-chance schema: any value anywhere, coerced by hand afterwards."""

    traceEvents: list[dict[str, object]] | None = None


class DeviceProperties(msgspec.Struct, gc=False):
    id: int = -1
    name: str = ""
    totalGlobalMem: int | None = None
    computeMajor: int | None = None
    computeMinor: int | None = None
    numSms: int | None = None
