"""The error bound as one value: the ``[OUTPUT:]X`` grammar, each output's bound, the tightest, ``mgerun``'s bounds
over a bundle's, the manifest's JSON, and bad input as one line (exit 2) from the commands."""

from __future__ import annotations

import dataclasses
import json
import zipfile

import pytest

from mgedump.base.bounds import DEFAULT_MAXERR, Bound, Bounds, parse_bounds
from mgedump.base.errors import UsageError
from mgedump.options import PackOptions, VerifyOptions
from tests.support import sample


def test_the_grammar_gives_the_default_and_each_outputs_own():
    bounds = parse_bounds(["1e-2", "prob:0.5", "a:b:0.25", "prob:0.125"], ["p99", "prob:mean"])
    # the name is everything before the last ':'; a name given twice keeps its place and its last value
    assert bounds == Bounds(0.01, "p99", (("prob", 0.125), ("a:b", 0.25)), (("prob", "mean"),))
    assert parse_bounds(["1", "2"]).maxerr == 2.0  # the last given wins
    assert parse_bounds() == Bounds() and parse_bounds(["prob:0"]).maxerr is None  # not given: none


@pytest.mark.parametrize(
    "maxerr, error_stat, message",
    [
        (["abc"], [], "maxerr 'abc': give a number (e.g. 1e-4) or OUTPUT:number (e.g. prob:1e-3)"),
        ([":1e-3"], [], "maxerr ':1e-3': give a number"),
        (["prob:"], [], "maxerr 'prob:': give a number"),
        (["-1"], [], "maxerr must be a finite number >= 0, got -1.0"),
        (["nan"], [], "maxerr must be a finite number >= 0, got nan"),
        (["y:inf"], [], "output_maxerr='y' must be a finite number >= 0, got inf"),
        ([], ["p50"], "error_stat 'p50': give one of max, p99, mean, median, or OUTPUT:STAT"),
        ([], ["prob:worst"], "error_stat 'prob:worst': give one of"),
    ],
)
def test_bad_grammar_is_one_usage_error(maxerr, error_stat, message):
    with pytest.raises(UsageError) as caught:
        parse_bounds(maxerr, error_stat)
    assert message in caught.value.one_line()


def test_each_output_has_its_bound_and_statistic():
    bounds = Bounds(1e-3, "p99", (("prob", 0.5),), (("box", "mean"),))
    assert bounds.of("prob") == Bound(0.5, "p99") and bounds.of("box") == Bound(1e-3, "mean")
    assert bounds.of("other") == bounds.default == Bound(1e-3, "p99")
    assert Bounds().of("prob") == Bound(DEFAULT_MAXERR, "max")  # nothing given: MegEngine's AssertEqual


def test_the_tightest_bound_of_every_output_or_of_some():
    bounds = Bounds(1e-3, output_maxerr=(("prob", 0.5), ("box", 1e-5)))
    assert bounds.tightest() == 1e-5  # the default and every output's own: what a search aims at
    assert bounds.tightest(["prob"]) == 0.5 and bounds.tightest(["prob", "other"]) == 1e-3
    assert bounds.tightest([]) == 1e-3 and Bounds(output_maxerr=(("prob", 1.0),)).tightest() == DEFAULT_MAXERR


def test_bounds_given_later_override_a_bundles():
    bundle = Bounds(1e-4, "p99", (("prob", 0.25), ("box", 0.5)), (("box", "mean"),))
    assert bundle.overridden_by(Bounds()) == bundle
    every = bundle.overridden_by(Bounds(0.5))  # mgerun --maxerr 0.5: every output's, the outputs' own too
    assert every.of("prob") == Bound(0.5, "p99") and every.of("box") == Bound(0.5, "mean")
    one = bundle.overridden_by(Bounds(output_maxerr=(("prob", 0.0),)))  # mgerun --maxerr prob:0: that one only
    assert one.of("prob").maxerr == 0.0 and one.of("box").maxerr == 0.5 and one.default.maxerr == 1e-4
    both = bundle.overridden_by(Bounds(0.5, output_maxerr=(("box", 1.0),)))
    assert (both.of("prob").maxerr, both.of("box").maxerr) == (0.5, 1.0)
    stat = bundle.overridden_by(Bounds(error_stat="max"))
    assert stat.of("box").stat == "max" and stat.of("prob").maxerr == 0.25


def test_the_json_is_the_manifests_and_reads_back():
    assert Bounds().to_json() == {"maxerr": DEFAULT_MAXERR}  # the default, and nothing not given
    full = Bounds(0.01, "p99", (("prob", 0.5),), (("prob", "mean"),))
    document = full.to_json()
    assert document == {
        "maxerr": 0.01,
        "output_maxerr": {"prob": 0.5},
        "error_stat": "p99",
        "output_error_stat": {"prob": "mean"},
    }
    assert Bounds.from_json(json.loads(json.dumps(document))) == full
    assert Bounds.from_json({"maxerr": 0.01}).to_json() == {"maxerr": 0.01}
    assert Bounds(error_stat="max").to_json() == {"maxerr": DEFAULT_MAXERR}  # max is the absent key
    assert full.text() == "0.01 of the p99 error (prob:0.5)" and Bounds(0.5).text() == "0.5"


def test_a_bundles_manifest_holds_the_bounds_packed(tmp_path, mgedump):
    cnn = sample("cnn.onnx")
    out = tmp_path / "b.mgetest"
    assert mgedump(cnn.path, "-d", cnn.spec, "--maxerr", "prob:1e-2", "--error-stat", "p99", "-o", out).code == 0
    with zipfile.ZipFile(out) as bundle:
        assertion = json.loads(bundle.read("mgedump.json"))["assertion"]
    assert assertion == {"enabled": True, "verbose": True, "maxerr": 1e-4, "output_maxerr": {"prob": 1e-2},
                         "error_stat": "p99"}  # fmt: skip
    assert Bounds.from_json(assertion) == Bounds(1e-4, "p99", (("prob", 1e-2),))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Bounds(maxerr=-1), "maxerr must be a finite number >= 0, got -1"),
        (lambda: Bounds(error_stat="p50"), "error_stat must be one of max, p99, mean, median, got 'p50'"),
        (lambda: Bounds.given(output_maxerr={"a": "x"}), "output_maxerr='a' must be a finite number >= 0, got x"),
        (lambda: Bounds.given(output_error_stat={"a": "p1"}), "output_error_stat='a' must be one of"),
        (lambda: PackOptions(output_maxerr="abc"), "output_maxerr takes output names and bounds, got 'a'"),
        (lambda: PackOptions(bounds=0.5), "bounds takes a Bounds, got float"),
        (lambda: VerifyOptions(maxerr=float("inf")), "maxerr must be a finite number >= 0, got inf"),
    ],
)
def test_a_bad_bound_is_refused_when_made(make, message):
    with pytest.raises(UsageError) as caught:
        make()
    assert message in caught.value.one_line()


def test_the_options_keywords_make_their_bounds():
    options = PackOptions(maxerr=0.5, output_maxerr={"prob": 1e-3}, error_stat="p99", output_error_stat=[("y", "mean")])
    assert options.bounds == Bounds(0.5, "p99", (("prob", 1e-3),), (("y", "mean"),))
    assert (options.maxerr, options.error_stat) == (0.5, "p99")  # read back from the bounds
    assert dataclasses.replace(options, silent=True).bounds == options.bounds
    assert PackOptions(bounds=Bounds(0.5), maxerr=0.25).bounds.maxerr == 0.25  # a keyword given replaces its part
    run = VerifyOptions(output_maxerr={"prob": 0.0})
    assert run.bounds == Bounds(output_maxerr=(("prob", 0.0),)) and run.maxerr is None
    assert dataclasses.replace(run, iters=3).bounds == run.bounds


@pytest.mark.parametrize(
    "command, args, needle",
    [
        ("mgedump", ["--maxerr", "abc"], "mgedump: error: --maxerr 'abc': give a number (e.g. 1e-4) or OUTPUT:"),
        ("mgedump", ["--maxerr", "prob:-1"], "mgedump: error: --maxerr prob: must be a finite number >= 0, got -1.0"),
        ("mgedump", ["--error-stat", "p50"], "mgedump: error: --error-stat 'p50': give one of max, p99, mean, median"),
        ("mgedump", ["--maxerr", "nope:1"], "mgedump: error: --maxerr nope: names no output of the model"),
        ("mgerun", ["--maxerr", "1e-3:"], "mgerun: error: --maxerr '1e-3:': give a number"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, mgedump, mgerun, command, args, needle):
    cnn = sample("cnn.onnx")
    if command == "mgedump":
        result = mgedump(cnn.path, "-d", cnn.spec, *args, "-o", tmp_path / "o.mgetest")
    else:
        result = mgerun(cnn.path, "-d", cnn.spec, *args)
    assert result.code == 2 and result.err.strip().splitlines() == [result.err.strip()] and needle in result.err
    assert not (tmp_path / "o.mgetest").exists()


def test_mgerun_refuses_a_bound_for_an_output_the_bundle_lacks(tmp_path, mgedump, mgerun):
    cnn = sample("cnn.onnx")
    assert mgedump(cnn.path, "-d", cnn.spec, "-o", tmp_path / "c.mgetest").code == 0
    result = mgerun(tmp_path / "c.mgetest", "--maxerr", "nope:0.1")
    assert result.code == 2 and result.err.strip() == (
        "mgerun: error: --maxerr nope: names no output of the model (its outputs: 'prob')"
    )
