"""Ranks in every command (issue #15 item 5): report, check, compare and annotate on a run folder or tar of rank
traces, and folders whose traces are not ranks of one run. Figures against `tests/ranks_stdlib.py`, which reads
the tar's member files with the standard library only."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import anchor, unwrapped
from tests.ranks_stdlib import run_figures
from tests.report_helpers import array, tiny_trace
from tracelens.analyses.ranks import RankFigures, separate_reason
from tracelens.cli import main
from tracelens.cli.runs import open_run
from tracelens.report.ranks import ranks_section

DLRM = "other/facebookresearch__param/dlrm_kineto.tar.gz"
HTA = "hta"


@pytest.fixture(scope="module")
def stdlib() -> dict[int, dict[str, Any]]:
    return run_figures(str(anchor(DLRM)))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELENS_CACHE_DIR", str(tmp_path / "cache"))


def test_the_stdlib_figures_are_the_recorded_ones(stdlib: dict[int, dict[str, Any]]) -> None:
    """The independent script reads what the raw files say (ProfilerStep#10 "dur" of each worker file)."""
    assert sorted(stdlib) == list(range(8))
    assert {r: f["file"].split("_")[0] for r, f in stdlib.items()} == {r: f"worker{r}" for r in range(8)}
    assert [stdlib[r]["step_us"] for r in range(8)] == [14455, 19901, 13017, 19313, 17979, 17797, 13091, 12509]
    assert [r for r in range(8) if stdlib[r]["straggler"]] == [7]


def test_run_labels_figures_and_focus_match_stdlib(stdlib: dict[int, dict[str, Any]]) -> None:
    with open_run(anchor(DLRM), None, workers=1) as run:
        assert run.one_run and [m.label for m in run.members] == [f"rank{r}" for r in range(8)]
        rows = {row.rank: row for row in run.report.rows}
        for rank, expected in stdlib.items():
            assert rows[rank].step_us == expected["step_us"]
            assert rows[rank].waiting_us == pytest.approx(expected["waiting_us"])
            assert rows[rank].straggler == expected["straggler"]
        member, why = run.focus()
        assert member.rank == 7 and "straggler" in why
        assert run.pick(3).name == stdlib[3]["file"]
        section = ranks_section(run.report, 7, why)
    steps = section.panels[0].figure
    waits = section.panels[1].figure
    assert steps is not None and waits is not None
    bars = steps.to_dict()["data"][0]
    assert list(bars["x"]) == [f"rank {r}" for r in range(8)]
    assert list(array(bars["y"])) == pytest.approx([stdlib[r]["step_us"] / 1000 for r in range(8)])
    waiting = next(t for t in waits.to_dict()["data"] if t["name"] == "waiting in collectives")
    assert list(array(waiting["y"])) == pytest.approx([stdlib[r]["waiting_us"] / 1000 for r in range(8)])


def _html_rows(page: str, panel_id: str) -> list[list[str]]:
    panel = page[page.index(f'id="panel-{panel_id}"') :]
    panel = panel[: panel.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", panel, flags=re.S)
    return [re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S) for row in rows if "<td" in row]


def test_report_of_the_tar_is_a_ranks_page_and_the_straggler_in_full(
    tmp_path: Path, stdlib: dict[int, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.html"
    assert main(["report", str(anchor(DLRM)), "-o", str(out)]) == 0
    assert "rank7: the straggler" in capsys.readouterr().err
    page = out.read_text()
    assert "rank 7 in full" in page and 'id="ranks"' in page
    rows = _html_rows(page, "ranks-table")
    assert [int(row[0]) for row in rows] == list(range(8))
    assert [float(row[2]) for row in rows] == [stdlib[r]["step_us"] / 1000 for r in range(8)]
    assert [row[8] for row in rows if row[8]] == ["slowest", "straggler, shown below"]
    # the rest of the page is rank 7's report: its own per-step figures follow the ranks page
    assert page.index('id="ranks"') < page.index('id="overview"')
    assert "worker7_step_12" in page

    picked = tmp_path / "rank1.html"
    assert main(["report", str(anchor(DLRM)), "--rank", "1", "-o", str(picked)]) == 0
    assert "rank 1 in full" in picked.read_text()


def test_check_on_the_tar_runs_every_rank(
    tmp_path: Path, stdlib: dict[int, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    expect = tmp_path / "h.toml"
    expect.write_text(
        '[[hypothesis]]\nname = "step under 19 ms"\nmetric = "per_step.step_us"\nop = "<"\nvalue = 19000\n'
        '[[hypothesis]]\nname = "rank 7 is the fastest"\ntrace = "rank7"\nmetric = "per_step.step_us"\n'
        'op = "<"\nvalue = 12600\n'
    )
    status = main(["check", str(anchor(DLRM)), "--expect", str(expect), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert [t["label"] for t in doc["traces"]] == [f"rank{r}" for r in range(8)]
    first = [v for v in doc["verdicts"] if v["name"] == "step under 19 ms"]
    assert {v["trace"]: v["measured"] for v in first} == {f"rank{r}": stdlib[r]["step_us"] for r in range(8)}
    wrong = sorted(v["trace"] for v in first if v["status"] == "wrong")
    assert wrong == [f"rank{r}" for r in range(8) if stdlib[r]["step_us"] >= 19000] == ["rank1", "rank3"]
    assert status == 1
    assert main(["check", str(anchor(DLRM)), "--expect", str(expect), "--rank", "7", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(v["trace"], v["measured"], v["status"]) for v in doc["verdicts"]] == [("rank7", 12509, "held")] * 2


def test_compare_takes_the_ranks_as_variants(stdlib: dict[int, dict[str, Any]], capsys: Any) -> None:
    assert main(["compare", str(anchor(DLRM)), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [v["name"] for v in doc["variants"]] == [f"rank{r}" for r in range(8)]
    assert [v["per_step"]["step_us"] for v in doc["variants"]] == [stdlib[r]["step_us"] for r in range(8)]


def test_annotate_needs_a_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "a.json.gz"
    assert main(["annotate", str(anchor(DLRM)), "-o", str(out)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and "--rank N" in errors[0] and not out.exists()
    assert main(["annotate", str(anchor(DLRM)), "--rank", "2", "-o", str(out)]) == 0
    with gzip.open(out) as handle:
        assert json.load(handle)["distributedInfo"]["rank"] == 2
    assert main(["annotate", str(anchor(DLRM)), "--rank", "9", "-o", str(tmp_path / "b.json")]) == 2
    assert "no rank 9" in capsys.readouterr().err


@pytest.mark.slow
def test_the_hta_folder_is_separate_traces_not_one_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Seven unrelated traces (ranks 0, 0, 1, 1, 1, 3 and none; world sizes 2 to 128): never a skew."""
    assert main(["analyze", str(anchor(HTA)), "--format", "json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["one_run"] is False
    assert doc["skew_pct"] is None and doc["stragglers"] == [] and doc["slowest_rank"] is None
    assert all(row["waiting_us"] is None and not row["straggler"] for row in doc["rows"])
    reason = doc["separate_reason"]
    assert "1 of 7 traces have no distributedInfo.rank (triton_example/triton_example.json.gz)" in reason
    assert "the traces disagree on world_size (2, 8, 16, 128)" in reason
    assert main(["analyze", str(anchor(HTA)), "--workers", "1"]) == 0
    text = capsys.readouterr().out
    assert "Separate traces (not ranks of one run)" in text and "% of the median" not in text
    for command in (["report", "-o", str(tmp_path / "x.html")], ["annotate", "--rank", "0"]):
        assert main([command[0], str(anchor(HTA)), *command[1:]]) == 2
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("tracelens: error:")]
        assert len(errors) == 1 and "not ranks of one run" in errors[0]


def test_check_takes_separate_traces_by_their_stems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "two"
    folder.mkdir()
    tiny_trace(folder, "a.json.gz", distributedInfo={"rank": 0, "world_size": 2})
    tiny_trace(folder, "b.json.gz", distributedInfo={"rank": 0, "world_size": 4})
    expect = tmp_path / "h.toml"
    expect.write_text('[[hypothesis]]\nname = "steps"\nmetric = "per_step.step_us"\nop = "=="\nvalue = 100\n')
    assert main(["check", str(folder), "--expect", str(expect), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert [t["label"] for t in json.loads(captured.out)["traces"]] == ["a", "b"]
    assert "not ranks of one run (the traces disagree on world_size (2, 4)" in unwrapped(captured.err)
    assert main(["check", str(folder), "--expect", str(expect), "--rank", "0"]) == 2
    assert "not ranks of one run" in capsys.readouterr().err


def test_a_folder_of_ranks_is_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with tarfile.open(anchor(DLRM)) as tar:
        tar.extractall(tmp_path, filter="data")
    folder = tmp_path / "dlrm_kineto"
    for path in folder.glob("worker[4-7]_*"):
        path.unlink()
    out = tmp_path / "r.html"
    assert main(["report", str(folder), "-o", str(out)]) == 0  # ranks 0-3 of 8: a partial run, still one job
    assert "missing ranks 4, 5, 6, 7" in out.read_text()
    shutil.copy(next(folder.glob("worker0_*")), folder / "again.json")
    assert main(["report", str(folder), "-o", str(out), "--force"]) == 2
    assert "ranks in more than one trace: 0" in capsys.readouterr().err


def _figures(rank: int | None, world_size: int | None, path: str, run_id: str | None = None) -> RankFigures:
    return RankFigures(rank, world_size, path, 1, 1, [1], 1.0, [1.0], 0.0, 0.0, 0.0, 0.0, [], run_id=run_id)


def test_what_makes_traces_one_run() -> None:
    assert separate_reason([_figures(0, 2, "a"), _figures(1, 2, "b")]) is None
    assert separate_reason([_figures(0, None, "a"), _figures(1, None, "b")]) is None  # no world size: by rank
    assert separate_reason([_figures(0, 2, "a", "x"), _figures(1, 2, "b", "y")]) == (
        "the traces come from different runs (tracelens_run.run_id x, y)"
    )
    assert separate_reason([_figures(0, 2, "a"), _figures(1, None, "b")]) == (
        "the traces disagree on world_size (2, unknown)"
    )
    assert separate_reason([_figures(0, 2, "a"), _figures(2, 2, "b")]) == "rank 2 is outside world_size 2"
    assert separate_reason([_figures(0, 2, "a"), _figures(0, 2, "b")]) == "ranks in more than one trace: 0 (a, b)"
    assert separate_reason([_figures(None, None, "a")]) == "1 of 1 traces have no distributedInfo.rank (a)"


def test_members_with_the_same_file_name_stay_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`rank0/trace.json`, `rank1/trace.json`: a common layout; each member is its own rank."""
    archive = tmp_path / "run.tar"
    with tarfile.open(archive, "w") as tar:
        for rank in (0, 1):
            folder = tmp_path / f"rank{rank}"
            folder.mkdir()
            path = tiny_trace(folder, "trace.json.gz", distributedInfo={"rank": rank, "world_size": 2})
            tar.add(path, arcname=f"rank{rank}/trace.json.gz")
    assert main(["analyze", str(archive), "--format", "json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["one_run"] is True
    assert [(row["rank"], row["path"]) for row in doc["rows"]] == [
        (0, "rank0/trace.json.gz"),
        (1, "rank1/trace.json.gz"),
    ]
    assert main(["compare", str(archive), "--format", "json"]) == 0
    assert [v["name"] for v in json.loads(capsys.readouterr().out)["variants"]] == ["rank0", "rank1"]


def test_rank_needs_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tiny_trace(tmp_path)
    expect = tmp_path / "h.toml"
    expect.write_text('[[hypothesis]]\nname = "steps"\nmetric = "per_step.step_us"\nop = "=="\nvalue = 100\n')
    for command in (
        ["analyze", str(trace), "--rank", "0"],
        ["check", str(trace), "--expect", str(expect), "--rank", "0"],
        ["compare", str(trace), str(trace), "--rank", "0"],
        ["report", str(trace), "--rank", "0", "-o", str(tmp_path / "r.html")],
        ["annotate", str(trace), "--rank", "0", "-o", str(tmp_path / "a.json")],
        ["report", str(trace), str(anchor(DLRM)), "-o", str(tmp_path / "r.html")],
    ):
        assert main(command) == 2, command
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("tracelens: error:")]
        assert len(errors) == 1 and ("--rank" in errors[0] or "not both" in errors[0]), command
