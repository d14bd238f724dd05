"""User errors: one line, a hint where the fix is not obvious, and the exit code each kind maps to."""

from __future__ import annotations

import pytest

from mgedump.base import errors


def test_one_line_joins_whitespace_and_adds_the_hint():
    error = errors.MgeError("bad\n  thing", hint="do  this")
    assert error.one_line() == "bad thing (hint: do this)" == str(error)
    assert errors.MgeError("plain").one_line() == "plain"


@pytest.mark.parametrize(
    "kind",
    [
        errors.UsageError,
        errors.SpecError,
        errors.DataError,
        errors.ModelError,
        errors.BundleError,
        errors.OutputError,
        errors.OptimizeError,
    ],
)
def test_bad_usage_or_input_is_exit_2(kind):
    assert issubclass(kind, errors.MgeError) and kind("x").exit_code == errors.EXIT_USAGE == 2


def test_a_run_failure_is_exit_1():
    assert errors.RunError("x").exit_code == errors.EXIT_FAILED == 1


def test_exit_codes():
    assert (errors.EXIT_OK, errors.EXIT_FAILED, errors.EXIT_USAGE, errors.EXIT_INTERRUPTED) == (0, 1, 2, 130)
