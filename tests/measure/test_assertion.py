"""The AssertEqual verdict: the metric, and every way an output can fail."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mgedump.measure.assertion import assert_equal


def test_the_metric_is_relative_above_one_and_absolute_below():
    expect = np.array([0.5, 100.0, -3.0], np.float32)
    got = np.array([0.5004, 100.2, -3.0], np.float32)
    check = assert_equal("y", expect, got, 1e-2)
    # |0.5 - 0.5004| / max(min(0.5, 0.5004), 1) = 4e-4; |100 - 100.2| / 100 = 2e-3: the worst is the second
    assert check.passed and check.err == pytest.approx(2e-3, rel=1e-3)
    assert check.worst_index == (1,) and float(check.expect_value) == 100.0


def test_err_above_maxerr_fails_with_where_and_both_values():
    expect = np.zeros((2, 3), np.float32)
    got = expect.copy()
    got[1, 2] = 0.5
    check = assert_equal("y", expect, got, 1e-4)
    assert not check.passed and check.err == 0.5 and check.reason is None
    assert check.worst_index == (1, 2) and float(check.got_value) == 0.5
    assert check.stats["abs_err_max"] == 0.5 and check.stats["shape"] == [2, 3]


def test_err_equal_to_maxerr_passes():
    check = assert_equal("y", np.array([1.0]), np.array([1.5]), 0.5)
    assert check.passed and check.err == 0.5


def test_shape_mismatch_fails():
    check = assert_equal("y", np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32), 1.0)
    assert not check.passed and check.err is None
    assert check.reason == "shape differs: expect [2, 3], get [3, 2]"


def test_dtype_mismatch_fails():
    check = assert_equal("y", np.zeros(3, np.float32), np.zeros(3, np.float16), 1.0)
    assert not check.passed and check.err is None and check.reason == "dtype differs: expect float32, get float16"


def test_empty_outputs_pass():
    check = assert_equal("y", np.zeros((0, 4), np.float32), np.zeros((0, 4), np.float32), 0.0)
    assert check.passed and check.err == 0.0


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.bool_])
def test_integers_and_bools_compare_exactly(dtype):
    expect = np.array([0, 1, 1, 0], dtype)
    assert assert_equal("n", expect, expect.copy(), 0.0).passed
    got = expect.copy()
    got[2] = 0
    check = assert_equal("n", expect, got, 1e9)  # no maxerr makes a differing integer pass
    assert not check.passed and check.err == 1.0 and check.worst_index == (2,)
    assert check.reason == "1 of 4 elements differ (exact comparison)"


def test_strings_compare_exactly():
    expect = np.array(["cat", "dog"], dtype=object)
    assert assert_equal("s", expect, np.array(["cat", "dog"], dtype=object), 0.0).passed
    check = assert_equal("s", expect, np.array(["cat", "cow"], dtype=object), 1.0)
    assert not check.passed and check.worst_index == (1,)


@pytest.mark.parametrize(
    "bad, side",
    [
        (("expect", np.nan), "expect"),
        (("get", np.inf), "get"),
        (("get", -np.inf), "get"),
    ],
)
def test_nan_or_infinity_on_one_side_fails(bad, side):
    expect = np.ones(4, np.float32)
    got = np.ones(4, np.float32)
    where, value = bad
    if where in ("expect", "both"):
        expect[3] = value
    if where in ("get", "both"):
        got[3] = value
    check = assert_equal("y", expect, got, 1e9)
    assert not check.passed and check.err is None
    assert check.reason == f"NaN or infinity in {side} only (1 elements)" and check.worst_index == (3,)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_the_same_non_finite_value_on_both_sides_agrees(value):
    """One metric for the bundle's checks and mgediff: a NaN (or infinity) where both hold it is no error."""
    expect = np.array([1.0, value, 2.0], np.float32)
    check = assert_equal("y", expect, expect.copy(), 0.0)
    assert check.passed and check.err == 0.0
    assert not assert_equal("y", expect, np.array([1.0, 1.0, 2.0], np.float32), 1e9).passed


def test_integers_compare_exactly_whatever_maxerr():
    expect = np.array([1000, 7], np.int64)
    check = assert_equal("y", expect, np.array([1001, 7], np.int64), 0.5)
    assert not check.passed and check.err == pytest.approx(1e-3)
    assert check.reason == "1 of 2 elements differ (exact comparison)" and check.worst_index == (0,)


def test_the_diff_and_the_check_agree_on_one_metric():
    """mgediff's tensor comparison is the same function as AssertEqual's."""
    from mgedump.diagnose.divergence import tensor_err

    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 5)).astype(np.float32)
    b = a + rng.normal(scale=1e-3, size=a.shape).astype(np.float32)
    for ints in (False, True):
        x, y = (np.round(a * 100).astype(np.int32), np.round(b * 100).astype(np.int32)) if ints else (a, b)
        check, t = assert_equal("y", x, y, 1e-3), tensor_err("y", x, y)
        assert check.err == t.err and check.passed == t.passes(1e-3) and check.worst_index == t.index


def test_the_json_form_is_plain():
    check = assert_equal("y", np.array([1.0, np.inf], np.float32), np.array([1.0, 2.0], np.float32), 1.0)
    data = check.to_json()
    assert data["expect"] == "inf" and data["get"] == 2.0 and data["worst_index"] == [1]
    assert type(data["get"]) is float


def test_finite_values_whose_difference_overflows_are_reported_not_a_crash(recwarn):
    """float64 values near the largest: the difference and the mean overflow; the check fails with inf, named,
    and every line formats (it ended in "Unknown format code 'g' for object of type 'str'")."""
    expect = np.array([1.7e308, 1.7e308])
    check = assert_equal("y", expect, np.array([-1.7e308, 1.7e308]), 1e-3)
    assert not check.passed and check.err is None and "overflows" in check.reason
    lines = check.failure_lines()
    assert "abs err max=inf" in lines[-1] and "expect min=1.7e+308" in lines[-1] and "mean=inf" in lines[-1]
    json.dumps(check.to_json(), allow_nan=False)  # strict JSON: no Infinity
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_complex_values_compare_as_complex(recwarn):
    """mgediff of complex tensors: the imaginary part counts (it was dropped with a ComplexWarning)."""
    from mgedump.diagnose.divergence import tensor_err

    a = np.array([1 + 1j, 2 + 0j], np.complex64)
    same_real = np.array([1 + 1.5j, 2 + 0j], np.complex64)
    t = tensor_err("z", a, same_real)
    assert t.err == pytest.approx(0.5 / np.sqrt(2), rel=1e-6) and t.index == (0,)
    assert tensor_err("z", a, a.copy()).err == 0.0
    assert math.isinf(tensor_err("z", a, np.array([np.nan, 2], np.complex64)).err)
    assert not list(recwarn)
