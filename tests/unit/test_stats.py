"""`stats.median` is `np.median` bit for bit, without its start-up cost."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tracelens.model.stats import distinct_ints, median, percentiles

FINITE = st.floats(min_value=-1e300, max_value=1e300)


@given(st.lists(st.one_of(FINITE, st.integers(min_value=-(2**52), max_value=2**52)), min_size=1, max_size=60))
def test_equals_numpy_median(values: list[float]) -> None:
    assert median(values) == float(np.median(np.asarray(values, dtype=np.float64)))


def test_even_count_means_the_two_middle_values_and_odd_takes_the_middle() -> None:
    assert median([5, 1, 3, 100]) == 4.0
    assert median(np.array([7.5, 1.0, 3.0])) == 3.0
    assert median([0.1, 0.2]) == (0.1 + 0.2) / 2


def test_empty_or_nan_gives_nan() -> None:
    assert math.isnan(median([]))
    assert math.isnan(median([1.0, float("nan"), 2.0]))


def test_does_not_import_numpy_ma() -> None:
    probe = (
        "import sys, numpy as np; from tracelens.model import stats; stats.median([3, 1, 2]); "
        "stats.percentiles(np.arange(9.0), [50]); stats.distinct_ints(np.arange(3)); print('numpy.ma' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


@given(
    st.lists(st.one_of(FINITE, st.integers(min_value=-(2**52), max_value=2**52)), min_size=1, max_size=60),
    st.lists(st.floats(min_value=0, max_value=100), min_size=1, max_size=4),
)
def test_percentiles_equal_numpy(values: list[float], percents: list[float]) -> None:
    array = np.asarray(values, dtype=np.float64)
    expected = np.percentile(array, percents)
    got = percentiles(array, percents)
    assert [v if not math.isnan(v) else "nan" for v in got] == [
        float(v) if not math.isnan(v) else "nan" for v in expected
    ]


def test_percentiles_interpolate_between_neighbours() -> None:
    assert percentiles(np.array([10.0, 0.0, 20.0, 30.0]), [50, 90, 100, 0]) == [15.0, 27.0, 30.0, 0.0]
    assert all(math.isnan(v) for v in percentiles(np.zeros(0), [50, 90]))


def test_distinct_ints_counts_small_codes_and_sorts_big_or_negative_ones() -> None:
    assert distinct_ints(np.array([3, 1, 3, 0], dtype=np.int32)).tolist() == [0, 1, 3]
    assert distinct_ints(np.array([2**40, -5, 2**40])).tolist() == [-5, 2**40]
    assert distinct_ints(np.zeros(0, dtype=np.int64)).tolist() == []
