"""Many ranks: directory / tar analysis, the cross-rank view, missing ranks. Figures checked by hand against
the raw JSON of the 8 DLRM rank traces (ProfilerStep#10 durations, NCCL kernel durations launched in it)."""

from __future__ import annotations

import gzip
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from tests.conftest import anchor, kernel, launch, op, step, write_trace
from tracelens.analyses.ranks import RankFigures, analyze_ranks
from tracelens.cli import main
from tracelens.parallel import rank_files, run_ranks

DLRM = "other/facebookresearch__param/dlrm_kineto.tar.gz"
STEP_US = [14455, 19901, 13017, 19313, 17979, 17797, 13091, 12509]  # ProfilerStep#10 "dur" per rank
COLLECTIVE_US = [5798, 11336, 3492, 9774, 6587, 6251, 3558, 1746]  # NCCL kernels launched in the step
COMPUTE_US = [1034, 1043, 1068, 1064, 1126, 1041, 1051, 1059]  # other kernels launched in the step
TRANSFER_US = 217  # sum over the 8 calls of the shortest duration of each call across ranks


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELENS_CACHE_DIR", str(tmp_path / "cache"))


def _dlrm_json(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    assert main(["analyze", str(anchor(DLRM)), "--format", "json", "--no-cache", *extra]) == 0
    document: dict[str, object] = json.loads(capsys.readouterr().out)
    return document


def test_dlrm_archive_cross_rank_view(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _dlrm_json(capsys, "--workers", "2")
    assert doc["schema"] == "tracelens.ranks/1"
    assert doc["world_size"] == 8 and doc["ranks_found"] == list(range(8))
    assert doc["missing_ranks"] == [] and doc["duplicate_ranks"] == [] and doc["failed_files"] == []
    rows = doc["rows"]
    assert isinstance(rows, list)
    assert [r["rank"] for r in rows] == list(range(8))
    assert [r["steps"] for r in rows] == [1] * 8
    assert [r["step_numbers"] for r in rows] == [[10]] * 8
    assert [r["step_us"] for r in rows] == STEP_US
    assert [r["collective_us"] for r in rows] == COLLECTIVE_US
    assert [r["compute_us"] for r in rows] == COMPUTE_US
    assert [r["collective_calls"] for r in rows] == [8] * 8
    assert [r["transfer_us"] for r in rows] == [TRANSFER_US] * 8
    assert [r["waiting_us"] for r in rows] == [c - TRANSFER_US for c in COLLECTIVE_US]
    assert doc["step_us_median"] == 16126  # (14455 + 17797) / 2
    assert (doc["step_us_min"], doc["step_us_max"]) == (12509, 19901)
    assert doc["slowest_rank"] == 1 and doc["fastest_rank"] == 7
    assert doc["skew_pct"] == pytest.approx((19901 - 12509) / 16126 * 100)
    # rank 7 waits 1529 µs per step, under half the median wait (5807.5 µs): the others wait for it
    assert doc["stragglers"] == [7]
    assert doc["matched_collectives"] == 8


def test_directory_with_a_missing_rank_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with tarfile.open(anchor(DLRM)) as tar:
        tar.extractall(tmp_path, filter="data")
    folder = tmp_path / "dlrm_kineto"
    for path in folder.glob("worker5_*"):
        path.unlink()
    shutil.copy(next(folder.glob("worker2_*")), folder / "copy_of_rank2.json")
    (folder / "notes.txt").write_text("not a trace")
    assert main(["analyze", str(folder), "--format", "json", "--no-cache", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["missing_ranks"] == [5]
    assert doc["duplicate_ranks"] == [2]
    assert [r["rank"] for r in doc["rows"]] == [0, 1, 2, 2, 3, 4, 6, 7]
    # a rank in two traces: not the ranks of one run, so no cross-rank figures (issue #15)
    assert doc["one_run"] is False and doc["skew_pct"] is None and doc["stragglers"] == []
    assert (
        doc["separate_reason"]
        == "ranks in more than one trace: 2 (copy_of_rank2.json, "
        + next(p.name for p in folder.glob("worker2_*"))
        + ")"
    )
    assert main(["analyze", str(folder), "--no-cache", "--workers", "1"]) == 0
    text = capsys.readouterr().out
    assert "not ranks of one run: ranks in more than one trace: 2" in text
    assert "Separate traces (not ranks of one run)" in text and "% of the median" not in text


def test_unusable_and_unranked_files_are_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = [
        step(1, 0, 100),
        op("aten::mm", 1, 20, ext=1),
        launch("cudaLaunchKernel", 2, 2, 9, ext=1),
        kernel("ncclKernel_AllReduce", 30, 40, 9),
    ]
    write_trace(tmp_path / "a.json", events, distributedInfo={"rank": 0, "world_size": 2})
    write_trace(tmp_path / "b.json", events)
    (tmp_path / "broken.json").write_text("{not json")
    assert main(["analyze", str(tmp_path), "--format", "json", "--no-cache", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["unranked_files"] == ["b.json"] and doc["missing_ranks"] == [1]
    assert len(doc["failed_files"]) == 1 and doc["failed_files"][0].startswith("broken.json: ")


def test_single_file_behaviour_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(anchor("other/facebookresearch__param/resnet_kineto.json.gz"))
    assert main(["analyze", path, "--format", "json", "--no-cache"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "tracelens.analyze/1"


def test_process_pool_equals_serial(tmp_path: Path) -> None:
    paths = rank_files(anchor(DLRM), tmp_path)
    assert len(paths) == 8
    serial, _ = run_ranks(paths, workers=1)
    pooled, _ = run_ranks(paths, workers=2)
    assert serial == pooled


def _figures(rank: int, collectives: list[tuple[str, float]], step_us: float = 100.0) -> RankFigures:
    total = sum(d for _, d in collectives)
    return RankFigures(
        rank,
        3,
        f"r{rank}",
        10,
        2,
        [1, 2],
        step_us,
        [step_us, step_us],
        0.0,
        50.0,
        total / 2,
        len(collectives) / 2,
        collectives,
    )


def test_waiting_is_the_excess_over_the_fastest_rank() -> None:
    figures = [
        _figures(0, [("ar", 10.0), ("ar", 30.0), ("sr", 5.0)]),
        _figures(1, [("ar", 14.0), ("ar", 20.0), ("sr", 9.0)]),
        _figures(2, [("ar", 50.0), ("ar", 26.0)], step_us=130.0),  # no "sr": only "ar" is matched
    ]
    results = analyze_ranks(figures, "x")
    # ar#1: min 10 -> waits 0, 4, 40; ar#2: min 20 -> 10, 0, 6; per step (2 steps): 5, 2, 23
    assert [row.waiting_us for row in results.rows] == [5.0, 2.0, 23.0]
    assert results.matched_collectives == 2
    assert results.missing_ranks == [] and results.world_size == 3
    assert results.step_us_median == 100.0 and results.slowest_rank == 2


@pytest.mark.parametrize(
    "name", ["sweep/compiled_static_geglu", "graphs/mlp_graph", "truth3/nostep_autotune_mlp", "eager_mlp"]
)
def test_a_ranks_figures_are_over_the_steps_analyze_reads(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A rank's step time is over the steps `analyze` of that trace is over (compiling and capturing steps left
    out): the same median step as `analyze --format json`, and as the raw events' step periods
    (tests/independent/step_windows.py) over those steps. Before, a compiled rank's median took in its compiling
    steps (compiled_static_geglu: 758,139.9 µs for a 1,233.3 µs step)."""
    import statistics

    import tracelens
    from tests.conftest import recorded_trace
    from tests.independent.step_windows import step_figures
    from tests.independent.warmup_steps import steady_steps
    from tracelens.analyses.ranks import rank_figures

    path = recorded_trace(f"h200/{name}.json.gz")
    assert main(["analyze", str(path), "--format", "json", "--no-cache"]) == 0
    document = json.loads(capsys.readouterr().out)
    figures = rank_figures(tracelens.load(path))
    assert figures.step_us == pytest.approx(document["per_step"]["step_us"], abs=1e-3)
    assert figures.steps == document["steps"]
    raw = {f["number"]: f["step_us"] for f in step_figures(str(path))}
    numbers = figures.step_numbers
    assert numbers == steady_steps(str(path))  # the warm-up steps, read from the raw events, left out
    assert figures.step_us == pytest.approx(statistics.median(raw[n] for n in numbers), abs=0.01)


def test_ranks_with_other_analyzed_steps_are_noted() -> None:
    """A rank that left out other steps (it recompiled elsewhere) gets a note: its collectives are matched by
    order within different steps."""
    import msgspec

    same = [_figures(r, [("ncclKernel_AllReduce", 10.0)]) for r in range(3)]
    assert not any("analyzed steps differ" in n for n in analyze_ranks(same, "run").notes)
    other = [*same[:2], msgspec.structs.replace(same[2], step_numbers=[2, 3])]
    assert any("analyzed steps differ" in n for n in analyze_ranks(other, "run").notes)


def test_separate_traces_are_listed_by_file_at_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    """A folder of separate traces (no rank in any: a recording's variants beside its timings.json) lists each
    by file, first, at 80 columns (the rank column, "?" for every row, is left out), and the JSON that is no
    trace as unusable."""
    folder = Path(__file__).resolve().parent.parent / "traces" / "h100" / "graphs_compiled" / "g1"
    assert main(["analyze", str(folder), "--width", "80", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = [line for line in lines if line.startswith("│")]
    names = sorted(p.name for p in folder.glob("*.json.gz"))
    assert [row.split("│")[1].strip() for row in rows] == names
    assert "rank" not in next(line for line in lines if line.startswith("┃") and "file" in line)
    assert "unusable: timings.json" in out


def test_each_ranks_load_warning_is_in_the_cross_rank_notes(capsys: pytest.CaptureFixture[str]) -> None:
    """Two DLRM ranks have GPU activity without a launch (64 of 326 and 64 of 337 kernels/copies/sets whose
    correlation id no runtime call carries, counted from the archive's raw JSON by hand): the archive's view says
    so per rank, as `compare` did (audit, 2026-12-07)."""
    doc = _dlrm_json(capsys)
    notes = [n for n in doc["notes"] if "have no launch" in n]  # type: ignore[union-attr]
    assert len(notes) == 2
    assert any(n.startswith("worker1_") and "64 of 326 GPU activities" in n for n in notes)
    assert any(n.startswith("worker3_") and "64 of 337 GPU activities" in n for n in notes)


def test_a_rank_without_a_complete_step_has_unknown_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """HTA's two sampled ranks, rank 1's file cut after its first 200,000 bytes of JSON (no ProfilerStep left
    whole): its per-step figures are unknown (null, "—"), never 0 ms of compute in 0 collective calls (new user,
    2026-12-07); rank 0's stay measured (before, rank 1 read 0.000 ms of compute and 0 calls)."""
    source = anchor("hta/trace_filter/sampled_rank-0.json.gz").parent
    shutil.copy(source / "sampled_rank-0.json.gz", tmp_path)
    cut = gzip.decompress((source / "sampled_rank-1.json.gz").read_bytes())[:200_000]
    (tmp_path / "sampled_rank-1.json").write_bytes(cut)
    assert main(["analyze", str(tmp_path), "--format", "json", "--no-cache"]) == 0
    rows = {row["rank"]: row for row in json.loads(capsys.readouterr().out)["rows"]}
    figures = ("step_us", "compute_us", "collective_us", "collective_calls", "transfer_us")
    assert all(rows[1][name] is None for name in figures)
    assert all(rows[0][name] > 0 for name in figures[:-1])  # its transfer needs a rank to match calls with
    assert main(["analyze", str(tmp_path), "--no-cache"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("│    1 "))
    assert "0.000" not in line and line.count("—") >= 5
