"""GPU peak figures for the roofline: dense (no sparsity) tensor-core TFLOP/s per dtype and memory TB/s.

Every figure carries its source. Vendors quote tensor throughput "with sparsity"; the dense figure is half of
it and that halving is noted where it was done. `fp32` is the non-tensor (CUDA-core / vector) FP32 rate,
which is what a plain fp32 matmul gets with TF32 off (PyTorch's default for matmul); `tf32` is the tensor-core
rate. Contract: `match_device(name, memory_bytes) -> DeviceSpec | None`; `peaks_for(...)` applies user overrides.
"""

from __future__ import annotations

import os
import re

import msgspec

PEAKS_ENV = "TRACELENS_PEAKS"


class DeviceSpec(msgspec.Struct, frozen=True):
    name: str
    tflops: dict[str, float]  # dense TFLOP/s by dtype label (bf16, fp16, fp32, tf32, fp8, fp64)
    hbm_tbps: float
    source: str

    def peak_tflops(self, dtype: str) -> float | None:
        if dtype in self.tflops:
            return self.tflops[dtype]
        return None


_NV_H100 = "NVIDIA H100 Tensor Core GPU datasheet (2023); tensor figures there are with sparsity, halved here"
_NV_H200 = "NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM column; sparse tensor figures halved"
_NV_A100 = "NVIDIA A100 Tensor Core GPU datasheet (2021); dense tensor figures as listed"
_NV_B200 = "NVIDIA HGX B200 datasheet (2024): 8-GPU totals divided by 8, sparse tensor figures halved"
_NV_L40S = "NVIDIA L40S datasheet (2023); sparse tensor figures halved"
_NV_ADA = (
    "NVIDIA Ada Lovelace architecture whitepaper v1.03, Appendix A (RTX 4090): dense, FP32 accumulate; memory 1008 GB/s"
)
_AMD_300 = "AMD Instinct MI300X datasheet (2023): dense matrix figures, 5.3 TB/s HBM3"
_AMD_325 = "AMD Instinct MI325X datasheet (2024): dense matrix figures, 6 TB/s HBM3E"

DEVICES: tuple[DeviceSpec, ...] = (
    DeviceSpec(
        "A100 SXM4 80GB",
        {"fp64": 19.5, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0},
        2.039,
        _NV_A100,
    ),
    DeviceSpec(
        "A100 40GB",
        {"fp64": 19.5, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0},
        1.555,
        _NV_A100,
    ),
    DeviceSpec(
        "A100 PCIe 80GB",
        {"fp64": 19.5, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0},
        1.935,
        _NV_A100,
    ),
    DeviceSpec(
        "H100 SXM",
        {"fp64": 67.0, "fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979.0, "int8": 1979.0},
        3.35,
        _NV_H100,
    ),
    DeviceSpec(
        "H100 PCIe",
        {"fp64": 51.0, "fp32": 51.0, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0, "int8": 1513.0},
        2.0,
        _NV_H100,
    ),
    DeviceSpec(
        "H100 NVL",
        {"fp64": 60.0, "fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5, "int8": 1670.5},
        3.9,
        _NV_H100,
    ),
    DeviceSpec(
        "H200 SXM",
        {"fp64": 67.0, "fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979.0, "int8": 1979.0},
        4.8,
        _NV_H200,
    ),
    DeviceSpec(
        "B200",
        {"fp64": 37.0, "fp32": 75.0, "tf32": 1125.0, "bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0, "int8": 4500.0},
        8.0,
        _NV_B200,
    ),
    DeviceSpec(
        "L40S",
        {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0, "int8": 733.0},
        0.864,
        _NV_L40S,
    ),
    DeviceSpec(
        "RTX 4090",
        {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3, "int8": 660.6},
        1.008,
        _NV_ADA,
    ),
    DeviceSpec(
        "RTX 4090 D",
        {"fp32": 73.5, "tf32": 73.5, "bf16": 147.1, "fp16": 147.1, "fp8": 294.1, "int8": 588.2},
        1.008,
        "derived: RTX 4090 figures x 114/128 SMs (NVIDIA RTX 4090 D spec page: 14,592 CUDA cores, 2.52 GHz boost, "
        "same 1008 GB/s memory)",
    ),
    DeviceSpec(
        "MI300X",
        {"fp64": 163.4, "fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "int8": 2614.9},
        5.3,
        _AMD_300,
    ),
    DeviceSpec(
        "MI325X",
        {"fp64": 163.4, "fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "int8": 2614.9},
        6.0,
        _AMD_325,
    ),
)

_BY_NAME = {spec.name: spec for spec in DEVICES}
GIB = 1 << 30


def match_device(name: str, memory_bytes: int | None = None) -> DeviceSpec | None:
    """The table entry for a `deviceProperties[].name` (memory size separates A100 40/80 GB, H100 NVL)."""
    text = name.upper()
    memory_gib = (memory_bytes or 0) / GIB
    key: str | None = None
    if "MI325" in text:
        key = "MI325X"
    elif "MI300X" in text:
        key = "MI300X"
    elif re.search(r"\bB200\b", text):
        key = "B200"
    elif "H200" in text:
        key = "H200 SXM"
    elif "H100" in text:
        key = "H100 PCIe" if "PCIE" in text else "H100 NVL" if "NVL" in text or memory_gib > 90 else "H100 SXM"
    elif "A100" in text:
        key = (
            "A100 PCIe 80GB"
            if "PCIE" in text and memory_gib > 50
            else "A100 SXM4 80GB"
            if memory_gib > 50
            else "A100 40GB"
        )
    elif "L40S" in text:
        key = "L40S"
    elif re.search(r"RTX 4090 D\b", text):
        key = "RTX 4090 D"
    elif "RTX 4090" in text:
        key = "RTX 4090"
    return _BY_NAME.get(key) if key else None


class Peaks(msgspec.Struct, frozen=True):
    """The peaks the roofline uses: from the device table, overridden by the user (CLI or TRACELENS_PEAKS)."""

    device: str
    tflops: dict[str, float] = msgspec.field(default_factory=dict)
    hbm_tbps: float | None = None
    source: str = ""

    def flops_peak(self, dtype: str) -> float | None:
        """TFLOP/s for `dtype`, falling back to a user's catch-all `*` figure."""
        return self.tflops.get(dtype, self.tflops.get("*"))


class PeakOverride(msgspec.Struct, frozen=True):
    tflops: dict[str, float] = msgspec.field(default_factory=dict)  # dtype → TFLOP/s; "*" applies to every dtype
    hbm_tbps: float | None = None


def parse_tflops(text: str) -> dict[str, float]:
    """`"989"` (every dtype) or `"bf16=989,fp32=67"` → {dtype: TFLOP/s}."""
    result: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        dtype, _, value = part.rpartition("=")
        result[dtype.strip().lower() or "*"] = float(value)
    return result


def override_from_env(environ: dict[str, str] | None = None) -> PeakOverride:
    """`TRACELENS_PEAKS='{"bf16": 989, "fp32": 67, "hbm_tbps": 4.8}'` (a bare `"tflops"` key applies to all)."""
    raw = (environ if environ is not None else dict(os.environ)).get(PEAKS_ENV, "").strip()
    if not raw:
        return PeakOverride()
    import json  # only when the variable is set: `analyze` imports this module before the trace loads

    data = json.loads(raw)
    tbps = data.pop("hbm_tbps", None)
    if "tflops" in data:
        data["*"] = data.pop("tflops")
    return PeakOverride({str(k).lower(): float(v) for k, v in data.items()}, float(tbps) if tbps is not None else None)


def merge_overrides(first: PeakOverride, second: PeakOverride) -> PeakOverride:
    """`second` wins where both give a figure."""
    return PeakOverride({**first.tflops, **second.tflops}, second.hbm_tbps or first.hbm_tbps)


def peaks_for(device_name: str, memory_bytes: int | None, override: PeakOverride | None = None) -> Peaks:
    spec = match_device(device_name, memory_bytes)
    override = override or PeakOverride()
    tflops = dict(spec.tflops) if spec else {}
    if override.tflops:
        tflops = {k: v for k, v in tflops.items() if "*" not in override.tflops} | override.tflops
    tbps = override.hbm_tbps or (spec.hbm_tbps if spec else None)
    parts = [f"table: {spec.name} ({spec.source})"] if spec else []
    if override.tflops or override.hbm_tbps:
        parts.append("user-supplied peaks")
    return Peaks(device_name, tflops, tbps, "; ".join(parts) or "unknown device: no peaks")
