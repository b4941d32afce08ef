"""CUDA-graph recordings (issues #28/#29): graph variants beside their eager twins, with the capture inside
the profiled window and, separately, in a trace of its own. Run on the H200 from the repository root:

    python3 workloads/graph_traces.py OUTDIR        (needs CUDA; its traces are traces/h200/graphs/)

GRAPHS_TOKENS / GRAPHS_SEQ set the MLP's tokens and the block's sequence (default 256 each); GRAPHS_ACTIVE the
profiled steps per variant (default 5); GRAPHS_ONLY=mlp_block
records those two parts alone. GRAPHS_VARIANTS (comma-separated: eager, graph, graph_apart, ro, ro_apart,
compiled, graph_compiled) records only those variants of the MLP and the block.

Per variant it writes OUTDIR/NAME.json.gz (torch.profiler, activities CPU+CUDA, record_shapes, a
synchronize after every step, one ProfilerStep per step) and an entry in OUTDIR/timings.json in the format of
traces/h200/extra/timings.json: `runs[NAME].cuda_event_ms` are CUDA events around each step timed WITHOUT the
profiler (the device synchronized before each step, the same step function, after the profiled window), so
they are the profiler-free step time of the same steps.

Variants (bf16, inference, torch.no_grad):
- mlp_*: the study's GeGLU MLP (hidden 2048, intermediate 8192) on 256 tokens: `mlp_eager`; `mlp_graph`
  (torch.cuda.graph: the capture is the window's first step, replays follow); `mlp_graph_capture` +
  `mlp_graph_replay` (the same, the capture in one trace and the replays in another); `mlp_ro`
  (torch.compile(mode="reduce-overhead"): compiled before the window, the cudagraph tree's recording inside
  it); `mlp_ro_capture` + `mlp_ro_replay` (a fresh compile; its recording alone in one trace, replays in the
  other); `mlp_compiled` (torch.compile default, no graphs: the compile-only twin); `mlp_graph_compiled`
  (torch.compile default, compiled and warmed up, then captured by torch.cuda.graph as `mlp_graph`: the twin of
  `compile` on a program that runs its own graphs).
- block_*: a Llama decoder block (hidden 2048, 16 heads, intermediate 5632, batch 1, seq 256, SDPA): the same
  set as the MLP.
- decode_*: a small Llama-architecture causal LM (transformers' LlamaForCausalLM from a config, random
  weights: hidden 1024, 8 layers, 16 heads, 8 KV heads, vocab 32000), one ProfilerStep per generated token
  after a 128-token prefill: `decode_eager` (DynamicCache), `decode_static_graph` (StaticCache, the forward
  compiled with mode="reduce-overhead", fullgraph=True).
Each part is guarded: a part that fails is logged with its error and the others go on.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import tarfile
import time
import traceback

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from workloads.block import make_block  # noqa: E402
from workloads.models import GeGLUMLP  # noqa: E402
from workloads.timing import summary  # noqa: E402

T0 = time.time()
OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/graphs"
BUDGET_S = float(os.environ.get("GRAPHS_BUDGET_S", "420"))
os.makedirs(OUT, exist_ok=True)
DEV = torch.device("cuda")
DTYPE = torch.bfloat16
ACTIVE = int(os.environ.get("GRAPHS_ACTIVE", "5"))  # profiled steps per variant (the capture's step besides)
TIMED = 30
RUNS: dict = {}
ENV = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "cuda": torch.version.cuda}
WRITTEN: list[str] = []


def log(*a: object) -> None:
    print("[%6.1fs]" % (time.time() - T0), *a, flush=True)


def left() -> float:
    return BUDGET_S - (time.time() - T0)


def cuda_event_times(step, n: int = TIMED) -> list[float]:
    """CUDA-event ms of `n` calls of `step`, the device synchronized before each (no profiler)."""
    times = []
    for _ in range(n):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def record(name: str, steps: list, *, timed_step=None, meta: dict | None = None) -> None:
    """Profile one ProfilerStep per callable in `steps` (a synchronize after each), then time `timed_step`
    (default: the last of `steps`) without the profiler."""
    tmp = "/tmp/%s.json" % name
    host_ms = []
    torch.cuda.synchronize()
    with torch.no_grad(), profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=0, warmup=1, active=len(steps), repeat=1),
        record_shapes=True,
        on_trace_ready=lambda p: p.export_chrome_trace(tmp),
    ) as prof:
        torch.zeros(1, device=DEV).add_(1)  # the profiler's warm-up step: a tiny op, not the workload
        torch.cuda.synchronize()
        prof.step()
        for step in steps:
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            host_ms.append((time.perf_counter() - t0) * 1e3)
            prof.step()
    with torch.no_grad():
        ev = cuda_event_times(timed_step or steps[-1])
    entry = {
        "iters": len(ev),
        "cuda_event_ms": summary(ev),
        "profiled_host_sync_ms": host_ms,
        "trace": name + ".json.gz",
        "meta": dict(meta or {}, name=name, steps_active=len(steps), **ENV),
    }
    with open(tmp) as f:
        data = json.load(f)
    data["graphs_run"] = entry
    path = os.path.join(OUT, name + ".json.gz")
    with gzip.open(path, "wt", compresslevel=6) as f:
        json.dump(data, f)
    os.remove(tmp)
    entry["trace_bytes"] = os.path.getsize(path)
    RUNS[name] = entry
    WRITTEN.append(path)
    log("wrote", name, entry["trace_bytes"], "B; profiled host+sync ms", [round(x, 3) for x in host_ms],
        "; profiler-free median ms", round(entry["cuda_event_ms"]["median"], 4))


def guarded(part):
    def run(*a, **k):
        if left() < 30:
            log("SKIP", part.__name__, "(budget)")
            return
        try:
            part(*a, **k)
        except Exception:
            log("FAILED", part.__name__)
            traceback.print_exc()
            sys.stdout.flush()

    return run


def captured(fn, x: torch.Tensor):
    """(capture, replay) of `fn(x)` in one torch.cuda.graph: `fn` warmed up three times on a side stream first, as
    torch.cuda.graph's docs ask; `capture` captures it and replays once, `replay` replays."""
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(3):
            fn(x)
    torch.cuda.current_stream().wait_stream(side)
    holder = {}

    def capture() -> None:
        with torch.cuda.graph(graph):
            holder["out"] = fn(x)
        graph.replay()

    return capture, graph.replay


def wanted(variant: str) -> bool:
    """Whether GRAPHS_VARIANTS asks for `variant` (all when it is not set)."""
    return VARIANTS is None or variant in VARIANTS


def graph_family(prefix: str, model: nn.Module, x: torch.Tensor, meta: dict) -> None:
    """Eager, manual torch.cuda.graph (in window / capture apart), compile reduce-overhead (in window /
    capture apart) and compile default, all of `model` on `x`."""
    eager = lambda: model(x)  # noqa: E731
    with torch.no_grad():
        for _ in range(5):
            eager()
    if wanted("eager"):
        guarded(record)(prefix + "_eager", [eager] * ACTIVE, meta=dict(meta, variant="eager"))

    def manual(apart: bool) -> None:
        capture, replay = captured(model, x)
        m = dict(meta, variant="cuda_graph_manual", capture="first step" if not apart else "own trace")
        if apart:
            record(prefix + "_graph_capture", [capture], timed_step=replay, meta=dict(m, part="capture"))
            record(prefix + "_graph_replay", [replay] * ACTIVE, meta=dict(m, part="replay"))
        else:
            record(prefix + "_graph", [capture] + [replay] * ACTIVE, timed_step=replay, meta=m)

    if wanted("graph"):
        guarded(manual)(False)
    if wanted("graph_apart"):
        guarded(manual)(True)

    def reduce_overhead(apart: bool) -> None:
        torch._dynamo.reset()
        fn = torch.compile(model, mode="reduce-overhead", dynamic=False)
        step = lambda: fn(x)  # noqa: E731
        with torch.no_grad():
            step()  # compile + the cudagraph tree's warm-up run, outside the window
        m = dict(meta, variant="compile_reduce_overhead",
                 capture="inside the window (second call)" if not apart else "own trace")
        if apart:
            record(prefix + "_ro_capture", [step, step], meta=dict(m, part="capture"))
            record(prefix + "_ro_replay", [step] * ACTIVE, meta=dict(m, part="replay"))
        else:
            record(prefix + "_ro", [step] * (ACTIVE + 1), meta=m)

    if wanted("ro"):
        guarded(reduce_overhead)(False)
    if wanted("ro_apart"):
        guarded(reduce_overhead)(True)

    def compiled_default() -> None:
        torch._dynamo.reset()
        fn = torch.compile(model, dynamic=False)
        step = lambda: fn(x)  # noqa: E731
        with torch.no_grad():
            for _ in range(3):
                step()
        record(prefix + "_compiled", [step] * ACTIVE, meta=dict(meta, variant="compile_default"))

    if wanted("compiled"):
        guarded(compiled_default)()

    def graph_compiled() -> None:
        torch._dynamo.reset()
        capture, replay = captured(torch.compile(model, dynamic=False), x)  # compiled during the warm-up
        record(prefix + "_graph_compiled", [capture] + [replay] * ACTIVE, timed_step=replay,
               meta=dict(meta, variant="compile_default_in_cuda_graph", capture="first step"))

    if wanted("graph_compiled"):
        guarded(graph_compiled)()


VARIANTS = set(os.environ["GRAPHS_VARIANTS"].split(",")) if os.environ.get("GRAPHS_VARIANTS") else None
TOKENS = int(os.environ.get("GRAPHS_TOKENS", "256"))  # the MLP's tokens (held-out shapes: another value)
SEQ = int(os.environ.get("GRAPHS_SEQ", "256"))  # the block's sequence length


def mlp_part() -> None:
    torch.manual_seed(0)
    model = GeGLUMLP(2048, 8192).to(DEV, DTYPE).eval()
    x = torch.randn(TOKENS, 2048, device=DEV, dtype=DTYPE)
    graph_family("mlp", model, x, {"model": "GeGLU MLP", "tokens": TOKENS, "hidden": 2048, "intermediate": 8192,
                                    "dtype": "bf16"})


def block_part() -> None:
    cfg = {"hidden": 2048, "heads": 16, "intermediate": 5632, "max_seq": SEQ}
    model = make_block(cfg, "eager", "sdpa", DEV, DTYPE).eval()
    x = torch.randn(1, SEQ, 2048, device=DEV, dtype=DTYPE)
    graph_family("block", model, x, dict(cfg, model="Llama block", batch=1, seq=SEQ, dtype="bf16"))


def decode_part() -> None:
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM, StaticCache

    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                      num_key_value_heads=8, vocab_size=32000, max_position_embeddings=1024)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to(DEV, DTYPE).eval()
    prompt = torch.randint(0, 32000, (1, 128), device=DEV)
    meta = {"model": "LlamaForCausalLM from config (random weights)", "hidden": 1024, "layers": 8, "heads": 16,
            "kv_heads": 8, "vocab": 32000, "prompt": 128, "batch": 1, "dtype": "bf16",
            "step": "one generated token (greedy)"}
    nsteps = ACTIVE + 1 + TIMED + 8

    def eager_run(name: str = "decode_eager", variant: str = "eager") -> None:
        with torch.no_grad():
            cache = DynamicCache()
            out = model(input_ids=prompt, past_key_values=cache, use_cache=True)
            state = {"tok": out.logits[:, -1:].argmax(-1), "cache": out.past_key_values}

        def step() -> None:
            o = model(input_ids=state["tok"], past_key_values=state["cache"], use_cache=True)
            state["tok"] = o.logits[:, -1:].argmax(-1)
            state["cache"] = o.past_key_values

        with torch.no_grad():
            for _ in range(3):
                step()
        record(name, [step] * ACTIVE, meta=dict(meta, variant=variant, cache="DynamicCache"))

    def static_run() -> None:
        torch._dynamo.reset()
        try:
            cache = StaticCache(config=cfg, max_cache_len=128 + nsteps + 8)
        except TypeError:  # older signature
            cache = StaticCache(config=cfg, max_batch_size=1, max_cache_len=128 + nsteps + 8, device=DEV,
                                dtype=DTYPE)
        fwd = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True, dynamic=False)
        with torch.no_grad():
            pos = torch.arange(128, device=DEV)
            out = model(input_ids=prompt, past_key_values=cache, cache_position=pos, use_cache=True)
        state = {"tok": out.logits[:, -1:].argmax(-1), "pos": 128}

        def step() -> None:
            p = torch.tensor([state["pos"]], device=DEV)
            o = fwd(input_ids=state["tok"], past_key_values=cache, cache_position=p, use_cache=True)
            state["tok"] = o.logits[:, -1:].argmax(-1).clone()
            state["pos"] += 1

        with torch.no_grad():
            step()  # compile + warm-up outside the window
        record("decode_static_graph", [step] * (ACTIVE + 1),
               meta=dict(meta, variant="static_cache_reduce_overhead", cache="StaticCache",
                         capture="inside the window (second call)"))

    def eager_flash_run() -> None:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
            eager_run("decode_eager_flash", "eager, SDPA without the cuDNN backend")

    if os.environ.get("GRAPHS_ONLY") != "decode_flash":
        guarded(eager_run)()
        guarded(static_run)()
    guarded(eager_flash_run)()


def main() -> None:
    log("env", ENV)
    parts = (decode_part,) if os.environ.get("GRAPHS_ONLY") == "decode_flash" else (mlp_part, block_part, decode_part)
    if os.environ.get("GRAPHS_ONLY") == "mlp_block":  # held-out shapes: the MLP and the block alone
        parts = (mlp_part, block_part)
    for part in parts:
        guarded(part)()
    with open(os.path.join(OUT, "timings.json"), "w") as f:
        json.dump({"about": "CUDA-event timings measured outside the profiler (ms), see graph_traces.py",
                   "environment": ENV, "command": " ".join(sys.argv), "runs": RUNS}, f, indent=1)
    with tarfile.open(os.path.join(OUT, "graphs.tar"), "w") as tar:
        for path in WRITTEN:
            tar.add(path, arcname=os.path.basename(path))
    for path in WRITTEN:
        os.remove(path)
    log("done; tar bytes", os.path.getsize(os.path.join(OUT, "graphs.tar")))


if __name__ == "__main__":
    main()
