"""The report's finding links (report/timeline.py:finding_links) on the eager MLP: the fusion finding and the
critical path have one, and each Perfetto hint names a slice or track that the `.pftrace` of `annotate --format
perfetto` holds (decoded with Perfetto's protos). The ranges: tests/browser/test_timeline_labels.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tracelens
from tests import rawtrace
from tests.test_pftrace import annotate, decode
from tracelens.analyses.summary import gpu_activity_frame
from tracelens.report.timeline import finding_links

ROOT = Path(__file__).resolve().parent.parent
EAGER_MLP = ROOT / "traces" / "h200" / "eager_mlp.json.gz"


def test_hints_name_what_the_pftrace_holds(tmp_path: Path) -> None:
    trace = tracelens.load(EAGER_MLP)
    links = finding_links(trace, gpu_activity_frame(trace), tracelens.analyze(trace))
    assert any(link.label.startswith("fusion #1") for link in links)
    assert any(link.label.startswith("critical path") for link in links)
    decoded = decode(annotate(EAGER_MLP, tmp_path))
    for link in links:
        searched = re.search(r"search '([^']+)'", link.perfetto)
        if searched:
            hits = [s for s in decoded.slices if s.name.startswith(searched.group(1))]
            assert hits and all(decoded.names[s.track].startswith("fusion opportunities") for s in hits), link
        elif sliced := re.search(r"the '([^']+)' slice", link.perfetto):
            assert any(s.name == sliced.group(1) for s in decoded.slices), link
        else:
            track = re.search(r"the '([^']+)' track", link.perfetto)
            assert track and any(n == track.group(1) for n in decoded.names.values()), link


def test_each_action_zooms_to_the_drawn_step_and_all_it_launched() -> None:
    """One link per action of "What to do next", on the drawn (median-length) step: from the raw events, its
    range is the step's ProfilerStep start to its end or the last end of the GPU activity launched in it."""
    trace = tracelens.load(EAGER_MLP)
    results = tracelens.analyze(trace)
    assert results.actions is not None and results.actions.actions
    links = [
        link for link in finding_links(trace, gpu_activity_frame(trace), results) if link.label.startswith("action")
    ]
    assert len(links) == len(results.actions.actions)
    number = int(re.search(r"step (\d+)$", links[0].label).group(1))  # type: ignore[union-attr]
    evs = rawtrace.events(EAGER_MLP)
    (step_start,) = [
        float(e["ts"]) for e in evs if e.get("name") == f"ProfilerStep#{number}" and e.get("cat") == "user_annotation"
    ]
    launched_at = rawtrace.launch_times(evs)
    (cpu_end,) = [
        float(e["ts"]) + float(e["dur"])
        for e in evs
        if e.get("name") == f"ProfilerStep#{number}" and e.get("cat") == "user_annotation"
    ]
    ends = [
        float(e["ts"]) + float(e["dur"])
        for e in evs
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
        and step_start <= launched_at.get(int(e["args"].get("correlation", -1)), -1.0) < cpu_end
    ]
    (index,) = [i for i, n in enumerate(trace.steps.number.tolist()) if n == number]
    at_us = trace.steps.start_ns[index] / 1000  # the step's start on the timeline (tracelens' time origin)
    for link in links:
        pad = (link.x1_us - link.x0_us) / 52  # the link's margin: a fiftieth of the step's range on each side
        assert link.x0_us + pad == pytest.approx(at_us, abs=0.01)
        assert (link.x1_us - pad) - (link.x0_us + pad) == pytest.approx(max(cpu_end, *ends) - step_start, abs=0.01)


def test_the_critical_path_link_counts_its_kernels_apart(tmp_path: Path) -> None:
    """The critical path's link names how many of its events are kernels, against the path's rows in the
    `.pftrace` (its 'critical path' track): kernels by name as the raw trace's `kernel` events, the rest apart (a
    memset, runtime calls, the closing sync the track leaves out); it read '8 kernels' for 5 kernels, 1 memset
    and 2 runtime calls."""
    trace = tracelens.load(EAGER_MLP)
    links = finding_links(trace, gpu_activity_frame(trace), tracelens.analyze(trace))
    (link,) = [link for link in links if link.label.startswith("critical path")]
    found = re.search(r": (\d+) kernels?(?: and (\d+) other events)?$", link.label)
    assert found, link.label
    kernel_names = {str(e["name"]) for e in rawtrace.events(EAGER_MLP) if e.get("cat") == "kernel"}
    decoded = decode(annotate(EAGER_MLP, tmp_path))
    path = [s for s in decoded.slices if decoded.names[s.track] == "critical path"]
    kernels = sum(1 for s in path if s.name in kernel_names)
    assert path and int(found.group(1)) == kernels
    assert int(found.group(2) or 0) >= len(path) - kernels  # the link also spans the step's closing sync
