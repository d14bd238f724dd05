"""Quantiles without numpy (mgedump.base.quantiles) are numpy's to the last bit, and computing them imports nothing."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from mgedump.base.quantiles import median, quantile


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 7, 10, 11, 30, 99, 100, 101, 1000])
def test_quantiles_and_medians_are_numpys_bit_for_bit(count):
    rng = np.random.default_rng(count)
    for scale in (1e-3, 1.0, 37.5, 1e6):
        values = rng.lognormal(0, 1, count) * scale
        if count > 3:
            values[: count // 3] = values[count // 3]  # ties, as timings of a fast model have
        ordered = sorted(values.tolist())
        assert median(ordered) == float(np.median(values))
        for q in (0.0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0):
            assert quantile(ordered, q) == float(np.quantile(values, q)), (count, scale, q)
        for percent in (50, 90, 99):
            assert quantile(ordered, percent / 100) == float(np.percentile(values, percent))


def test_latency_figures_import_no_numpy_ma():
    code = (
        "import sys\n"
        "from mgedump.measure.timing import latency_stats\n"
        "stats = latency_stats([3.0, 1.0, 2.0, 5.0])\n"
        "assert stats['median'] == 2.5 and stats['p90'] > 3.0, stats\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
