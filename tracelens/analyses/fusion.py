"""Fusion opportunities from dataflow: groups of memory-bound kernels linked producer → consumer, and
GEMM-epilogue opportunities (a pointwise consumer of GEMM outputs that the GEMM's epilogue could absorb).

Contract: `analyze_fusion(ctx) -> Fusion` (`fusion_of(trace, window, models=None)` for any window); pure. An
execution trace attached to `trace`
(`tracelens.loader.et.attach`, the `--et FILE` option) is used where it identifies an op's tensors.

Candidates: unfused elementwise / norm / reduction / copy kernels whose launching op has a memory-bound model
(see `opmodels.py`), fills, and `aten::cat`'s tensor-list copies (`list_copy_io`: dtype from the kernel's element
size). The kernels of one op call are one member (`_calls`). Links only on evidence (docs/fusion.md):
- every input slot of every kernel is attributed to the nearest earlier kernel on its stream (same step, at most
  `MAX_SKIPPED` kernels between) that wrote a tensor of its key — the same tensor (execution trace: storage,
  offset and size) or, without one, the same shape AND dtype, directly or through a view op taken between them
  (`views.py`) — first among outputs nobody has read yet. Writers are candidates and the non-candidates whose
  output is known (GEMMs, convolutions, gathers, in-place updates: `op_writes`). Within one backward node's
  function only the buffer an in-place op updates is attributed (its ops' outputs are gradients of different
  inputs: `MulBackward0`'s two products); arguments a backward op reads as tensors the forward saved, and 0-d
  tensors updated in place (module counters), carry no evidence (`_no_evidence`);
- producer → consumer: a candidate's output attributed to a candidate, both forward or both backward, not of
  one node's function (the engine's gradient accumulation and shape reduction after the function are a node
  call of their own, `_backward_nodes`), no `AccumulateGrad` (per-parameter sinks), and no non-candidate between
  them whose input was attributed to the producer (a GEMM that reads the output cannot be moved);
- shared input: two kernels of one backward node's function that read the node's incoming gradient (the same
  tensor id, or without an execution trace an input of equal shape and dtype) — fused, it is read once.
A candidate's output attributed to a non-candidate (GEMM, attention, convolution …) is read outside any group.
Linked kernels form a group. Bytes now = the kernels' modelled bytes; bytes fused = the inputs read from
outside the group (a shared input once) + the outputs used outside it (an output consumed inside the group is
taken as not needed elsewhere — a fuser recomputes it — unless a non-candidate reads it, it is a softmax result
a backward op of the step reads (`_saved_results`), or the execution trace shows an op outside the group reading
it: `_read_outside_groups`). Saving = group kernel time × (1 − fused / now): the fused kernel runs at the bandwidth
the group's kernels achieved.

GEMM epilogue: a group (or single kernel, Inductor `triton_poi_` kernels included) of pointwise kernels whose
inputs include the outputs of GEMM kernels launched just before it (same evidence rules). Bytes that would no
longer move = the GEMM outputs' writes and reads plus the group's intermediates; the saving = the group's kernel
time (its remaining traffic — the group's outputs — is written by the GEMM epilogue; the GEMM stays
compute-bound). Compiled GeGLU: gate and up written and read back (4 × 134 MB) for the gelu·mul kernel.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from tracelens.analyses.dispatch import SYNC_API
from tracelens.analyses.keygroups import F64, first_seen_groups
from tracelens.analyses.opmodels import (
    GATHER_LOSSES,
    GEMM_OPS,
    RESULT_SAVED,
    SAVED_RESULTS,
    base_name,
    gemm_inputs,
    gemm_output,
    input_reads,
    memory_op_io,
    op_reads,
    op_writes,
    saved_arguments,
)
from tracelens.analyses.roofline import KernelModels, kernel_categories, kernel_models
from tracelens.analyses.shapes import DTYPES, OpShapes, Tensor, named_signatures, op_shapes, signature_codes
from tracelens.analyses.views import VIEW_LIKE, Views, view_ops
from tracelens.analyses.window import Window
from tracelens.loader.et import OpTensors, TensorRef, op_tensors
from tracelens.model.cuda_graphs import replaying_launch
from tracelens.model.events import I64, EventTable, Kind
from tracelens.model.kernel_names import CATEGORIES, short_name
from tracelens.model.stats import distinct_ints
from tracelens.model.trace import Trace

if TYPE_CHECKING:
    from tracelens.analyses.context import AnalysisContext

MEMORY_CATEGORIES = ("elementwise", "norm", "reduction", "copy")
MEMORY_MODELS = ("elementwise", "norm", "reduction", "copy", "fill")
POINTWISE_MODELS = ("elementwise",)
MAX_SKIPPED = 3  # other kernels that may sit between a producer and its consumer on the stream
SLOTS = 8  # inputs kept per kernel
BACKWARD_NODE = "autograd::engine::evaluate_function: "
COMPILED_BACKWARD = "CompiledFunctionBackward"  # the node of a torch.compile'd graph's backward
PRODUCER, SHARED, GEMM, CALL = 0, 1, 2, 3  # link kinds (CALL: the later kernels of one op call)
LIST_COPIES = ("aten::cat",)  # ops whose first argument is a tensor list (see `list_copy_io`)
OVERWRITES = frozenset(
    {"aten::copy_", "aten::fill_", "aten::zero_", "aten::normal_", "aten::uniform_"}
)  # first argument
OPAQUE_ELEMENT = re.compile(r"OpaqueType<(\d+)u?>")  # the element size of PyTorch's cat kernels


class FusionOpportunity(msgspec.Struct, frozen=True):
    ops: list[str]
    kernels: list[str]  # short names, in stream order
    calls_per_step: float
    kernel_us_per_step: float
    bytes_now: int  # per call of the group
    bytes_fused: int
    est_saving_us: float  # per step
    stream: int
    kind: str = "chain"  # "chain": memory-bound kernels fused; "gemm_epilogue": absorbed by the GEMMs in `gemm_kernels`
    evidence: str = "shapes"  # "shapes" (shape and dtype) or "tensor ids" (execution trace)
    gemm_kernels: list[str] = msgspec.field(
        default_factory=list
    )  # gemm_epilogue: the GEMM kernels whose outputs it reads
    across_sync: bool = False  # linked (by tensor ids only) across a host sync: a graph break for torch.compile
    note: str = ""


class Fusion(msgspec.Struct, frozen=True):
    shapes_recorded: bool
    opportunities: list[FusionOpportunity]  # chains, then GEMM-epilogue opportunities; largest saving first
    est_saving_us_per_step: float  # chains only (what a fuser of memory-bound kernels would save)
    gemm_epilogue_saving_us_per_step: float = 0.0  # epilogue opportunities (overlap the chains they contain)
    evidence: str = "shapes"  # "tensor ids" when an execution trace identified tensors


def analyze_fusion(ctx: AnalysisContext) -> Fusion:
    return fusion_of(ctx.trace, ctx.steady, ctx.kernel_models)


def fusion_of(trace: Trace, window: Window, models: KernelModels | None = None) -> Fusion:
    ev = trace.events
    models = kernel_models(trace, window) if models is None else models
    kernels = np.flatnonzero(window.in_window & (ev.kind == Kind.KERNEL))
    shapes_recorded = _shapes_recorded(trace, kernels)
    if kernels.size < 2 or len(models) == 0:
        return Fusion(shapes_recorded, [], 0.0)
    kernels = kernels[np.lexsort((ev.ts_ns[kernels], ev.stream[kernels], ev.device[kernels]))]
    tensors = op_tensors(trace)
    info = _kernel_info(trace, window, kernels, models, tensors)
    if info is None:
        return Fusion(shapes_recorded, [], 0.0)
    links = _links(trace, kernels, info)
    steps = max(window.n_steps, 1)
    evidence = "tensor ids" if info.by_id.any() else "shapes"
    chains = _opportunities(trace, kernels, info, links, steps, epilogue=False)
    epilogues = _opportunities(trace, kernels, info, links, steps, epilogue=True)
    return Fusion(
        shapes_recorded,
        chains + epilogues,
        round(float(sum(o.est_saving_us for o in chains)), 3),
        round(float(sum(o.est_saving_us for o in epilogues)), 3),
        evidence,
    )


def _shapes_recorded(trace: Trace, kernels: I64) -> bool:
    """Whether any op of the trace recorded `Input Dims` (the first kernels' launching ops are looked at first)."""
    dims, launching = trace.events.input_dims, trace.links.op[kernels[:4096]]
    if np.flatnonzero(dims[launching[launching >= 0]]).size:  # raw JSON is never empty: only None is false
        return True
    return bool(np.flatnonzero(dims).size)


class _Info(msgspec.Struct, frozen=True):
    """Per kernel, in stream order."""

    candidate: np.ndarray  # bool: a memory-bound fusion candidate
    pointwise: np.ndarray  # bool: may live in a GEMM epilogue (elementwise model, or Inductor `triton_poi_`)
    gemm: np.ndarray  # bool: a GEMM kernel whose op's output is known
    op_row: I64  # the op whose model it got (GEMMs: the launching op), -1 = none
    in_code: I64  # (n, SLOTS) codes of the tensors it reads, -1 padding
    in_bytes: F64  # (n, SLOTS)
    in_rest: F64  # bytes the op moves beyond its coded slots (inputs past `SLOTS`, tensor lists): read from outside
    out_code: I64  # code of the tensor it writes, -1 unknown
    out_bytes: F64
    now: F64  # modelled bytes
    dur_ns: F64
    lane: I64
    step: I64
    node: I64  # row of the backward-node call it runs in, -1 = forward, < -1: a compiled graph's (`_backward_nodes`)
    sink: np.ndarray  # bool: runs in an AccumulateGrad node
    in_place: np.ndarray  # bool: its op updates its first argument, input slot 0, in place (`add_`, `index_add_`)
    opaque: np.ndarray  # bool: not a candidate and its op recorded no shapes: it may touch any tensor
    by_id: np.ndarray  # bool: tensors identified by the execution trace
    call: I64  # position of the first kernel of the op call it belongs to (`_calls`)
    saved: np.ndarray  # bool: a forward softmax whose result a backward op of its step reads (`_saved_results`)
    et_readers: dict[int, list[int]]  # (execution trace) the ops that read a kernel's output after its op
    op_ns: I64  # start of the op whose shapes it got (views taken between two kernels' ops link them)
    track: I64  # thread of that op
    views: Views  # the window's view ops, keyed by the codes of `in_code` / `out_code`
    barrier: I64  # host syncs (`SYNC_OPS`, `SYNC_API`) on the launching thread before the kernel's launch


def _kernel_info(
    trace: Trace, window: Window, kernels: I64, models: KernelModels, tensors: OpTensors | None
) -> _Info | None:
    """None when no kernel can be part of an opportunity (no candidate, no Inductor pointwise kernel)."""
    ev, links = trace.events, trace.links
    n = kernels.size
    by_row = np.argsort(models.row, kind="stable")
    at = np.minimum(np.searchsorted(models.row[by_row], kernels), by_row.size - 1)
    entry = np.where(models.row[by_row[at]] == kernels, by_row[at], -1)
    modelled = entry >= 0
    entry = np.maximum(entry, 0)
    category = kernel_categories(trace, kernels)
    memory_category = np.asarray([c in MEMORY_CATEGORIES for c in CATEGORIES], dtype=bool)[category]
    label = models.label[entry]
    op_row = np.where(modelled, models.op_row[entry], -1)
    candidate = modelled & memory_category & _label_is(models, MEMORY_MODELS)[label] & (op_row >= 0)
    poi = _name_is(ev, ev.name[kernels].astype(np.int64), lambda name: name.startswith("triton_poi_"))
    inductor = modelled & _label_is(models, ("inductor",))[label] & poi
    pointwise = (candidate & _label_is(models, POINTWISE_MODELS)[label]) | inductor
    if not pointwise.any() and int(candidate.sum()) < 2:
        return None
    launching = links.op[kernels].astype(np.int64)
    gemm_op = _outer_gemm_ops(trace, np.where(category == CATEGORIES.index("gemm"), launching, -1))
    io = _Io(n)
    codes = _Codes()
    io.fill(trace, np.where(candidate, op_row, -1), codes, "memory")
    io.fill(trace, np.where(inductor, op_row, -1), codes, "inductor", models.bytes[entry])
    io.fill(trace, gemm_op, codes, "gemm")
    others = ~candidate & ~inductor & (gemm_op < 0)  # attention, convolution, scatter …: what their op was given
    reads = np.where(others, np.where(op_row >= 0, op_row, launching), -1)
    io.fill(trace, reads, codes, "reads")
    copies = ~modelled & (category == CATEGORIES.index("copy"))
    listed = io.fill_lists(trace, kernels, np.where(copies, launching, -1), codes)
    candidate |= listed
    op_row = np.where(listed, launching, op_row)
    listed_bytes = io.in_bytes.sum(axis=1) + io.in_rest + io.out_bytes
    now = np.where(modelled, models.bytes[entry], np.where(listed, listed_bytes, 0.0))
    by_id = np.zeros(n, dtype=bool)
    et_readers: dict[int, list[int]] = {}
    if tensors is not None:
        identify = np.where(candidate | inductor, op_row, np.where(gemm_op >= 0, gemm_op, reads))
        by_id, et_readers = io.fill_ids(trace, identify, tensors, codes)
        by_id &= candidate | inductor
    node, sink = _backward_nodes(trace, np.where(op_row >= 0, op_row, launching))
    lane = ev.device[kernels] * 1_000_003 + ev.stream[kernels]
    source = np.where(op_row >= 0, op_row, np.where(gemm_op >= 0, gemm_op, launching))
    # each replay of a captured op is a call of its own (its kernels share the capture's op row)
    replay = replaying_launch(ev, links.launch, kernels)
    call = _calls(source, lane if not (replay >= 0).any() else _pair_ids(lane, replay))
    io.one_per_call(np.where(candidate, call, -1), now)
    return _Info(
        candidate=candidate,
        pointwise=pointwise,
        gemm=(gemm_op >= 0) & (io.out_code >= 0) & ~candidate & ~inductor,
        op_row=np.where(op_row >= 0, op_row, gemm_op),
        in_code=io.in_code,
        in_bytes=io.in_bytes,
        in_rest=io.in_rest,
        out_code=io.out_code,
        out_bytes=io.out_bytes,
        now=now,
        dur_ns=ev.dur_ns[kernels].astype(np.float64),
        lane=lane,
        step=links.step[kernels].astype(np.int64),
        node=node,
        sink=sink,
        in_place=io.in_place,
        opaque=~candidate & ~inductor & (gemm_op < 0) & _no_shapes(trace, launching),
        by_id=by_id,
        call=call,
        saved=_saved_results(trace, candidate & (node == -1), op_row, io, links.step[kernels].astype(np.int64)),
        et_readers=et_readers,
        op_ns=np.where(op_row >= 0, ev.ts_ns[np.maximum(op_row, 0)], -1),
        track=np.where(op_row >= 0, ev.track[np.maximum(op_row, 0)], -1).astype(np.int64),
        views=view_ops(trace, window, codes.code),
        barrier=host_syncs_before(trace, kernels),
    )


SYNC_OPS = frozenset({"aten::item", "aten::_local_scalar_dense"})  # `.item()`: a device-to-host read
ACROSS_SYNC_NOTE = (
    "linked across a host sync (.item(), cudaStreamSynchronize or a blocking copy): torch.compile breaks the graph "
    "there, so one kernel needs the sync removed first"
)


def host_syncs_before(trace: Trace, kernels: I64) -> I64:
    """Per kernel: how many host syncs (`.item()` ops, `SYNC_API` runtime calls: stream/device/event syncs,
    blocking copies) started on its launching thread before its launch (a kernel without a launch: before it
    ran). Two kernels with different counts have a sync between their launches."""
    ev, links = trace.events, trace.links
    names = ev.names
    sync_name = np.asarray([bool(SYNC_API.match(n)) for n in names] + [False], dtype=bool)
    item_name = np.asarray([n in SYNC_OPS for n in names] + [False], dtype=bool)
    api = (ev.kind == Kind.RUNTIME) | (ev.kind == Kind.DRIVER)
    syncs = np.flatnonzero(
        (api & np.take(sync_name, ev.name)) | ((ev.kind == Kind.CPU_OP) & np.take(item_name, ev.name))
    )
    if syncs.size == 0 or kernels.size == 0:
        return np.zeros(kernels.size, dtype=np.int64)
    span = int(max(int(ev.ts_ns.max()), 0)) + 1
    origin = int(min(int(ev.ts_ns.min()), 0))
    keys = np.sort(ev.track[syncs].astype(np.int64) * (span - origin + 1) + (ev.ts_ns[syncs] - origin))
    launch = links.launch[kernels].astype(np.int64)
    at = np.where(launch >= 0, launch, kernels)
    track = np.where(launch >= 0, ev.track[np.maximum(at, 0)], -1).astype(np.int64)
    kernel_keys = track * (span - origin + 1) + (ev.ts_ns[at] - origin)
    return np.searchsorted(keys, kernel_keys, side="left").astype(np.int64)


def _label_is(models: KernelModels, kinds: tuple[str, ...]) -> np.ndarray:
    """Per model label: whether its model is one of `kinds`."""
    return np.asarray([label.model in kinds for label in models.labels] + [False], dtype=bool)


def _name_is(ev: EventTable, codes: I64, predicate: Callable[[str], bool]) -> np.ndarray:
    """Whether `predicate` holds for the name of each name code in `codes` (evaluated once per distinct code)."""
    distinct = distinct_ints(codes)
    table = np.zeros(len(ev.names), dtype=bool)
    table[distinct] = [predicate(ev.names[c]) for c in distinct.tolist()]
    return table[codes]


def _pair_ids(a: I64, b: I64) -> I64:
    """One small integer per distinct (a, b) pair."""
    return np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)[1].ravel().astype(np.int64)


def _calls(source: I64, lane: I64) -> I64:
    """For each kernel, the position of the first kernel (in stream order) of the op call its tensors come
    from (`source`: the op's row, -1 = none: a call of its own) on its stream; itself for a one-kernel call.
    An op that launches several kernels (`native_layer_norm_backward`'s input and weight gradients, a
    `_foreach_` op over a long list, a GEMM and its epilogue kernel) reads and writes its tensors once: its
    kernels are one writer and one member of a group, never producer and consumer of each other."""
    own = -1 - np.arange(source.size, dtype=np.int64)  # no op: unique keys
    group, first = first_seen_groups(np.where(source >= 0, source, own), lane)
    return first[group]


def _no_shapes(trace: Trace, rows: I64) -> np.ndarray:
    """Whether the op at each row (-1: none) recorded no `Input Dims`."""
    dims = trace.events.input_dims
    present = np.zeros(rows.size, dtype=bool)
    has_op = np.flatnonzero(rows >= 0)
    present[has_op[np.flatnonzero(dims[rows[has_op]])]] = True  # raw JSON is never empty: None is false
    return ~present


def _outer_gemm_ops(trace: Trace, rows: I64) -> I64:
    """The outermost GEMM op around each GEMM kernel's launching op (`aten::linear` → `aten::matmul` →
    `aten::bmm` on reshaped views): its output has the shape the consumers see."""
    ev, parent = trace.events, trace.links.parent
    is_gemm = np.asarray([name in GEMM_OPS for name in ev.names], dtype=bool)
    rows = np.where((rows >= 0) & is_gemm[ev.name[np.maximum(rows, 0)]], rows, -1)
    for _ in range(4):
        up = np.where(rows >= 0, parent[np.maximum(rows, 0)], -1)
        lift = (up >= 0) & is_gemm[ev.name[np.maximum(up, 0)]]
        if not lift.any():
            break
        rows = np.where(lift, up, rows)
    return rows


class _Codes:
    """Integer codes of tensor keys: (dims, dtype) from shapes, ("id", storage, offset, numel) from an ET."""

    def __init__(self) -> None:
        self.table: dict[object, int] = {}

    def code(self, key: object) -> int:
        return self.table.setdefault(key, len(self.table))


class _Io:
    """Input/output codes and bytes of each kernel's op, decoded once per distinct shape signature."""

    def __init__(self, n: int) -> None:
        self.in_code = np.full((n, SLOTS), -1, dtype=np.int64)
        self.in_bytes = np.zeros((n, SLOTS), dtype=np.float64)
        self.in_rest = np.zeros(n, dtype=np.float64)
        self.in_place = np.zeros(n, dtype=bool)  # the op updates its first argument (input slot 0) in place
        self.saved_result = np.full(n, -1, dtype=np.int64)  # a backward op's forward-result argument (`SAVED_RESULTS`)
        self.out_code = np.full(n, -1, dtype=np.int64)
        self.out_bytes = np.zeros(n, dtype=np.float64)

    def fill(self, trace: Trace, rows: I64, codes: _Codes, what: str, model_bytes: F64 | None = None) -> None:
        ev = trace.events
        chosen = np.flatnonzero(rows >= 0)
        if chosen.size == 0:
            return
        signature, first = named_signatures(ev, rows[chosen])
        has = signature >= 0
        sig_in = np.full((first.size, SLOTS), -1, dtype=np.int64)
        sig_in_bytes = np.zeros((first.size, SLOTS), dtype=np.float64)
        sig_out = np.full(first.size, -1, dtype=np.int64)
        sig_out_bytes = np.zeros(first.size, dtype=np.float64)
        sig_in_place = np.zeros(first.size, dtype=bool)
        sig_saved = np.full(first.size, -1, dtype=np.int64)
        for index, row in enumerate(rows[chosen][first].tolist()):
            name, shapes = ev.names[int(ev.name[row])], op_shapes(ev, row)
            inputs, output = _op_io(what, name, shapes)
            sig_in_place[index] = _updates_first(name, shapes, inputs)
            blind, scalar_update = _no_evidence(name, shapes, sig_in_place[index])
            kept = inputs[:SLOTS]
            sig_in[index, : len(kept)] = [-1 if _among(t, blind) else codes.code((t.dims, t.dtype)) for t in kept]
            sig_in_bytes[index, : len(kept)] = input_reads(name, shapes, kept)
            if output is not None:
                code = -1 if scalar_update else codes.code((output.dims, output.dtype))
                sig_out[index], sig_out_bytes[index] = code, float(output.nbytes)
            result = shapes.tensor(SAVED_RESULTS[name][0]) if shapes is not None and name in SAVED_RESULTS else None
            if result is not None:
                sig_saved[index] = codes.code((result.dims, result.dtype))
        at, sig = chosen[has], signature[has]
        self.in_code[at], self.in_bytes[at] = sig_in[sig], sig_in_bytes[sig]
        self.out_code[at], self.out_bytes[at] = sig_out[sig], sig_out_bytes[sig]
        self.in_place[at] = sig_in_place[sig]
        self.saved_result[at] = sig_saved[sig]
        if what == "inductor" and model_bytes is not None:  # what the model counts beyond its arguments: the write
            done = chosen[has]
            self.out_bytes[done] = np.maximum(model_bytes[done] - self.in_bytes[done].sum(axis=1), 0.0)

    def one_per_call(self, call: I64, now: F64) -> None:
        """The tensors of an op call on its first kernel only (`_calls`): the later kernels read and write
        nothing of their own. What the call's model moves beyond its coded tensors (a `_foreach_` op's tensor
        lists) is an input from outside (`in_rest`)."""
        n = call.size
        later = (call >= 0) & (call != np.arange(n))
        self.in_code[later], self.in_bytes[later], self.in_rest[later] = -1, 0.0, 0.0
        self.out_code[later], self.out_bytes[later] = -1, 0.0
        first = np.flatnonzero(call == np.arange(n))
        total = np.bincount(call[call >= 0], weights=now[call >= 0], minlength=n)[first]
        coded = self.in_bytes[first].sum(axis=1) + self.in_rest[first] + self.out_bytes[first]
        self.in_rest[first] += np.maximum(total - coded, 0.0)

    def fill_lists(self, trace: Trace, kernels: I64, rows: I64, codes: _Codes) -> np.ndarray:
        """Inputs and output of the tensor-list copies among `rows` (the launching op per kernel, -1 = none):
        `aten::cat(tensors, dim)`. The profiler records a tensor list's dims but not its dtype: the element
        size is read from the kernel (`CatArrayBatchedCopy<OpaqueType<N>, …>`) and the dtype is the one dtype
        of that size among the tensors already coded (the trace's other candidates and GEMMs); with none or
        several, the call is left out. Returns which kernels were filled."""
        ev = trace.events
        listed = np.zeros(rows.size, dtype=bool)
        is_list_copy = np.asarray([name in LIST_COPIES for name in ev.names], dtype=bool)
        chosen = np.flatnonzero(rows >= 0)
        chosen = chosen[is_list_copy[ev.name[rows[chosen]]]]
        if chosen.size == 0:
            return listed
        signature, _ = signature_codes(ev, rows[chosen])
        pairs = signature * (len(ev.names) + 1) + ev.name[kernels[chosen]].astype(np.int64)  # (shapes, kernel)
        _, first, which = np.unique(pairs, return_index=True, return_inverse=True)
        by_size = _dtypes_by_size(codes)
        for index, at in enumerate(first.tolist()):
            if signature[at] < 0:
                continue
            position = int(chosen[at])
            found = list_copy_io(ev, int(rows[position]), ev.names[int(ev.name[kernels[position]])], by_size)
            if found is None:
                continue
            inputs, output = found
            same = chosen[which.reshape(-1) == index]
            kept = inputs[:SLOTS]
            self.in_code[same[:, None], np.arange(len(kept))] = [codes.code((t.dims, t.dtype)) for t in kept]
            self.in_bytes[same[:, None], np.arange(len(kept))] = [float(t.nbytes) for t in kept]
            self.in_rest[same] = float(sum(t.nbytes for t in inputs[SLOTS:]))
            self.out_code[same] = codes.code((output.dims, output.dtype))
            self.out_bytes[same] = float(output.nbytes)
            listed[same] = True
        return listed

    def fill_ids(
        self, trace: Trace, rows: I64, tensors: OpTensors, codes: _Codes
    ) -> tuple[np.ndarray, dict[int, list[int]]]:
        """Replace shape keys by tensor identities where the execution trace has the op (the first argument of
        the ops that overwrite it is not read; the bytes of a loss that gathers one value per row stay the
        model's, `input_reads`); returns (identified, per kernel with an
        identified output: the rows of the ops that read it after its op started, views left out)."""
        ev = trace.events
        identified = np.zeros(rows.size, dtype=bool)
        readers: dict[int, list[int]] = {}
        for position, row in enumerate(rows.tolist()):
            found = tensors.get(row) if row >= 0 else None
            if found is None:
                continue
            inputs, outputs = found
            identified[position] = True
            name = ev.names[int(ev.name[row])]
            gathered = base_name(name) in GATHER_LOSSES
            model_bytes = self.in_bytes[position].copy()
            self.in_code[position] = -1
            self.in_bytes[position] = 0.0
            read = inputs[1:] if name in OVERWRITES else inputs  # copy_(dst, src): dst is written, not read
            for slot, ref in enumerate(read[:SLOTS]):
                self.in_code[position, slot] = codes.code(("id", *ref[:3]))
                self.in_bytes[position, slot] = model_bytes[slot] if gathered else float(ref[2] * ref[3])
            if outputs:
                ref = outputs[0]
                self.out_code[position] = codes.code(("id", *ref[:3]))
                self.out_bytes[position] = float(ref[2] * ref[3])
                readers[position] = _readers_after(trace, tensors, ref, row)
        return identified, readers


def _readers_after(trace: Trace, tensors: OpTensors, ref: TensorRef, row: int) -> list[int]:
    """(Execution trace) the ops of the step of the op at `row` that read the tensor `ref` after it started and
    before another op wrote that storage region (an in-place update, or a new tensor in the same memory: the
    execution trace numbers storages by address). Only `aten::` ops read data (an autograd node or a module's
    record function is given the tensors its ops read), and not those that only view it (`VIEW_LIKE`) or
    overwrite it (`copy_`, `fill_` … given it as their first argument)."""
    ev, step = trace.events, trace.links.step
    start = ev.ts_ns[row]
    later = [
        ev.ts_ns[w] for w in tensors.writers(ref) if ev.ts_ns[w] > start and ev.names[int(ev.name[w])] not in VIEW_LIKE
    ]
    end = min(later, default=np.iinfo(np.int64).max)
    found = []
    for r in tensors.readers(ref):
        name = ev.names[int(ev.name[r])]
        if step[r] != step[row] or not start < ev.ts_ns[r] < end or name in VIEW_LIKE or not name.startswith("aten::"):
            continue
        if name in OVERWRITES:
            given = tensors.get(r)
            if given is not None and given[0] and given[0][0][:3] == ref[:3]:
                continue
        found.append(r)
    return found


def _op_io(what: str, name: str, shapes: OpShapes | None) -> tuple[tuple[Tensor, ...], Tensor | None]:
    """(inputs, output) of an op call as `what` kind of kernel runs it: a GEMM's operands and result, an
    Inductor kernel's arguments (output: see `_Io.fill`), a memory-bound op's (`memory_op_io`), or what any
    other op was given and, where its arguments determine it, what it writes (`op_writes`)."""
    if what == "gemm":
        return gemm_inputs(name, shapes), gemm_output(name, shapes)
    if what == "inductor":
        return (shapes.tensors if shapes else ()), None
    if what == "reads":
        return op_reads(name, shapes), op_writes(name, shapes)
    return memory_op_io(name, shapes)


def _no_evidence(name: str, shapes: OpShapes | None, in_place: bool) -> tuple[list[Tensor | None], bool]:
    """The arguments of an op call whose shape and dtype are no evidence of where they come from, and whether
    its output is none of where it goes. A backward op's arguments that are tensors the forward saved
    (`saved_arguments`: no op of the backward wrote them). An in-place update of a 0-d tensor (a module's
    counter or step, `num_batches_tracked.add_(1)`): every 0-d tensor of a dtype has the same key, so the
    buffer, its 0-d operands (wrapped numbers) and the result link nothing by shape."""
    if shapes is None:
        return [], False
    blind: list[Tensor | None] = [shapes.args[i] for i in saved_arguments(name, shapes)]
    first = shapes.args[0] if shapes.args else None
    scalar_update = in_place and first is not None and not first.dims
    if scalar_update:
        blind += [t for t in shapes.args if t is not None and not t.dims]
    return blind, scalar_update


def _updates_first(name: str, shapes: OpShapes | None, inputs: tuple[Tensor, ...]) -> bool:
    """Whether an `aten::` op updates its first argument in place (its name ends in `_`) and that tensor is
    its first input slot."""
    first = shapes.args[0] if shapes is not None and shapes.args else None
    return name.startswith("aten::") and name.endswith("_") and bool(inputs) and inputs[0] is first


def _among(tensor: Tensor, tensors: list[Tensor | None]) -> bool:
    """Whether `tensor` is one of `tensors` (the same argument, not an equal one)."""
    return any(tensor is t for t in tensors)


def _saved_results(trace: Trace, forward: np.ndarray, op_row: I64, io: _Io, step: I64) -> np.ndarray:
    """Which `forward` candidates are softmax / log_softmax calls whose result a backward op of the same step
    reads (`SAVED_RESULTS`: `_softmax_backward_data(grad, output, …)` — its `output` argument, recorded as a
    tensor of the result's key): autograd saved the result, so it stays written though the forward group
    consumes it (a fuser of the forward group cannot drop it; recomputing it in the backward needs each row's
    max and sum, which the program does not keep)."""
    ev = trace.events
    readers = np.flatnonzero(io.saved_result >= 0)
    names = np.asarray([name in RESULT_SAVED for name in ev.names], dtype=bool)
    saving = forward & (op_row >= 0) & (io.out_code >= 0)
    saving[saving] = names[ev.name[op_row[saving]]]
    if readers.size == 0 or not saving.any():
        return np.zeros(op_row.size, dtype=bool)
    width = int(max(io.out_code.max(), io.saved_result.max())) + 1
    keys = np.sort(step[readers] * width + io.saved_result[readers])
    return saving & _in_sorted(keys, step * width + io.out_code)


def _in_sorted(table: I64, values: I64) -> np.ndarray:
    """Whether each of `values` is in the sorted array `table` (np.isin without its numpy.ma import)."""
    if table.size == 0:
        return np.zeros(values.size, dtype=bool)
    return table[np.minimum(np.searchsorted(table, values), table.size - 1)] == values


def _dtypes_by_size(codes: _Codes) -> dict[int, str]:
    """Element size → dtype, for the sizes that exactly one dtype among the coded (dims, dtype) keys has."""
    sizes: dict[int, set[str]] = {}
    itemsize = {label: size for size, label in DTYPES.values()}
    for key in codes.table:
        if isinstance(key, tuple) and len(key) == 2 and key[1] in itemsize:
            sizes.setdefault(itemsize[key[1]], set()).add(key[1])
    return {size: next(iter(labels)) for size, labels in sizes.items() if len(labels) == 1}


def list_copy_io(
    ev: EventTable, row: int, kernel_name: str, dtype_by_size: dict[int, str]
) -> tuple[tuple[Tensor, ...], Tensor] | None:
    """(inputs, output) of the `aten::cat(tensors, dim)` call at `row` launching `kernel_name`: the inputs are
    the recorded tensor list (empty 1-d tensors skipped, as cat does), the output their concatenation along
    `dim`; both in the dtype of the kernel's element size (`dtype_by_size`). None when anything is not
    recorded or does not fit."""
    size = OPAQUE_ELEMENT.search(kernel_name)
    dtype = dtype_by_size.get(int(size.group(1))) if size else None
    raw, concrete = ev.input_dims[row], ev.concrete_inputs[row]
    if dtype is None or raw is None or concrete is None:
        return None
    try:
        dims, values = msgspec.json.decode(bytes(raw)), msgspec.json.decode(bytes(concrete))
    except msgspec.DecodeError:
        return None
    if not isinstance(dims, list) or not dims or not isinstance(values, list) or len(values) < 2:
        return None
    listed = [d for d in dims[0] if isinstance(d, list) and d != [0]] if isinstance(dims[0], list) else []
    if not listed or not all(isinstance(d, list) and d and all(type(v) is int for v in d) for d in listed):
        return None
    rank = len(listed[0])
    try:
        axis = int(str(values[1]))
    except ValueError:
        return None
    if not -rank <= axis < rank or any(len(d) != rank for d in listed):
        return None
    axis %= rank
    if any(d[:axis] + d[axis + 1 :] != listed[0][:axis] + listed[0][axis + 1 :] for d in listed):
        return None
    itemsize = int(size.group(1)) if size else 0
    inputs = tuple(Tensor(tuple(d), dtype, itemsize) for d in listed)
    out = list(listed[0])
    out[axis] = sum(d[axis] for d in listed)
    return inputs, Tensor(tuple(out), dtype, itemsize)


def _backward_nodes(trace: Trace, op_rows: I64) -> tuple[I64, np.ndarray]:
    """The backward-node call each op runs in (-1 = forward; below -1 = a compiled graph's backward, -2 - its
    row: one function running a whole graph, whose ops feed each other), and whether that node is an
    AccumulateGrad.

    The autograd engine's `autograd::engine::evaluate_function: X` runs the node's function (the op `X` under
    it) and then adds each output the function returned into the input buffer of the node that takes it
    (`aten::add_` directly under `evaluate_function`, outside `X`). The function's ops are one node call (its
    separate outputs: the sibling rules); an accumulation reads one of those outputs and a gradient from another
    node, so it is a node call of its own: the `evaluate_function` row. Ops under an `evaluate_function` with
    no function child (older traces) get the `evaluate_function` row, as before."""
    ev, parent = trace.events, trace.links.parent
    codes = {name: code for code, name in enumerate(ev.names)}
    function = np.asarray(
        [codes.get(name[len(BACKWARD_NODE) :], -1) if name.startswith(BACKWARD_NODE) else -2 for name in ev.names],
        dtype=np.int64,
    )  # per name: -2 = not a node; else the code of its function's name (-1 = not in the trace)
    node = np.full(op_rows.size, -1, dtype=np.int64)
    evaluate = np.full(op_rows.size, -1, dtype=np.int64)
    # the ops still walking up (on a thread that runs backward nodes), their current ancestor and the one below
    threads = distinct_ints(ev.track[np.take(function, ev.name) != -2].astype(np.int64))
    at = np.flatnonzero(op_rows >= 0)
    track = ev.track[op_rows[at]].astype(np.int64)
    at = at[_in_sorted(threads, track)]
    current, below = op_rows[at], np.full(at.size, -1, dtype=np.int64)
    for _ in range(256):
        if at.size == 0:
            break
        hit = function[ev.name[current]] != -2
        found, under, row = at[hit], below[hit], current[hit]
        evaluate[found] = row
        is_function = under >= 0
        is_function[is_function] = ev.name[under[is_function]] == function[ev.name[row[is_function]]]
        node[found] = np.where(is_function, under, row)
        at, below, current = at[~hit], current[~hit], parent[current[~hit]]
        up = current >= 0
        at, below, current = at[up], below[up], current[up]
    accumulate = np.asarray(["AccumulateGrad" in name for name in ev.names], dtype=bool)
    sink = np.zeros(op_rows.size, dtype=bool)
    sink[evaluate >= 0] = accumulate[ev.name[evaluate[evaluate >= 0]]]
    graph = np.asarray([name.endswith(COMPILED_BACKWARD) for name in ev.names], dtype=bool)
    node = np.where((node >= 0) & graph[ev.name[np.maximum(node, 0)]], -2 - node, node)
    return node, sink


class _Links(msgspec.Struct, frozen=True):
    src: I64  # positions into the stream-ordered kernels
    dst: I64
    kind: I64  # PRODUCER, SHARED or GEMM
    slot: I64  # the input slot of dst it satisfies
    read_outside: np.ndarray  # bool per kernel: a later non-candidate (a GEMM, attention …) reads its output


def _links(trace: Trace, kernels: I64, info: _Info) -> _Links:
    """Every link backed by evidence (see the module docstring), vectorised over look-back distances.

    Each input slot of each kernel is attributed to at most one earlier kernel on its stream (same step, at most
    `MAX_SKIPPED` kernels between) that wrote a tensor of its key, directly or through a view: the nearest, and
    first among those whose output nobody has read yet (a program reads what it writes: of two tensors of one
    key, the one not read yet is the likelier input; `_Attribution`). A candidate's output attributed to a
    candidate is a producer link (when the rules allow it); attributed to a non-candidate (GEMM, attention,
    convolution …), it is read outside any group, and that kernel blocks links across it. A non-candidate's
    output (a GEMM's, a convolution's: `op_writes`) takes the slot without a link (a GEMM-epilogue link where it
    feeds a pointwise kernel)."""
    state = _Attribution(kernels.size)
    pairs = [_Pairs.at(info, distance) for distance in range(1, MAX_SKIPPED + 2)]
    for unread_only in (True, False):
        for distance, at in enumerate(pairs, start=1):
            _attribute(info, state, at, distance, unread_only)
    later = np.flatnonzero(info.candidate & (info.call != np.arange(kernels.size)))
    state.link(info.call[later], later, np.full(later.size, -1, dtype=np.int64), CALL)
    columns = [np.concatenate([part[i] for part in state.parts]) for i in range(4)]
    return _Links(columns[0], columns[1], columns[2], columns[3], state.read_outside)


class _Attribution:
    """What the slot attribution has decided so far (see `_links`)."""

    def __init__(self, n: int) -> None:
        self.n = n
        empty = np.zeros(0, dtype=np.int64)
        self.parts: list[tuple[I64, I64, I64, I64]] = [(empty, empty, empty, empty)]
        self.slot_call = np.full((n, SLOTS), -1, dtype=np.int64)  # the op call (`_calls`) a slot went to
        self.taken = np.zeros((n, SLOTS), dtype=bool)  # an input slot is satisfied once (nearest first)
        self.read = np.zeros(n, dtype=bool)  # per op call: some later kernel's slot was attributed to its output
        self.read_by = np.zeros(
            (n, MAX_SKIPPED + 1), dtype=bool
        )  # [s, d - 1]: kernel s + d, a non-candidate, reads s's
        self.read_outside = np.zeros(n, dtype=bool)  # a non-candidate reads this candidate's output
        self.fed_by = np.full(n, -1, dtype=np.int64)  # the backward-node call that already feeds a consumer
        self.gemm_used = np.zeros(n, dtype=bool)  # a GEMM output feeds one epilogue consumer: the nearest

    def take(self, src: I64, dst: I64, match: np.ndarray, call: I64) -> I64:
        """Attribute the first free matching slot of each dst to its src, whose op call is `call` (one slot per
        call and consumer); returns the slot (-1: none)."""
        slot = _first_true(match & ~self.taken[dst])
        use = slot >= 0
        self.taken[dst[use], slot[use]] = True
        self.slot_call[dst[use], slot[use]] = call[src[use]]
        self.read[call[src[use]]] = True
        return slot

    def link(self, src: I64, dst: I64, slot: I64, kind: int) -> None:
        self.parts.append((src, dst, np.full(src.size, kind, dtype=np.int64), slot))


class _Pairs(msgspec.Struct, frozen=True):
    """The (src, dst) kernel pairs `distance` apart that may be attributed: same stream and step, dst reads a
    coded tensor, and src's output is known or both are candidates of one backward-node call (a shared input);
    with what does not change while attributing."""

    src: I64
    dst: I64
    sibling: np.ndarray  # both in one eager backward-node call
    scope: np.ndarray  # both forward or both backward
    known: np.ndarray  # src's output is known
    closed: np.ndarray  # (pairs, SLOTS): slots src may not take (within a node call: all but an in-place op's first)

    @staticmethod
    def at(info: _Info, distance: int) -> _Pairs:
        dst = np.arange(distance, info.lane.size)
        src = dst - distance
        alike = (info.lane[src] == info.lane[dst]) & (info.step[src] == info.step[dst])
        # across a host sync only by tensor ids (an execution trace), never by shapes alone
        alike &= (info.barrier[src] == info.barrier[dst]) | (info.by_id[src] & info.by_id[dst])
        sibling = (info.node[src] >= 0) & (info.node[src] == info.node[dst])
        known = info.out_code[src] >= 0
        shared = sibling & info.candidate[src] & info.candidate[dst]
        keep = np.flatnonzero(alike & (known | shared) & (info.in_code[dst] >= 0).any(axis=1))
        src, dst, sibling = src[keep], dst[keep], sibling[keep]
        return _Pairs(
            src=src,
            dst=dst,
            sibling=sibling,
            scope=(info.node[src] != -1) == (info.node[dst] != -1),
            known=known[keep],
            closed=sibling[:, None] & ~(info.in_place[dst][:, None] & (np.arange(SLOTS) == 0)),
        )


def _attribute(info: _Info, state: _Attribution, pairs: _Pairs, distance: int, unread_only: bool) -> None:
    """Attribute the free slots of every kernel to the kernel `distance` positions before it (`pairs`; see
    `_links`); `unread_only`: only to an output nobody has read yet. Within one backward-node call, a kernel
    takes only the first argument of an in-place op (the node's zeros that `index_add_` fills): its ops'
    outputs are gradients of different inputs, not each other's inputs, and never linked; a producer whose link
    the rules refuse (another scope, a non-candidate reading its output in between) still takes the slot."""
    src, dst, sibling, scope, closed = pairs.src, pairs.dst, pairs.sibling, pairs.scope, pairs.closed
    same = pairs.known & ~(state.slot_call[dst] == info.call[src][:, None]).any(axis=1)
    if unread_only:
        same &= ~state.read[info.call[src]]
    between_ok = np.ones(dst.size, dtype=bool)
    for offset in range(1, distance):
        middle = src + offset
        # a candidate's output: the non-candidate reads attributed to it; a GEMM's: any read of its key
        attributed = state.read_by[src, offset - 1]
        same_key = (info.in_code[middle] == info.out_code[src][:, None]).any(axis=1)
        reads = np.where(info.candidate[src], attributed, same_key)
        between_ok &= ~(~info.candidate[middle] & (reads | info.opaque[middle]))
    clean = between_ok & ~info.sink[src] & ~info.sink[dst]
    # a candidate's output: into a candidate (or an Inductor pointwise kernel, for the epilogue view) a producer
    # link where the rules allow it (the separate outputs of one backward node are gradients of different
    # inputs: one consumer takes one); into any other kernel, read outside any group
    rows = np.flatnonzero(same & info.candidate[src])
    c, d = src[rows], dst[rows]
    feeds = (info.node[c] < 0) | (state.fed_by[d] != info.node[c])
    slot = state.take(c, d, _slot_reads(info, c, d) & feeds[:, None] & ~closed[rows], info.call)
    consumer = info.candidate[d] | info.pointwise[d]
    linked = (slot >= 0) & consumer & clean[rows] & scope[rows] & ~sibling[rows]
    state.link(c[linked], d[linked], slot[linked], PRODUCER)
    state.fed_by[d[linked]] = info.node[c[linked]]
    outside = (slot >= 0) & ~info.candidate[d]
    state.read_by[c[outside], distance - 1] = True
    state.read_outside[c[outside]] = True
    # a GEMM's output into a pointwise consumer (the epilogue view: each GEMM output feeds one, the nearest)
    rows = np.flatnonzero(same & clean & info.gemm[src] & ~state.gemm_used[info.call[src]] & info.pointwise[dst])
    c, d = src[rows], dst[rows]
    slot = state.take(c, d, (info.in_code[d] == info.out_code[c][:, None]) & ~closed[rows], info.call)
    state.link(c[slot >= 0], d[slot >= 0], slot[slot >= 0], GEMM)
    state.gemm_used[info.call[c[slot >= 0]]] = True
    # any other non-candidate's output (GEMM, convolution …): the nearest writer of the key, no link
    rows = np.flatnonzero(same & ~info.candidate[src])
    c, d = src[rows], dst[rows]
    keep = ~(state.slot_call[d] == info.call[c][:, None]).any(axis=1)  # not just linked by the GEMM step
    c, d, rows = c[keep], d[keep], rows[keep]
    state.take(c, d, _slot_reads(info, c, d) & ~closed[rows], info.call)
    if not unread_only:
        return  # (once)
    # shared input between two kernels of one backward-node call (not an output: read or not does not matter)
    shared = sibling & clean & info.candidate[src] & info.candidate[dst]
    rows = np.flatnonzero(shared)
    d, c = dst[rows], src[rows]
    same_input = (info.in_code[d][:, :, None] == info.in_code[c][:, None, :]) & (info.in_code[d][:, :, None] >= 0)
    slot = _first_true(same_input.any(axis=2) & ~state.taken[d])
    use = slot >= 0
    state.taken[d[use], slot[use]] = True
    state.link(c[use], d[use], slot[use], SHARED)


def _slot_reads(info: _Info, src: I64, dst: I64) -> np.ndarray:
    """(len(dst), SLOTS): whether input slot s of kernel dst has the key of src's output, or the key of a view
    of it taken between their ops (`_through_views`). Unknown inputs read nothing."""
    direct = (info.in_code[dst] == info.out_code[src][:, None]) & (info.in_code[dst] >= 0)
    return direct | _through_views(info, src, dst)


def _through_views(info: _Info, src: I64, dst: I64) -> np.ndarray:
    """(len(dst), SLOTS): whether input slot s of dst reads a view of src's output, taken by a view op on dst's
    thread after src's op started and before dst's op started (`views.py`)."""
    slots = info.in_code.shape[1]
    found = info.views.connects(
        np.repeat(info.track[dst], slots),
        np.repeat(info.out_code[src], slots),
        info.in_code[dst].reshape(-1),
        np.repeat(info.op_ns[src], slots),
        np.repeat(info.op_ns[dst], slots),
    )
    return found.reshape(-1, slots)


def _first_true(match: np.ndarray) -> I64:
    """Index of the first true column of each row, -1 where none."""
    if match.size == 0:
        return np.full(match.shape[0], -1, dtype=np.int64)
    first = np.argmax(match, axis=1)
    return np.where(match.any(axis=1), first, -1).astype(np.int64)


def _components(n: int, src: I64, dst: I64) -> I64:
    """Connected components of the link graph: the smallest member position labels each component."""
    label = np.arange(n, dtype=np.int64)
    if src.size == 0:
        return label
    while True:
        low = np.minimum(label[src], label[dst])
        new = label.copy()
        np.minimum.at(new, src, low)
        np.minimum.at(new, dst, low)
        new = new[new]
        if np.array_equal(new, label):
            return label
        label = new


def _read_outside_groups(trace: Trace, info: _Info, label: I64) -> np.ndarray:
    """(Execution trace) whether an op outside each kernel's group reads its output: a reader that is neither
    the op of a member of the group nor an op enclosing one (`aten::log_softmax` around `_log_softmax`). The
    backward's `_log_softmax_backward_data` reading the forward result is outside the forward group."""
    outside = np.zeros(label.size, dtype=bool)
    if not info.et_readers:
        return outside
    parent = trace.links.parent
    inside: set[tuple[int, int]] = set()
    for position in np.flatnonzero(info.candidate).tolist():
        row, group = int(info.op_row[position]), int(label[position])
        for _ in range(16):
            if row < 0 or (row, group) in inside:
                break
            inside.add((row, group))
            row = int(parent[row])
    for position, readers in info.et_readers.items():
        group = int(label[position])
        outside[position] = any((r, group) not in inside for r in readers)
    return outside


_GroupKey = tuple[tuple[int, ...], tuple[str, ...], tuple[str, ...], int]  # op names, kernels, GEMMs, stream


def _opportunities(
    trace: Trace, kernels: I64, info: _Info, links: _Links, steps: int, epilogue: bool
) -> list[FusionOpportunity]:
    """Groups of linked kernels, aggregated by (ops, kernels, stream): chains of ≥ 2 candidates, or (epilogue)
    pointwise groups that read GEMM outputs."""
    ev = trace.events
    member = info.pointwise if epilogue else info.candidate
    # (an Inductor kernel is already fused: in the epilogue view it stands alone)
    inner = (links.kind != GEMM) & info.candidate[links.src] & info.candidate[links.dst]
    inner &= member[links.src] & member[links.dst]
    src, dst, kind, slot = links.src[inner], links.dst[inner], links.kind[inner], links.slot[inner]
    label = _components(kernels.size, src, dst)
    removed = np.zeros_like(info.in_bytes)  # input bytes satisfied inside the group
    satisfied = kind != CALL
    removed[dst[satisfied], slot[satisfied]] = info.in_bytes[dst[satisfied], slot[satisfied]]
    internal_out = np.zeros(kernels.size, dtype=bool)
    produced = kind == PRODUCER
    kept = info.saved | links.read_outside | _read_outside_groups(trace, info, label)
    internal_out[src[produced]] = ~kept[src[produced]]
    absorbed = np.zeros(kernels.size, dtype=np.float64)  # GEMM outputs an epilogue reads
    gemm_writes = np.zeros(kernels.size, dtype=np.float64)  # per component label: the GEMM outputs it absorbs
    gemm_count = np.zeros(kernels.size, dtype=np.int64)
    gemms: dict[int, list[int]] = {}
    if epilogue:
        g = links.kind == GEMM
        np.add.at(absorbed, links.dst[g], info.in_bytes[links.dst[g], links.slot[g]])
        np.add.at(gemm_writes, label[links.dst[g]], info.out_bytes[links.src[g]])  # a GEMM feeds one consumer
        np.add.at(gemm_count, label[links.dst[g]], 1)
        for s, d in zip(links.src[g].tolist(), links.dst[g].tolist(), strict=True):
            gemms.setdefault(int(label[d]), []).append(s)
    ext_in = info.in_bytes.sum(axis=1) - removed.sum(axis=1) + info.in_rest
    ext_out = np.where(internal_out, 0.0, info.out_bytes)
    positions = np.flatnonzero(member)
    positions = positions[np.argsort(label[positions], kind="stable")]  # grouped, stream order inside a group
    if positions.size == 0:
        return []
    starts = np.flatnonzero(np.r_[True, label[positions][1:] != label[positions][:-1]])
    size = np.diff(np.r_[starts, positions.size])
    op_calls = np.add.reduceat((info.call[positions] == positions).astype(np.int64), starts)  # per group
    now = np.add.reduceat(info.now[positions], starts)
    fused = np.add.reduceat(ext_in[positions] + ext_out[positions], starts)
    dur = np.add.reduceat(info.dur_ns[positions], starts)
    identified = np.minimum.reduceat(info.by_id[positions].astype(np.int64), starts)
    crossing = np.maximum.reduceat(info.barrier[positions], starts) != np.minimum.reduceat(
        info.barrier[positions], starts
    )
    roots = label[positions[starts]]
    if epilogue:
        now = now + gemm_writes[roots]
        fused = np.maximum(fused - np.add.reduceat(absorbed[positions], starts), 0.0)
        saving = dur.copy()
        keep = (gemm_count[roots] > 0) & (now > 0)
    else:
        fused = np.minimum(fused, now)
        with np.errstate(invalid="ignore", divide="ignore"):
            saving = np.where(now > 0, dur * (1 - fused / np.maximum(now, 1e-300)), 0.0)
        keep = (op_calls >= 2) & (now > 0)
    op_codes = ev.name[np.maximum(info.op_row, 0)].tolist()
    kernel_codes = ev.name[kernels].tolist()
    shorts: dict[int, str] = {}  # short name per kernel name code, for the kernels of the groups kept

    def short(position: int) -> str:
        code = kernel_codes[position]
        return shorts[code] if code in shorts else shorts.setdefault(code, short_name(ev.names[code]))

    streams = ev.stream[kernels].tolist()
    rows: dict[_GroupKey, list[float]] = {}
    for g in np.flatnonzero(keep).tolist():
        members = positions[starts[g] : starts[g] + size[g]].tolist()
        used_gemms = sorted(gemms.get(int(roots[g]), []))
        key: _GroupKey = (
            tuple(op_codes[m] for m in members),
            tuple(short(m) for m in members),
            tuple(short(m) for m in used_gemms),
            int(streams[members[0]]),
        )
        figures = rows.setdefault(key, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        figures[0] += 1
        figures[1] += float(now[g])
        figures[2] += float(fused[g])
        figures[3] += float(dur[g])
        figures[4] += float(saving[g])
        figures[5] += float(identified[g])
        figures[6] += float(crossing[g])
    result = []
    for key, (calls, bytes_now, bytes_fused, time_ns, saving_ns, identified_calls, crossings) in rows.items():
        result.append(
            FusionOpportunity(
                ops=[ev.names[code] for code in key[0]],
                kernels=list(key[1]),
                calls_per_step=round(calls / steps, 3),
                kernel_us_per_step=round(time_ns / 1000 / steps, 3),
                bytes_now=round(bytes_now / calls),
                bytes_fused=round(bytes_fused / calls),
                est_saving_us=round(saving_ns / 1000 / steps, 3),
                stream=key[3],
                kind="gemm_epilogue" if epilogue else "chain",
                evidence="tensor ids" if identified_calls == calls else "shapes",
                gemm_kernels=list(key[2]),
                across_sync=crossings > 0,
                note=ACROSS_SYNC_NOTE if crossings > 0 else "",
            )
        )
    result.sort(key=lambda o: (-o.est_saving_us, o.ops, o.kernels))
    return result
