"""The public API is pinned: adding or removing a name from `tracelens.__all__` must be deliberate."""

from __future__ import annotations

from pathlib import Path

import tracelens

PUBLIC = [
    "AnalysisResults",
    "Hypothesis",
    "HypothesisError",
    "Trace",
    "TracelensError",
    "UnusableTraceError",
    "Verdict",
    "__version__",
    "analyze",
    "check",
    "kernels_frame",
    "launches_frame",
    "load",
    "ops_frame",
    "plot",
    "steps_frame",
]


def test_all_is_pinned_and_sorted() -> None:
    assert tracelens.__all__ == PUBLIC
    assert sorted(tracelens.__all__) == tracelens.__all__


def test_every_public_name_exists_and_is_documented() -> None:
    for name in tracelens.__all__:
        value = getattr(tracelens, name)
        if name != "__version__":
            assert (value.__doc__ or "").strip(), f"tracelens.{name} has no docstring"


def test_package_is_typed() -> None:
    assert (Path(tracelens.__file__).parent / "py.typed").is_file()
