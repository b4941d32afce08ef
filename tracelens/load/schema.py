"""msgspec schemas for the Kineto / Chrome trace JSON: only the fields the analyses use are decoded.

Unknown keys are ignored; `Input Dims` and friends stay undecoded (`msgspec.Raw`) until an analysis asks.
"""

from __future__ import annotations

import msgspec

Number = int | float
NO_RAW = msgspec.Raw()  # default for absent raw fields (empty)


class Args(msgspec.Struct, gc=False):
    external_id: int | None = msgspec.field(default=None, name="External id")
    external_id_legacy: int | None = msgspec.field(default=None, name="external id")
    correlation: int | str | None = None
    sequence_number: int | None = msgspec.field(default=None, name="Sequence number")
    device: int | str | None = None
    stream: int | str | None = None
    bytes: int | str | None = None
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
