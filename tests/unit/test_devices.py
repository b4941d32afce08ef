"""Device table matching and user-supplied peaks."""

from __future__ import annotations

import pytest

from tracelens.analyses.devices import (
    DEVICES,
    PeakOverride,
    match_device,
    merge_overrides,
    override_from_env,
    parse_tflops,
    peaks_for,
)

GIB = 1 << 30


@pytest.mark.parametrize(
    ("name", "memory_gib", "expected"),
    [
        ("NVIDIA H200", 141, "H200 SXM"),
        ("NVIDIA H100 80GB HBM3", 80, "H100 SXM"),
        ("NVIDIA H100 PCIe", 80, "H100 PCIe"),
        ("NVIDIA H100", 95, "H100 NVL"),
        ("NVIDIA A100-SXM4-80GB", 79, "A100 SXM4 80GB"),
        ("NVIDIA A100-PG509-200", 39, "A100 40GB"),
        ("NVIDIA B200", 180, "B200"),
        ("NVIDIA L40S", 45, "L40S"),
        ("NVIDIA GeForce RTX 4090", 24, "RTX 4090"),
        ("NVIDIA GeForce RTX 4090 D", 24, "RTX 4090 D"),
        ("AMD Instinct MI300X VF", 191, "MI300X"),
        ("AMD Instinct MI325X", 256, "MI325X"),
    ],
)
def test_device_names_from_traces_match_the_table(name: str, memory_gib: int, expected: str) -> None:
    spec = match_device(name, memory_gib * GIB)
    assert spec is not None and spec.name == expected


def test_unknown_devices_have_no_peaks() -> None:
    assert match_device("Tesla V100-SXM2-16GB", 16 * GIB) is None
    peaks = peaks_for("Tesla V100-SXM2-16GB", 16 * GIB)
    assert peaks.flops_peak("bf16") is None and peaks.hbm_tbps is None


def test_every_entry_has_a_source_and_dense_bf16_peak() -> None:
    for spec in DEVICES:
        assert spec.source and spec.hbm_tbps > 0 and spec.tflops["bf16"] > 0
    h200 = match_device("NVIDIA H200")
    assert h200 is not None and (h200.tflops["bf16"], h200.hbm_tbps) == (989.5, 4.8)


def test_user_peaks_override_the_table() -> None:
    assert parse_tflops("989") == {"*": 989.0}
    assert parse_tflops("bf16=900, fp32=60") == {"bf16": 900.0, "fp32": 60.0}
    env = override_from_env({"TRACELENS_PEAKS": '{"bf16": 800, "hbm_tbps": 3.0}'})
    assert env == PeakOverride({"bf16": 800.0}, 3.0)
    merged = merge_overrides(env, PeakOverride({"bf16": 700.0}, None))
    peaks = peaks_for("NVIDIA H200", None, merged)
    assert (peaks.flops_peak("bf16"), peaks.flops_peak("fp32"), peaks.hbm_tbps) == (700.0, 67.0, 3.0)
    everything = peaks_for("NVIDIA H200", None, PeakOverride({"*": 500.0}))
    assert (everything.flops_peak("bf16"), everything.flops_peak("fp8")) == (500.0, 500.0)
