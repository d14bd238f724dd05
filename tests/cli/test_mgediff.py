"""The mgediff command: what it prints, its exit codes, its report, and bad input."""

from __future__ import annotations

import json

import onnx
import pytest

from mgedump.optimize.float16 import convert
from tests.support import run_script, sample


@pytest.fixture
def naive16(tmp_path):
    """overflow_chain.onnx converted to float16 with nothing kept float32."""
    model = onnx.load(str(sample("float16/overflow_chain.onnx").path))
    convert(model, "io16xc32")
    path = tmp_path / "naive16.onnx"
    onnx.save(model, path)
    return path


def test_float32_against_naive_float16_names_the_overflow(naive16, tmp_path, mgediff):
    report = tmp_path / "diff.json"
    result = mgediff(sample("float16/overflow_chain.onnx").path, naive16, "-d", "#rand(5,10)", "--report-json", report)
    assert result.code == 1, result.err
    lines = result.out.splitlines()
    assert lines[2] == "maxerr 0.01 (float16 on one side: float16's precision)"
    assert lines[3].startswith("test case 0: 5 tensors matched, 0 in A only,") and lines[3].endswith("FAILED")
    assert lines[4].startswith("  first divergence: node 'amplify' (MatMul), output 'big' err inf")
    assert "float16 overflow: B holds an infinity where A is finite" in lines[4]
    assert lines[-1] == "FAILED: 1 of 1 test case(s) have a tensor above maxerr"
    data = json.loads(report.read_text())
    first = data["test_cases"][0]["first_divergence"]
    assert data["exit_code"] == 1 and first["node"] == "amplify" and first["output"]["err"] == "inf"


def test_a_model_against_itself_is_clean(mgediff):
    cnn = sample("cnn.onnx")
    result = mgediff(cnn.path, cnn.path, "-d", cnn.spec, "-d", "#rand(0,2)")
    assert result.code == 0, result.err
    assert result.out.splitlines()[-1] == "all 2 test case(s) within maxerr"


def test_two_io_dumps_of_the_same_run_are_clean(tmp_path, mgedump, mgerun, mgediff):
    cnn = sample("cnn.onnx")
    assert mgedump(cnn.path, "-d", cnn.spec, "-d", cnn.spec, "-o", tmp_path / "b.mgetest", "-q").code == 0
    for folder in ("one", "two"):
        assert mgerun(tmp_path / "b.mgetest", "--iter", "1", "--io-dump", tmp_path / folder).code == 0
    result = mgediff(tmp_path / "one", tmp_path / "two")
    assert result.code == 0, result.out + result.err
    assert "test case 1: 12 tensors matched" in result.out


def test_a_bundle_gives_its_test_cases_to_a_model(tmp_path, mgedump, mgediff):
    cnn = sample("cnn.onnx")
    bundle = tmp_path / "b.mgetest"
    flags = ["--optimize-for-inference", "--enable-io16xc32", "--maxerr", "1e-2"]
    assert mgedump(cnn.path, "-d", cnn.spec, "-d", "#rand(0,3)", *flags, "-o", bundle, "-q").code == 0
    result = mgediff(cnn.path, bundle, "-v")
    assert result.code == 0, result.out + result.err
    assert "test case 1:" in result.out and "in B only: " in result.out  # the Casts float16 added


def test_the_console_script(tmp_path):
    cnn = sample("cnn.onnx")
    done = run_script("mgediff", cnn.path, cnn.path, "-d", cnn.spec)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "args, needle",
    [
        (lambda t: [t / "nope", sample("cnn.onnx").path], "does not exist"),
        (lambda t: [sample("cnn.onnx").path, sample("cnn.onnx").path], "give test data with -d"),
        (lambda t: [sample("cnn.onnx").path, sample("half_relu.onnx").path, "-d", "#rand(0,1)"], "takes input(s) 'x'"),
        (
            lambda t: [sample("cnn.onnx").path, sample("cnn.onnx").path, "-d", "#rand(0,1)", "--maxerr", "-1"],
            "--maxerr must be",
        ),
    ],
)
def test_bad_input(tmp_path, mgediff, args, needle):
    result = mgediff(*args(tmp_path))
    assert result.code == 2 and needle in result.err and len(result.err.strip().splitlines()) == 1


def _drop_key(case, key):
    import json

    index = json.loads((case / "index.json").read_text())
    for entry in index["tensors"]:
        del entry[key]
    (case / "index.json").write_text(json.dumps(index))


@pytest.mark.parametrize(
    "damage, needle",
    [
        (lambda case: (case / "index.json").unlink(), "no index.json (incomplete dump)"),
        (
            lambda case: (case / "0002.pb").write_bytes((case / "0002.pb").read_bytes()[:-1] + b"\x01"),
            "does not match its sha256",
        ),
        (lambda case: _drop_key(case, "dtype"), "a dtype"),  # was a KeyError traceback
        (lambda case: _drop_key(case, "max"), "needs min, max and mean"),
    ],
)
def test_a_damaged_io_dump_is_bad_input(tmp_path, mgedump, mgerun, mgediff, damage, needle):
    cnn = sample("cnn.onnx")
    assert mgedump(cnn.path, "-d", cnn.spec, "-o", tmp_path / "b.mgetest", "-q").code == 0
    assert mgerun(tmp_path / "b.mgetest", "--iter", "1", "--io-dump", tmp_path / "dump").code == 0
    damage(tmp_path / "dump" / "test_data_set_0")
    result = mgediff(tmp_path / "dump", cnn.path)
    assert result.code == 2 and needle in result.err and len(result.err.strip().splitlines()) == 1
