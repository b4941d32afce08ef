"""Evaluating hypotheses on tiny hand-built traces: every figure below is read off the events in
tests/test_check_builders.py (eager: GEMM 100 µs + gelu 20 µs + mul 30 µs per step; compiled: GEMM 100 µs +
triton_poi_fused_gelu_mul_0 25 µs per step; two steps each)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tracelens
from tests.conftest import TRACES
from tests.test_check_builders import FUSED, GEMM, write_compiled, write_eager
from tracelens.hypotheses import TraceDocument, check_document, document_from, parse_hypotheses
from tracelens.hypotheses.evaluate import Verdict, evaluate
from tracelens.hypotheses.parse import HypothesisError
from tracelens.hypotheses.paths import MetricPathError, resolve


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> list[TraceDocument]:
    folder = tmp_path_factory.mktemp("traces")
    return [check_document(tracelens.load(write_eager(folder))), check_document(tracelens.load(write_compiled(folder)))]


def run(docs: list[TraceDocument], **entry: Any) -> list[Verdict]:
    return evaluate(parse_hypotheses({"hypothesis": [{"name": "h", **entry}]}, "h.toml"), docs)


def one(docs: list[TraceDocument], **entry: Any) -> Verdict:
    verdicts = run(docs, **entry)
    assert len(verdicts) == 1
    return verdicts[0]


def test_labels_are_the_recorded_variant_and_the_file_stem(docs: list[TraceDocument]) -> None:
    assert [(d.label, d.aliases) for d in docs] == [("eager_mlp", ("eager_mlp",)), ("compiled_mlp", ("compiled_mlp",))]
    renamed = document_from("runs/a.pt.trace.json.gz", {"trace": {"run": {"variant": "liger_mlp"}}})
    assert (renamed.label, renamed.aliases) == ("a", ("a", "liger_mlp"))
    assert renamed.answers_to("liger_mlp") and renamed.answers_to("a") and not renamed.answers_to("b")


def test_metric_held_and_wrong_with_measured_value(docs: list[TraceDocument]) -> None:
    held = one(docs, trace="compiled_mlp", metric="per_step.kernels", op="==", value=2)
    wrong = one(docs, trace="eager_mlp", metric="per_step.kernels", op="==", value=5)
    assert (held.held, held.measured, held.expected, held.status) == (True, 2, 2, "HELD")
    assert (wrong.held, wrong.measured, wrong.expected, wrong.status) == (False, 3, 5, "WRONG")
    assert wrong.evidence[:2] == ("per_step.kernels = 3", "median of 2 step(s) #1..#2: 3, 3")
    assert f"{GEMM}: 1/step, mean 100 µs, launched by aten::addmm" in wrong.evidence


def test_hypothesis_without_trace_applies_to_every_trace(docs: list[TraceDocument]) -> None:
    verdicts = run(docs, metric="per_step.gpu_kernel_us", op="<=", value=130)
    assert [(v.trace, v.measured, v.held) for v in verdicts] == [("eager_mlp", 150, False), ("compiled_mlp", 125, True)]


@pytest.mark.parametrize(
    ("op", "value", "held"),
    [
        ("==", 125, True),
        ("!=", 125, False),
        ("<", 125, False),
        ("<=", 125, True),
        (">", 124.9, True),
        (">=", 125.1, False),
    ],
)
def test_ordering_ops(docs: list[TraceDocument], op: str, value: float, held: bool) -> None:
    assert one(docs, trace="compiled_mlp", metric="per_step.gpu_kernel_us", op=op, value=value).held is held


@pytest.mark.parametrize(
    ("tolerance", "held"),
    [
        (None, False),
        (4.0, False),
        (5.0, True),
        ("4%", False),
        ("4.2%", True),
        ({"rel": 0.05, "abs": 1}, True),
        ({"below": 10, "above": 5}, True),  # 120 − 10 ≤ 125 ≤ 120 + 5
        ({"below": 10, "above": 4.9}, False),
        ({"below": 0, "above": 5}, True),
    ],
)
def test_tolerance_for_equality(docs: list[TraceDocument], tolerance: Any, held: bool) -> None:
    entry: dict[str, Any] = {"trace": "compiled_mlp", "metric": "per_step.gpu_kernel_us", "op": "==", "value": 120}
    if tolerance is not None:
        entry["tolerance"] = tolerance
    assert one(docs, **entry).held is held  # |125 - 120| = 5 = 4.17 % of 120


def test_cross_trace_comparison_with_factor(docs: list[TraceDocument]) -> None:
    faster = one(docs, trace="compiled_mlp", metric="per_step.gpu_kernel_us", op="<", than={"trace": "eager_mlp"})
    assert (faster.held, faster.measured, faster.expected) == (True, 125, 150)
    assert faster.evidence[1] == "reference: per_step.gpu_kernel_us on eager_mlp = 150"
    by_20_percent = one(
        docs, trace="compiled_mlp", metric="per_step.gpu_kernel_us", op="<", than={"trace": "eager_mlp", "factor": 0.8}
    )
    assert (by_20_percent.held, by_20_percent.expected) == (False, 120.0)  # 125 < 0.8 × 150 = 120 is false
    assert by_20_percent.evidence[1] == "reference: per_step.gpu_kernel_us on eager_mlp = 150 × 0.8 = 120"


def test_than_within_the_same_trace(docs: list[TraceDocument]) -> None:
    verdict = one(docs, trace="eager_mlp", metric="per_step.gpu_kernel_us", op="<", than={"metric": "per_step.step_us"})
    assert (verdict.held, verdict.measured, verdict.expected) == (True, 150, 500)


def test_kernel_pattern_exists_counts_and_times(docs: list[TraceDocument]) -> None:
    exists = one(docs, trace="compiled_mlp", kernel="triton_poi_fused_*gelu*mul*")
    assert (exists.held, exists.measured, exists.expected) == (True, 1.0, None)
    assert exists.evidence == (f"{FUSED}: 1/step, mean 25 µs, launched by CompiledFunction",)
    absent = one(docs, trace="eager_mlp", kernel="triton_*")
    assert (absent.held, absent.measured) == (False, 0)
    assert absent.evidence[0].startswith("no kernel matches 'triton_*'")
    mean = one(docs, trace="compiled_mlp", kernel="triton_*", measure="mean_us", op="==", value=25)
    assert (mean.held, mean.measured) == (True, 25.0)
    # short names match too: the eager elementwise kernels are `vectorized_elementwise_kernel[gelu]` / `[mul]`
    count = one(docs, trace="eager_mlp", kernel="vectorized_elementwise_kernel*", op="==", value=2)
    assert (count.held, count.measured) == (True, 2.0)
    per_step = one(docs, trace="eager_mlp", kernel="*elementwise*", measure="us_per_step", op="==", value=50)
    assert (per_step.held, per_step.measured) == (True, 50.0)
    total = one(docs, trace="eager_mlp", kernel="*elementwise*", measure="total_us", op="==", value=100)
    calls = one(docs, trace="eager_mlp", kernel="*elementwise*", measure="calls", op="==", value=4)
    assert (total.held, calls.held) == (True, True)


def test_kernel_time_compared_across_traces_keeps_the_measure(docs: list[TraceDocument]) -> None:
    verdict = one(
        docs,
        trace="compiled_mlp",
        kernel=FUSED,
        measure="mean_us",
        op="<",
        than={"trace": "eager_mlp", "kernel": "*elementwise*"},
    )
    # 25 µs < the mean of the eager gelu (20 µs) and mul (30 µs) kernels, 25 µs: false
    assert (verdict.held, verdict.measured, verdict.expected) == (False, 25.0, 25.0)


def test_cpu_ops_and_api_calls(docs: list[TraceDocument]) -> None:
    t = one(docs, trace="eager_mlp", cpu_op="aten::t", measure="mean_us", op="==", value=4)
    assert (t.held, t.evidence) == (True, ("aten::t: 1/step, mean 4 µs",))
    assert one(docs, trace="compiled_mlp", cpu_op="aten::t", op="==", value=0).held
    occupancy = one(docs, trace="eager_mlp", api_call="cudaOccupancy*", op="==", value=3)
    assert (occupancy.held, occupancy.measured) == (False, 1.0)
    launches = one(docs, trace="compiled_mlp", api_call="cu*Launch*", op="==", value=2)
    assert launches.held  # cudaLaunchKernel + cuLaunchKernelEx


def test_fuses(docs: list[TraceDocument]) -> None:
    fused = one(docs, trace="compiled_mlp", fuses=["gelu", "mul"])
    assert (fused.held, fused.measured) == (True, FUSED)
    assert fused.evidence == (
        f"{FUSED}: 1/step, mean 25 µs, launched by CompiledFunction (decoded Inductor name: gelu, mul)",
    )
    eager = one(docs, trace="eager_mlp", fuses=["gelu", "mul"])
    assert (eager.held, eager.measured) == (False, "no single kernel")
    assert eager.evidence == ("gelu: vectorized_elementwise_kernel[gelu]", "mul: vectorized_elementwise_kernel[mul]")
    assert not one(docs, trace="compiled_mlp", fuses=["gelu", "add"]).held


def test_fusion_read_from_the_launching_op() -> None:
    document = {
        "steps": 1,
        "kernels": [
            {
                "name": "_my_kernel",
                "short_name": "_my_kernel",
                "calls_per_step": 1,
                "mean_us": 9.0,
                "op": "LigerGELUMulFunction",
            }
        ],
        "ops": [{"name": "LigerGELUMulFunction", "kernels": [{"name": "_my_kernel"}]}],
    }
    verdict = one([document_from("liger.json", document)], fuses=["gelu", "mul"])
    assert verdict.held
    assert verdict.evidence[0].endswith("(launching op LigerGELUMulFunction: gelu, mul)")


def test_contains_on_lists_and_strings_with_globs(docs: list[TraceDocument]) -> None:
    assert one(docs, trace="eager_mlp", metric="kernels.op", op="contains", value="aten::addmm").held
    assert one(docs, trace="compiled_mlp", metric="kernels.name", op="contains", value="triton_poi_*").held
    assert one(docs, trace="eager_mlp", metric="kernels.name", op="not-contains", value="triton_*").held
    assert one(docs, trace="eager_mlp", metric="trace.gpus", op="not-contains", value="H200").held
    assert one(docs, trace="eager_mlp", metric="trace.format", op="contains", value="kin").held


def test_paths_index_select_and_project(docs: list[TraceDocument]) -> None:
    eager = docs[0].document
    assert resolve(eager, "step_table.1.kernels") == 3
    assert resolve(eager, "step_table.-1.number") == 2
    assert resolve(eager, "ops[aten::gelu].kernels_per_step") == 1
    assert resolve(eager, "trace.run.variant") == "eager_mlp"
    assert resolve(eager, "ops.name") == ["aten::addmm", "aten::mul", "aten::gelu"]
    assert resolve(eager, "cpu_ops[aten::t].mean_us") == 4


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("per_step.kernel", 'no key "kernel" in per_step; close: kernels, gpu_kernel_us'),
        ("per_stp.kernels", 'no key "per_stp" in the document; close: per_step, per_step_note, steps'),
        ("step_table.9.kernels", "step_table has 2 entries; no index 9"),
        (
            "ops[aten::gelü].calls_per_step",
            'no entry named "aten::gelü" in ops; close: aten::gelu, aten::mul, aten::addmm',
        ),
        (
            "ops[aten::*].name",
            "[aten::*] matches 3 entries of ops (aten::addmm, aten::mul, aten::gelu); make it match one",
        ),
        ("per_step.kernels.x", 'per_step.kernels is a int (3); it has no "x"'),
        ("kernels.nam", 'no key "nam" in the entries of kernels; close: name'),
        ("ops[].name", 'empty segment in metric path "ops[].name"'),
        ("per_step..kernels", 'cannot read metric path "per_step..kernels" at character 10'),
    ],
)
def test_bad_metric_path_names_the_path_and_close_keys(path: str, message: str, docs: list[TraceDocument]) -> None:
    with pytest.raises(MetricPathError) as info:
        resolve(docs[0].document, path)
    assert str(info.value) == message


def test_missing_metric_path_is_malformed_not_wrong(docs: list[TraceDocument]) -> None:
    with pytest.raises(HypothesisError) as info:
        run(docs, trace="eager_mlp", metric="per_step.kernel", op="==", value=3)
    assert str(info.value) == (
        'h.toml: hypothesis 1 ("h"): metric "per_step.kernel" on eager_mlp: no key "kernel" in per_step; '
        "close: kernels, gpu_kernel_us"
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"trace": "liger_mlp", "metric": "steps", "op": "==", "value": 2},
            'no trace named "liger_mlp" among the traces given (eager_mlp, compiled_mlp)',
        ),
        (
            {"trace": "eager_mlp", "metric": "per_step", "op": "==", "value": 2},
            'metric "per_step" on eager_mlp is a table; pick one of its keys; valid: kernels, memcpy, memset, '
            "launches, cpu_ops, cpu_us, gpu_busy_us, gpu_kernel_us, step_us, queue_backlog_us, gpu_window_us",
        ),
        ({"trace": "eager_mlp", "metric": "kernels.name", "op": "==", "value": 2}, 'op "==" cannot compare a list'),
        (
            {"trace": "eager_mlp", "metric": "trace.format", "op": "<", "value": 2},
            "op \"<\" needs a number; trace.format < 2 measured 'kineto'",
        ),
        (
            {"trace": "eager_mlp", "metric": "steps", "op": "contains", "value": 2},
            "contains needs a list or a string; measured 2",
        ),
        (
            {"trace": "eager_mlp", "metric": "steps", "op": "<", "than": {"metric": "trace.format"}},
            "than: trace.format on eager_mlp is 'kineto', not a number",
        ),
    ],
)
def test_evaluation_errors_name_the_entry(docs: list[TraceDocument], entry: dict[str, Any], message: str) -> None:
    with pytest.raises(HypothesisError) as info:
        run(docs, **entry)
    assert str(info.value).startswith(f'h.toml: hypothesis 1 ("h"): {message}')


def test_ambiguous_trace_name(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    docs = [check_document(tracelens.load(write_eager(tmp_path / d))) for d in ("a", "b")]
    with pytest.raises(HypothesisError, match='trace "eager_mlp" is ambiguous'):
        run(docs, trace="eager_mlp", metric="steps", op="==", value=2)


def test_check_api_takes_traces_paths_and_plain_tables(tmp_path: Path) -> None:
    eager, compiled = write_eager(tmp_path), write_compiled(tmp_path)
    verdicts = tracelens.check(
        [tracelens.load(eager), compiled],
        [
            {
                "name": "fewer kernels",
                "trace": "compiled_mlp",
                "metric": "per_step.kernels",
                "op": "<",
                "than": {"trace": "eager_mlp"},
            }
        ],
    )
    assert [(v.trace, v.held, v.measured, v.expected) for v in verdicts] == [("compiled_mlp", True, 2, 3)]
    (tmp_path / "h.toml").write_text('[[hypothesis]]\nname = "x"\nfuses = ["gelu", "mul"]\n')
    assert [v.held for v in tracelens.check(compiled, tmp_path / "h.toml")] == [True]


def _batch_norm_document() -> TraceDocument:
    kernel = "bn_bw_relu_kernel"
    document = {
        "steps": 1,
        "kernels": [{"name": kernel, "short_name": kernel, "calls_per_step": 1, "mean_us": 9.0, "op": "x"}],
        "ops": [{"name": "aten::cudnn_batch_norm_backward_relu", "kernels": [{"name": kernel}]}],
    }
    return document_from("bn.json", document)


def test_fuses_matches_whole_ops_not_prefixes() -> None:
    """`cudnn_batch_norm` is the forward op: its words are a subset of `cudnn_batch_norm_backward`'s, but a
    kernel of the backward op does not fuse it; `re:` asks for a pattern explicitly."""
    docs = [_batch_norm_document()]
    assert not one(docs, fuses=["cudnn_batch_norm", "relu"]).held
    assert one(docs, fuses=["cudnn_batch_norm_backward", "relu"]).held
    assert one(docs, fuses=["re:batch_norm", "relu"]).held
    assert not one(docs, fuses=["re:^layer_norm", "relu"]).held


def test_kernel_names_match_exactly_unless_a_pattern(docs: list[TraceDocument]) -> None:
    exact = one(docs, trace="eager_mlp", kernel="vectorized_elementwise_kernel", op="==", value=0)
    assert (exact.held, exact.measured) == (True, 0)  # `[gelu]`/`[mul]` kernels are other names
    glob = one(docs, trace="eager_mlp", kernel="vectorized_elementwise_kernel*", op="==", value=2)
    regex = one(docs, trace="eager_mlp", kernel=r"re:elementwise_kernel\[(gelu|mul)\]$", op="==", value=2)
    assert (glob.held, regex.held) == (True, True)
    with pytest.raises(HypothesisError, match="bad regular expression"):
        one(docs, trace="eager_mlp", kernel="re:(", op="==", value=2)


def test_the_evaluate_module_is_not_shadowed_by_a_function() -> None:
    import types

    import tracelens.hypotheses as hypotheses

    assert isinstance(hypotheses.evaluate, types.ModuleType) and hypotheses.evaluate.evaluate is evaluate
    assert hypotheses.verdicts_for is evaluate


def test_a_figure_the_trace_cannot_give_is_unknown_not_wrong(tmp_path: Path) -> None:
    """A prediction checked on a trace cut off before its first complete step: `critical_path.step_us` is null
    there, so the verdict is UNKNOWN (neither held nor wrong; exit 1: it passes no gate), never WRONG "measured
    None"; a null reference (`than`) too, where it stopped the run; a kernel pattern that matches nothing stays
    WRONG with the names that exist."""
    import gzip
    import json
    import subprocess
    import sys

    cut = tmp_path / "cut.json"
    cut.write_bytes(gzip.decompress((TRACES / "h200/eager_mlp.json.gz").read_bytes())[:30_000])
    predictions = tmp_path / "p.toml"
    run = [sys.executable, "-m", "tracelens"]
    assert subprocess.run([*run, "analyze", str(TRACES / "h200/eager_mlp.json.gz"), "--predict", str(predictions),
                           "--no-cache"], capture_output=True).returncode == 0  # fmt: skip
    checked = subprocess.run([*run, "check", str(cut), "--expect", str(predictions), "--format", "json"],
                             capture_output=True, text=True)  # fmt: skip
    assert checked.returncode == 1, checked.stderr
    document = json.loads(checked.stdout)
    assert document["wrong"] == 0 and document["unknown"] >= 1
    unknown = [v for v in document["verdicts"] if v["status"] == "unknown"]
    assert unknown and all(v["measured"] is None and v["held"] is None for v in unknown)
    text = subprocess.run([*run, "check", str(cut), "--expect", str(predictions)], capture_output=True, text=True)
    assert "UNKNOWN" in text.stdout and "None" not in text.stdout and "WRONG" not in text.stdout
    reference = tmp_path / "r.toml"
    reference.write_text(
        '[[hypothesis]]\nname = "slower"\nmetric = "critical_path.step_us"\nop = "<"\nthan = { trace = "cut" }\n'
        '[[hypothesis]]\nname = "typo"\nkernel = "gelu_typo*"\nmeasure = "mean_us"\nop = "<"\nvalue = 5\n'
    )
    both = [str(TRACES / "h200/eager_mlp.json.gz"), str(cut)]
    checked = subprocess.run([*run, "check", *both, "--expect", str(reference), "--format", "json"],
                             capture_output=True, text=True)  # fmt: skip
    assert checked.returncode == 1, checked.stderr
    statuses = {(v["name"], v["trace"]): v["status"] for v in json.loads(checked.stdout)["verdicts"]}
    assert statuses[("slower", "eager_mlp")] == "unknown" and statuses[("typo", "eager_mlp")] == "wrong"
