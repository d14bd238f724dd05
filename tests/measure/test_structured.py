"""The AssertEqual metric of sequences, maps and optionals: the structure first, then every tensor inside; the worst
element named by its path."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mgedump.measure.structured import check_value, measure_value


def _probs(*rows) -> list[dict[int, np.ndarray]]:
    return [{k: np.asarray(p, np.float32) for k, p in enumerate(row)} for row in rows]


def test_the_worst_probability_is_named_by_its_path():
    expect = _probs([0.1, 0.9], [0.2, 0.8], [0.3, 0.7])
    got = _probs([0.1, 0.9], [0.2, 0.8], [0.3, 0.75])
    check = check_value("probabilities", expect, got, 1e-4)
    assert not check.passed and check.err == pytest.approx(0.05, rel=1e-5)
    assert check.worst_path == "[2][1]" and check.worst_index is None
    assert check.failure_lines()[1] == "  worst element at [2][1]: expect=0.7, get=0.75"
    assert check_value("probabilities", expect, got, 0.1).passed


@pytest.mark.parametrize(
    ("expect", "got", "reason"),
    [
        (_probs([0.1]), _probs([0.1], [0.2]), "sequence length differs: expect 1, get 2 at the top"),
        (_probs([0.1, 0.9]), _probs([0.1]), "map keys differ: expect 2 keys, get 1; not in both: [1] at [0]"),
        (None, np.ones(2, np.float32), "the optional is empty in expect only at the top"),
        ([np.ones(2)], [{0: np.ones(2)}], "expect holds ndarray, get dict at [0]"),
    ],
)
def test_a_structure_that_differs_is_an_infinite_error(expect, got, reason):
    m = measure_value(expect, got)
    assert math.isinf(m.err) and m.reason == reason
    check = check_value("y", expect, got, 1e9)
    assert not check.passed
    # the reason says where; no "worst element" line with no values (it read "worst element at : expect=None, ...")
    assert check.failure_lines()[0].endswith(reason) and not any("worst element" in x for x in check.failure_lines())


def test_a_tensor_inside_a_sequence_gives_its_own_index():
    expect = [np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)]
    got = [np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)]
    got[1][1, 2] = 0.5
    m = measure_value(expect, got)
    assert m.err == 0.5 and m.path == "[1][1, 2]"


def test_string_keys_are_quoted_and_exact_values_stay_exact():
    expect = {"cat": np.asarray(1), "dog": np.asarray(2)}
    assert measure_value(expect, {"cat": np.asarray(1), "dog": np.asarray(3)}).path == "['dog']"
    m = measure_value(expect, {"cat": np.asarray(1), "dog": np.asarray(3)})
    assert m.exact and not m.passes(1e9)


def test_empty_values_agree():
    assert measure_value([], []).err == 0 and measure_value(None, None).err == 0 and measure_value({}, {}).err == 0
