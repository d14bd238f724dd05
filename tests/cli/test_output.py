"""What the commands print for a failure, and the tables."""

from __future__ import annotations

import numpy as np

from mgedump.cli.output import case_lines, table
from mgedump.commands.verify import CaseReport
from mgedump.measure.assertion import assert_equal, value_text
from mgedump.measure.timing import Timing


def test_a_failure_says_where_and_shows_both_values_plainly():
    expect = np.array([[0.1, 0.0935]], np.float32)
    got = np.array([[0.1, 0.2245]], np.float32)
    case = CaseReport(0, "#rand(0,1)", "-d #1", [assert_equal("prob", expect, got, 1e-4)], Timing(1, [1.0]))
    lines = case_lines(case.record())
    assert lines[0] == "test case 0 (-d #1: #rand(0,1))"
    assert lines[1].startswith("AssertEqual: err=0.131") and lines[1].endswith("(name=prob) FAILED (maxerr=0.0001)")
    assert lines[2] == "  worst element at [0, 1]: expect=0.0935, get=0.2245"
    assert lines[3].startswith("  float32[1, 2]: abs err max=0.131")


def test_silent_prints_nothing_for_a_pass():
    case = CaseReport(0, "s", "o", [assert_equal("y", np.ones(2), np.ones(2), 0.0)], Timing(1, [1.0]))
    assert case_lines(case.record()) == []


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


def test_a_failure_on_another_machine_says_so_beside_it():
    expect, got = np.zeros((1, 2), np.float32), np.ones((1, 2), np.float32)
    case = CaseReport(3, "#rand(0,1)", "-d #4", [assert_equal("prob", expect, got, 1e-4)], Timing(1, [1.0]))
    elsewhere = ["packed with onnxruntime 1.17.0, run with 1.20.1"]
    lines = case_lines(case.record(), elsewhere=elsewhere)
    assert (
        lines[-1] == "  where it ran differs from where it was packed: packed with onnxruntime 1.17.0, run with 1.20.1"
    )
    passing = CaseReport(0, "s", "o", [assert_equal("y", np.ones(2), np.ones(2), 0.0)], Timing(1, [1.0]))
    assert case_lines(passing.record(), show_passing=True, elsewhere=elsewhere) == [
        "test case 0 (o: s)",
        "AssertEqual: err=0 (name=y)",
    ]


def test_a_name_that_is_not_clean_prints_escaped(capfd):
    from mgedump.cli.output import say

    say("test case 0 (-d #1: \udcff.npy) \x1b[31mred\u202e")
    assert capfd.readouterr().out == "test case 0 (-d #1: \\xff.npy) \\x1b[31mred\\u202e\n"
