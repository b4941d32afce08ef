"""`tracelens annotate --format perfetto`: the .pftrace decoded with Perfetto's own protos (the `perfetto`
package's `perfetto_trace_pb2`) and checked event by event against the raw JSON, read here with json/gzip only
(tests/rawtrace.py): every complete event is a slice, every GPU activity is present with its time and duration,
no overlap is lost (no two activities of one track overlap, so Perfetto nests none of them), and a flow runs from
each launching call to each GPU activity whose correlation id names a call."""

from __future__ import annotations

import gzip
import itertools
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import pytest

from tests import anchors, rawtrace

ROOT = Path(__file__).resolve().parents[1]
TRACES = [
    ROOT / "traces" / "h200" / "eager_mlp.json.gz",  # steps, fusion, critical path
    anchors.CORPUS / "hta" / "trace_diff" / "test" / "test.json.gz",  # 31 kernels overlap another of their stream
    anchors.CORPUS / "amd_tracelens" / "mi300" / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",  # no-launch activities
]
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "hip_runtime", "runtime"}

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")


@dataclass
class Slice:
    track: int
    name: str
    ts: int
    dur: int
    flows_out: list[int] = field(default_factory=list)
    flows_in: list[int] = field(default_factory=list)
    args: dict[str, object] = field(default_factory=dict)


@dataclass
class Decoded:
    names: dict[int, str]  # track uuid -> name
    parents: dict[int, int]
    slices: list[Slice]
    counters: dict[int, list[tuple[int, float]]]

    def root_of(self, uuid: int) -> str:
        while uuid in self.parents:
            uuid = self.parents[uuid]
        return self.names[uuid]


def decode(data: bytes) -> Decoded:
    """Slices rebuilt from begin/end pairs per track (an end closes the track's innermost open slice)."""
    trace = pb.Trace()
    trace.ParseFromString(data)
    names: dict[int, str] = {}
    parents: dict[int, int] = {}
    open_: dict[int, list[Slice]] = {}
    slices: list[Slice] = []
    counters: dict[int, list[tuple[int, float]]] = {}
    for packet in trace.packet:
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            names[d.uuid] = d.name
            if d.HasField("parent_uuid"):
                parents[d.uuid] = d.parent_uuid
            continue
        if not packet.HasField("track_event"):
            continue
        e = packet.track_event
        if e.type == pb.TrackEvent.TYPE_COUNTER:
            value = e.counter_value if e.HasField("counter_value") else e.double_counter_value
            counters.setdefault(e.track_uuid, []).append((packet.timestamp, value))
        elif e.type == pb.TrackEvent.TYPE_SLICE_END:
            item = open_[e.track_uuid].pop()
            item.dur = packet.timestamp - item.ts
        else:
            args = {a.name: _value(a) for a in e.debug_annotations}
            item = Slice(
                e.track_uuid, e.name, packet.timestamp, 0, list(e.flow_ids), list(e.terminating_flow_ids), args
            )
            slices.append(item)
            if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
                open_.setdefault(e.track_uuid, []).append(item)
    assert not any(open_.values()), "slices left open"
    return Decoded(names, parents, slices, counters)


def _value(annotation: object) -> object:
    for kind in ("string_value", "int_value", "double_value", "bool_value"):
        if annotation.HasField(kind):  # type: ignore[attr-defined]
            return getattr(annotation, kind)
    return None


def annotate(trace: Path, tmp_path: Path) -> bytes:
    out = tmp_path / "out.pftrace"
    done = subprocess.run(
        [sys.executable, "-m", "tracelens", "annotate", str(trace), "--format", "perfetto", "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return out.read_bytes()


def ns(us: object) -> int:
    """The float's exact value in ns (float(us) * 1000 would round to 256 ns at today's epoch µs)."""
    return round(Fraction(float(us)) * 1000)  # type: ignore[arg-type]


# annotating and decoding the HTA test trace (1.6 MB of gzip) takes ~3 s on a 2-core machine: its cases are slow
SLOW = {TRACES[1]}


@pytest.fixture(
    scope="module",
    params=[pytest.param(p, marks=pytest.mark.slow) if p in SLOW else p for p in TRACES],
    ids=lambda p: p.name,
)
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], Decoded]:
    path: Path = request.param
    if not path.exists():
        pytest.skip(f"{path} not here")
    raw = [e for e in rawtrace.events(path) if isinstance(e.get("ts"), (int, float))]
    return raw, decode(annotate(path, tmp_path_factory.mktemp("pftrace")))


def source_slices(decoded: Decoded) -> list[Slice]:
    return [s for s in decoded.slices if decoded.root_of(s.track) != "tracelens"]


def is_gpu(event: dict) -> bool:
    return str(event.get("cat", "")).lower() in GPU_CATS


def close(a: list[tuple[str, int, int]], b: list[tuple[str, int, int]]) -> bool:
    """Equal multisets of (name, ts, dur), times within 1 ns (µs floats → ns)."""
    pairs = zip(sorted(a), sorted(b), strict=False)
    return len(a) == len(b) and all(x[0] == y[0] and abs(x[1] - y[1]) <= 1 and abs(x[2] - y[2]) <= 1 for x, y in pairs)


def test_every_event_is_a_slice(case: tuple[list[dict], Decoded]) -> None:
    raw, decoded = case
    got = Counter(s.name for s in source_slices(decoded))
    assert got == Counter(str(e.get("name", "")) for e in raw)


def test_every_gpu_activity_present_with_its_time(case: tuple[list[dict], Decoded]) -> None:
    raw, decoded = case
    expected = [(str(e["name"]), ns(e["ts"]), ns(e.get("dur", 0))) for e in raw if is_gpu(e)]
    on_streams = [
        s
        for s in source_slices(decoded)
        if decoded.root_of(s.track).startswith("GPU ") and "annotations" not in decoded.names[s.track]
    ]
    got = [(s.name, s.ts, s.dur) for s in on_streams]
    assert expected and close(got, expected)


def test_no_overlap_lost(case: tuple[list[dict], Decoded]) -> None:
    """No two GPU activities of one track overlap (Perfetto would draw the second inside the first), and a
    stream whose activities overlap in the source has as many lanes as its deepest overlap."""
    raw, decoded = case
    by_track: dict[int, list[tuple[int, int]]] = {}
    for s in source_slices(decoded):
        if decoded.root_of(s.track).startswith("GPU ") and "annotations" not in decoded.names[s.track]:
            by_track.setdefault(s.track, []).append((s.ts, s.ts + s.dur))
    for intervals in by_track.values():
        intervals.sort()
        assert all(b[0] >= a[1] for a, b in itertools.pairwise(intervals))
    depth: dict[tuple[object, object], int] = {}  # deepest overlap per source stream, by a sweep
    for key in {(e["pid"], e["tid"]) for e in raw if is_gpu(e)}:
        points = sorted(
            p
            for e in raw
            if is_gpu(e) and (e["pid"], e["tid"]) == key
            for p in ((ns(e["ts"]) + ns(e.get("dur", 0)), -1), (ns(e["ts"]), 1))
        )
        level = deepest = 0
        for _, step in points:
            level += step
            deepest = max(deepest, level)
        depth[key] = deepest
    assert len(by_track) == sum(depth.values())


def test_a_flow_for_every_linked_launch(case: tuple[list[dict], Decoded]) -> None:
    raw, decoded = case
    calls: dict[int, list[dict]] = {}  # GPU activities live in the device's pid: match by correlation id alone
    for e in raw:
        corr = (e.get("args") or {}).get("correlation")
        if str(e.get("cat", "")).lower() in LAUNCH_CATS and corr is not None:
            calls.setdefault(int(corr), []).append(e)
    linked = []
    for e in raw:
        corr = (e.get("args") or {}).get("correlation")
        if is_gpu(e) and corr is not None and len(calls.get(int(corr), [])) == 1:
            linked.append((e, calls[int(corr)][0]))
    by_flow_out = {f: s for s in decoded.slices for f in s.flows_out}
    by_flow_in = {f: s for s in decoded.slices for f in s.flows_in}
    assert set(by_flow_out) == set(by_flow_in)
    got = [
        ((target.name, target.ts, target.dur), (source.name, source.ts, source.dur))
        for flow, target in by_flow_in.items()
        for source in [by_flow_out[flow]]
    ]
    expected = [
        ((str(k["name"]), ns(k["ts"]), ns(k.get("dur", 0))), (str(c["name"]), ns(c["ts"]), ns(c.get("dur", 0))))
        for k, c in linked
    ]
    assert len(got) == len(expected)
    assert close([a for a, _ in got], [a for a, _ in expected])
    assert close([b for _, b in got], [b for _, b in expected])


def test_steps_and_findings_tracks(case: tuple[list[dict], Decoded]) -> None:
    """Each ProfilerStep of the source is a slice of `steps (CPU range)` with its time, and the GPU work it
    launched (activities whose launching call starts in the step) spans one slice of `steps (GPU work
    launched)`: from the first start to the last end."""
    raw, decoded = case
    spans = [
        (int(str(e["name"]).split("#")[1]), ns(e["ts"]), ns(e["ts"]) + ns(e.get("dur", 0)))
        for e in raw
        if str(e.get("name", "")).startswith("ProfilerStep#")
        and not is_gpu(e)
        and e.get("cat") != "gpu_user_annotation"
    ]
    tracks = {decoded.names[s.track] for s in decoded.slices if decoded.root_of(s.track) == "tracelens"}
    steps_cpu = sorted((s.name, s.ts, s.dur) for s in decoded.slices if decoded.names[s.track] == "steps (CPU range)")
    expected = sorted((f"step {n}", start, end - start) for n, start, end in spans)
    assert close(steps_cpu, expected), (steps_cpu[:3], expected[:3])
    calls = {
        int(e["args"]["correlation"]): ns(e["ts"])
        for e in raw
        if str(e.get("cat", "")).lower() in LAUNCH_CATS and "correlation" in (e.get("args") or {})
    }
    launched: dict[int, list[tuple[int, int]]] = {}
    for e in raw:
        call = calls.get(int((e.get("args") or {}).get("correlation", -1)))
        if is_gpu(e) and call is not None:
            for number, start, end in spans:
                if start <= call < end:
                    launched.setdefault(number, []).append((ns(e["ts"]), ns(e["ts"]) + ns(e.get("dur", 0))))
    windows = sorted(
        (s.name, s.ts, s.dur) for s in decoded.slices if decoded.names[s.track].startswith("steps (GPU work launched)")
    )
    expected_windows = sorted(
        (f"step {n} GPU", min(a for a, _ in work), max(b for _, b in work) - min(a for a, _ in work))
        for n, work in launched.items()
    )
    assert close(windows, expected_windows)
    if spans:
        assert "critical path" in tracks
    by_track: dict[int, list[tuple[int, int]]] = {}  # findings tracks: slices never overlap (lanes instead)
    for s in decoded.slices:
        if decoded.root_of(s.track) == "tracelens":
            by_track.setdefault(s.track, []).append((s.ts, s.ts + s.dur))
    for intervals in by_track.values():
        intervals.sort()
        assert all(b[0] >= a[1] for a, b in itertools.pairwise(intervals))


def test_memory_and_queue_counters(tmp_path: Path) -> None:
    """Queue depth per stream from the raw events: +1 at the launching call's start, −1 at the activity's end;
    the counter's maximum equals the sweep's."""
    path = TRACES[0]
    raw = rawtrace.events(path)
    decoded = decode(annotate(path, tmp_path))
    launch = {int(e["args"]["correlation"]): ns(e["ts"]) for e in raw if str(e.get("cat")).lower() in LAUNCH_CATS}
    points = sorted(
        p
        for e in raw
        if is_gpu(e) and int(e["args"].get("correlation", -1)) in launch
        for p in ((launch[int(e["args"]["correlation"])], 1), (ns(e["ts"]) + ns(e["dur"]), -1))
    )
    level, deepest = 0, 0
    for _, step in sorted(points, key=lambda p: (p[0], p[1])):
        level += step
        deepest = max(deepest, level)
    queue = [t for t, n in decoded.names.items() if n.endswith("queue depth")]
    assert len(queue) == 1
    assert max(v for _, v in decoded.counters[queue[0]]) == deepest
    assert decoded.counters[queue[0]][-1][1] == 0


def test_without_the_package_one_error_line(tmp_path: Path) -> None:
    """A Python that cannot import `perfetto`: one `tracelens: error:` line saying how to install, exit 2."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "perfetto.py").write_text("raise ImportError('blocked for the test')\n")
    import os

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocker), str(ROOT)]))
    done = subprocess.run(
        [sys.executable, "-m", "tracelens", "annotate", str(TRACES[0]), "--format", "perfetto", "-o", "x.pftrace"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracelens: error:") and "pip install perfetto" in lines[0]
    assert not (tmp_path / "x.pftrace").exists()


def test_refuses_to_replace_its_input(tmp_path: Path) -> None:
    copy = tmp_path / "t.json.gz"
    copy.write_bytes(TRACES[0].read_bytes())
    done = subprocess.run(
        [sys.executable, "-m", "tracelens", "annotate", str(copy), "--format", "perfetto", "-o", str(copy), "--force"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2 and "input" in done.stderr
    assert gzip.decompress(copy.read_bytes())  # untouched
