"""`annotate`'s streamed rewrite (`rewrite.stream_pieces`, range by range as the file is read) gives the same bytes
as the whole-text rewrite (`rewrite.rewrite_pieces`) on the real traces, plain and gzip, cut into ranges of any
size; and, read by the stdlib `json` module, the output is the input with the findings' args merged into the
chosen events and the new events appended, nothing else changed. Files the streamed rewrite cannot place (a
bare array, a key twice, a cut-off file) fall back to the whole-text rewrite with the same output."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import anchor, anchor_traces, kernel, recorded_trace, write_trace
from tests.report_helpers import tiny_events
from tracelens.analyses import analyze
from tracelens.cli import main
from tracelens.errors import TracelensError
from tracelens.loader import load_trace
from tracelens.loader.rewrite import (
    AddedSlice,
    Additions,
    NotStreamable,
    rewrite_pieces,
    rewrite_source,
    stream_pieces,
)
from tracelens.renderers.perfetto import trace_additions

SMALL = [p for p in anchor_traces() if p.stat().st_size < 2_000_000]  # 16 of the 20: 2 s in all


def _both(path: Path, chunk_bytes: int = 1 << 16, *more: int) -> tuple[bytes, bytes, Additions]:
    """The whole-text rewrite of `path` with its findings, and the streamed one in ranges of `chunk_bytes`
    (checked equal to the streamed ones in ranges of each of `more`)."""
    trace = load_trace(path)
    additions = trace_additions(trace, analyze(trace))
    source = rewrite_source(trace)
    del trace
    whole = b"".join(rewrite_pieces(source, additions))
    streamed = b"".join(stream_pieces(source, additions, chunk_bytes))
    for size in more:
        assert b"".join(stream_pieces(source, additions, size)) == streamed, size
    return whole, streamed, additions


@pytest.mark.parametrize("path", SMALL, ids=[p.name for p in SMALL])
def test_streamed_bytes_equal_the_whole_text_rewrite_on_anchors(path: Path) -> None:
    whole, streamed, _ = _both(path)
    assert streamed == whole


@pytest.mark.slow
def test_streamed_bytes_equal_on_a_big_anchor_plain_and_gzip(tmp_path: Path) -> None:
    """The 63 MB AMD anchor, gzip and plain, in 4 MB ranges (the default) and 64 kB ones (12 s)."""
    source = anchor("amd_tracelens/inference/xdit_flux.1_aiter_sage/profile_trace_rank_0.json.gz")
    plain = tmp_path / "profile.json"
    with gzip.open(source) as packed, plain.open("wb") as out:
        shutil.copyfileobj(packed, out)
    for path in (source, plain):
        whole, streamed, _ = _both(path, 4 << 20, 1 << 16)
        assert streamed == whole, path


@pytest.mark.parametrize("chunk_bytes", [1, 100, 1 << 20])
def test_the_output_is_the_input_with_args_merged_and_events_appended(tmp_path: Path, chunk_bytes: int) -> None:
    """Against the stdlib parser, event by event: a recorded H200 trace, ranges of one event up to all."""
    path = recorded_trace("h200/eager_mlp.json.gz")
    whole, streamed, additions = _both(path, chunk_bytes, 1 << 16)
    assert streamed == whole
    document = json.loads(gzip.decompress(path.read_bytes()))
    output = json.loads(streamed)
    _check_merged(document, output, additions)


def _check_merged(document: dict[str, Any], output: dict[str, Any], additions: Additions) -> None:
    """`output` is `document` with the additions' args merged into complete events (ph X, a number ts; args
    that are not an object replaced) and the new events appended, nothing else changed."""
    assert list(output) == list(document)
    assert {k: v for k, v in output.items() if k != "traceEvents"} == {
        k: v for k, v in document.items() if k != "traceEvents"
    }
    events, written = document["traceEvents"], output["traceEvents"]
    merged: list[str] = []
    for before, after in zip(events, written[: len(events)], strict=True):
        if before == after:
            continue
        assert before["ph"] == "X" and isinstance(before["ts"], int | float) and not isinstance(before["ts"], bool)
        assert {k: v for k, v in after.items() if k != "args"} == {k: v for k, v in before.items() if k != "args"}
        old_args = before.get("args") if isinstance(before.get("args"), dict) else {}
        extra = {k: v for k, v in after["args"].items() if k not in old_args or old_args[k] != v}
        assert {k: v for k, v in after["args"].items() if k not in extra} == {
            k: v for k, v in old_args.items() if k not in extra
        }
        merged.append(json.dumps(extra, sort_keys=True))
    assert sorted(merged) == sorted(json.dumps(dict(v), sort_keys=True) for v in additions.row_args.values())
    new = written[len(events) :]
    tracks = {s.track for s in additions.slices}
    assert len(new) == (2 + len(tracks) + len(additions.slices) if additions.slices else 0)
    pids = [e["pid"] for e in events if isinstance(e, dict) and type(e.get("pid")) is int]
    assert {e["pid"] for e in new} <= {max(pids, default=0) + 1}


# hand-written files: the text between and around events in every spelling the streamed cuts must survive
ODD_TEXTS = {
    "spaced": '{ "schemaVersion" : 1 ,\n "traceEvents" : [\n  {EVENTS}\n ] ,\n "displayTimeUnit" : "ms" }\n',
    "keys after": '{"traceEvents":[{EVENTS}],"deviceProperties":[{"id":0}, {"id":1}],"x":{"y":[{}, {}]}}',
    "no other keys": '{"traceEvents":[{EVENTS}]}',
}


def _odd_events() -> list[Any]:
    events: list[Any] = tiny_events()
    events[0] = {**events[0], "name": 'a}, {"ph": "X"} , {b'}  # a boundary inside a string
    events[1] = {**events[1], "args": {"nested": [{"a": 1}, {"b": [{}, {}]}]}}  # and inside an event
    return [{}, *events[:3], 7, {}, "text", [1, {}], *events[3:], {"ph": "X", "ts": 5, "dur": 1, "args": 3}]


@pytest.mark.parametrize("layout", list(ODD_TEXTS))
@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_odd_layouts_stream_to_the_same_bytes(tmp_path: Path, layout: str, suffix: str) -> None:
    events = ",\n ".join(json.dumps(e) for e in _odd_events())
    text = ODD_TEXTS[layout].replace("{EVENTS}", events).encode()
    path = tmp_path / f"odd{suffix}"
    path.write_bytes(gzip.compress(text) if suffix.endswith(".gz") else text)
    trace = load_trace(path)
    rows = range(len(trace.events))
    additions = Additions(slices=(AddedSlice("t", "x", 0, 1),), row_args={row: {"mark": row} for row in rows})
    source = rewrite_source(trace)
    whole = b"".join(rewrite_pieces(source, additions))
    for chunk_bytes in (1, 7, 50, 1 << 20):
        assert b"".join(stream_pieces(source, additions, chunk_bytes)) == whole, chunk_bytes
    _check_merged(json.loads(text), json.loads(whole), additions)


@pytest.mark.parametrize(
    "text",
    [
        '{"traceEvents": 5, "a": 1, "traceEvents": [{EVENTS}]}',  # traceEvents twice: the later wins
        '{"a": 1, "traceEvents": [{EVENTS}], "a": 2}',  # a key before and after the events
        '{"meta": {"traceEvents": [1]}, "traceEvents": [{EVENTS}]}',  # the key in a nested object first
        "[{EVENTS}]",  # a bare array
    ],
    ids=["events twice", "key twice", "key nested first", "bare array"],
)
def test_what_the_stream_cannot_place_falls_back_to_the_same_output(tmp_path: Path, text: str) -> None:
    path = tmp_path / "odd.json"
    path.write_text(text.replace("{EVENTS}", ",".join(json.dumps(e) for e in tiny_events())))
    trace = load_trace(path)
    additions = trace_additions(trace, analyze(trace))
    source = rewrite_source(trace)
    with pytest.raises(NotStreamable):
        b"".join(stream_pieces(source, additions))
    output = tmp_path / "out.json"
    assert main(["annotate", str(path), "-o", str(output)]) == 0
    assert output.read_bytes() == b"".join(rewrite_pieces(source, additions))
    assert not [p.name for p in tmp_path.iterdir() if "tracelens-tmp" in p.name]


def test_a_file_changed_after_loading_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.json", tiny_events())
    trace = load_trace(path)
    source = rewrite_source(trace)
    write_trace(path, [*tiny_events(), kernel("late", 300, 1, correlation=999)])
    with pytest.raises(TracelensError, match="cannot match events"):
        b"".join(stream_pieces(source, Additions(slices=(AddedSlice("t", "x", 0, 1),))))


def test_cli_output_plain_gzip_and_stdout_agree(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    source = recorded_trace("h200/eager_mlp.json.gz")
    assert main(["annotate", str(source), "-o", str(tmp_path / "a.json")]) == 0
    assert main(["annotate", str(source), "-o", str(tmp_path / "a.json.gz")]) == 0
    capsysbinary.readouterr()
    assert main(["annotate", str(source), "-o", "-"]) == 0
    plain = (tmp_path / "a.json").read_bytes()
    assert gzip.decompress((tmp_path / "a.json.gz").read_bytes()) == plain
    assert capsysbinary.readouterr().out == plain
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "a.json.gz"]
