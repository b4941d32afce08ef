"""The timeline's step menu: "step N" spans the step's CPU range and the GPU work it launched, so the step's own
kernels are on screen even when the GPU runs behind the CPU (on the eager MLP, step 3's kernels start after its
CPU range, and its CPU range shows the previous step's GEMM). Expected figures from the raw JSON (tests/rawtrace)."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest

import tracelens
from tests import anchors, rawtrace
from tracelens.analyses import analyze
from tracelens.renderers.page import build_report
from tracelens.report.timeline import page_hovers

EAGER_MLP = Path("traces/h200/eager_mlp.json.gz")
# six steps on 8 GPUs with the GPU behind the CPU: step 1009's GPU work ends 57 ms after its CPU range
LAGGING = anchors.CORPUS / "hta" / "trace_diff" / "test" / "test.json.gz"  # in the repository (tests/corpus)


def _step_kernels(path: Path, number: int) -> tuple[float, list[tuple[str, float, float]]]:
    """(origin µs, [(name, start µs, end µs)]) of the GPU activities launched in ProfilerStep#number, times since
    the trace's first µs (the timeline's x axis)."""
    raw = [e for e in rawtrace.events(path) if isinstance(e.get("ts"), (int, float))]
    origin = math.floor(min(float(e["ts"]) for e in raw))
    (step,) = [
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in raw
        if e["name"] == f"ProfilerStep#{number}" and e.get("cat") != "gpu_user_annotation"
    ]
    launches = rawtrace.launch_times(raw)
    out = []
    for e in raw:
        if str(e.get("cat", "")).lower() not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        launched = launches.get(int((e.get("args") or {}).get("correlation", -1)))
        if launched is not None and step[0] <= launched < step[1]:
            out.append((str(e["name"]), float(e["ts"]) - origin, float(e["ts"]) + float(e["dur"]) - origin))
    return origin, out


def test_step_view_holds_the_steps_own_kernels() -> None:
    _, activities = _step_kernels(EAGER_MLP, 3)
    kernels = [a for a in activities if not a[0].startswith(("Memset", "Memcpy"))]
    assert len(kernels) == 5 and len(activities) == 7  # and two memsets
    trace = tracelens.load(EAGER_MLP)
    figure = build_report([(trace, analyze(trace))]).panel("timeline").figure
    assert figure is not None
    (button,) = [b for b in figure.layout.updatemenus[0].buttons if b.label == "step 3"]
    low, high = button.args[0]["xaxis.range"]
    for name, start, end in activities:
        assert low <= start and end <= high, (name, start, end, low, high)
    # and the view is the step, not the trace: the CPU range of step 3 is inside, step 5's kernels are not
    _, later = _step_kernels(EAGER_MLP, 5)
    assert all(start > high for _, start, _ in later)


@pytest.mark.parametrize("number", [1009, 1010, 1011, 1012, 1013, 1014])
def test_step_view_when_the_gpu_lags(number: int) -> None:
    if not LAGGING.exists():
        pytest.skip(f"{LAGGING} not here")
    _, activities = _step_kernels(LAGGING, number)
    assert activities
    low, high = _lagging_ranges()[f"step {number}"]
    outside = [a for a in activities if not (low <= a[1] and a[2] <= high)]
    assert not outside, (len(outside), outside[:2], low, high)


@functools.cache
def _lagging_ranges() -> dict[str, list[float]]:
    """The step menu's x range per label (one report for all the steps)."""
    trace = tracelens.load(LAGGING)
    figure = build_report([(trace, analyze(trace))]).panel("timeline").figure
    assert figure is not None
    buttons = figure.layout.updatemenus[0].buttons
    return {b.label: b.args[0]["xaxis.range"] for b in buttons if b.label.startswith("step ")}


def test_kernel_hover_names_its_findings() -> None:
    """On the eager MLP, the GELU and the multiply kernels (raw names: GeluCUDAKernelImpl, MulFunctor) are the
    fusion finding's chain: their hovers name it; every kernel hover has its full name and grid × block."""
    trace = tracelens.load(EAGER_MLP)
    figure = build_report([(trace, analyze(trace))]).panel("timeline").figure
    assert figure is not None
    hovers = [
        text
        for t in figure.data
        if t.meta and t.meta.get("lod") == "hover"
        for text in page_hovers(t.text, t.meta.get("names"), t.customdata)
    ]
    raw = [e for e in rawtrace.events(EAGER_MLP) if e.get("cat") == "kernel"]
    elementwise = [e for e in raw if "Gelu" in e["name"] or "MulFunctor" in e["name"]]
    assert len(elementwise) == 10
    fused = [h for h in hovers if "elementwise_kernel[gelu]" in h or "elementwise_kernel[mul]" in h]
    assert len(fused) == len(elementwise)
    assert all("finding: fusion #1: aten::gelu → aten::mul" in h for h in fused)
    gemm = [h for h in hovers if h.startswith("<b>nvjet")]
    assert len(gemm) == sum(e["name"].startswith("nvjet") for e in raw)
    assert all("grid 132 × block 384" in h for h in gemm)
