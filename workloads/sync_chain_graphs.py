"""A host sync inside the step under CUDA graphs (issue #28's review): `workloads.truth3.sync_chain` (abs → amax →
`.item()` → mul on a 4,096² fp32 tensor) eager, `torch.compile`d and compiled with `mode="reduce-overhead"`, two
recordings of each in one process, 8 profiled steps with a synchronize after each. A hand capture of the whole
step fails (`.item()` in a capture: cudaErrorStreamCaptureInvalidated; printed); reduce-overhead makes one graph
per side of the graph break. Run on a GPU from the repository root:

    python3 workloads/sync_chain_graphs.py OUTDIR        (its traces are traces/h100/sync_chain_graphs/)
"""

from __future__ import annotations

import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from workloads.truth3 import _export, sync_chain


def main(out: str) -> None:
    x = torch.randn(4096, 4096, device="cuda")
    try:  # what a hand capture of the step does
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            sync_chain(x)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            sync_chain(x)
        print("capture OK")
    except Exception as exc:  # the failure is the finding
        print("capture failed:", type(exc).__name__, str(exc).splitlines()[0][:300])
    torch.cuda.synchronize()
    variants = [
        ("sync_chain_eager", sync_chain),
        ("sync_chain_compiled", torch.compile(sync_chain)),
        ("sync_chain_ro", torch.compile(sync_chain, mode="reduce-overhead")),
    ]
    for repeat in range(2):
        for name, fn in variants:
            for _ in range(5):
                fn(x)
            torch.cuda.synchronize()
            activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
            with profile(activities=activities, record_shapes=True, schedule=schedule(wait=1, warmup=1, active=8)) as p:
                for _ in range(10):
                    fn(x)
                    torch.cuda.synchronize()
                    p.step()
            _export(p, os.path.join(out, f"{name}_r{repeat}.json.gz"), {"variant": name, "n": 4096})
            print("wrote", name, repeat)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/sync_chain_graphs")
