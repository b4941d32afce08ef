"""The idle time after a device's last activity (the last analyzed step's tail, no later activity ends it) is
split as every gap is (docs/definitions.md, "Busy and idle buckets"): `sync_wait_us` until the CPU returned from
a synchronisation overlapping it, the rest `other_idle_us` (auditor, 2026-12-07: it was all `other_idle_us`).

Independent: from the raw events (stdlib), the last step's tail runs from the end of the device's last GPU
activity to the end of the step's ProfilerStep range; its sync part ends where the last `*Synchronize` call
overlapping it returns."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tracelens.cli import main

ROOT = Path(__file__).resolve().parent.parent / "traces/h200"
GPU = {"kernel", "gpu_memcpy", "gpu_memset"}


def _tail_us(path: Path, step: int) -> tuple[float, float]:
    """(sync µs, other µs) of the tail after the last GPU activity, inside ProfilerStep#`step`."""
    with gzip.open(path, "rt") as handle:
        events = [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]
    rng = next(e for e in events if e.get("name") == f"ProfilerStep#{step}")
    step_end = float(rng["ts"]) + float(rng["dur"])
    last_gpu_end = max(float(e["ts"]) + float(e["dur"]) for e in events if e.get("cat") in GPU)
    syncs = [
        float(e["ts"]) + float(e["dur"])
        for e in events
        if e.get("cat") == "cuda_runtime"
        and "Synchronize" in e["name"]
        and float(e["ts"]) < step_end
        and float(e["ts"]) + float(e["dur"]) > last_gpu_end
    ]
    release = min(max(syncs), step_end) if syncs else last_gpu_end
    return release - last_gpu_end, step_end - release


@pytest.mark.parametrize("name", ["eager_mlp", "eager_linear", "compiled_mlp", "liger_mlp", "block/eager_block"])
def test_the_last_steps_tail_gives_its_sync_part_to_sync(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = ROOT / f"{name}.json.gz"
    assert main(["analyze", str(path), "--format", "json", "--no-cache"]) == 0
    last = json.loads(capsys.readouterr().out)["bound_breakdown"]["steps"][-1]
    sync_us, other_us = _tail_us(path, last["number"])
    assert sync_us > 1.0  # each of these steps ends in a synchronisation after its last kernel
    assert last["sync_wait_us"] == pytest.approx(sync_us, abs=0.01)
    assert last["other_idle_us"] == pytest.approx(other_us, abs=0.01)
