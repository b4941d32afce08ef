"""CPU call depth folds, in headless Chromium (skips without it), asserted on what is drawn: the HF Llama training
step's two threads (the main thread 6 levels deep, the autograd thread 8, as the stdlib nesting of the raw events
gives: tests/independent/call_depth.py) at load (the main thread whole, the autograd thread folded to its top 3),
after the "CPU depth" menu's "top level" and "all levels", and after clicking a thread's label: the lanes drawn
per thread, the depth of every slice drawn one by one (read from the raw events), the launch links' and the
critical path's lanes, the hover, the range totals and the step view.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests import rawtrace
from tests.browser.chromium import browser_page
from tests.browser.test_report_browser import open_report, write_report
from tests.independent import call_depth, thread_names

ROOT = Path(__file__).resolve().parents[2]
LLAMA_TRAIN = ROOT / "traces" / "h200" / "record" / "hf_llama_train.json.gz"
MARKS = ("▸ ", "▾ ")  # a thread with several levels: folded / unfolded
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")

# What is drawn: the lane ticks (value, text), every bar rectangle in view ([lane, start, end]; the page draws each
# bar as x = start, end, end, start, gap; y = bottom, bottom, top, top, gap), every slice hover drawn one by one
# ([start of its bar, lane, group name, text, x]), the launch links ([launch x, source lane, GPU lane - 0.4]), the
# critical path's outlines ([lane, start, end]), the lanes' pixel heights, the x range and the range totals.
DRAWN = """() => {
  const gd = document.getElementById('chart-timeline'), ya = gd._fullLayout.yaxis, xa = gd._fullLayout.xaxis;
  const out = {ticks: Array.from(ya.tickvals, (v, i) => [+v, String(ya.ticktext[i])]), bars: [], hovers: [],
               links: [], outlines: [], range: xa.range.slice(), yrange: ya.range.slice(),
               lanePx: [], height: gd._fullLayout.height,
               gpuUs: Number(document.getElementById('chart-timeline-range').dataset.gpuUs)};
  const lanes = Math.round(ya.range[0] + 0.5);
  for (let l = 0; l < lanes; l++) out.lanePx.push(Math.abs(ya.l2p(l + 0.5) - ya.l2p(l - 0.5)));
  const bars = {};
  gd.data.forEach(t => {
    const m = t.meta || {};
    if (m.lod === 'bars') {
      bars[m.group] = t;
      for (let k = 0; k + 4 < t.x.length; k += 5) {
        if (t.x[k] === null) continue;
        out.bars.push([(+t.y[k] + +t.y[k + 2]) / 2, +t.x[k], +t.x[k + 1]]);
      }
    }
  });
  gd.data.forEach((t, i) => {
    const m = t.meta || {};
    if (m.lod === 'hover') {  // a slice drawn one by one: its bar (same group, same position) starts where it does
      t.x.forEach((x, k) => {
        const text = String(t.text[k]);
        if (!text.includes('merged')) out.hovers.push([+bars[m.group].x[5 * k], +t.y[k], String(t.name), text, +x]);
      });
    } else if (m.lod === 'links') {  // plotly's decoded copy (the page's data may hold the base64 form)
      const f = gd._fullData.find(full => full.index === i);
      for (let k = 0; k + 2 < f.x.length; k += 3) out.links.push([+f.x[k], +f.y[k], +f.y[k + 1]]);
    } else if (m.lod === 'outline') {
      for (let k = 0; k + 5 < t.x.length; k += 6) {
        if (t.x[k] !== null) out.outlines.push([(+t.y[k] + +t.y[k + 2]) / 2, +t.x[k], +t.x[k + 1]]);
      }
    }
  });
  return out;
}"""
LABEL_POINT = """(label) => {
  const gd = document.getElementById('chart-timeline'), ya = gd._fullLayout.yaxis, xa = gd._fullLayout.xaxis;
  const box = gd.getBoundingClientRect(), i = Array.from(ya.ticktext, String).indexOf(label);
  return i < 0 ? null : [box.left + xa._offset - 30, box.top + ya._offset + ya.l2p(+ya.tickvals[i])];
}"""
POINT = """([x, y]) => {
  const gd = document.getElementById('chart-timeline'), ya = gd._fullLayout.yaxis, xa = gd._fullLayout.xaxis;
  const box = gd.getBoundingClientRect();
  return [box.left + xa._offset + xa.l2p(x), box.top + ya._offset + ya.l2p(y)];
}"""
MENU_HEADERS = """() => Array.from(
  document.querySelectorAll('#chart-timeline .updatemenu-header .updatemenu-item-text'), t => t.textContent)"""
ZOOM = "([a, b]) => Plotly.relayout('chart-timeline', {'xaxis.range': [a, b]})"
ZOOM_TO = """(label) => {
  const gd = document.getElementById('chart-timeline');
  const button = gd.layout.updatemenus[0].buttons.find(b => b.label === label);
  return Plotly.relayout(gd, button.args[0]).then(() => true);
}"""


class Raw:
    """The raw trace, read with the standard library: the depth of each CPU event (and of each runtime / driver
    call) by its thread's label and its start (µs since the trace's first µs), and the GPU activities."""

    def __init__(self, path: Path) -> None:
        raw = [e for e in rawtrace.events(path) if isinstance(e.get("ts"), (int, float))]
        self.origin = math.floor(min(float(e["ts"]) for e in raw))
        names = thread_names.names(str(path))
        self.label: dict[Any, str] = {}
        self.levels: dict[str, int] = {}
        self.by_start: dict[str, list[tuple[float, int]]] = {}
        self.spans: dict[str, list[tuple[float, float, int]]] = {}
        self.launches: dict[str, list[tuple[float, int]]] = {}
        self._index: dict[tuple[int, str], dict[int, set[int]]] = {}
        for (pid, tid), nested in call_depth.depths(path).items():
            thread = names.get((str(pid), str(tid)), ("", ""))[0]
            label = f"{thread_names.short(thread, str(tid))} ({tid})" if thread else f"CPU {pid}/{tid}"
            self.levels[label] = 1 + max(depth for _, depth in nested)
            for e, depth in nested:
                start = float(e["ts"]) - self.origin
                self.by_start.setdefault(label, []).append((start, depth))
                self.spans.setdefault(label, []).append((start, start + float(e["dur"]), depth))
                if str(e.get("cat", "")).lower() in LAUNCH_CATS:
                    self.launches.setdefault(label, []).append((start, depth))
        self.gpu = [
            (float(e["ts"]) - self.origin, float(e["ts"]) - self.origin + float(e["dur"]))
            for e in raw
            if str(e.get("cat", "")).lower() in GPU_CATS
        ]

    def depth_at(self, table: dict[str, list[tuple[float, int]]], label: str, x: float) -> set[int]:
        """The depths of the thread's events in `table` that start at `x` (within 2 ns)."""
        index = self._index.get((id(table), label))
        if index is None:
            index = self._index[(id(table), label)] = {}
            for at, depth in table[label]:
                index.setdefault(round(at * 1000), set()).add(depth)
        ns = round(x * 1000)
        return set().union(*(index.get(ns + d, set()) for d in range(-2, 3)))

    def depths_in(self, label: str, low: float, high: float) -> set[int]:
        """The depths of the thread's events that overlap [low, high]."""
        return {depth for start, end, depth in self.spans[label] if start <= high and end >= low}

    def gpu_us(self, low: float, high: float) -> float:
        return sum(max(0.0, min(end, high) - max(start, low)) for start, end in self.gpu)


def _bands(drawn: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(label without its mark, first lane, lanes) of each band, from the drawn ticks (counter lanes: none here)."""
    ticks = sorted(drawn["ticks"])
    total = round(drawn["yrange"][0] + 0.5)
    out = []
    for i, (first, text) in enumerate(ticks):
        end = ticks[i + 1][0] if i + 1 < len(ticks) else total
        out.append((text.removeprefix(MARKS[0]).removeprefix(MARKS[1]), int(first), int(end - first)))
    return out


def _band_of(bands: list[tuple[str, int, int]], lane: float) -> tuple[str, int, int]:
    return next(band for band in bands if band[1] <= lane < band[1] + band[2])


def _check(drawn: dict[str, Any], raw: Raw, shown: dict[str, int]) -> dict[str, int]:
    """The drawn timeline against the raw events when each CPU thread `label` shows its top `shown[label]` levels:
    its band has that many lanes; bars are drawn on the lanes of the depths under it that have events in view (and
    nowhere else); every slice drawn one by one lies on the lane of its raw depth (none deeper); every launch link
    starts on the lane of its call's depth (or the band's last lane when the call is folded away) where a bar is
    drawn; every critical-path outline surrounds a drawn bar; every lane is as tall in pixels as any other; the
    range totals equal the raw GPU time. Returns the number of lanes with bars drawn, per thread."""
    bands = _bands(drawn)
    low, high = drawn["range"]
    cpu = {label: (first, n) for label, first, n in bands if not label.startswith("GPU")}
    drawn_lanes: dict[str, int] = {}
    assert set(cpu) == set(shown), (bands, shown)
    for label, (first, n) in cpu.items():
        assert n == shown[label], (label, n, shown[label])
        lanes = {
            round(lane) - first for lane, s, e in drawn["bars"] if first <= lane < first + n and s <= high and e >= low
        }
        expected = {depth for depth in raw.depths_in(label, low, high) if depth < n}
        assert lanes == expected, (label, lanes, expected)
        drawn_lanes[label] = len(lanes)
    assert max(drawn["lanePx"]) - min(drawn["lanePx"]) < 0.05, drawn["lanePx"]  # GPU lanes as tall as CPU lanes
    checked = dict.fromkeys(cpu, 0)
    for start, lane, group, _, _ in drawn["hovers"]:
        label, first, _ = _band_of(bands, lane)
        if label in cpu and not group.startswith("GPU"):
            depths = raw.depth_at(raw.by_start, label, start)
            assert lane - first in depths and lane - first < shown[label], (label, start, lane - first, depths)
            checked[label] += 1
    assert sum(checked.values()) > 0, checked
    by_lane: dict[float, list[tuple[float, float]]] = {}
    for lane, s, e in drawn["bars"]:
        by_lane.setdefault(lane, []).append((s, e))
    for x, y0, y1 in drawn["links"]:
        if not low <= x <= high:
            continue
        label, first, n = _band_of(bands, y0)
        (depth,) = raw.depth_at(raw.launches, label, x) or {-1}
        assert y0 - first == min(depth, n - 1), (label, x, y0 - first, depth)
        assert any(s <= x <= e for s, e in by_lane.get(y0, [])), (x, y0)  # lands on a drawn slice
        assert _band_of(bands, round(y1))[0].startswith("GPU")
    for lane, start, end in drawn["outlines"]:
        assert any(s < end and start < e for s, e in by_lane.get(lane, [])), (lane, start, end)
    assert abs(drawn["gpuUs"] - raw.gpu_us(low, high)) < 0.01
    return drawn_lanes


def _choose(page: Any, label: str) -> None:
    """Pick `label` in the timeline's "CPU depth" menu, by mouse."""
    page.locator("#chart-timeline .updatemenu-header-group", has_text="CPU depth").click()
    page.locator("#chart-timeline .updatemenu-dropdown-button", has_text=label).click()
    page.wait_for_timeout(300)


@pytest.mark.slow
def test_cpu_depth_folds_and_unfolds(tmp_path: Path) -> None:
    raw = Raw(LLAMA_TRAIN)
    assert raw.levels == {"python3 (469)": 6, "pt_autograd_0 (529)": 8}, raw.levels
    main, autograd = "python3 (469)", "pt_autograd_0 (529)"
    report = tmp_path / "llama.html"
    write_report([LLAMA_TRAIN], report)
    with browser_page() as page:
        errors, requests = open_report(page, report)
        page.locator("#chart-timeline").scroll_into_view_if_needed()
        loaded = page.evaluate(DRAWN)
        # a thread deeper than 6 levels starts at its top 3
        assert _check(loaded, raw, {main: 6, autograd: 3}) == {main: 6, autograd: 3}
        assert loaded["outlines"] and loaded["links"]
        assert {text for _, text in loaded["ticks"]} == {MARKS[1] + main, MARKS[0] + autograd, "GPU 0 stream 7"}

        _choose(page, "CPU depth: top level")
        middle = sum(loaded["range"]) / 2  # zoomed in to 2 ms, where top-level slices are drawn one by one
        page.evaluate(ZOOM, [middle - 1_000, middle + 1_000])
        page.wait_for_timeout(300)
        top = page.evaluate(DRAWN)
        _check(top, raw, {main: 1, autograd: 1})
        assert top["height"] <= loaded["height"] and top["range"] == [middle - 1_000, middle + 1_000]
        assert len(top["links"]) == len(loaded["links"]) > 0
        page.evaluate(ZOOM, loaded["range"])

        _choose(page, "CPU depth: all levels")
        assert _check(page.evaluate(DRAWN), raw, {main: 6, autograd: 8}) == raw.levels

        # a click on a thread's label folds that thread to its top level, another click unfolds it
        page.mouse.click(*page.evaluate(LABEL_POINT, MARKS[1] + autograd))
        page.wait_for_timeout(300)
        assert _check(page.evaluate(DRAWN), raw, {main: 6, autograd: 1}) == {main: 6, autograd: 1}
        assert page.evaluate(MENU_HEADERS)[1] == "CPU depth: per thread (label clicks)"
        page.mouse.click(*page.evaluate(LABEL_POINT, MARKS[0] + autograd))
        page.wait_for_timeout(300)
        assert _check(page.evaluate(DRAWN), raw, {main: 6, autograd: 8}) == raw.levels
        assert page.evaluate(MENU_HEADERS)[1] == "CPU depth: all levels"  # the entry the state is

        # folded, the step view, the labels and the hover still work
        _choose(page, "CPU depth: 2 levels")
        assert page.evaluate(ZOOM_TO, "step 4")
        page.wait_for_timeout(300)
        step = page.evaluate(DRAWN)
        _check(step, raw, {main: 2, autograd: 2})
        assert step["range"] != loaded["range"]
        middle = sum(step["range"]) / 2  # 1 ms, where slices are wide enough for their labels
        page.evaluate(ZOOM, [middle - 500, middle + 500])
        page.wait_for_timeout(300)
        step = page.evaluate(DRAWN)
        _check(step, raw, {main: 2, autograd: 2})
        labels = page.evaluate(
            "() => document.getElementById('chart-timeline').querySelectorAll('.textpoint text').length"
        )
        assert labels > 5
        _, lane, _, text, x = min(
            (h for h in step["hovers"] if h[2].startswith("GPU")), key=lambda h: abs(h[4] - sum(step["range"]) / 2)
        )
        page.mouse.move(*page.evaluate(POINT, [x, lane]))
        page.wait_for_selector("#chart-timeline .hoverlayer .hovertext", timeout=5_000)
        tooltip = page.evaluate("document.querySelector('#chart-timeline .hoverlayer').textContent")
        assert not errors and not requests
    assert "launched by" in text and "launched by" in tooltip, (text, tooltip)


COUNTER_AND_GPU = """() => {
  const gd = document.getElementById('chart-timeline'), ya = gd._fullLayout.yaxis;
  const counter = gd._fullData.find(t => t.meta && t.meta.lod === 'counter');
  const util = gd.data.find(t => t.meta && t.meta.lod === 'util');
  return {ticks: Array.from(ya.tickvals, (v, i) => [+v, String(ya.ticktext[i])]), range: ya.range.slice(),
          counter: Array.from(counter.y, Number), gpuLane: +util.y[0] + 0.5, height: gd._fullLayout.height,
          div: gd.getBoundingClientRect().height};
}"""


@pytest.mark.slow  # over 3 s on a 2-core machine
def test_folding_moves_the_gpu_and_counter_lanes_up(tmp_path: Path) -> None:
    """The tiny two-step trace (a thread three levels deep: step › op › launch; one GPU stream) with a counter
    series (`ph: C`, 4 samples): a click on the thread's label folds it to one lane, and the GPU stream's lane and
    the counter's lane (its samples drawn inside it) move up to the lanes right below it; the GEMM at 30-50 µs still
    hovers on the GPU lane; another click unfolds the thread and puts them back."""
    from tests.conftest import write_trace
    from tests.report_helpers import tiny_events

    samples = [
        {"ph": "C", "name": "queue", "pid": 100, "ts": ts, "args": {"depth": v}}
        for ts, v in ((0, 0), (30, 2), (60, 1), (150, 3))
    ]
    path = write_trace(tmp_path / "tiny.json", tiny_events() + samples)
    raw = call_depth.lanes_per_thread(path)
    assert raw == {(100, 1): 3}, raw
    report = tmp_path / "tiny.html"
    write_report([path], report)
    with browser_page() as page:
        errors, requests = open_report(page, report)
        page.locator("#chart-timeline").scroll_into_view_if_needed()
        unfolded = page.evaluate(COUNTER_AND_GPU)
        label = next(text for _, text in unfolded["ticks"] if text.startswith(MARKS[1]))
        page.mouse.click(*page.evaluate(LABEL_POINT, label))
        page.wait_for_timeout(300)
        folded = page.evaluate(COUNTER_AND_GPU)
        page.mouse.move(*page.evaluate(POINT, [40.0, folded["gpuLane"]]))
        page.wait_for_selector("#chart-timeline .hoverlayer .hovertext", timeout=5_000)
        tooltip = page.evaluate("document.querySelector('#chart-timeline .hoverlayer').textContent")
        page.mouse.click(*page.evaluate(LABEL_POINT, MARKS[0] + label.removeprefix(MARKS[1])))
        page.wait_for_timeout(300)
        again = page.evaluate(COUNTER_AND_GPU)
        assert not errors and not requests
    lanes = raw[(100, 1)]
    for drawn, cpu_lanes in ((unfolded, lanes), (folded, 1), (again, lanes)):
        ticks = sorted(drawn["ticks"])
        assert [value for value, _ in ticks] == [0, cpu_lanes, cpu_lanes + 1], ticks
        assert drawn["gpuLane"] == cpu_lanes and ticks[1][1].startswith("GPU"), drawn
        assert ticks[2][1].endswith("queue: depth"), ticks
        assert all(cpu_lanes + 0.5 <= y <= cpu_lanes + 1.5 for y in drawn["counter"]), drawn["counter"]
        assert drawn["range"] == [cpu_lanes + 1.5, -0.5]
        assert abs(drawn["div"] - drawn["height"]) < 1  # the chart's element follows the figure's height
    assert "ampere_sgemm_128x64_nn" in tooltip and "launched by: aten::mm" in tooltip, tooltip


XDIT = "amd_tracelens/inference/xdit_flux.1_aiter_sage/profile_trace_rank_0.json.gz"


@pytest.mark.slow
def test_python_frames_take_no_lane_and_the_big_trace_starts_folded(tmp_path: Path) -> None:
    """xdit Flux on MI300X (recorded with Python stacks, 201k Python events not drawn): its main thread's lanes are
    the nesting depths of its drawn events among themselves (9, by the stdlib nesting of the raw events, which
    reads no Python event), not counting the Python frames between them; at load it shows its top 3, every slice on
    the lane of its raw depth; unfolded, all 9."""
    from tests.conftest import anchor

    path = anchor(XDIT)
    raw = Raw(path)
    (main,) = raw.levels
    assert raw.levels[main] == 9, raw.levels
    report = tmp_path / "xdit.html"
    write_report([path], report)
    with browser_page() as page:
        errors, requests = open_report(page, report)
        page.locator("#chart-timeline").scroll_into_view_if_needed()
        loaded = page.evaluate(DRAWN)
        _choose(page, "CPU depth: all levels")
        unfolded = page.evaluate(DRAWN)
        assert not errors and not requests
    assert _check(loaded, raw, {main: 3}) == {main: 3}
    assert _check(unfolded, raw, {main: 9}) == raw.levels
    assert (MARKS[0] + main) in {text for _, text in loaded["ticks"]}
