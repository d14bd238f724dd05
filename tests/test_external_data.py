"""Models that keep their weights in external files pack into one data member and verify."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from mgedump.modelfile import uses_external_data


def _mlp() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.3, name)
               for name, shape in (("W1", (32, 64)), ("W2", (64, 8)))]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "W2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("one_file", [True, False])
def test_external_data_packs_into_one_member_and_verifies(tmp_path, mgedump, mgerun, one_file):
    folder = tmp_path / "model"
    folder.mkdir()
    path = folder / "mlp.onnx"
    onnx.save_model(_mlp(), str(path), save_as_external_data=True, all_tensors_to_one_file=one_file,
                    location="weights.bin", size_threshold=0)
    assert uses_external_data(str(path))
    out = tmp_path / "ext.mgetest"
    assert mgedump(path, "-d", "#rand(0,1)", "-d", "#rand(-1,1)", "-o", out).code == 0
    with zipfile.ZipFile(out) as zf:
        names = zf.namelist()
        manifest = json.loads(zf.read("mgedump.json"))
        zf.extractall(tmp_path / "unzipped")
    assert names[1:3] == ["model.onnx", "model.onnx.data"]
    assert manifest["model"]["external_data"] == "model.onnx.data"
    # unzipped, the model loads on its own with its data beside it
    onnx.checker.check_model(str(tmp_path / "unzipped" / "model.onnx"))
    loaded = onnx.load(str(tmp_path / "unzipped" / "model.onnx"))
    for tensor in loaded.graph.initializer:
        np.testing.assert_array_equal(numpy_helper.to_array(tensor),
                                      numpy_helper.to_array(next(t for t in _mlp().graph.initializer if t.name == tensor.name)))
    result = mgerun(out, "--iter", "1")
    assert result.code == 0, result.out + result.err
    assert result.out.count("AssertEqual: err=0 (name=y)") == 2


def test_embedded_weights_are_not_external(samples):
    assert not uses_external_data(str(samples / "cnn.onnx"))
    assert not uses_external_data(str(samples / "ir3_mlp.onnx"))


def test_unsafe_external_location_is_refused(tmp_path, mgedump):
    model = _mlp()
    for tensor in model.graph.initializer:
        tensor.ClearField("raw_data")
        tensor.ClearField("float_data")
        tensor.data_location = TensorProto.EXTERNAL
        entry = tensor.external_data.add()
        entry.key, entry.value = "location", "../outside.bin"
    path = tmp_path / "evil.onnx"
    path.write_bytes(model.SerializeToString())
    result = mgedump(path, "-d", "#rand(0,1)", "-o", tmp_path / "o.mgetest")
    assert result.code == 2 and "not a safe relative path" in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_optimised_external_data_model_keeps_one_data_member(tmp_path, mgedump, mgerun):
    path = tmp_path / "mlp.onnx"
    onnx.save_model(_mlp(), str(path), save_as_external_data=True, location="w.bin", size_threshold=0)
    out = tmp_path / "o.mgetest"
    assert mgedump(path, "-d", "#rand(0,1)", "--optimize-for-inference", "--enable-ioc16", "--maxerr", "1e-2", "-o", out).code == 0
    with zipfile.ZipFile(out) as zf:
        assert zf.namelist()[1:3] == ["model.onnx", "model.onnx.data"]
        assert zf.getinfo("model.onnx.data").file_size < (32 * 64 + 64 * 8) * 4  # float16 weights
    assert mgerun(out, "--iter", "1").code == 0
