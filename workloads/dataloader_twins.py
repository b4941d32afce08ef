"""DataLoader twins (issue #28, the `data_loading` action): the same DataLoader-fed training loop with the batches
built in the main process (`num_workers=0`) and by worker processes (`num_workers=N`, prefetching while the GPU
works), each without and with `pin_memory`. Run on the H200 from the repository root:

    python3 workloads/dataloader_twins.py OUTDIR        (needs CUDA; its traces are traces/h200/dataloader_twins/)

The loop is workloads/dataloader_loop.py's (the study's GeGLU MLP with AdamW, 256-token batches whose host work is
`BATCH_WORK` matmuls of a 256x256 fp32 tensor, a synchronize per step), recorded with a profiler schedule (wait 1,
warm-up 2, active 8) so each trace has ProfilerStep ranges, the DataLoader's `enumerate(DataLoader)#…__next__`
ranges inside them. Per variant: OUTDIR/NAME.json.gz and an entry of OUTDIR/timings.json (`cuda_event_ms`: CUDA
events around each of 30 steps of the same loop without the profiler, after the window).
"""

from __future__ import annotations

import gzip
import os
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dataloader_loop import Batches, _setup, _step, _timed, write_timings  # noqa: E402

WAIT, WARMUP, ACTIVE = 1, 2, 8
# (num_workers, pin_memory): without pinning, a worker's batch arrives in fresh shared memory and its copy to
# the GPU pays the page faults in the main process (5 ms a batch in the first recording)
VARIANTS = ((0, False), (2, False), (8, False), (0, True), (2, True), (8, True))


def _name(workers: int, pin: bool) -> str:
    return f"dl_workers{workers}" + ("_pin" if pin else "")


def _loader(workers: int, pin: bool) -> torch.utils.data.DataLoader:  # type: ignore[type-arg]
    return torch.utils.data.DataLoader(
        Batches(), batch_size=None, num_workers=workers, prefetch_factor=4 if workers else None,
        persistent_workers=workers > 0, pin_memory=pin,
    )


def record(workers: int, pin: bool, out: str) -> dict[str, object]:
    name = _name(workers, pin)
    model, optimizer = _setup(False)
    batches = iter(_loader(workers, pin))
    for _ in range(5):  # warm-up: the workers start, the allocator settles
        _step(model, optimizer, next(batches))
    path = os.path.join(out, f"{name}.json.gz")
    raw = path[: -len(".gz")]
    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(activities=acts, record_shapes=True, schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE,
                 repeat=1), on_trace_ready=lambda p: p.export_chrome_trace(raw)) as prof:
        for _ in range(WAIT + WARMUP + ACTIVE):
            _step(model, optimizer, next(batches))
            prof.step()
    with open(raw, "rb") as src, gzip.open(path, "wb") as dst:
        dst.write(src.read())
    os.remove(raw)
    times = _timed(model, optimizer, batches, 30)
    return {
        "trace": f"{name}.json.gz",
        "num_workers": workers,
        "pin_memory": pin,
        "iters": len(times),
        "cuda_event_ms": {"median": statistics.median(times), "min": min(times), "max": max(times), "n": len(times)},
    }


def main(out: str) -> int:
    os.makedirs(out, exist_ok=True)
    runs: dict[str, object] = {}
    for workers, pin in VARIANTS:
        name, t0 = _name(workers, pin), time.time()
        try:
            runs[name] = record(workers, pin, out)
            print(f"{name}: {runs[name]['cuda_event_ms']} ({time.time() - t0:.1f} s)", flush=True)
        except Exception as error:  # noqa: BLE001 - one variant failing must not lose the others
            print(f"{name}: FAILED {error!r}", flush=True)
    write_timings(out, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
