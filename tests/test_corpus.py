"""Real third-party traces: every one through `analyze`, and figures checked by hand.

The per-step kernel counts below were computed by an independent stdlib-json script (ProfilerStep spans,
kernel → runtime call by correlation, step = the span containing the call's start), not by tracelens.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import anchor, anchor_traces, optional_corpus
from tracelens.cli import main

CORPUS = anchor_traces()


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_every_corpus_trace_analyzes_in_both_formats(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(path), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "tracelens.analyze/1"
    assert document["trace"]["events"] > 0
    assert main(["analyze", str(path)]) == 0
    assert "Per step" in capsys.readouterr().out


def analyze_json(relative: str, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    assert main(["analyze", str(anchor(relative)), "--format", "json", *extra]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def step_kernels(document: dict[str, object]) -> list[tuple[int, int]]:
    return [(row["number"], row["kernels"]) for row in document["step_table"]]  # type: ignore[attr-defined,index]


def test_triton_example_one_inductor_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    doc = analyze_json("hta/triton_example/triton_example.json.gz", capsys)
    assert doc["per_step"]["kernels"] == 1  # type: ignore[index]
    (kernel,) = doc["kernels"]  # type: ignore[misc]
    assert kernel["name"] == "triton_poi_fused_add_cos_sin_0"
    assert kernel["category"] == "fused" and kernel["total_us"] == 1.76
    assert kernel["op"] == "Torch-Compiled Region: 0/0"  # the wrapper cpu_op is skipped
    assert doc["trace"]["launches_linked_by_external_id"] == 1  # type: ignore[index]


def test_legacy_2021_resnet50_six_steps_of_1462_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    doc = analyze_json("other/pytorch__kineto/worker0.1623143089861.pt.trace.json.gz", capsys)
    assert doc["trace"]["format"] == "kineto-legacy"  # type: ignore[index]
    assert step_kernels(doc) == [(n, 1462) for n in range(5, 11)]
    assert [row["gpu_kernel_us"] for row in doc["step_table"]] == [  # type: ignore[attr-defined]
        98598,
        98570,
        98596,
        98623,
        98504,
        98641,
    ]


@optional_corpus("other/deepseek-ai__profile-data/train.json.gz")
def test_deepseek_integer_microsecond_trace(capsys: pytest.CaptureFixture[str]) -> None:
    doc = analyze_json("other/deepseek-ai__profile-data/train.json.gz", capsys)
    assert step_kernels(doc) == [(1, 963)]
    assert doc["step_table"][0]["gpu_kernel_us"] == 244041  # type: ignore[index]
    assert doc["trace"]["gpus"] == ["NVIDIA H800"]  # type: ignore[index]


def test_df_index_resolver_five_steps_and_the_last_one_is_kept(capsys: pytest.CaptureFixture[str]) -> None:
    doc = analyze_json("hta/df_index_resolver/df_index_resolver.json.gz", capsys)
    assert step_kernels(doc) == [(n, 3874) for n in range(2, 7)]  # HTA drops step 6
    assert doc["step_table"][-1]["gpu_kernel_us"] == 243100  # type: ignore[index]


def test_qwen_h100_kernels_enqueued_before_the_window_are_unattributed(capsys: pytest.CaptureFixture[str]) -> None:
    doc = analyze_json("amd_tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", capsys)
    assert step_kernels(doc) == [(6, 1029)]
    assert doc["per_step"]["gpu_kernel_us"] == 31760.058  # type: ignore[index]
    assert doc["trace"]["unattributed_gpu_activities"] == 509  # type: ignore[index]


def test_step_option_selects_one_step(capsys: pytest.CaptureFixture[str]) -> None:
    doc = analyze_json("hta/trace_filter/sampled_rank-0.json.gz", capsys, "--step", "552")
    assert doc["step_numbers"] == [552] and doc["per_step"]["kernels"] == 577  # type: ignore[index]


def test_unknown_step_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(anchor("hta/trace_filter/sampled_rank-0.json.gz")), "--step", "9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracelens: error: no step 9") and "551..552" in err


@optional_corpus("other/HazyResearch__zoology/trace.json.gz")
def test_trace_without_gpu_activity_warns_and_analyzes_cpu_side(capsys: pytest.CaptureFixture[str]) -> None:
    doc = analyze_json("other/HazyResearch__zoology/trace.json.gz", capsys)
    # 268 launch calls but no GPU activity recorded: what they ran is unknown, not 0 (audit, 2026-12-07)
    assert doc["per_step"]["launches"] == 268  # type: ignore[index]
    assert doc["per_step"]["kernels"] is None  # type: ignore[index]
    assert doc["per_step"]["memcpy"] is None  # type: ignore[index]
    assert doc["per_step"]["cpu_ops"] == 1206  # type: ignore[index]
    assert any("no GPU activity" in w for w in doc["warnings"])  # type: ignore[attr-defined]
