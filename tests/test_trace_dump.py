"""trace.dump: ONNX models and bundles that the real mgedump/mgerun commands accept (acceptance 2)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import onnx
import pytest

import mgedump.functional as F
from mgedump import tensor
from mgedump.jit import trace
from mgedump.runtime import open_session


def command(name: str) -> str:
    found = shutil.which(name, path=os.path.dirname(sys.executable))
    if not found:
        pytest.fail(f"console script {name} is not installed next to {sys.executable}")
    return found


def run(*argv: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.fixture
def f_exp():
    @trace(capture_as_const=True)
    def f(x):
        return np.exp(x)

    f(tensor(5.0))
    return f


def test_acceptance_dump_then_pack_and_verify_with_the_commands(f_exp, tmp_path):
    f_exp.dump(str(tmp_path / "f.onnx"))
    model = onnx.load(str(tmp_path / "f.onnx"))
    onnx.checker.check_model(model)
    assert model.ir_version == 8 and [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [13]
    packed = run(command("mgedump"), "f.onnx", "-d", "#rand(0,1)", "-o", "f.mgetest", cwd=str(tmp_path))
    assert packed.returncode == 0, packed.stderr
    checked = run(command("mgerun"), "f.mgetest", cwd=str(tmp_path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "AssertEqual: err=" in checked.stdout


def test_acceptance_dump_with_input_data_writes_a_verified_bundle(f_exp, tmp_path):
    out = tmp_path / "f.mgetest"
    f_exp.dump(str(out), input_data=["#rand(0,1)"])
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("mgedump.json"))
    assert [c["spec"] for c in manifest["test_cases"]] == ["#rand(0,1)"]
    assert manifest["optimizations"] == ["optimize-for-inference"]
    checked = run(command("mgerun"), str(out), cwd=str(tmp_path))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_dump_bundle_from_arrays_and_multiple_inputs(tmp_path):
    w = tensor(np.arange(6, dtype=np.float32).reshape(2, 3))

    @trace(capture_as_const=True)
    def f(x, y):
        return {"sum": F.linear(x, w) + y, "max": F.max(x, axis=1)}

    x = np.random.default_rng(0).random((4, 3), dtype=np.float32)
    y = np.ones((4, 2), np.float32)
    f(tensor(x), tensor(y))
    out = tmp_path / "two.mgetest"
    f.dump(str(out), arg_names=["features", "offset"], maxerr=1e-5,
           input_data=[[x, y], {"features": x * 2, "offset": tensor(y)}, "features:#rand(0,1);offset:#const(0)"])
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("mgedump.json"))
        expect = onnx.numpy_helper.to_array(onnx.load_tensor_from_string(zf.read("test_data_set_1/output_0.pb")))
    assert [i["name"] for i in manifest["inputs"]] == ["features", "offset"]
    assert [o["name"] for o in manifest["outputs"]] == ["sum", "max"]
    assert manifest["assertion"]["maxerr"] == 1e-5 and len(manifest["test_cases"]) == 3
    np.testing.assert_allclose(expect, (x * 2) @ w.numpy().T + y, rtol=1e-6)
    checked = run(command("mgerun"), str(out), "--iter", "1", cwd=str(tmp_path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # arrays are recorded by name, not by a temporary path: the same dump gives the same bytes
    assert manifest["test_cases"][0]["spec"] == "features:case0_input0.npy;offset:case0_input1.npy"
    assert manifest["test_cases"][0]["origin"] == "input_data[0]"
    again = tmp_path / "again.mgetest"
    f.dump(str(again), arg_names=["features", "offset"], maxerr=1e-5,
           input_data=[[x, y], {"features": x * 2, "offset": tensor(y)}, "features:#rand(0,1);offset:#const(0)"])
    assert again.read_bytes() == out.read_bytes()
    with pytest.raises(ValueError, match="test case 0 is one array, but the graph has 2 inputs"):
        f.dump(str(tmp_path / "x.mgetest"), input_data=[x])
    with pytest.raises(ValueError, match="unknown input"):
        f.dump(str(tmp_path / "x.mgetest"), input_data=[{"z": x}])
    with pytest.raises(ValueError, match="has 1 array"):
        f.dump(str(tmp_path / "x.mgetest"), input_data=[[x]])


def test_dump_no_assert_strip_info_and_file_objects(f_exp, tmp_path):
    bundle = tmp_path / "f.mgetest"
    strip = tmp_path / "strip.json"
    f_exp.dump(str(bundle), input_data=["#rand(0,1)"], no_assert=True, strip_info_file=str(strip))
    with zipfile.ZipFile(bundle) as zf:
        assert not any(n.endswith("output_0.pb") for n in zf.namelist())
    info = json.loads(strip.read_text())
    assert [op["op_type"] for op in info["operators"]] == ["Exp"]
    assert (tmp_path / "strip.required_operators.config").exists()

    @trace(capture_as_const=True)
    def g(x):
        return F.relu(x) * 2

    g(tensor([1.0, -1.0]))
    g.dump(str(tmp_path / "g.mgetest"), input_data=["#rand(-1,1)"], strip_info_file=str(strip), append_json=True)
    info = json.loads(strip.read_text())
    assert len(info["models"]) == 2 and {"Exp", "Relu", "Mul"} <= {op["op_type"] for op in info["operators"]}

    g.dump(str(tmp_path / "g.onnx"), strip_info_file=str(strip), append_json=True)  # the same model as bundled
    assert [m["model"] for m in json.loads(strip.read_text())["models"]] == ["model.onnx", "g.onnx"]

    buffer = io.BytesIO()
    g.dump(buffer, optimize_for_inference=False)
    model = onnx.load_from_string(buffer.getvalue())
    assert [n.op_type for n in model.graph.node] == ["Relu", "Mul"]
    with pytest.raises(TypeError, match="needs a path"):
        g.dump(io.BytesIO(), input_data=["#rand(0,1)"])


def test_dumped_model_computes_what_the_trace_did(tmp_path):
    @trace(capture_as_const=True)
    def f(x):
        y = F.conv2d(x, tensor(np.ones((2, 1, 3, 3), np.float32) / 9), padding=1)
        return F.softmax(F.flatten(F.avg_pool2d(y, 2), 1), axis=1), F.argmax(y, axis=1)

    x = tensor(np.random.default_rng(1).random((3, 1, 6, 6), dtype=np.float32))
    probs, idx = f(x)
    for optimize in (False, True):
        path = str(tmp_path / f"m{optimize}.onnx")
        f.dump(path, optimize_for_inference=optimize, output_names=["probs", "idx"])
        session = open_session(path)
        got_probs, got_idx = session.run(None, {"x": x.numpy()})
        np.testing.assert_allclose(got_probs, probs.numpy(), rtol=1e-6)
        np.testing.assert_array_equal(got_idx, idx.numpy())


def test_dump_keeps_unused_inputs_and_returns_of_inputs(tmp_path):
    @trace(capture_as_const=True)
    def f(x, unused):
        return x, x * 2, x

    f(tensor([1.0]), tensor([2.0]))
    path = str(tmp_path / "m.onnx")
    f.dump(path, optimize_for_inference=False)
    model = onnx.load(path)
    onnx.checker.check_model(model)
    assert [i.name for i in model.graph.input] == ["x", "unused"]
    session = open_session(path)
    got = session.run(None, {"x": np.array([3.0], np.float32), "unused": np.array([0.0], np.float32)})
    assert [g.tolist() for g in got] == [[3.0], [6.0], [3.0]]
