"""The steps `analyze`'s per-step figures are over, recomputed from the raw Kineto JSON (json/gzip only): the
steps (`ProfilerStep`s, else the inferred ones of tests/independent/step_windows.py), less the warm-up ones
(docs/definitions.md, "steady state"): a step holding a torch.compile compilation (tests/independent/compiles.py)
or a CUDA-graph capture (`cudaStreamBeginCapture` on the runtime track) is warm-up, and so is every step before
the last such step; where no step follows the last one, only the steps holding warm-up are left out.

Run `python -m tests.independent.warmup_steps TRACE` to print the steps kept.
"""

from __future__ import annotations

import sys

from tests.independent.compiles import compilations
from tests.independent.step_windows import load_events, step_figures

CAPTURE_BEGIN = ("cudaStreamBeginCapture", "hipStreamBeginCapture")


def steady_steps(path: str) -> list[int]:
    """The step numbers kept, in order."""
    events = load_events(path)
    spans = [(f["cpu_start_ns"] / 1000, f["cpu_end_ns"] / 1000, int(f["number"])) for f in step_figures(path)]
    numbers = [n for _, _, n in spans]
    warm = {step for _, step, _ in compilations(path) if step is not None}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver", "hip_runtime") and e.get("name") in CAPTURE_BEGIN:
            warm |= {n for start, end, n in spans if start <= float(e["ts"]) <= end}
    if not warm:
        return numbers
    last = max(numbers.index(n) for n in warm if n in numbers)
    after = numbers[last + 1 :]
    return after if after else [n for n in numbers if n not in warm]


if __name__ == "__main__":
    print(steady_steps(sys.argv[1]))
