"""Thread and process names (docs/loading.md#thread-names) against an independent stdlib reading of the metadata
events (tests/independent/thread_names.py), on recorded H200 traces and corpus traces; and in the labels that the
report's lanes, the DataFrame views and the Perfetto output use."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracelens
from tests import anchors
from tests.independent import thread_names
from tracelens.model.trace import short_thread_name

ROOT = Path(__file__).resolve().parent.parent
H200 = [
    "traces/h200/eager_mlp.json.gz",
    "traces/h200/compiled_mlp.json.gz",
    "traces/h200/record/hf_llama_train.json.gz",  # the autograd thread: pt_autograd_0, then python3
]
CORPUS = [
    "hta/trace_filter/sampled_rank-0.json.gz",
    "hta/triton_example/triton_example.json.gz",
    "amd_tracelens/torch_compile_triton/trace.json.gz",
    "amd_tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "other/pytorch__kineto/worker0.1623143089861.pt.trace.json.gz",  # tids as strings in the metadata
]


def _path(name: str) -> Path:
    if name.startswith("traces/"):
        return ROOT / name
    found = anchors.find(name)
    if found is None:
        pytest.skip(anchors.missing_reason(name))
    return found


@pytest.mark.parametrize("name", H200 + CORPUS)
def test_names_match_the_metadata_events(name: str) -> None:
    path = _path(name)
    expected = thread_names.names(str(path))
    tracks = tracelens.load(path).tracks
    cpu = [t for t in range(len(tracks)) if not tracks.is_gpu[t]]
    named = 0
    for track in cpu:
        key = (tracks.pid[track], tracks.tid[track])
        assert key in expected, key
        thread, process = expected[key]
        assert (tracks.thread_name[track], tracks.process_name[track]) == (thread, process), key
        if thread:
            named += 1
            short = thread_names.short(thread, key[1])
            short = short if len(short) <= 48 else short[:47] + "…"
            assert tracks.label(track) == f"{short} ({key[1]})"
        else:
            assert tracks.label(track) == f"CPU {key[0]}/{key[1]}"
    assert named >= 1  # every trace here names its main thread
    for track in range(len(tracks)):
        if tracks.is_gpu[track]:
            assert (tracks.thread_name[track], tracks.process_name[track]) == ("", "")
            assert tracks.label(track).startswith("GPU ")


def test_the_autograd_thread_keeps_its_name() -> None:
    """Kineto names the autograd thread twice (`pt_autograd_0`, then `python3`, the process's name): the specific
    name wins; the main thread's is the process's name."""
    tracks = tracelens.load(ROOT / H200[2]).tracks
    labels = {tracks.label(t) for t in range(len(tracks)) if not tracks.is_gpu[t]}
    assert {"pt_autograd_0 (529)", "python3 (469)"} <= labels


def test_short_names() -> None:
    assert short_thread_name("thread 871 (pt_autograd_0)", "871") == "pt_autograd_0"
    assert short_thread_name("thread 871 (pt_autograd_0)", "872") == "thread 871 (pt_autograd_0)"
    assert short_thread_name("worker\n  loop", "1") == "worker loop"
    long = short_thread_name("x" * 500, "1")
    assert len(long) == 48 and long.endswith("…")


def test_a_trace_without_metadata_keeps_pid_tid_labels(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    trace.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 8, "ts": 1, "dur": 2},'
        ' {"ph": "M", "name": "thread_name", "pid": 7, "tid": 9, "args": {"name": 5}},'
        ' {"ph": "M", "name": "thread_sort_index", "pid": 7, "tid": 8, "args": {"sort_index": "x"}}]}'
    )
    tracks = tracelens.load(trace).tracks
    assert [tracks.label(t) for t in range(len(tracks))] == ["CPU 7/8"]
    assert tracks.sort_index is not None and tracks.sort_index.tolist() == [-1]


@pytest.mark.slow
def test_perfetto_thread_tracks_carry_the_names(tmp_path: Path) -> None:
    """`annotate --format perfetto`: each named CPU thread's track is `<short name> (<tid>)`, under its process
    (`<process name> (pid <pid>)`), as the stdlib reading of the metadata says."""
    from tests.test_pftrace import annotate, decode

    path = ROOT / H200[2]
    decoded = decode(annotate(path, tmp_path))
    expected = thread_names.names(str(path))
    slice_tracks = {s.track for s in decoded.slices}
    tracks = tracelens.load(path).tracks
    cpu = [(tracks.pid[t], tracks.tid[t]) for t in range(len(tracks)) if not tracks.is_gpu[t]]
    for pid, tid in cpu:
        thread, process = expected[(pid, tid)]
        if not thread:
            continue
        track_name = f"{thread_names.short(thread, tid)} ({tid})"
        uuids = [u for u, n in decoded.names.items() if n == track_name and u in slice_tracks]
        assert uuids, track_name
        assert all(decoded.root_of(u) == f"{process} (pid {pid})" for u in uuids)
