"""What the profiler adds per recorded event, and what it does not follow (docs/profiler_overhead.md, "What the
per-event cost follows"): `workloads/profiler_cost.py` on an H100 (`traces/h100/profiler_cost`, 2026-12-07), each
trace taken in alternation with its CUDA-event reference. From the raw events (`tests/test_profiler_overhead.py`'s
stdlib `independent`): (profiled step − CUDA-event step) ÷ CPU ops and runtime calls per step, in the trace's
median kernel-launch call; the median over the four rounds of each program.

    PYTHONPATH=. python tests/test_profiler_cost.py      # prints the docs' table
"""

from __future__ import annotations

import gzip
import json
import statistics
from functools import cache
from pathlib import Path

import pytest

from tests.test_profiler_overhead import _estimate, independent

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "traces/h100/profiler_cost"
HF_EAGER = [ROOT / f"traces/h100/{run}/hf_llama_train_b1s128_eager.json.gz" for run in ("record", "record2", "record3")]
DOC = ROOT / "docs/profiler_overhead.md"


def per_event(path: Path, free_us: float) -> float:
    """What the profiler added per CPU op and runtime call, in the trace's median kernel-launch calls."""
    figures = independent(path)
    return (figures["step_us"] - free_us) / figures["events"] / figures["launch_us"]


@cache
def table() -> dict[str, dict[str, float]]:
    """Per program: events per step, median launch call µs, profiled and CUDA-event step µs, and the added cost
    per event in launch calls (medians over the rounds)."""
    traces = json.loads((FOLDER / "timings.json").read_text())["traces"]
    rows: dict[str, list[dict[str, float]]] = {}
    for name, timing in traces.items():
        path, free_us = FOLDER / f"{name}.json.gz", timing["cuda_event_ms"]["median"] * 1e3
        figures = independent(path)
        rows.setdefault(timing["variant"], []).append(
            {**figures, "free_us": free_us, "per_event": per_event(path, free_us)}
        )
    return {
        variant: {
            key: statistics.median(r[key] for r in runs)
            for key in ("events", "launch_us", "step_us", "free_us", "per_event")
        }
        for variant, runs in rows.items()
    }


def hf_per_event() -> list[float]:
    """The eager 1 × 128 Llama training step on the three H100 hosts (`tracelens record`'s own timings)."""
    out = []
    for path in HF_EAGER:
        with gzip.open(path, "rt") as handle:
            free_us = float(json.load(handle)["tracelens_record"]["profiler_free"]["median_step_us"])
        out.append(per_event(path, free_us))
    return out


def markdown() -> str:
    lines = [
        "| program | CPU ops + runtime calls /step | launch call µs | profiled step µs | CUDA events µs | "
        "added per event (launch calls) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for variant, row in table().items():
        lines.append(
            f"| `{variant}` | {row['events']:,.0f} | {row['launch_us']:.2f} | {row['step_us']:,.1f} | "
            f"{row['free_us']:,.1f} | {row['per_event']:.2f} |"
        )
    return "\n".join(lines)


def test_the_docs_table_is_the_raw_one() -> None:
    assert markdown() in DOC.read_text(encoding="utf-8")


def test_the_cost_per_event_does_not_follow_the_events_per_step() -> None:
    """32 and 256 (Linear, GELU) pairs a step: 8× the events, the same cost per event within 15 %."""
    rows = table()
    assert rows["chain_k256"]["events"] > 7 * rows["chain_k32"]["events"]
    assert rows["chain_k256"]["per_event"] == pytest.approx(rows["chain_k32"]["per_event"], rel=0.15)


def test_the_cost_per_event_does_not_follow_the_python_between_ops() -> None:
    """The same ops through four levels of nn.Module: the same events, a cost per event within 20 % of the flat
    loop's (the CUDA-event step itself is 25-27 % longer: the Python runs, the profiler does not charge it)."""
    rows = table()
    for k in ("k32", "k256"):
        nested, chain = rows[f"nested_{k}"], rows[f"chain_{k}"]
        assert nested["events"] == chain["events"] and nested["free_us"] > 1.1 * chain["free_us"]
        assert nested["per_event"] == pytest.approx(chain["per_event"], rel=0.20)


def test_hugging_face_costs_about_twice_what_these_programs_cost() -> None:
    """The backward costs a little more per event (train against chain: under 1.5×); the Hugging Face Llama's
    eager step costs more than 1.7× the flat loop's on every H100 host: what sets it is none of the three."""
    rows = table()
    for k in ("k32", "k256"):
        assert 1.0 < rows[f"train_{k}"]["per_event"] / rows[f"chain_{k}"]["per_event"] < 1.5
    flat = max(rows[v]["per_event"] for v in ("chain_k32", "chain_k256", "nested_k32", "nested_k256"))
    assert min(hf_per_event()) > 1.7 * flat


def estimate_errors_pct() -> list[float]:
    """The model's estimate (stdlib, `_estimate`) against each trace's CUDA-event step, %: held out (these
    programs were recorded after every constant was fitted)."""
    traces = json.loads((FOLDER / "timings.json").read_text())["traces"]
    return [
        100 * (_estimate(independent(FOLDER / f"{name}.json.gz")) / (t["cuda_event_ms"]["median"] * 1e3) - 1)
        for name, t in sorted(traces.items())
    ]


def test_the_model_holds_on_these_programs() -> None:
    """Held out: 22 of the 28 traces within ±15 % (the six outside: the 4-pair loop's 133 µs steps, −15 to −21 %,
    and single disturbed rounds of 32 and 256 pairs, +26 to +47 %)."""
    errors = estimate_errors_pct()
    assert len(errors) == 28 and sum(abs(e) <= 15 for e in errors) == 22


if __name__ == "__main__":
    print("estimate within ±15 %:", sum(abs(e) <= 15 for e in estimate_errors_pct()), "of", len(estimate_errors_pct()))
    print(markdown())
    print("Hugging Face eager 1 × 128 Llama, per event:", ", ".join(f"{v:.2f}" for v in hf_per_event()))
