"""Hypotheses files: every malformed case exits 2 with one `tracelens: error:` line naming the entry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_check_builders import write_compiled, write_eager
from tracelens.cli import main
from tracelens.hypotheses import parse_hypotheses
from tracelens.hypotheses.parse import HypothesisError, Reference, Subject, Tolerance

GOOD = """
[[hypothesis]]
name = "compiled MLP launches four kernels per step"
metric = "per_step.kernels"
op = "=="
value = 4
"""

MALFORMED = [
    (
        '[[hypothesis]]\nname = "a"\nmetric = "per_step.kernels"\nop = "=<"\nvalue = 4\n',
        'h.toml: hypothesis 1 ("a"): unknown op "=<"; use one of == != < <= > >= contains not-contains',
    ),
    (
        '[[hypothesis]]\nname = "a"\nmetrc = "per_step.kernels"\nop = "=="\nvalue = 4\n',
        "h.toml: hypothesis 1 (\"a\"): unknown key 'metrc'; did you mean 'metric'?",
    ),
    (
        '[[hypothesis]]\nmetric = "per_step.kernels"\nop = "=="\nvalue = 4\n',
        'h.toml: hypothesis 1: needs a name = "..." (a non-empty string)',
    ),
    (
        '[[hypothesis]]\nname = "a"\nop = "=="\nvalue = 4\n',
        'h.toml: hypothesis 1 ("a"): needs exactly one of metric, kernel, cpu_op, api_call, fuses (found none)',
    ),
    (
        '[[hypothesis]]\nname = "a"\nmetric = "x"\nkernel = "y"\nop = "=="\nvalue = 4\n',
        'h.toml: hypothesis 1 ("a"): needs exactly one of metric, kernel, cpu_op, api_call, fuses '
        "(found metric, kernel)",
    ),
    (
        '[[hypothesis]]\nname = "a"\nmetric = "per_step.kernels"\nvalue = 4\n',
        'h.toml: hypothesis 1 ("a"): needs an op (one of == != < <= > >= contains not-contains)',
    ),
    (
        '[[hypothesis]]\nname = "a"\nmetric = "per_step.kernels"\nop = "=="\n',
        'h.toml: hypothesis 1 ("a"): op "==" needs exactly one of value = ... or than = {...}',
    ),
    (
        '[[hypothesis]]\nname = "a"\nmetric = "per_step.kernels"\nop = "<"\nvalue = "four"\n',
        'h.toml: hypothesis 1 ("a"): op "<" needs a number as value, not \'four\'',
    ),
    (
        '[[hypothesis]]\nname = "a"\nmetric = "per_step.kernels"\nop = "<"\nvalue = 4\ntolerance = 1\n',
        'h.toml: hypothesis 1 ("a"): tolerance applies to "==" and "!=" only',
    ),
    (
        '[[hypothesis]]\nname = "a"\nmetric = "per_step.kernels"\nop = "=="\nvalue = 4\ntolerance = "x%"\n',
        "h.toml: hypothesis 1 (\"a\"): tolerance must be a number, not 'x'",
    ),
    (
        '[[hypothesis]]\nname = "a"\nmetric = "per_step.kernels"\nop = "=="\nvalue = 4\ntolerance = -1\n',
        'h.toml: hypothesis 1 ("a"): tolerance must be a finite number ≥ 0, not -1',
    ),
    (
        '[[hypothesis]]\nname = "a"\nmetric = "per_step.kernels"\nop = "=="\nvalue = 4\n'
        "tolerance = { rel = 1, ab = 2 }\n",
        "h.toml: hypothesis 1 (\"a\"): tolerance: unknown key 'ab'; did you mean 'abs'?",
    ),
    (
        '[[hypothesis]]\nname = "a"\nmetric = "per_step.step_us"\nop = "<"\nthan = "eager"\n',
        'h.toml: hypothesis 1 ("a"): than must be a table, e.g. than = { trace = "eager_mlp" }',
    ),
    (
        '[[hypothesis]]\nname = "a"\nmetric = "per_step.step_us"\nop = "<"\nthan = { trace = "e", factor = 0 }\n',
        'h.toml: hypothesis 1 ("a"): than: factor must be a positive number, not 0',
    ),
    (
        '[[hypothesis]]\nname = "a"\nmetric = "per_step.step_us"\nop = "<"\nthan = { }\n',
        'h.toml: hypothesis 1 ("a"): than compares with itself; name another trace, metric or a factor',
    ),
    (
        '[[hypothesis]]\nname = "a"\nmetric = "per_step.step_us"\nop = "<"\n'
        'than = { trace = "e", kernel = "k", metric = "m" }\n',
        'h.toml: hypothesis 1 ("a"): than: at most one of metric, kernel, cpu_op, api_call (found metric, kernel)',
    ),
    (
        '[[hypothesis]]\nname = "a"\nmetric = "kernels.name"\nop = "contains"\nthan = { trace = "e" }\n',
        'h.toml: hypothesis 1 ("a"): op "contains" compares with a value, not with than',
    ),
    (
        '[[hypothesis]]\nname = "a"\nkernel = "triton_*"\nmeasure = "mean"\n',
        "h.toml: hypothesis 1 (\"a\"): unknown measure 'mean'; did you mean 'mean_us'?",
    ),
    (
        '[[hypothesis]]\nname = "a"\nmetric = "per_step.kernels"\nmeasure = "mean_us"\nop = "=="\nvalue = 1\n',
        'h.toml: hypothesis 1 ("a"): measure applies to kernel, cpu_op and api_call, not to metric',
    ),
    (
        '[[hypothesis]]\nname = "a"\nkernel = "triton_*"\nvalue = 1\n',
        'h.toml: hypothesis 1 ("a"): value/than need an op',
    ),
    (
        '[[hypothesis]]\nname = "a"\nfuses = ["gelu"]\n',
        'h.toml: hypothesis 1 ("a"): fuses needs a list of at least two op names, e.g. fuses = ["gelu", "mul"]',
    ),
    (
        '[[hypothesis]]\nname = "a"\nfuses = ["gelu", "mul"]\nop = "=="\n',
        "h.toml: hypothesis 1 (\"a\"): 'op' does not apply to fuses (it states that one kernel covers the ops)",
    ),
    (
        '[[hypothesis]]\nname = "a"\ntrace = ""\nfuses = ["gelu", "mul"]\n',
        'h.toml: hypothesis 1 ("a"): trace must be a non-empty string',
    ),
    (
        GOOD + GOOD,
        'h.toml: hypothesis 2 ("compiled MLP launches four kernels per step"): duplicate name (also hypothesis 1)',
    ),
    ("[hypothesis]\nname = 1\n", "h.toml: no [[hypothesis]] entries"),
    ("title = 'x'\n", "h.toml: unknown top-level key 'title'; write hypotheses as [[hypothesis]]"),
    ("", "h.toml: no [[hypothesis]] entries"),
    ("[[hypothesis]\n", "h.toml: not valid TOML: "),
    (
        '[[hypothesis]]\nname = "ok"\nkernel = "x"\n[[hypothesis]]\nname = "b"\nmetric = "per_step.kernels"\nop = ">"\n'
        "value = true\n",
        'h.toml: hypothesis 2 ("b"): op ">" needs a number as value, not True',
    ),
]


@pytest.mark.parametrize(("text", "message"), MALFORMED, ids=[m[1][:60] for m in MALFORMED])
def test_malformed_file_exits_2_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    trace = write_eager(tmp_path)
    (tmp_path / "h.toml").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    status = main(["check", str(trace), "--expect", "h.toml"])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1
    if ": hypothesis " in message:  # an entry's problem names the line of its [[hypothesis]] header
        assert re.match(r"tracelens: error: h\.toml:\d+: hypothesis", lines[0])
    assert re.sub(r"^(tracelens: error: h\.toml):\d+:", r"\1:", lines[0]).startswith(f"tracelens: error: {message}")
    if not message.endswith(": "):
        assert re.sub(r"^(tracelens: error: h\.toml):\d+:", r"\1:", lines[0]) == f"tracelens: error: {message}"


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_eager(tmp_path)
    assert main(["check", str(trace), "--expect", str(tmp_path / "nope.toml")]) == 2
    assert capsys.readouterr().err == f"tracelens: error: {tmp_path / 'nope.toml'}: no such file\n"


def test_malformed_file_fails_before_reading_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The hypotheses are validated first: a missing trace is not even looked at."""
    (tmp_path / "h.toml").write_text('[[hypothesis]]\nname = "a"\nkernel = "k"\nop = "~"\nvalue = 1\n')
    assert main(["check", str(tmp_path / "absent.json"), "--expect", str(tmp_path / "h.toml")]) == 2
    assert 'unknown op "~"' in capsys.readouterr().err


def test_expect_is_required(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(write_compiled(tmp_path))]) == 2
    assert "--expect" in capsys.readouterr().err


def test_parsed_entries_are_typed() -> None:
    parsed = parse_hypotheses(
        {
            "hypothesis": [
                {"name": "a", "metric": "per_step.kernels", "op": "==", "value": 4, "tolerance": "5%"},
                {
                    "name": "b",
                    "kernel": "triton_*",
                    "measure": "mean_us",
                    "op": "<",
                    "trace": "liger_mlp",
                    "than": {"trace": "compiled_mlp", "factor": 1.05},
                },
                {"name": "c", "cpu_op": "aten::t", "op": "==", "value": 0, "tolerance": {"abs": 0.5, "rel": 0.1}},
                {"name": "d", "fuses": ["GELU", "mul"], "trace": "x"},
                {"name": "e", "api_call": "cudaOccupancy*"},
                {
                    "name": "f",
                    "cpu_op": "Torch-Compiled*",
                    "measure": "us_per_step",
                    "op": "<",
                    "than": {"trace": "eager", "cpu_op": "aten::linear"},
                },
            ]
        },
        "h.toml",
    )
    a, b, c, d, e, f = parsed
    assert (a.index, a.subject, a.tolerance) == (1, Subject("metric", "per_step.kernels"), Tolerance(relative=0.05))
    assert b.than == Reference("compiled_mlp", Subject("kernel", "triton_*", "mean_us"), 1.05)
    assert b.statement() == "kernel 'triton_*' mean_us < 1.05 × kernel 'triton_*' mean_us of compiled_mlp"
    assert c.tolerance == Tolerance(absolute=0.5, relative=0.1)
    assert (d.subject, d.fuses, d.statement()) == (None, ("gelu", "mul"), "a kernel fuses gelu + mul")
    assert (e.op, e.statement()) == (None, "api_call 'cudaOccupancy*' exists")
    # a `than` naming another pattern keeps the hypothesis's measure
    assert f.than == Reference("eager", Subject("cpu_op", "aten::linear", "us_per_step"), 1.0)


def test_tolerance_is_relative_or_absolute_whichever_is_larger() -> None:
    assert Tolerance(relative=0.05).allows(93.79, 89.4)
    assert not Tolerance(relative=0.04).allows(93.79, 89.4)
    assert Tolerance(absolute=1.0).allows(5.0, 4.0)
    assert not Tolerance(absolute=1.0, relative=0.1).allows(5.5, 4.0)
    assert Tolerance(absolute=1.0, relative=0.5).allows(5.5, 4.0)


def test_a_below_above_tolerance_is_an_asymmetric_range() -> None:
    assert Tolerance(below=10.0, above=5.0).allows(110.0, 120.0)
    assert not Tolerance(below=10.0, above=5.0).allows(109.9, 120.0)
    assert Tolerance(below=10.0, above=5.0).allows(125.0, 120.0)
    assert not Tolerance(below=10.0, above=5.0).allows(125.1, 120.0)
    assert Tolerance(below=10.0, above=5.0).describe() == "−10/+5"
    entry = {"name": "n", "metric": "per_step.step_us", "op": "==", "value": 1}
    for raw, message in (
        ({"below": 1}, "tolerance: give both below and above"),
        ({"below": 1, "above": 2, "rel": 0.1}, "tolerance: "),
        ({"below": -1, "above": 2}, "tolerance.below"),
    ):
        with pytest.raises(HypothesisError) as info:
            parse_hypotheses({"hypothesis": [{**entry, "tolerance": raw}]}, "h.toml")
        assert message in str(info.value), str(info.value)


def test_parse_error_is_a_tracelens_error_with_status_2() -> None:
    with pytest.raises(HypothesisError) as info:
        parse_hypotheses(
            {"hypothesis": [{"name": "compiled is faster", "metric": "per_step.step_us", "op": "=<", "value": 1}]},
            "hypotheses.toml",
        )
    assert str(info.value) == (
        'hypotheses.toml: hypothesis 1 ("compiled is faster"): unknown op "=<"; '
        "use one of == != < <= > >= contains not-contains"
    )
    assert info.value.exit_code == 2
