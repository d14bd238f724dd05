"""The mgerun command: options as the user gives them, what it prints, and where."""

from __future__ import annotations

import pytest

from tests.support import SAMPLES, run_script


@pytest.fixture
def bundle(tmp_path, mgedump):
    out = tmp_path / "cnn.mgetest"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-d", SAMPLES / "images" / "cat.png", "-o", out).code == 0
    return out


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--thread", "0"], "--thread must be >= 1"),
        (["--warmup-iter", "-1"], "--warmup-iter must be >= 0"),
        (["--graph-opt", "max"], "'max' is not one of"),
        (["--repeat-sweep", "1,x"], "not a comma-separated list"),
        (["--repeat-sweep", "0"], "batch sizes must be >= 1"),
    ],
)
def test_bad_benchmark_options(bundle, mgerun, args, needle):
    result = mgerun(bundle, *args)
    assert result.code == 2 and needle in result.err and len(result.err.strip().splitlines()) == 1


def test_no_progress_bar_without_a_terminal(bundle):
    result = run_script("mgerun", bundle, "--iter", "200")
    assert result.returncode == 0
    assert "\r" not in result.stderr and "\r" not in result.stdout


@pytest.mark.parametrize(
    "args", [["--seed", "0"], ["--repeat", "1"], ["--resize-input"], ["--input-transform", "data"]]
)
def test_data_options_given_for_a_bundle_are_refused(bundle, mgerun, args):
    """Given, even with their default value: they would silently do nothing for a bundle."""
    result = mgerun(bundle, *args)
    assert result.code == 2
    assert f"{args[0]} applies to a plain model with -d, not a bundle" in result.err


def test_verbose_output_and_the_last_line(bundle, mgerun):
    result = mgerun(bundle, "--iter", "2")
    lines = result.out.splitlines()
    assert lines[0] == "test case 0 (-d #1: #rand(0,1))" and lines[1].startswith("AssertEqual: err=0 (name=prob)")
    assert lines[-1] == "all 2 test case(s) passed"
    assert any(line.startswith("latency (ms)") for line in lines)
    iterations = mgerun(bundle, "--iter", "3", "-v").out
    assert iterations.count("  iterations (ms): ") == 2


def test_a_profiled_latency_table_says_so(bundle, mgerun, tmp_path):
    """onnxruntime's profiler slows every run it records: the table says the figures are profiled, and why."""
    plain = mgerun(bundle, "--iter", "3")
    profiled = mgerun(bundle, "--iter", "3", "--profile", tmp_path / "p.json")
    assert plain.code == profiled.code == 0
    assert "latency (ms)" in plain.out and "profiled" not in plain.out
    assert "latency (ms), profiled" in profiled.out and "--profile was on" in profiled.out
