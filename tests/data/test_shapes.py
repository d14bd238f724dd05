"""Shapes: a generator's dims and the model's, symbolic dims set to 1 with a warning, fixed dims enforced."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from mgedump.base.errors import SpecError
from mgedump.model.runtime import TensorInfo
from tests.data.support import F32, build


def test_leading_dims_and_symbolic_dims(caplog):
    sym = TensorInfo("x", "float32", ("N", 3, None, 8))
    with caplog.at_level(logging.WARNING, logger="mgedump"):
        (case,) = build(["#rand(0,1,4,...)"], [sym])
    assert case["x"].shape == (4, 3, 1, 8)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "dim 2" in warnings[0] and "symbolic" in warnings[0]
    (case,) = build(["#const(2,5,3,7,8)"], [sym])
    assert case["x"].shape == (5, 3, 7, 8) and np.all(case["x"] == 2)


def test_full_shape_must_fit_fixed_dims_and_rank():
    with pytest.raises(SpecError, match="rank 4"):
        build(["#rand(0,1,3,4,5)"], [F32])
    with pytest.raises(SpecError, match="fixes it to 3"):
        build(["#rand(0,1,1,2,4,5)"], [F32])
