"""Golden analyze results for every corpus and recorded trace (tests/golden/, gzip-compressed JSON made by
scripts/regen_golden.py).

Every section of the analyze JSON is frozen, and only the keys present in the golden file are compared, so
new fields and new sections do not break these tests; changed figures do. When a change of figures is
intended: `PYTHONPATH=. python scripts/regen_golden.py`, then review what it prints (every changed value).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests import anchors
from tests.conftest import REPO, anchor, optional_corpus, recorded_trace
from tracelens.cli import main

_SPEC = importlib.util.spec_from_file_location("regen_golden", REPO / "scripts" / "regen_golden.py")
assert _SPEC is not None and _SPEC.loader is not None
regen = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(regen)

CORPUS: dict[str, Path] = regen.corpus()


def _subset_difference(golden: Any, actual: Any, where: str = "") -> str | None:
    """First place where `actual` differs from `golden`, looking only at keys present in `golden`."""
    if isinstance(golden, dict):
        if not isinstance(actual, dict):
            return f"{where}: expected an object, got {actual!r:.80}"
        for key, value in golden.items():
            if key not in actual:
                return f"{where}.{key}: missing"
            difference = _subset_difference(value, actual[key], f"{where}.{key}")
            if difference:
                return difference
        return None
    if isinstance(golden, list):
        if not isinstance(actual, list) or len(actual) != len(golden):
            got = len(actual) if isinstance(actual, list) else repr(actual)
            return f"{where}: expected a list of {len(golden)}, got {got}"
        for index, (want, got) in enumerate(zip(golden, actual, strict=True)):
            difference = _subset_difference(want, got, f"{where}[{index}]")
            if difference:
                return difference
        return None
    if golden != actual or type(golden) is not type(actual):
        return f"{where}: golden {golden!r:.120}, now {actual!r:.120}"
    return None


def test_subset_comparison_ignores_new_keys_only() -> None:
    golden = {"a": 1, "b": [{"x": 1.5}, {"x": 2}]}
    assert _subset_difference(golden, {"a": 1, "b": [{"x": 1.5, "new": 0}, {"x": 2}], "c": 3}) is None
    assert _subset_difference(golden, {"a": 1, "b": [{"x": 1.5}, {"x": 3}]}) == ".b[1].x: golden 2, now 3"
    assert _subset_difference(golden, {"a": 1, "b": [{"x": 1.5}]}) == ".b: expected a list of 2, got 1"
    assert _subset_difference(golden, {"b": []}) == ".a: missing"
    assert _subset_difference({"a": 1}, {"a": 1.0}) == ".a: golden 1, now 1.0"


def test_golden_bytes_are_fixed_by_the_text() -> None:
    """Same text, same bytes: no time or file name in the gzip header; the text comes back unchanged."""
    text = regen.dumps({"a": [1, 2.5, None], "µs": "→"})
    data = regen.encode(text)
    assert data == regen.encode(text)
    assert data[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # no FNAME, mtime 0, level 9, OS unknown
    assert regen.decode(data) == text


def test_regen_summary_lists_the_changed_values() -> None:
    old = regen.dumps({"a": 1, "b": [{"x": 1.5}, {"x": 2}], "c": "s", "gone": True})
    new = regen.dumps({"a": 1.0, "b": [{"x": 1.5}, {"x": 3}, {"x": 4}], "c": "s", "d": None})
    assert regen.summary(old, new) == [
        ".a: 1 → 1.0",
        ".b: list of 2 → 3",
        ".b[1].x: 2 → 3",
        ".gone: removed (was true)",
        ".d: added null",
    ]
    assert regen.summary(old, new, shown=2) == [
        ".a: 1 → 1.0",
        ".b: list of 2 → 3",
        "… 5 differences in all (b 2, a 1, gone 1, d 1)",
    ]
    assert regen.summary(old, old.replace("\n", "\n ")) == ["same values, other text (formatting or key order)"]


ABSENT_OPTIONAL = [
    pytest.param(f"anchor_traces/{name}", marks=optional_corpus(name))
    for name in anchors.OPTIONAL
    if anchors.find(name) is None
]


@pytest.mark.parametrize("name", [*CORPUS, *ABSENT_OPTIONAL])
def test_analyze_matches_golden(name: str) -> None:
    text = regen.read_golden(name)
    assert text is not None, f"no golden result for {name}: run PYTHONPATH=. python scripts/regen_golden.py"
    golden = json.loads(text)
    actual = json.loads(regen.dumps(regen.golden_document(CORPUS[name])))
    difference = _subset_difference(golden, actual)
    assert difference is None, f"{name}{difference} (if intended: scripts/regen_golden.py, review the diff)"


def test_every_golden_file_has_its_trace() -> None:
    stored = {
        p.relative_to(regen.GOLDEN).as_posix().removesuffix(regen.SUFFIX) for p in regen.GOLDEN.rglob("*.json.gz")
    }
    # an uncompressed golden (from a branch of before) is converted by scripts/regen_golden.py, text unchanged
    assert not list(regen.GOLDEN.rglob(f"*{regen.LEGACY_SUFFIX}"))
    optional = {f"anchor_traces/{name}" for name in anchors.OPTIONAL}
    assert set(CORPUS) <= stored
    assert stored - set(CORPUS) <= optional  # only a trace that may be absent (not redistributable) lacks its file


def test_the_golden_set_covers_the_corpus() -> None:
    names = set(CORPUS)
    assert "anchor_traces/hta/trace_diff/control/control.json.gz" in names
    absent = sum(anchors.find(name) is None for name in anchors.OPTIONAL)
    assert sum(n.startswith("anchor_traces/") for n in names) == 20 - absent
    if regen.TRACES.exists():
        assert "traces/h200/eager_mlp.json.gz" in names


# ---------------------------------------------------------------- identical input → identical bytes


@pytest.mark.slow
def test_identical_input_gives_byte_identical_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = anchor("hta/trace_diff/control/control.json.gz")
    copies = [tmp_path / "a" / source.name, tmp_path / "b" / source.name]
    outputs = []
    for copy in copies:
        copy.parent.mkdir()
        shutil.copyfile(source, copy)
        for _ in range(2):
            assert main(["analyze", str(copy), "--format", "json"]) == 0
            outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert outputs[2] == outputs[3]
    # another path to the same bytes: only the path differs
    assert outputs[0].replace(str(copies[0]), "X") == outputs[2].replace(str(copies[1]), "X")
    assert outputs[0].count(str(copies[0])) == 1


@pytest.mark.slow
def test_regenerating_gives_the_same_bytes() -> None:
    path = anchor("other/pytorch__kineto/worker0.1623143089861.pt.trace.json.gz")
    first = regen.dumps(regen.golden_document(path))
    assert regen.dumps(regen.golden_document(path)) == first


# ---------------------------------------------------------------- figures checked by hand in the golden files


def _golden(name: str) -> dict[str, Any]:
    text = regen.read_golden(name)
    if text is None:
        pytest.skip(f"{name} not in the golden set")
    document: dict[str, Any] = json.loads(text)
    return document


def test_golden_triton_example_one_kernel_of_1_76_us() -> None:
    """The raw file has exactly one `kernel` event: triton_poi_fused_add_cos_sin_0, dur 1.76 (µs)."""
    anchor("hta/triton_example/triton_example.json.gz")
    golden = _golden("anchor_traces/hta/triton_example/triton_example.json.gz")
    assert [(k["name"], k["calls"], k["total_us"]) for k in golden["kernels"]] == [
        ("triton_poi_fused_add_cos_sin_0", 1, 1.76)
    ]
    assert golden["kernels"][0]["category"] == "fused"
    assert golden["per_step"]["kernels"] == 1
    assert golden["per_step"]["gpu_kernel_us"] == 1.76


def test_golden_legacy_kineto_worker0_six_steps_of_1462_kernels() -> None:
    """torch 1.9 trace: ProfilerStep#5..#10; counted by hand from the raw JSON (Runtime `correlation` →
    Kernel, launch inside the step span): 1462 kernels in each of the 6 steps, 8772 Kernel events in all."""
    anchor("other/pytorch__kineto/worker0.1623143089861.pt.trace.json.gz")
    golden = _golden("anchor_traces/other/pytorch__kineto/worker0.1623143089861.pt.trace.json.gz")
    assert golden["trace"]["format"] == "kineto-legacy"
    assert golden["trace"]["steps_in_trace"] == 6
    assert golden["step_numbers"] == [5, 6, 7, 8, 9, 10]
    assert [row["kernels"] for row in golden["step_table"]] == [1462] * 6
    assert golden["trace"]["events_by_kind"]["kernel"] == 8772


def test_golden_control_six_steps_of_1428_kernels() -> None:
    anchor("hta/trace_diff/control/control.json.gz")
    golden = _golden("anchor_traces/hta/trace_diff/control/control.json.gz")
    assert golden["step_numbers"] == [1009, 1010, 1011, 1012, 1013, 1014]
    assert {row["kernels"] for row in golden["step_table"]} == {1428}
    assert {row["launches"] for row in golden["step_table"]} == {1575}


@pytest.mark.parametrize(
    ("variant", "kernels_per_step"),
    [("eager_linear", 1), ("compiled_linear", 1), ("eager_mlp", 5), ("compiled_mlp", 4), ("liger_mlp", 4)],
)
def test_golden_recorded_variants_kernels_per_step(variant: str, kernels_per_step: int) -> None:
    recorded_trace(f"h200/{variant}.json.gz")
    golden = _golden(f"traces/h200/{variant}.json.gz")
    assert golden["trace"]["run"]["variant"] == variant
    assert golden["per_step"]["kernels"] == kernels_per_step
    assert {row["kernels"] for row in golden["step_table"]} == {kernels_per_step}


@pytest.mark.parametrize("name", list(CORPUS) or [pytest.param("none", marks=pytest.mark.skip("no corpus"))])
def test_golden_figures_are_consistent(name: str) -> None:
    """Invariants every stored result satisfies: attributed kernels ≤ kernels in the file, GPU busy ≤ the step's
    GPU window, a positive step time, a non-negative backlog, per-step medians within the range of the steps;
    GPU figures null only for traces without GPU activity."""
    golden = _golden(name)
    kernels_in_file = golden["trace"]["events_by_kind"].get("kernel", 0)
    rows = golden["step_table"]
    assert sum(row["kernels"] or 0 for row in rows) <= kernels_in_file
    assert golden["steps"] == len(rows) == len(golden["step_numbers"])
    has_gpu = any(golden["trace"]["events_by_kind"].get(kind) for kind in ("kernel", "memcpy", "memset"))
    # counts unknown (null) only where the trace has launches but no GPU activity: its kernels were not recorded
    assert all(row["kernels"] is not None for row in rows) or not has_gpu
    for index, row in enumerate(rows):
        assert row["complete"] is True
        if row["step_us"] is None:  # only the first step, behind a queue from before the recording, with a warning
            assert index == 0 and any(
                w.startswith(f"step {row['number']}: step time unknown") for w in golden["warnings"]
            )
        else:
            assert row["step_us"] > 0
        if not has_gpu:
            assert row["gpu_busy_us"] is row["gpu_window_us"] is row["queue_backlog_us"] is None
            continue
        assert 0 <= row["gpu_busy_us"] <= row["gpu_window_us"] + 1e-6
        assert row["queue_backlog_us"] >= 0
    for key, value in golden["per_step"].items():
        if key.startswith("profiler_free"):  # of the window as a whole (docs/profiler_overhead.md), no row has it
            continue
        present = [row[key] for row in rows if row[key] is not None]
        if present:
            assert min(present) <= value <= max(present)
        else:
            assert value is None
    counted = sum((r["kernels"] or 0) + (r["memcpy"] or 0) + (r["memset"] or 0) for r in rows)
    assert sum(k["calls"] for k in golden["kernels"]) == counted
