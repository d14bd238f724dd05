"""What the data tests share: test cases built from ``-d`` texts for given inputs."""

from __future__ import annotations

from mgedump.data import build_cases
from mgedump.data.spec import expand_specs
from mgedump.model.runtime import TensorInfo
from mgedump.options import DataOptions

F32 = TensorInfo("x", "float32", (1, 3, 4, 5))


def build(specs, inputs, **opts):
    """The input arrays of each test case, by input name."""
    cases = build_cases(expand_specs(list(specs)), inputs, DataOptions(**opts))
    return [dict(case.inputs) for case in cases]
