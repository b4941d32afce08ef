"""What the timeline draws, in headless Chromium (skips without it): at step zoom the slices wide enough carry
their labels (the eager MLP's step 3: a label at the centre of each of its five kernels, read from the raw JSON,
each label a piece of the kernel's name), and the biggest corpus trace (xdit Flux on MI300X, 63 MB) is
interactive (every chart drawn, then a zoom redrawn) within 3 s of starting to load the page."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from tests import rawtrace
from tests.browser.chromium import browser_page
from tests.browser.test_report_browser import open_report, write_report
from tests.conftest import anchor

ROOT = Path(__file__).resolve().parents[2]
EAGER_MLP = ROOT / "traces" / "h200" / "eager_mlp.json.gz"
XDIT = "amd_tracelens/inference/xdit_flux.1_aiter_sage/profile_trace_rank_0.json.gz"
INTERACTIVE_S = 3.0

ZOOM_TO = """(label) => {
  const gd = document.getElementById('chart-timeline');
  const button = gd.layout.updatemenus[0].buttons.find(b => b.label === label);
  return Plotly.relayout(gd, button.args[0]).then(() => true);
}"""
LABELS = """() => {
  const gd = document.getElementById('chart-timeline');
  const t = gd.data.find(t => t.meta && t.meta.lod === 'labels');
  const ya = gd._fullLayout.yaxis;
  const lanes = {};
  ya.tickvals.forEach((v, i) => { lanes[v] = String(ya.ticktext[i]); });
  return {x: Array.from(t.x), y: Array.from(t.y), text: Array.from(t.text), lanes: lanes,
          drawn: gd.querySelectorAll('.textpoint text').length};
}"""


def _step_kernels(number: int) -> list[tuple[str, float]]:
    """(name, centre µs since the trace's first µs) of the kernels launched in ProfilerStep#number."""
    raw = [e for e in rawtrace.events(EAGER_MLP) if isinstance(e.get("ts"), (int, float))]
    origin = math.floor(min(float(e["ts"]) for e in raw))
    launches = rawtrace.launch_times(raw)
    (start, end) = next(
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in raw
        if e["name"] == f"ProfilerStep#{number}" and e.get("cat") != "gpu_user_annotation"
    )
    out = []
    for e in raw:
        launched = launches.get(int((e.get("args") or {}).get("correlation", -1)))
        if e.get("cat") == "kernel" and launched is not None and start <= launched < end:
            out.append((str(e["name"]), float(e["ts"]) - origin + float(e["dur"]) / 2))
    return out


@pytest.mark.slow
def test_step_zoom_labels_each_kernel(tmp_path: Path) -> None:
    kernels = _step_kernels(3)
    assert len(kernels) == 5
    report = tmp_path / "report.html"
    write_report([EAGER_MLP], report)
    with browser_page() as page:
        errors, requests = open_report(page, report)
        assert page.evaluate(ZOOM_TO, "step 3")
        page.wait_for_timeout(200)
        labels = page.evaluate(LABELS)
        assert not errors and not requests
    assert labels["drawn"] == len(labels["text"]) > 5  # in the SVG, not only in the data
    gpu_lane = next(float(v) for v, name in labels["lanes"].items() if name.startswith("GPU"))
    on_gpu = [(x, t) for x, y, t in zip(labels["x"], labels["y"], labels["text"], strict=True) if y == gpu_lane]
    for name, centre in kernels:
        (text,) = [t for x, t in on_gpu if abs(x - centre) < 0.01]
        assert len(text) >= 5 and text.removesuffix("…").split(" ")[0] in name, (text, name)
    cpu = [t for y, t in zip(labels["y"], labels["text"], strict=True) if y != gpu_lane]
    assert any(t.startswith("ProfilerStep#3") and t.endswith("µs") for t in cpu)  # name and duration


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="issue #30's goal, not met yet: 5.3-6.6 s on the 2-core shared machine (9.3 s before the slices were "
    "held back from the first plot); strict, so reaching it fails this marker and it must go",
)
def test_big_trace_interactive_within_3_s(tmp_path: Path) -> None:
    path = anchor(XDIT)
    if not path.exists():
        pytest.skip(f"{path} not here")
    report = tmp_path / "report.html"
    write_report([path], report)
    with browser_page() as page:
        started = time.monotonic()
        errors, requests = open_report(page, report)
        assert page.evaluate(ZOOM_TO, "whole trace")
        elapsed = time.monotonic() - started
        assert not errors and not requests
    print(f"xdit report interactive after {elapsed:.2f} s ({report.stat().st_size / 1e6:.1f} MB page)")
    assert elapsed < INTERACTIVE_S


RANGE_TOTAL = """() => {
  const gd = document.getElementById('chart-timeline'), box = document.getElementById('chart-timeline-range');
  return [Number(box.dataset.gpuUs), box.textContent, gd._fullLayout.xaxis.range];
}"""


@pytest.mark.slow
def test_range_totals_match_the_raw_events(tmp_path: Path) -> None:
    """Zoomed to step 3 (a range selection), the totals under the chart give the GPU time inside the range: the
    raw kernel/memcpy/memset intervals clipped to it, summed."""
    raw = [e for e in rawtrace.events(EAGER_MLP) if isinstance(e.get("ts"), (int, float))]
    origin = math.floor(min(float(e["ts"]) for e in raw))
    report = tmp_path / "report.html"
    write_report([EAGER_MLP], report)
    with browser_page() as page:
        open_report(page, report)
        assert page.evaluate(ZOOM_TO, "step 3")
        page.wait_for_timeout(200)
        total_us, text, (low, high) = page.evaluate(RANGE_TOTAL)
    expected = 0.0
    for e in raw:
        if str(e.get("cat", "")).lower() in ("kernel", "gpu_memcpy", "gpu_memset"):
            start = float(e["ts"]) - origin
            expected += max(0.0, min(start + float(e["dur"]), high) - max(start, low))
    assert expected > 1000 and abs(total_us - expected) < 0.01, (total_us, expected)
    assert "gemm" in text and "By kernel: nvjet" in text


@pytest.mark.slow
def test_timeline_on_the_first_screen(tmp_path: Path) -> None:
    """In a 1400 × 1000 window the timeline's chart starts on the first screen, after the summary."""
    report = tmp_path / "report.html"
    write_report([EAGER_MLP], report)
    with browser_page(1400, 1000) as page:
        open_report(page, report)
        top, overview = page.evaluate(
            "() => [document.getElementById('chart-timeline').getBoundingClientRect().top,"
            " document.getElementById('overview').getBoundingClientRect().top]"
        )
    assert overview < top < 700, (overview, top)


LLAMA_TRAIN = ROOT / "traces" / "h200" / "record" / "hf_llama_train.json.gz"
LANE_LABELS = """() => {
  const ya = document.getElementById('chart-timeline')._fullLayout.yaxis;
  return Array.from(ya.ticktext, String);
}"""


@pytest.mark.slow
def test_lanes_are_labelled_with_thread_names(tmp_path: Path) -> None:
    """The CPU lanes carry the thread names of the trace's metadata events (`pt_autograd_0 (529)` for the autograd
    thread of the HF Llama training step), as the stdlib reading of them gives (tests/independent/thread_names.py)."""
    from tests.independent import thread_names

    named = {
        f"{thread_names.short(thread, tid)} ({tid})"
        for (pid, tid), (thread, _) in thread_names.names(str(LLAMA_TRAIN)).items()
        if thread
    }
    assert "pt_autograd_0 (529)" in named
    report = tmp_path / "report.html"
    write_report([LLAMA_TRAIN], report)
    with browser_page() as page:
        errors, requests = open_report(page, report)
        ticks = page.evaluate(LANE_LABELS)
        assert not errors and not requests
    assert named <= set(ticks), (named, ticks)
    assert not [t for t in ticks if t.startswith("CPU 469/")]  # no pid/tid label left for a named thread


HOVERS = """() => {
  const o = document.getElementById('chart-timeline')._tlOriginals;
  const area = document.createElement('textarea');
  const out = [];
  o.groups.forEach(g => (g.text || []).forEach(t => {
    area.innerHTML = t.split('<br>').join('');
    out.push(area.value);
  }));
  return out;
}"""


@pytest.mark.slow
def test_kernel_hovers_give_the_full_name(tmp_path: Path) -> None:
    """Each of step 3's kernels (names read from the raw JSON) has a hover that holds its full name, though the
    page stores each distinct name once (the hover's title is the short name)."""
    kernels = _step_kernels(3)
    report = tmp_path / "report.html"
    write_report([EAGER_MLP], report)
    html = report.read_text()
    with browser_page() as page:
        errors, requests = open_report(page, report)
        assert page.evaluate(ZOOM_TO, "step 3")
        page.wait_for_timeout(200)
        hovers = page.evaluate(HOVERS)
        assert not errors and not requests
    long = [name for name, _ in kernels if len(name) > 60]
    assert long  # the eager MLP's GEMMs have long templated names
    for name in long:
        assert any(name in text for text in hovers), name
        assert html.count(name[:60].replace("<", "&lt;").replace(">", "&gt;")) <= 2  # once (plus the kernel table)


CLICK_FINDING = """(text) => {
  const gd = document.getElementById('chart-timeline');
  const before = gd._fullLayout.xaxis.range.slice();
  const button = Array.from(document.querySelectorAll('button.tl-zoom')).find(b => b.textContent.includes(text));
  if (!button) return null;
  button.click();
  return new Promise(resolve => setTimeout(() => resolve({before: before,
    after: gd._fullLayout.xaxis.range.slice(), hint: button.nextElementSibling.textContent}), 300));
}"""


@pytest.mark.slow
def test_a_finding_link_zooms_the_timeline_to_its_kernels(tmp_path: Path) -> None:
    """The eager MLP's fusion finding (GELU → multiply): its button narrows the timeline's x range to one that holds
    a GELU kernel and a multiply kernel (read from the raw JSON) whole, and names the Perfetto slice to search."""
    raw = [e for e in rawtrace.events(EAGER_MLP) if isinstance(e.get("ts"), (int, float))]
    origin = math.floor(min(float(e["ts"]) for e in raw))
    kernels = [
        (str(e["name"]), float(e["ts"]) - origin, float(e["ts"]) - origin + float(e["dur"]))
        for e in raw
        if e.get("cat") == "kernel"
    ]
    report = tmp_path / "report.html"
    write_report([EAGER_MLP], report)
    with browser_page() as page:
        errors, requests = open_report(page, report)
        result = page.evaluate(CLICK_FINDING, "fusion #1")
        assert not errors and not requests
    assert result is not None, "no button for fusion #1"
    (x0, x1), (b0, b1) = result["after"], result["before"]
    assert x1 - x0 < (b1 - b0) / 2  # zoomed in
    inside = [name for name, start, end in kernels if x0 <= start and end <= x1]
    assert any("Gelu" in name for name in inside) and any("MulFunctor" in name for name in inside), inside
    assert "fuse #1:" in result["hint"]
