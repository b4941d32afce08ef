"""`tracelens compare` on the H200 shape sweeps: steps by shape, compiles per shape, break-even of compiling.

Per-shape kernel µs and shapes are checked against tests/independent/shapes_sweep.py (raw JSON, stdlib), the
compiles against tests/independent/compiles.py; a few figures were checked by hand in the traces."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from tests.conftest import recorded_trace
from tests.independent import compiles as independent_compiles
from tests.independent import shapes_sweep as independent
from tracelens.cli import main

VARIANTS = ("eager", "liger", "compiled_static", "compiled_default")


def _compare(model: str, capsys: pytest.CaptureFixture[str]) -> tuple[list[Path], dict]:
    paths = [recorded_trace(f"h200/sweep/{v}_{model}.json.gz") for v in VARIANTS]
    assert main(["compare", *map(str, paths), "--format", "json"]) == 0
    return paths, json.loads(capsys.readouterr().out)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["geglu", "block"])
def test_shapes_match_the_stdlib_computation(model: str, capsys: pytest.CaptureFixture[str]) -> None:
    paths, doc = _compare(model, capsys)
    for variant, path in zip(doc["variants"], paths, strict=True):
        steps = independent.per_step(str(path))
        by_shape: dict[str, list[tuple[int, float]]] = {}
        for number, shape, kernel_us in steps:
            assert shape is not None
            by_shape.setdefault("×".join(map(str, shape)), []).append((number, kernel_us))
        rows = variant["shapes"]
        assert [r["shape"] for r in rows] == list(by_shape)  # order of first appearance
        for row in rows:
            expected = by_shape[row["shape"]]
            assert row["steps"] == [n for n, _ in expected]
            assert row["kernel_us"] == pytest.approx(statistics.median(us for _, us in expected), abs=0.002)
        # the shapes agree with the token counts the workload wrote for each step
        tokens = variant["run"]["tokens"]
        assert [next(r["tokens"] for r in rows if n in r["steps"]) for n, _, _ in steps] == tokens
        # compile time per shape: the compile ids that started in the shape's steps
        ids = independent_compiles.compilations(str(path))
        for row in rows:
            assert row["compile_ids"] == [i for i, step, _ in ids if step in row["steps"]]
            floor_ms = sum(ms for _, step, ms in ids if step in row["steps"])
            # at least Dynamo's compile_inner spans, at most the wall time of the steps that compiled
            assert floor_ms - 0.001 <= row["compile_ms"] <= (row["first_step_us"] / 1000 if floor_ms else 0.0)


@pytest.mark.parametrize("model", ["geglu", "block"])
def test_break_even_is_compile_time_over_the_kernel_saving(model: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, doc = _compare(model, capsys)
    shapes = {v["name"]: {r["shape"]: r for r in v["shapes"]} for v in doc["variants"]}
    rows = doc["break_even"]
    assert {(r["variant"], r["baseline"]) for r in rows} == {
        (f"{c}_{model}", f"{b}_{model}") for c in ("compiled_static", "compiled_default") for b in ("eager", "liger")
    }
    for row in rows:
        mine, base = shapes[row["variant"]][row["shape"]], shapes[row["baseline"]][row["shape"]]
        saving = base["kernel_us"] - mine["kernel_us"]
        assert row["saving_us_per_step"] == pytest.approx(saving, abs=0.002)
        if mine["compile_ms"] == 0:
            assert row["steps"] == 0
        elif saving <= 0:
            assert row["steps"] is None
        else:
            assert row["steps"] == math.ceil(mine["compile_ms"] * 1000 / row["saving_us_per_step"])


def test_hand_checked_block_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    _, doc = _compare("block", capsys)
    static = {r["shape"]: r for r in doc["variants"][2]["shapes"]}
    default = {r["shape"]: r for r in doc["variants"][3]["shapes"]}
    # static: one compile per new shape (0/0..0/4), none for the repeated 2048 (step 4)
    assert [r["compile_ids"] for r in static.values()] == [["0/0"], ["0/1"], ["0/2"], ["0/3"], ["0/4"]]
    assert static["2048×2048"]["steps"] == [2, 4]
    assert static["4096×2048"]["compile_ms"] == pytest.approx(1783.882, abs=0.01)
    # default torch.compile: compiles at the first two shapes, then runs every new shape without compiling
    assert [r["compile_ms"] > 0 for r in default.values()] == [True, True, False, False, False]
    # eager pays cuDNN's per-shape SDPA set-up without compiling: 43 ms for the first 4096-token step
    eager = {r["shape"]: r for r in doc["variants"][0]["shapes"]}
    assert eager["4096×2048"]["first_step_us"] == pytest.approx(43083.251, abs=0.01)
    assert eager["4096×2048"]["kernel_us"] == pytest.approx(1183.359, abs=0.001)
    pairs = {(r["variant"], r["baseline"], r["shape"]): r["steps"] for r in doc["break_even"]}
    assert pairs["compiled_static_block", "eager_block", "4096×2048"] == 3984  # 1783.882 ms / 447.777 µs
    assert pairs["compiled_static_block", "liger_block", "4096×2048"] == 56540  # 1783.882 ms / 31.551 µs
    assert pairs["compiled_default_block", "eager_block", "3072×2048"] == 0


def test_no_shapes_without_a_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [recorded_trace(f"h200/block/{v}_block.json.gz") for v in ("eager", "compiled")]
    assert main(["compare", *map(str, paths), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [v["shapes"] for v in doc["variants"]] == [[], []]
    assert doc["break_even"] == []


def test_text_tables_fit_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [recorded_trace(f"h200/sweep/{v}_geglu.json.gz") for v in ("eager", "compiled_static")]
    assert main(["compare", *map(str, paths)]) == 0
    out = capsys.readouterr().out
    ours = out[out.index("Shape sweep of eager_geglu") :].split("What the figures say")[0].splitlines()
    assert max(len(line.rstrip()) for line in ours) <= 80  # the tables (sentences wrap at the console's width)
    # the 4096-token rows: steps (how many), step #, kernel µs, first step ms, compile ms; then its break-even
    assert [line for line in ours if "4096×2048" in line] == [
        "│ 4096×2048 │     1 │ 5      │   1,198.2 │         — │      4.3 │        0.0 │",
        "│ 4096×2048 │     1 │ 5      │   1,134.0 │         — │    710.5 │      696.7 │",
        "│ 4096×2048 │ eager_geglu │      696.7 │      64.3 │  10,843 │",
    ]


def test_report_comparison_has_the_sweep_tables() -> None:
    from tracelens import analyze, load
    from tracelens.report.compare import comparison_section

    paths = [recorded_trace(f"h200/sweep/{v}_geglu.json.gz") for v in ("eager", "compiled_default")]
    traces = [load(p) for p in paths]
    section = comparison_section([(p.name.split(".")[0], t, analyze(t)) for p, t in zip(paths, traces, strict=True)])
    panels = {panel.id: panel for panel in section.panels}
    assert panels["compare-shapes"].table is not None and panels["compare-break-even"].table is not None
    shapes = panels["compare-shapes"].table.rows
    assert shapes[6][:4] == ("compiled_default_geglu", "2048×2048", "2", "2, 4")  # steps: how many, step #: which
    assert shapes[6][7:] == ("881.5", "0/1")  # the dynamic-shape recompile, at the second shape
    # after it, no compile: break-even 0 steps at 3072 tokens
    assert ("compiled_default_geglu", "eager_geglu", "3072×2048", "0.0", "54.5", "0") in panels[
        "compare-break-even"
    ].table.rows
