"""The trace model: events (columnar), tracks, metadata, links and steps, built once by the loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from tracelens.model.events import GPU_ACTIVITY_KINDS, I32, I64, Bool, EventTable, kind_mask
from tracelens.model.memory import CounterTable, MemoryTable
from tracelens.model.serial import Arrays, from_plain, to_plain

WHOLE_TRACE_SOURCE = "whole_trace"  # `StepTable.source` (JSON `trace.step_source`) of a trace without steps


class TrackTable(msgspec.Struct, frozen=True):
    """One row per (pid, tid) pair; GPU tracks are device/stream pairs. `thread_name`, `process_name` and
    `sort_index`: per track, from the trace's metadata events (`thread_name`, `process_name`,
    `thread_sort_index`; docs/loading.md#thread-names), "" and -1 where the trace gives none (GPU tracks: always);
    empty when the table was built without them."""

    pid: tuple[str, ...]
    tid: tuple[str, ...]
    is_gpu: Bool
    device: I64  # GPU device index, -1 for CPU tracks
    stream: I64  # GPU stream id, -1 for CPU tracks
    thread_name: tuple[str, ...] = ()  # as the trace writes it ("thread 871 (pt_autograd_0)")
    process_name: tuple[str, ...] = ()
    sort_index: I64 | None = None

    def __len__(self) -> int:
        return len(self.pid)

    def label(self, track: int) -> str:
        """`GPU 0 stream 7`; a CPU thread by its name and tid when the trace names it (`pt_autograd_0 (871)`),
        else `CPU pid/tid`."""
        if self.is_gpu[track]:
            return f"GPU {self.device[track]} stream {self.stream[track]}"
        name = self.short_name(track)
        return f"{name} ({self.tid[track]})" if name else f"CPU {self.pid[track]}/{self.tid[track]}"

    def short_name(self, track: int) -> str:
        """The thread's name without Kineto's `thread <tid> (...)` wrapper, at most `MAX_NAME_CHARS` characters;
        "" when the trace names no such thread."""
        if not self.thread_name or self.is_gpu[track]:
            return ""
        return short_thread_name(self.thread_name[track], self.tid[track])


MAX_NAME_CHARS = 48  # longer thread names are cut (with "…") in labels


def short_thread_name(name: str, tid: str) -> str:
    """`name` without Kineto's wrapper (`thread 871 (pt_autograd_0)` with tid 871 → `pt_autograd_0`), cut to
    `MAX_NAME_CHARS`; other names as they are."""
    wrapper = f"thread {tid} ("
    if name.startswith(wrapper) and name.endswith(")") and len(name) > len(wrapper) + 1:
        name = name[len(wrapper) : -1]
    name = " ".join(name.split())  # no newlines or runs of spaces in a label
    return name if len(name) <= MAX_NAME_CHARS else name[: MAX_NAME_CHARS - 1] + "…"


class Device(msgspec.Struct, frozen=True):
    index: int
    name: str
    num_sms: int | None
    total_memory_bytes: int | None
    compute_capability: str | None


class ProfilerFreeTiming(msgspec.Struct, frozen=True):
    """Step times measured without the profiler by the recording, from a documented metadata key
    (docs/record.md#metadata): the median step and how it was taken."""

    step_us: float  # median over `steps` steps timed just before the profiled window
    steps: int
    clock: str  # "cuda_events" (event to event on the current stream) or "wall_clock" (perf_counter)
    key: str  # the metadata key it was read from ("tracelens_record")
    partial_reason: str | None = None  # the recording's window was cut short (a crash, Ctrl-C), else None


class TraceMeta(msgspec.Struct, frozen=True):
    """Facts about the recording, from the file's top-level keys."""

    schema_version: int | None
    devices: tuple[Device, ...]
    cuda_runtime_version: str | None
    cuda_driver_version: str | None
    hip_runtime_version: str | None
    base_time_ns: int | None
    rank: int | None
    world_size: int | None
    format: str  # "kineto", "kineto-legacy" (2021 categories), "chrome-array"
    run: dict[str, Any]  # the `tracelens_run` object written by our workloads, else {}
    raw: dict[str, Any] = msgspec.field(default_factory=dict)
    profiler_free: ProfilerFreeTiming | None = None  # measured profiler-free step time, when the trace has it
    # profiler options as the trace states them (top-level `record_shapes` etc. or `tracelens_record.options`);
    # None where the trace does not say
    record_shapes: bool | None = None
    with_stack: bool | None = None
    profile_memory: bool | None = None


class Links(msgspec.Struct, frozen=True):
    """Who launched what. Index arrays into the event table; -1 where there is no link.

    - `parent`: enclosing CPU-side event on the same thread (nesting).
    - `launch`: for GPU activity, the runtime/driver call with the same correlation id.
    - `op`: for API calls and GPU activity, the innermost CPU op that issued them.
    - `step`: step index (into `StepTable`) of CPU events by their start and of GPU activity by its launch.
    """

    parent: I32
    depth: I32
    launch: I32
    op: I32
    step: I32
    op_by_external_id: int  # launches whose External id resolved to an enclosing op
    op_by_containment: int  # launches attributed by time containment instead


class StepTable(msgspec.Struct, frozen=True):
    """Profiler steps (`ProfilerStep#N`), steps inferred from repeated calls (`model.steps.infer_steps`), or one
    whole-trace window when the trace has neither."""

    number: I64
    start_ns: I64
    end_ns: I64
    complete: Bool
    source: str  # "ProfilerStep", "inferred" (from `inferred_from`) or WHOLE_TRACE_SOURCE
    inferred_from: str = ""  # what inferred steps are, e.g. "Torch-Compiled Region calls"; "" otherwise
    # True: each step is one call and the time until the next call belongs to no step (steps inferred from
    # torch.compile calls); False: each step is a range or a period of the loop (ProfilerStep, loop markers)
    spans_calls: bool = False

    @property
    def per_step(self) -> bool:
        """Whether these are steps (ProfilerStep or inferred) that per-step figures may be claimed over."""
        return self.source != WHOLE_TRACE_SOURCE

    @property
    def label(self) -> str:
        """How the steps were found, for output: "ProfilerStep", "inferred from ..." or "whole trace"."""
        if self.source == "inferred":
            return f"inferred from {self.inferred_from}"
        return "whole trace" if self.source == WHOLE_TRACE_SOURCE else self.source

    def __len__(self) -> int:
        return int(self.number.shape[0])

    @property
    def duration_ns(self) -> I64:
        return self.end_ns - self.start_ns


class Truncation(msgspec.Struct, frozen=True):
    truncated: bool = False
    dropped_tail_bytes: int = 0


class Trace(msgspec.Struct, frozen=True, weakref=True):
    """A loaded, linked trace. Build it with `tracelens.load()`."""

    path: Path | None
    events: EventTable
    tracks: TrackTable
    meta: TraceMeta
    links: Links
    steps: StepTable
    origin_us: float  # event time 0 ns == this many µs in the file's own clock
    uncompressed_bytes: int
    truncation: Truncation = Truncation()
    warnings: tuple[str, ...] = ()
    # rows are in a canonical order (time, ...), not file order: row i is the source_rows[i]-th complete
    # (`ph: "X"`, finite `ts`) event of the file, which has source_events of them; None means row == position
    source_rows: I64 | None = None
    source_events: int = -1
    # `[memory]` instant events (profile_memory=True) and counter samples (`ph: "C"`); empty when the trace has none
    memory: MemoryTable = msgspec.field(default_factory=MemoryTable.empty)
    counters: CounterTable = msgspec.field(default_factory=CounterTable.empty)

    @property
    def n_events(self) -> int:
        return len(self.events)

    def gpu_mask(self) -> Bool:
        return kind_mask(self.events.kind, GPU_ACTIVITY_KINDS)

    def step_index(self, number: int) -> int | None:
        hits = np.flatnonzero(self.steps.number == number)
        return int(hits[0]) if hits.size else None

    def to_plain(self) -> tuple[Arrays, dict[str, Any]]:
        """Every field of the trace and of its tables, as numpy arrays and JSON-able values
        (`tracelens.model.serial`: written over the dataclass fields, so no field can be left out)."""
        return to_plain(self)

    @classmethod
    def from_plain(cls, arrays: Arrays, values: dict[str, Any]) -> Trace:
        """The trace that `to_plain` gave `arrays` and `values` for (`KeyError`, `TypeError` or `ValueError`
        when they describe none)."""
        return from_plain(cls, arrays, values)
