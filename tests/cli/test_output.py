"""What the commands print for a failure, and the tables."""

from __future__ import annotations

import numpy as np

from mgedump.assertion import assert_equal, value_text
from mgedump.cli.output import case_lines, table
from mgedump.commands.verify import CaseReport
from mgedump.timing import Timing


class _Report:
    verbose = False


def test_a_failure_says_where_and_shows_both_values_plainly():
    expect = np.array([[0.1, 0.0935]], np.float32)
    got = np.array([[0.1, 0.2245]], np.float32)
    case = CaseReport(0, "#rand(0,1)", "-d #1", [assert_equal("prob", expect, got, 1e-4)], Timing(1, [1.0]))
    lines = case_lines(case, _Report())
    assert lines[0] == "test case 0 (-d #1: #rand(0,1))"
    assert lines[1].startswith("AssertEqual: err=0.131") and lines[1].endswith("(name=prob) FAILED (maxerr=0.0001)")
    assert lines[2] == "  worst element at [0, 1]: expect=0.0935, get=0.2245"
    assert lines[3].startswith("  float32[1, 2]: abs err max=0.131")


def test_silent_prints_nothing_for_a_pass():
    case = CaseReport(0, "s", "o", [assert_equal("y", np.ones(2), np.ones(2), 0.0)], Timing(1, [1.0]))
    assert case_lines(case, _Report()) == []


def test_values_as_people_read_them():
    assert value_text(np.float32(0.0935)) == "0.0935"
    assert value_text(np.float16(0.1)) == "0.1"
    assert value_text(np.int64(7)) == "7" and value_text(np.True_) == "True"
    assert value_text("cat") == "'cat'"


def test_table_alignment():
    assert table([["name", "n"], ["a", "10"], ["long name", "2"]]) == [
        "name        n",
        "a          10",
        "long name   2",
    ]
