"""Casts to an input's dtype."""

from __future__ import annotations

import logging

import numpy as np

from mgedump.data.casts import cast_to
from mgedump.model.runtime import TensorInfo


def test_cast_to_is_quiet_when_lossless(caplog):
    with caplog.at_level(logging.WARNING, logger="mgedump"):
        out = cast_to(np.arange(5, dtype=np.uint8), TensorInfo("x", "float32", (5,)), "data")
    assert out.dtype == np.float32 and not caplog.records
