"""The conformance harness itself: each kind of difference it is meant to catch is caught, in either direction,
and agreement is not mistaken for one (a comparison that cannot fail would prove nothing)."""

from __future__ import annotations

import pytest

from tests.native.harness import Outcome, differences, refusal_class, verdicts

PASSING = """test case 0 (-d #1: #rand(0,1))
AssertEqual: err=1.19209e-07 (name=prob)
latency (ms)  batch  iters    min  median   mean    p90    p99    max  stddev   inf/s  samples/s
test case 0       1      1  0.381   0.381  0.381  0.381  0.381  0.381   0.000  2622.2          -
cold start: session created in 4.0 ms, first run 0.381 ms, peak memory 74 MiB
ran with onnxruntime 1.32.0 on AMD EPYC (x86_64, AVX-512 VNNI), Linux 6.18.44-fc-v669
all 1 test case(s) passed
"""
FAILING = """== b.mgetest [ioc16]
test case 0 (-d #1: #rand(0,1))
AssertEqual: err=0.0171043 (name=prob) FAILED (maxerr=0.0001)
  worst element at [0, 6]: expect=0.2049172, get=0.22202152
  float32[1, 10]: abs err max=0.0171043 mean=0.00744957; expect min=0.0469726 max=0.204917
b.mgetest: FAILED: 1 of 1 test case(s) failed
"""


def test_agreement_is_no_difference():
    timing_differs = PASSING.replace("0.381", "0.120").replace("74 MiB", "3 MiB").replace("onnxruntime 1.32.0", "1.19")
    assert differences(Outcome(0, PASSING, ""), Outcome(0, timing_differs, "")) == []
    assert differences(Outcome(1, FAILING, ""), Outcome(1, FAILING.replace("0.2049172", "0.204917"), "")) == []
    # err printed with more digits by one side: the same to 6 significant digits
    assert differences(Outcome(0, PASSING, ""), Outcome(0, PASSING.replace("1.19209e-07", "1.192093e-07"), "")) == []


@pytest.mark.parametrize(
    "reference, native, what",
    [
        (Outcome(0, PASSING, ""), Outcome(1, PASSING, ""), "exit code"),
        (Outcome(0, PASSING, ""), Outcome(0, PASSING.replace("1.19209e-07", "1.19219e-07"), ""), "verdict"),
        (Outcome(0, PASSING, ""), Outcome(0, PASSING.replace("name=prob", "name=probs"), ""), "verdict"),
        (Outcome(0, PASSING, ""), Outcome(0, PASSING.replace("all 1 test case(s) passed\n", ""), ""), "verdict"),
        (Outcome(1, FAILING, ""), Outcome(1, FAILING.replace("[0, 6]", "[0, 7]"), ""), "verdict"),
        (Outcome(1, FAILING, ""), Outcome(1, FAILING.replace("[ioc16]", "[fp32]"), ""), "verdict"),
        (Outcome(1, FAILING, ""), Outcome(1, FAILING.replace("maxerr=0.0001", "maxerr=0.001"), ""), "verdict"),
        (Outcome(1, FAILING, ""), Outcome(1, FAILING.replace("test case 0 (", "test case 1 ("), ""), "verdict"),
        (
            Outcome(2, "", "mgerun: error: b.mgetest: member 'x' appears twice in the archive\n"),
            Outcome(2, "", "mgerun-native: error: b.mgetest: member 'x' is compressed; bundle members are stored\n"),
            "refusal class",
        ),
        (
            Outcome(2, "", "mgerun: error: b.mgetest: member 'x' appears twice in the archive\n"),
            Outcome(2, "", "mgerun-native: error: b: member 'x' appears twice in the archive\nmore\n"),
            "lines on stderr",
        ),
        (
            Outcome(2, "", "mgerun: error: this bundle's manifest is malformed: environment.cpu: expected an object\n"),
            Outcome(2, "", "mgerun-native: error: this bundle's manifest is malformed: environment: missing\n"),
            "refusal class",
        ),
        (Outcome(2, "", "mgerun: error: --iter must be >= 1, got -5\n"), Outcome(0, PASSING, ""), "exit code"),
        (Outcome(0, PASSING, ""), Outcome(-11, "", ""), "crashed"),
    ],
)
def test_each_difference_is_caught_in_either_direction(reference, native, what):
    assert any(what in problem for problem in differences(reference, native))
    if what != "lines on stderr":  # mgerun's own refusal of a bundle of variants may take a line per variant
        assert any(what in problem or "exit code" in problem for problem in differences(native, reference))


def test_refusals_are_classed_by_mgerun_words_whatever_the_path_and_program():
    assert refusal_class("mgerun: error: /a/b.mgetest: member 'm' is 12 bytes, manifest says 13") == "size"
    assert refusal_class("mgerun-native: error: x.mgetest: member 'n' is 7 bytes, manifest says 1") == "size"
    assert refusal_class("mgerun: error: --thread must be >= 1, got -1") == "option:--thread"
    assert refusal_class("mgerun: error: this bundle's manifest is malformed: members: missing") == "malformed:members"
    assert refusal_class("mgerun: error: something new").startswith("unclassified")


def test_the_verdicts_of_a_run_are_read_line_by_line():
    assert verdicts(FAILING) == [
        ("variant", "ioc16"),
        ("case", 0, "ran"),
        ("assert", "prob", "0.0171043", "FAILED", "0.0001", "", "max", ""),
        ("worst", "[0, 6]"),
        ("closing", "FAILED: 1 of 1 test case(s) failed"),
    ]


def test_a_statistic_and_the_largest_error_beside_it_are_verdicts():
    """A bound on the median hides elements far off; the line says the statistic and the largest error, and an
    implementation that drops either differs."""
    median = "test case 0 (given: x)\nAssertEqual median: err=0 (max 10) (name=out)\nall 1 test case(s) passed\n"
    assert ("assert", "out", "0", "ok", "", "", "median", "10") in verdicts(median)
    silent = median.replace(" (max 10)", "")
    assert differences(Outcome(0, median, ""), Outcome(0, silent, ""))
    assert differences(Outcome(0, median, ""), Outcome(0, median.replace("median", "mean", 1), ""))
