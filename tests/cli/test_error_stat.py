"""A bound on another statistic than the largest error (docs/assertion.md#error-statistics): ``mgerun`` says the
statistic and the largest error beside every ``err``, every report records them, and ``mgerun --error-stat``
chooses the statistic (``--error-stat max`` takes back the largest-error check)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from tests.shared import made_once
from tests.support import rewrite_bundle, run_ok, run_script

LINE = "AssertEqual median: err=0 (max 10) (name=y)"


def _model(folder: Path) -> Path:
    """x [1,1000] -> y = x * 3 (values in [0, 3]: an element moved by 10 has an error of 10 / max(y, 1))."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "k"], ["y"])],
        "thousand",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1000])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1000])],
        initializer=[helper.make_tensor("k", TensorProto.FLOAT, [], [3.0])],
    )
    path = folder / "thousand.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    return path


def _moved(folder: Path) -> None:
    """The issue's bundle: bounded on the median, 400 of its 1000 expected elements moved by 10 (the first is
    below 1, so the largest error is 10 exactly)."""
    from mgedump.bundle.tensorproto import decode, encode

    model = _model(folder)
    packed = folder / "packed.mgetest"
    run_ok("mgedump", model, "-d", "#rand(0,1)", "--error-stat", "median", "-o", packed, "-q")

    def edit(names, manifest, members):
        array, name = decode(members["test_data_set_0/output_0.pb"])
        array = array.copy()
        array[0, 0] = np.float32(0.5)
        array[0, :400] += np.float32(10)
        members["test_data_set_0/output_0.pb"] = encode(array, name)

    rewrite_bundle(packed, folder / "moved.mgetest", edit, fix_hashes=True)


@pytest.fixture(scope="module")
def moved() -> Path:
    return made_once("error-stat: median, 400 of 1000 moved by 10", _moved) / "moved.mgetest"


def test_a_median_bound_passes_but_the_line_shows_the_statistic_and_the_largest_error(moved, tmp_path):
    done = run_script(
        "mgerun", moved, "--maxerr", "1e-4", "--iter", "1", "--warmup-iter", "0",
        "--report-json", tmp_path / "r.json", "--junit-xml", tmp_path / "r.xml", "--report-html", tmp_path / "r.html",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert LINE in done.stdout.splitlines()
    record = json.loads((tmp_path / "r.json").read_text())["bundles"][0]["test_cases"][0]["outputs"][0]
    assert (record["error_stat"], record["err"], record["max_err"]) == ("median", 0.0, 10.0)
    properties = {
        p.get("name").removesuffix(" (moved)"): p.get("value") for p in ET.parse(tmp_path / "r.xml").iter("property")
    }
    assert properties["error_stat"] == "median"
    assert properties["maxerr"] == "0.0001; statistic median"
    page = (tmp_path / "r.html").read_text()
    assert "y median 0 / 0.0001, max 10" in page and "statistic median" in page


def test_error_stat_max_takes_back_the_largest_error_check(moved, tmp_path):
    done = run_script(
        "mgerun", moved, "--error-stat", "max", "--iter", "1", "--warmup-iter", "0",
        "--report-json", tmp_path / "r.json", "--junit-xml", tmp_path / "r.xml",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "AssertEqual: err=10 (name=y) FAILED (maxerr=0.0001)" in done.stdout.splitlines()
    record = json.loads((tmp_path / "r.json").read_text())["bundles"][0]["test_cases"][0]["outputs"][0]
    assert record["error_stat"] == "max" and "max_err" not in record and record["passed"] is False
    properties = {
        p.get("name").removesuffix(" (moved)"): p.get("value") for p in ET.parse(tmp_path / "r.xml").iter("property")
    }
    assert properties["error_stat"] == "max"


def test_error_stat_chooses_one_output_and_the_failure_line_shows_the_largest_error(moved):
    done = run_script("mgerun", moved, "--error-stat", "max", "--error-stat", "y:mean", "--iter", "1")
    assert done.returncode == 1
    # the mean of 400 errors of 10 / max(y + 10... , 1) over 1000 elements, and the largest error beside it
    failed = next(line for line in done.stdout.splitlines() if line.startswith("AssertEqual"))
    assert failed.startswith("AssertEqual mean: err=") and " (max 10) (name=y) FAILED (maxerr=0.0001)" in failed


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("worst", "--error-stat 'worst': give one of max, p99, mean, median, or OUTPUT:STAT"),
        ("nope:p99", "--error-stat nope: names no output of the model (its outputs: 'y')"),
    ],
)
def test_a_bad_statistic_is_one_line_and_exit_2(moved, flag, message):
    done = run_script("mgerun", moved, "--error-stat", flag, "--iter", "1")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"mgerun: error: {message} (see 'mgerun --help')"] or (
        done.stderr.count("\n") == 1 and message in done.stderr
    )
