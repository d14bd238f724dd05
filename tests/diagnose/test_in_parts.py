"""Running with every tensor exposed: parts under a memory budget give the dump one run gives; sizes estimated."""

from __future__ import annotations

import numpy as np
import onnx

from mgedump.diagnose.in_parts import estimate_sizes, partition
from mgedump.diagnose.iodump import IoDump
from tests.diagnose.support import CNN, FEEDS, _dump


def test_a_small_budget_runs_in_parts_and_gives_the_same_dump(tmp_path):
    whole = _dump(tmp_path / "whole")
    parts = _dump(tmp_path / "parts", budget=40_000)  # conv1's output alone is 32 KiB
    assert whole.runner.parts_run == 1 and parts.runner.parts_run >= 4
    a, b = IoDump(str(tmp_path / "whole")).cases[0], IoDump(str(tmp_path / "parts")).cases[0]
    assert a.names == b.names
    for name in a.names:  # other outputs exposed, other kernels chosen: equal to float32's rounding
        np.testing.assert_allclose(a.tensor(name), b.tensor(name), rtol=1e-5, atol=1e-6)
    again = _dump(tmp_path / "again", budget=40_000)
    assert again.runner.parts_run == parts.runner.parts_run
    for name in a.names:  # the same budget gives the same parts and the same bytes
        np.testing.assert_array_equal(IoDump(str(tmp_path / "again")).cases[0].tensor(name), b.tensor(name))


def test_partition_and_estimates():
    sizes = estimate_sizes(onnx.load(str(CNN)), FEEDS)
    assert sizes["conv1"] == 8 * 32 * 32 * 4 and sizes["prob"] == 10 * 4
    assert partition(["a", "b", "c"], {"a": 5, "b": 5, "c": 5}, 10) == [["a", "b"], ["c"]]
    assert partition(["big"], {"big": 100}, 10) == [["big"]]  # one tensor at least, whatever the budget
    assert partition(["a", "u"], {"a": 8}, 10) == [["a"], ["u"]]  # unknown sizes count as the largest known
