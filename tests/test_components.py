"""`tracelens compare` components (norm/rope/attention/mlp/other) on the H200 decoder-block traces.

Every figure is checked against tests/components_stdlib.py, which reads the raw trace JSON itself, and a few
were checked by hand in the traces (listed in the asserts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import components_stdlib
from tests.conftest import recorded_trace
from tracelens.cli import main

INFERENCE = ("eager_block", "compiled_block", "liger_block", "eager_math_block")
TRAINING = ("train_eager_block", "train_compiled_block", "train_liger_block", "train_eager_math_block")


def _paths(names: tuple[str, ...]) -> list[Path]:
    return [recorded_trace(f"h200/block/{name}.json.gz") for name in names]


def _compare(paths: list[Path], capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["compare", *map(str, paths), *extra]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("names", [INFERENCE, TRAINING], ids=["inference", "training"])
def test_components_match_the_stdlib_computation(names: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    paths = _paths(names)
    doc = json.loads(_compare(paths, capsys, "--format", "json"))
    expected = components_stdlib.components(paths)
    unplaced = components_stdlib.unplaced(paths)
    for variant, path in zip(doc["variants"], paths, strict=True):
        got = {c["name"]: (c["attributed_kernels"], c["attributed_us_per_step"]) for c in variant["components"]}
        assert list(got) == ["norm", "rope", "attention", "mlp", "gemm", "other"]
        for name, (kernels, us) in expected[path].items():
            assert got[name][0] == pytest.approx(kernels, abs=1e-3), (path.name, name)
            assert got[name][1] == pytest.approx(us, abs=0.01), (path.name, name)
        # the components cover every kernel of the window: their sum is the mean kernel time per step
        total_us = sum(us for _, us in expected[path].values())
        assert sum(c["attributed_us_per_step"] for c in variant["components"]) == pytest.approx(total_us, abs=0.02)
        assert sum(c["attributed_kernels"] for c in variant["components"]) == pytest.approx(
            variant["per_step"]["kernels"]
        )
        # "—" (null) exactly where the component cannot be placed, with its reason; never a 0 there
        dashes = {c["name"] for c in variant["components"] if c["us_per_step"] is None}
        assert dashes == unplaced[path], path.name
        assert all(c["reason"] for c in variant["components"] if c["us_per_step"] is None)


def test_hand_checked_block_components(capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(_compare(_paths(INFERENCE), capsys, "--format", "json"))
    table = {
        v["name"]: {c["name"]: (c["attributed_kernels"], c["attributed_us_per_step"]) for c in v["components"]}
        for v in doc["variants"]
    }
    # eager: QKV GEMM + cuDNN SDPA + output GEMM under the `attention` scope; rotate_half's 10 kernels under `rope`
    assert table["eager_block"]["attention"] == (3, pytest.approx(264.97, abs=0.01))
    assert table["eager_block"]["rope"][0] == 10
    # compiled: no scopes; the fused rope kernel by its words (neg, cat), the two GEMMs by their eager shapes
    assert table["compiled_block"]["rope"] == (1, pytest.approx(18.218, abs=0.01))
    assert table["compiled_block"]["attention"][0] == 3
    assert table["compiled_block"]["mlp"][0] == 4  # 3 GEMMs + triton_poi_fused__unsafe_view_mul_silu_3
    # Liger: _triton_rope plus the two .contiguous() copies it makes of q and k
    assert table["liger_block"]["rope"][0] == 3
    assert table["liger_block"]["norm"][0] == 2


def test_text_shows_the_component_table_only_for_block_traces(capsys: pytest.CaptureFixture[str]) -> None:
    text = _compare(_paths(("eager_block", "liger_block")), capsys)
    assert "Kernel µs per step by block component" in text
    assert "attention" in text and "total" in text
    linear = [recorded_trace(f"h200/{n}.json.gz") for n in ("eager_linear", "compiled_linear")]
    assert "by block component" not in _compare(linear, capsys)


@pytest.mark.slow
def test_sweep_components_use_the_steps_without_compilation(capsys: pytest.CaptureFixture[str]) -> None:
    """Compiled sweep traces: the window drops the steps that compiled, as the variants table does. Which steps
    compiled is known from the recording (sweep/timings.json: Dynamo graphs per step 1,1,1,0,1,1 static and
    1,1,0,0,0,0 default), not from tracelens."""
    names = ("eager_block", "compiled_static_block", "compiled_default_block", "liger_block")
    paths = [recorded_trace(f"h200/sweep/{name}.json.gz") for name in names]
    doc = json.loads(_compare(paths, capsys, "--format", "json"))
    steps = {paths[1]: {4}, paths[2]: {3, 4, 5, 6}}
    expected = components_stdlib.components(paths, steps)
    for variant, path in zip(doc["variants"], paths, strict=True):
        got = {c["name"]: (c["attributed_kernels"], c["attributed_us_per_step"]) for c in variant["components"]}
        for name, (kernels, us) in expected[path].items():
            assert got[name][0] == pytest.approx(kernels, abs=1e-3), (path.name, name)
            assert got[name][1] == pytest.approx(us, abs=0.01), (path.name, name)
    static = {c["name"]: c["attributed_us_per_step"] for c in doc["variants"][1]["components"]}
    # step 4 (2048 tokens) alone: 359.265 µs of kernels, the variants table's figure for that trace
    assert sum(static.values()) == pytest.approx(doc["variants"][1]["per_step"]["gpu_kernel_us"], abs=0.01)


def test_plain_mlp_gemms_are_their_own_component_and_unplaced_ones_are_dashes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue #27 item 2: a plain MLP without scopes puts its GEMMs under `gemm`, not `other`; norm, rope,
    attention and mlp cannot be placed there, so they are null with a reason (never 0), the text shows "—",
    and no sentence ranks a variant on them."""
    paths = [recorded_trace(f"h200/{n}.json.gz") for n in ("eager_mlp", "compiled_mlp")]
    doc = json.loads(_compare(paths, capsys, "--format", "json"))
    expected = components_stdlib.components(paths)
    unplaced = components_stdlib.unplaced(paths)
    for variant, path in zip(doc["variants"], paths, strict=True):
        rows = {c["name"]: c for c in variant["components"]}
        assert rows["gemm"]["us_per_step"] == pytest.approx(expected[path]["gemm"][1], abs=0.01)
        assert rows["gemm"]["kernels"] == 3
        assert {n for n, c in rows.items() if c["us_per_step"] is None} == unplaced[path] >= {"norm", "rope"}
    for sentence in doc["verdicts"]:
        for name in unplaced[paths[0]] & unplaced[paths[1]]:
            assert not sentence.startswith(f"{name}: ") or "not compared" in sentence
    text = _compare(paths, capsys)
    norm_line = next(line for line in text.splitlines() if line.startswith("│ norm"))
    assert "—" in norm_line and "0.0" not in norm_line


def test_a_gemm_row_of_0_beside_gemm_kernels_says_where_they_are(capsys: pytest.CaptureFixture[str]) -> None:
    """Where every GEMM of a variant sits in a scope (the stdlib computation puts none in `gemm` while the trace
    has GEMM kernels), the caption names that variant: its `gemm 0.0 (0)` is not "no GEMMs"."""
    paths = [recorded_trace(f"h200/graphs/{n}.json.gz") for n in ("block_eager", "block_compiled", "mlp_eager")]
    expected = components_stdlib.components(paths)
    doc = json.loads(_compare(paths, capsys, "--format", "json"))
    scoped = [
        v["name"]
        for v, path in zip(doc["variants"], paths, strict=True)
        if expected[path]["gemm"][0] == 0 and v["kernels_by_category"].get("gemm", 0) > 0
    ]
    assert scoped == ["block_eager", "block_compiled"]
    gemm_sentences = [v for v in doc["verdicts"] if v.startswith("gemm:")]  # no ranking on a 0 that is elsewhere
    assert not any(name in v for v in gemm_sentences for name in scoped), gemm_sentences
    text = " ".join(_compare(paths, capsys, "--width", "200").split())
    assert "gemm 0 in block_eager, block_compiled: their GEMMs are in the rows above" in text


@pytest.mark.parametrize("folder", ["h200/graphs", "h100/graphs_compiled/g1"], ids=["h200", "h100"])
def test_kernels_a_graph_replayed_take_the_captured_scopes(folder: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The eager block and its CUDA graph (captured in the trace, replayed after): every replayed kernel takes the
    `record_function` scope of its captured launch, so each component has the eager block's kernels (rope 10,
    not 8 of them with 2 in `other`), against the stdlib computation (which matches replays to captures itself)."""
    paths = [recorded_trace(f"{folder}/block_{variant}.json.gz") for variant in ("eager", "graph")]
    windows = {}  # the steps the components are over: the analyzed ones (the graph's capture step left out)
    for path in paths:
        assert main(["analyze", str(path), "--format", "json"]) == 0
        windows[path] = set(json.loads(capsys.readouterr().out)["step_numbers"])
    doc = json.loads(_compare(paths, capsys, "--format", "json"))
    expected = components_stdlib.components(paths, windows)
    for variant, path in zip(doc["variants"], paths, strict=True):
        got = {c["name"]: (c["attributed_kernels"], c["attributed_us_per_step"]) for c in variant["components"]}
        for name, (kernels, us) in expected[path].items():
            assert got[name][0] == pytest.approx(kernels, abs=1e-3), (path.name, name)
            assert got[name][1] == pytest.approx(us, abs=0.01), (path.name, name)
    eager, graph = ({c["name"]: c["kernels"] for c in v["components"]} for v in doc["variants"])
    assert eager == graph and graph["rope"] == 10


def test_the_compare_table_rows_add_up_to_the_total() -> None:
    """compare's block-component table: a placed row's figure is what the rules put there, and the row 'not placed'
    holds the — rows' kernels, so the rows add up to the total (eager_mlp's gelu kernel was in no row, audit)."""
    import tracelens
    from tracelens.analyses import analyze
    from tracelens.analyses.compare import compare_variants
    from tracelens.renderers.compare_out import _components_table

    paths = [recorded_trace(f"h200/{name}.json.gz") for name in ("eager_mlp", "compiled_mlp")]
    comparison = compare_variants([(p.name, tracelens.load(p), analyze(tracelens.load(p))) for p in paths])
    table = _components_table(comparison)
    names = list(table.columns[0]._cells)
    assert names[-2:] == ["not placed", "total"]
    for column in table.columns[1:]:
        cells = [str(c) for c in column._cells]
        values = [float(c.split(" ")[0].replace(",", "")) for c in cells if c != "—"]
        assert sum(values[:-1]) == pytest.approx(values[-1], abs=0.2)
