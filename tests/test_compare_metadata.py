"""`compare`'s metadata ops per step: the median over the summary's steps of the metadata ops (aten::t, view,
expand …; a nest such as aten::t → transpose → as_strided once), against the raw events: each such cpu_op not
directly inside another one, by the ProfilerStep its start lies in, the steps that capture a CUDA graph left out
(as the summary leaves them out: warm-up)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from tests import rawtrace
from tracelens.cli import main
from tracelens.model.op_names import METADATA_OPS

ROOT = Path(__file__).resolve().parent.parent
# a CUDA-graph trace whose first step captures the graph (32 metadata ops in it, none in a replay), its eager twin,
# and the study's MLPs
TRACES = ("graphs/block_eager", "graphs/block_graph", "graphs/mlp_graph", "eager_mlp", "compiled_mlp")


def _median_metadata_ops(path: Path) -> float:
    events = rawtrace.events(path)
    steps = rawtrace.steps([e for e in events if e.get("cat") == "user_annotation"])  # not the GPU's copy
    capturing = {
        i
        for i, (_, start, end) in enumerate(steps)
        for e in events
        if "Capture" in str(e.get("name", "")) and start <= float(e["ts"]) <= end
    }
    ops = sorted(
        (e for e in events if e.get("cat") == "cpu_op"), key=lambda e: (float(e["ts"]), -float(e.get("dur", 0)))
    )
    counts = [0] * len(steps)
    open_ops: dict[object, list[dict[str, object]]] = {}
    for op in ops:
        start = float(op["ts"])
        stack = open_ops.setdefault(op.get("tid"), [])
        while stack and float(stack[-1]["ts"]) + float(stack[-1].get("dur", 0)) < start:  # type: ignore[arg-type]
            stack.pop()
        parent = stack[-1] if stack else None
        stack.append(op)
        if op["name"] not in METADATA_OPS or (parent is not None and parent["name"] in METADATA_OPS):
            continue
        for i, (_, step_start, step_end) in enumerate(steps):
            if step_start <= start <= step_end:
                counts[i] += 1
    kept = [c for i, c in enumerate(counts) if i not in capturing]
    return float(statistics.median(kept))


@pytest.mark.parametrize("name", TRACES)
def test_metadata_ops_per_step_is_the_median_over_the_summary_steps(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = ROOT / "traces" / "h200" / f"{name}.json.gz"
    assert main(["compare", str(path), str(path), "--format", "json"]) == 0
    variant = json.loads(capsys.readouterr().out)["variants"][0]
    assert variant["per_step"]["metadata_ops"] == _median_metadata_ops(path)


def test_a_component_equal_in_every_variant_has_no_fastest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`compare` of a trace and its copy: each component the same in both, said so, never "X fastest (61.7),
    Y slowest (61.7)"."""
    import shutil

    source = Path(__file__).resolve().parent.parent / "traces" / "h200" / "graphs" / "block_eager.json.gz"
    copy = tmp_path / "block_eager_copy.json.gz"
    shutil.copyfile(source, copy)
    assert main(["compare", "--width", "200", str(source), str(copy)]) == 0
    out = capsys.readouterr().out
    assert "slowest" not in out and "fastest" not in out
    assert "step: the same in every variant (1,180.6 µs/step)" in out and "least" not in out
    assert "GPU kernel time: the same in every variant (" in out
    assert "norm: the same in every variant placed (41.5 µs/step)" in out


def test_compare_gives_each_variant_its_profiler_free_step(tmp_path: Path) -> None:
    """`compare`'s `per_step` carries the step without the profiler and its source as `analyze` gives it (one
    quantity, one value); on `tracelens record` twins it is the CUDA-event median the recorder wrote (stdlib)."""
    import gzip

    pair = [ROOT / f"traces/h100/record3/hf_gpt2_train_{v}.json.gz" for v in ("eager", "compiled")]
    out = tmp_path / "c.json"
    assert main(["compare", *map(str, pair), "--format", "json", "-o", str(out), "--no-cache"]) == 0
    variants = json.loads(out.read_text())["variants"]
    for path, variant in zip(pair, variants, strict=True):
        with gzip.open(path, "rt") as handle:
            measured = json.load(handle)["tracelens_record"]["profiler_free"]["median_step_us"]
        assert variant["per_step"]["profiler_free_source"] == "measured"
        assert variant["per_step"]["profiler_free_step_us"] == pytest.approx(measured, abs=0.05)
    # an estimated one, as analyze's
    alone = tmp_path / "a.json"
    eager = ROOT / "traces/h200/eager_mlp.json.gz"
    assert main(["analyze", str(eager), "--format", "json", "-o", str(alone), "--no-cache"]) == 0
    analyzed = json.loads(alone.read_text())["per_step"]
    both = tmp_path / "b.json"
    assert main(["compare", str(eager), str(pair[0]), "--format", "json", "-o", str(both), "--no-cache"]) == 0
    first = json.loads(both.read_text())["variants"][0]["per_step"]
    assert (first["profiler_free_step_us"], first["profiler_free_source"]) == (
        analyzed["profiler_free_step_us"],
        "estimated",
    )


def test_the_no_profiler_step_stays_at_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    """At 80 columns the variants table keeps the step without the profiler where a variant has one (the
    variant names wrap and dispatch goes first; exposed dispatch stays), and on `tracelens record` twins it is
    the recorder's CUDA-event median, marked m (stdlib). Before 2026-12-07 it was the first number left out."""
    import gzip

    pair = [ROOT / f"traces/h100/record3/hf_llama_train_b1s128_{v}.json.gz" for v in ("eager", "compiled")]
    assert main(["compare", *map(str, pair), "--no-cache", "--width", "80"]) == 0
    table = capsys.readouterr().out.split("Kernel µs per step")[0]
    assert "no-profiler" in table and "dispatch µs/step (--width" in table.replace("\n", " ")
    for path in pair:
        with gzip.open(path, "rt") as handle:
            measured = json.load(handle)["tracelens_record"]["profiler_free"]["median_step_us"]
        assert f"{measured:,.1f} m" in table
    assert max(len(line) for line in table.splitlines()) <= 80
