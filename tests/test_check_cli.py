"""`tracelens check` in-process: exit 0 when all held, 1 when any is wrong (printing the measured value),
2 for unusable input; text and `tracelens.check/1` JSON output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_check_builders import FUSED, write_compiled, write_eager
from tracelens.cli import main

HELD = """
[[hypothesis]]
name = "compiled MLP launches two kernels per step"
trace = "compiled_mlp"
metric = "per_step.kernels"
op = "=="
value = 2

[[hypothesis]]
name = "compiled is faster"
trace = "compiled_mlp"
metric = "per_step.gpu_kernel_us"
op = "<"
than = { trace = "eager_mlp", factor = 0.9 }

[[hypothesis]]
name = "Inductor fuses gelu and mul"
trace = "compiled_mlp"
fuses = ["gelu", "mul"]
"""

WRONG = """
[[hypothesis]]
name = "eager MLP runs five kernels"
trace = "eager_mlp"
metric = "per_step.kernels"
op = "=="
value = 5
"""


@pytest.fixture()
def traces(tmp_path: Path) -> list[str]:
    return [str(write_eager(tmp_path)), str(write_compiled(tmp_path))]


def hypotheses(tmp_path: Path, text: str) -> str:
    path = tmp_path / "h.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_all_held_exits_0(tmp_path: Path, traces: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", *traces, "--expect", hypotheses(tmp_path, HELD)]) == 0
    out = capsys.readouterr().out
    assert out.count("HELD") == 3 and "WRONG" not in out
    assert out.rstrip().endswith("3 held, 0 wrong")


def test_wrong_guess_exits_1_and_prints_the_measured_value(
    tmp_path: Path, traces: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", *traces, "--expect", hypotheses(tmp_path, HELD + WRONG)]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    row = next(i for i, line in enumerate(lines) if "eager MLP runs five" in line)
    # one line per verdict (held ones without evidence), the evidence of a WRONG one indented below it
    assert lines[row] == (
        "WRONG 4. eager MLP runs five kernels [eager_mlp]: measured 3, error +66.7 % (per_step.kernels == 5)"
    )
    assert lines[row + 1].strip() == "per_step.kernels = 3"
    assert sum(line.startswith("HELD ") for line in lines) == 3
    assert not any("reference:" in line for line in lines)  # held verdicts' evidence only with -v
    assert main(["check", *traces, "--expect", hypotheses(tmp_path, HELD + WRONG), "-v"]) == 1
    assert "reference: per_step.gpu_kernel_us on eager_mlp = 150 × 0.9 = 135" in capsys.readouterr().out
    assert out.rstrip().endswith("3 held, 1 wrong")


def test_json_output(tmp_path: Path, traces: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", *traces, "--expect", hypotheses(tmp_path, HELD + WRONG), "--format", "json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "tracelens.check/1"
    assert (document["held"], document["wrong"]) == (3, 1)
    assert [t["label"] for t in document["traces"]] == ["eager_mlp", "compiled_mlp"]
    verdicts = {v["name"]: v for v in document["verdicts"]}
    assert verdicts["compiled is faster"] == {
        "index": 2,
        "name": "compiled is faster",
        "trace": "compiled_mlp",
        "status": "held",
        "held": True,
        "statement": "per_step.gpu_kernel_us < 0.9 × per_step.gpu_kernel_us of eager_mlp",
        "measured": 125,
        "expected": 135.0,
        "error_pct": None,  # only an == with a number as value has one
        "evidence": verdicts["compiled is faster"]["evidence"],
        "note": "",
        "action": None,
        "before": None,
        "taken_action": None,
        "took": "",
        "reason": "",
        "before_value": None,
        "no_change_holds": None,
        "gemm_drift_us": None,
    }
    assert verdicts["compiled is faster"]["evidence"][:2] == [
        "per_step.gpu_kernel_us = 125",
        "reference: per_step.gpu_kernel_us on eager_mlp = 150 × 0.9 = 135",
    ]
    assert verdicts["Inductor fuses gelu and mul"]["measured"] == FUSED
    five = verdicts["eager MLP runs five kernels"]
    assert (five["measured"], five["status"], five["error_pct"]) == (3, "wrong", 66.667)  # (5 / 3 - 1) × 100


def test_single_trace_lines_name_no_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = str(write_eager(tmp_path))
    assert main(["check", trace, "--expect", hypotheses(tmp_path, WRONG)]) == 1
    out = capsys.readouterr().out
    assert "WRONG 1. eager MLP runs five kernels: measured 3, error +66.7 % (per_step.kernels == 5)" in out.splitlines()


def test_every_parse_error_in_one_run_with_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        '[[hypothesis]]\nname = "a"\nmetric = "per_step.kernels"\nop = "=="\n\n'
        '[[hypothesis]]\nname = "b"\nkernel = "re:("\n\n'
        '[[hypothesis]]\nname = "c"\nfuses = ["gelu"]\n'
    )
    assert main(["check", str(write_eager(tmp_path)), "--expect", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line.split(": hypothesis")[0] for line in err[:3]] == [
        f"tracelens: error: {path}:1",
        f"tracelens: error: {path}:6",
        f"tracelens: error: {path}:10",
    ]
    assert err[3] == f"tracelens: error: {path}: 3 problems (above); nothing checked"


def test_every_toml_syntax_error_in_one_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        '[[hypothesis]]\nname = "a" x\n\n[[hypothesis]]\nname = "b"\nop = = 3\n\n'
        '[[hypothesis]]\nname = "c"\nmetric = "per_step.kernels"\nop = "=<"\nvalue = 1\n'
    )
    assert main(["check", str(write_eager(tmp_path)), "--expect", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line.split(": not valid TOML")[0] for line in err[:2]] == [
        f"tracelens: error: {path}:2",
        f"tracelens: error: {path}:6",
    ]
    # the valid block is validated too: its problem in the same run
    assert err[2].startswith(f'tracelens: error: {path}:8: hypothesis 3 ("c"): unknown op "=<"')


def test_output_file_and_no_overwrite(tmp_path: Path, traces: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "verdicts.json"
    args = ["check", *traces, "--expect", hypotheses(tmp_path, HELD), "--format", "json", "-o", str(out)]
    assert main(args) == 0
    assert json.loads(out.read_text())["held"] == 3
    assert main(args) == 2
    assert capsys.readouterr().err.endswith(f"tracelens: error: {out} exists; pass --force to overwrite it\n")


def test_unusable_trace_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("not json at all")
    assert main(["check", str(bad), "--expect", hypotheses(tmp_path, WRONG)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracelens: error: ") and len(err.splitlines()) == 1 and "Traceback" not in err


def test_hypothesis_naming_an_absent_trace_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = str(write_compiled(tmp_path))
    assert main(["check", trace, "--expect", hypotheses(tmp_path, WRONG)]) == 2
    assert capsys.readouterr().err == (
        f'tracelens: error: {tmp_path / "h.toml"}: hypothesis 1 ("eager MLP runs five kernels"): '
        'no trace named "eager_mlp" among the traces given (compiled_mlp)\n'
    )


def test_bad_metric_path_exits_2_listing_close_keys(
    tmp_path: Path, traces: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    text = WRONG.replace("per_step.kernels", "per_step.kernel")
    assert main(["check", *traces, "--expect", hypotheses(tmp_path, text)]) == 2
    err = capsys.readouterr().err
    assert err.endswith(
        ': hypothesis 1 ("eager MLP runs five kernels"): metric "per_step.kernel" on eager_mlp: '
        'no key "kernel" in per_step; close: kernels, gpu_kernel_us\n'
    )


def test_step_option(tmp_path: Path, traces: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    text = HELD.replace(
        'op = "=="\nvalue = 2',
        'op = "=="\nvalue = 2\n\n[[hypothesis]]\nname = "one step"\n'
        'trace = "eager_mlp"\nmetric = "steps"\nop = "=="\nvalue = 1',
    )
    assert main(["check", *traces, "--expect", hypotheses(tmp_path, text), "--step", "2"]) == 0
    assert main(["check", *traces, "--expect", hypotheses(tmp_path, text), "--step", "9"]) == 2
    assert "no step 9" in capsys.readouterr().err


def test_every_evaluation_problem_in_one_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Problems found only against the traces (an unknown trace name, a metric path the document lacks) are
    reported together too, each naming its hypothesis."""
    path = tmp_path / "h.toml"
    path.write_text(
        '[[hypothesis]]\nname = "a"\ntrace = "nope"\nmetric = "per_step.kernels"\nop = "=="\nvalue = 1\n\n'
        '[[hypothesis]]\nname = "b"\nmetric = "per_step.kernals"\nop = "=="\nvalue = 1\n\n'
        '[[hypothesis]]\nname = "c"\nmetric = "per_step.kernels"\nop = "=="\nvalue = 3\n'
    )
    assert main(["check", str(write_eager(tmp_path)), "--expect", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3
    assert err[0].startswith(f'tracelens: error: {path}: hypothesis 1 ("a"): no trace named "nope"')
    assert err[1].startswith(f'tracelens: error: {path}: hypothesis 2 ("b"): ')
    assert "kernals" in err[1]
    assert err[2] == f"tracelens: error: {path}: 2 problems (above); nothing checked"
