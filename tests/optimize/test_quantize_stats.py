"""An int8 candidate's outputs measured: statistics per output, top-1 agreement for score vectors only."""

from __future__ import annotations

import numpy as np
import pytest

from mgedump.optimize.quantize_stats import output_stats


def test_output_stats_top1_only_for_score_vectors():
    want = [[np.array([[0.1, 0.7, 0.2], [0.5, 0.4, 0.1]], np.float32), np.array([3.0], np.float32)]]
    got = [[np.array([[0.1, 0.6, 0.3], [0.3, 0.6, 0.1]], np.float32), np.array([3.5], np.float32)]]
    scores, single = output_stats(["p", "y"], want, got)
    assert scores.top1_agreement == 0.5 and scores.top1_rows == 2 and scores.destroyed
    assert scores.max_abs_err == pytest.approx(0.2) and single.top1_agreement is None
