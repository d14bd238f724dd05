"""Many bundles in one call: each reported, the worst exit code, one JSON and one JUnit report for all."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from junitparser import Error, Failure, JUnitXml

from tests.support import SAMPLES, rewrite_bundle, run_ok


def _failing(good: Path, out: Path) -> Path:
    """A bundle whose expected output is off by 0.5: its one test case fails its assertion."""
    from mgedump.bundle.tensorproto import decode, encode

    def shift(names, manifest, members):
        array, name = decode(members["test_data_set_0/output_0.pb"])
        members["test_data_set_0/output_0.pb"] = encode(array + np.float32(0.5), name)

    return rewrite_bundle(good, out, shift, fix_hashes=True)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    """A folder of three bundles: one passes (two test cases), one fails, one is not a bundle at all."""
    folder = tmp_path_factory.mktemp("zoo")
    run_ok(
        "mgedump", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-d", "#rand(0,2)", "-o", folder / "a_good.mgetest", "-q"
    )
    scratch = tmp_path_factory.mktemp("scratch")
    run_ok("mgedump", SAMPLES / "gray.onnx", "-d", "#rand(0,255)", "-o", scratch / "gray.mgetest", "-q")
    _failing(scratch / "gray.mgetest", folder / "b_fails.mgetest")
    (folder / "c_malformed.mgetest").write_text("not a zip archive\n")
    (folder / "notes.txt").write_text("not a bundle: a folder stands for its *.mgetest files only\n")
    return folder


def test_a_folder_of_three_bundles(zoo, tmp_path, mgerun):
    report, junit = tmp_path / "r.json", tmp_path / "junit.xml"
    result = mgerun(zoo, "--iter", "2", "--report-json", report, "--junit-xml", junit)
    assert result.code == 2  # the worst: the malformed bundle
    lines = result.out.splitlines()
    assert [line for line in lines if line.startswith("== ")] == [
        f"== {zoo / name}" for name in ("a_good.mgetest", "b_fails.mgetest", "c_malformed.mgetest")
    ]
    assert f"{zoo / 'a_good.mgetest'}: all 2 test case(s) passed" in lines
    assert f"{zoo / 'b_fails.mgetest'}: FAILED: 1 of 1 test case(s) failed" in lines
    assert any(line.startswith(f"{zoo / 'c_malformed.mgetest'}: ERROR (exit 2): not a bundle") for line in lines)
    assert lines[-1].startswith("3 bundle(s): 1 passed, 1 failed, 1 could not run; peak memory ")
    assert lines[-1].endswith("; exit 2")
    assert result.err.strip().splitlines() == [
        f"mgerun: error: {zoo / 'c_malformed.mgetest'}: not a bundle (corrupt or not a zip archive: "
        "File is not a zip file)"
    ]

    document = json.loads(report.read_text())
    assert document["report_version"] == 2 and document["exit_code"] == 2 and document["passed"] is False
    assert [b["exit_code"] for b in document["bundles"]] == [0, 1, 2]
    assert [len(b["test_cases"]) for b in document["bundles"]] == [2, 1, 0]
    assert document["bundles"][2]["error"].endswith(
        "not a bundle (corrupt or not a zip archive: File is not a zip file)"
    )
    assert document["peak_rss_mib"] > 0

    xml = JUnitXml.fromfile(str(junit))
    suites = {suite.name: suite for suite in xml}
    assert sorted(suites) == ["a_good", "b_fails", "c_malformed"]
    cases = [(suite.name, case) for suite in xml for case in suite]
    assert len(cases) == 4
    outcomes = {(s, c.name): [type(r).__name__ for r in c.result] for s, c in cases}
    assert outcomes == {
        ("a_good", "test case 0 (-d #1: #rand(0,1))"): [],
        ("a_good", "test case 1 (-d #2: #rand(0,2))"): [],
        ("b_fails", "test case 0 (-d #1: #rand(0,255))"): ["Failure"],
        ("c_malformed", "bundle"): ["Error"],
    }
    failure = next(r for _, c in cases for r in c.result if isinstance(r, Failure))
    assert failure.message.startswith("AssertEqual: err=0.5 (name=score) FAILED (maxerr=0.0001)")
    assert "worst element at [0, " in failure.text
    error = next(r for _, c in cases for r in c.result if isinstance(r, Error))
    assert "not a bundle" in error.message
    assert all(c.classname == s for s, c in cases)
    assert all(c.time >= 0 for _, c in cases) and suites["a_good"].tests == 2 and suites["b_fails"].failures == 1


def test_a_model_that_fails_to_run_is_a_junit_error(tmp_path, mgerun):
    junit = tmp_path / "junit.xml"
    result = mgerun(SAMPLES / "bad" / "gather_index.onnx", "-d", "#rand(0,100)", "--iter", "1", "--junit-xml", junit)
    assert result.code == 1
    (case,) = [case for suite in JUnitXml.fromfile(str(junit)) for case in suite]
    (error,) = case.result
    assert isinstance(error, Error) and "indices element out of data bounds" in error.message


def test_per_bundle_outputs_are_named_after_the_bundles(zoo, tmp_path, mgerun):
    good = zoo / "a_good.mgetest"
    other = tmp_path / "other.mgetest"
    other.write_bytes(good.read_bytes())
    result = mgerun(good, other, "--iter", "1", "--profile", tmp_path / "prof.json", "--bin-out-dump", tmp_path / "out")
    assert result.code == 0, result.err
    assert sorted(p.name for p in tmp_path.glob("prof.*.json")) == ["prof.a_good.json", "prof.other.json"]
    assert (tmp_path / "out" / "other" / "test_data_set_1" / "prob.npy").exists()
    assert json.loads((tmp_path / "prof.other.json").read_text())  # onnxruntime's own profile


def test_two_bundles_of_one_name_with_per_bundle_outputs_are_refused(zoo, tmp_path, mgerun):
    (tmp_path / "x").mkdir()
    twin = tmp_path / "x" / "a_good.mgetest"
    twin.write_bytes((zoo / "a_good.mgetest").read_bytes())
    result = mgerun(zoo / "a_good.mgetest", twin, "--profile", tmp_path / "p.json")
    assert result.code == 2 and "are both called 'a_good'" in result.err
    assert mgerun(zoo / "a_good.mgetest", twin, "--iter", "1").code == 0  # without such outputs, fine


@pytest.mark.parametrize(
    "args, needle",
    [
        (lambda z, t: [z / "a_good.mgetest", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)"], "one plain model"),
        (lambda z, t: [z / "a_good.mgetest", SAMPLES / "cnn.onnx"], "is a plain model: run it alone"),
        (lambda z, t: [(t / "empty").mkdir() or t / "empty"], "holds no *.mgetest bundle"),
        (lambda z, t: [], "give a bundle"),
        (lambda z, t: [z, "--concurrency", "0"], "--concurrency must be >= 1"),
        (lambda z, t: [z, "--duration", "-1"], "--duration must be a finite number of seconds >= 0"),
        (lambda z, t: [z, "--duration", "nan"], "--duration must be a finite number of seconds >= 0"),
        (lambda z, t: [z, "--junit-xml", t / "no" / "such" / "j.xml"], "output folder does not exist"),
        (lambda z, t: [z, "--report-html", t], "is a folder"),
        (lambda z, t: [z, "--junit-xml", z / "a_good.mgetest"], "is the input"),
    ],
)
def test_bad_input_for_many_bundles(zoo, tmp_path, mgerun, args, needle):
    result = mgerun(*args(zoo, tmp_path))
    assert result.code == 2, result.out + result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines
    assert result.out == ""  # refused before any bundle ran


def test_library_verify_all(zoo):
    from mgedump.commands.verify_many import verify_all
    from mgedump.options import VerifyOptions

    summary = verify_all([str(zoo / "a_good.mgetest"), str(zoo / "b_fails.mgetest")], VerifyOptions(iters=1))
    assert summary.exit_code == 1 and [r.exit_code for r in summary.results] == [0, 1]
    with pytest.raises(Exception, match="not a bundle"):  # one bundle alone raises, as verify does
        verify_all([str(zoo / "c_malformed.mgetest")])


_MANY = """
import json, sys
from mgedump import VerifyOptions, verify_all
summary = verify_all([sys.argv[1]], VerifyOptions(iters=1, warmup=0))
print(json.dumps([r.peak_rss_mib for r in summary.results]))
"""


def test_memory_does_not_grow_with_the_number_of_bundles(tmp_path):
    """The report keeps each bundle's statistics, not its tensors: ten bundles with an 8 MiB output each leave the
    peak memory where two left it (it grew by both tensors of every bundle before)."""
    import shutil
    import subprocess
    import sys

    import onnx
    from onnx import TensorProto, helper

    from tests.support import run_ok

    n = 2 << 20  # 8 MiB of float32
    graph = helper.make_graph(
        [helper.make_node("Expand", ["x", "shape"], ["y"])],
        "wide",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
        [helper.make_tensor("shape", TensorProto.INT64, [1], [n])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "wide.onnx")
    folder = tmp_path / "bundles"
    folder.mkdir()
    run_ok("mgedump", tmp_path / "wide.onnx", "-d", "#rand(0,1)", "-o", folder / "b00.mgetest", "-q")
    for k in range(1, 10):
        shutil.copyfile(folder / "b00.mgetest", folder / f"b{k:02d}.mgetest")
    done = subprocess.run([sys.executable, "-c", _MANY, str(folder)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    peaks = json.loads(done.stdout)
    assert len(peaks) == 10
    assert peaks[-1] - peaks[1] < 3 * 8, peaks  # MiB: less than three outputs' worth over eight more bundles
