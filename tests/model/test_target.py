"""--target-runtime: the model written at the newest IR and opsets an older onnxruntime loads, proved on the packing
machine, recorded in the manifest; what the target lacks refused by name."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from mgedump.base.errors import ModelError, UsageError
from mgedump.model.target import RUNTIMES, retarget, runtime_for
from tests.support import bundle_manifest, bundle_member, sample

X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])


def ir10_model() -> onnx.ModelProto:
    """What onnx 1.16+ writes for an opset 21 model: IR 10, which onnxruntime 1.17 refuses."""
    w = numpy_helper.from_array(np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8), "w")
    s = numpy_helper.from_array(np.linspace(0.5, 1.5, 8, dtype=np.float32), "s")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="matmul"),
        helper.make_node("Add", ["h", "s"], ["a"], name="add"),
        helper.make_node("Tanh", ["a"], ["y"], name="tanh"),
    ]
    graph = helper.make_graph(nodes, "ir10", [X], [Y], [w, s])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model


def rms_model() -> onnx.ModelProto:
    """RMSNormalization, an operator of ai.onnx opset 23."""
    s = numpy_helper.from_array(np.ones(8, np.float32), "s")
    graph = helper.make_graph([helper.make_node("RMSNormalization", ["x", "s"], ["y"], name="rms")], "g", [X], [Y], [s])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


def test_the_table_knows_onnxruntime_1_17():
    runtime = runtime_for("1.17.3", "1.32.0")
    assert runtime is not None and (runtime.ir_version, runtime.opset, runtime.ml_opset) == (9, 20, 4)
    assert runtime_for("1.32", "1.32.0") is None  # the installed one proves it as it is
    assert all(a <= b for a, b in zip(list(RUNTIMES.values()), list(RUNTIMES.values())[1:], strict=False))


@pytest.mark.parametrize("text", ["1.5", "x", "1", "1.17a"])
def test_an_unknown_target_is_refused(text):
    """Named as the surface in use names the option: the library's keyword, mgedump's flag."""
    from mgedump.base.naming import spoken_as
    from mgedump.cli import mgedump_command
    from mgedump.cli.flags.spelling import speller

    with pytest.raises(UsageError, match="^target_runtime "):
        runtime_for(text, "1.32.0")
    with spoken_as(speller(mgedump_command)), pytest.raises(UsageError, match="^--target-runtime "):
        runtime_for(text, "1.32.0")


def test_an_ir10_model_is_lowered_to_ir9_and_opset20():
    model = ir10_model()
    changes = retarget(model, runtime_for("1.17", "1.32.0"))
    assert changes == ["ai.onnx opset 21 -> 20", "IR version 10 -> 9"]
    assert model.ir_version == 9 and [(o.domain, o.version) for o in model.opset_import] == [("", 20)]
    onnx.checker.check_model(model)


def test_an_operator_newer_than_the_target_is_refused_by_name():
    with pytest.raises(ModelError, match=r"operator RMSNormalization \(node 'rms'\) is ai.onnx opset 23, newer than "):
        retarget(rms_model(), runtime_for("1.17", "1.32.0"))


def test_an_element_type_the_target_ir_lacks_is_refused():
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E4M3FN)],
        "g",
        [X],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [1, 8])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    with pytest.raises(ModelError, match="element type FLOAT8E4M3FN, which IR version 9 introduced"):
        retarget(model, runtime_for("1.14", "1.32.0"))


def test_an_ml_opset_with_unchanged_operators_is_lowered():
    graph = helper.make_graph(
        [helper.make_node("Normalizer", ["x"], ["y"], domain="ai.onnx.ml", norm="L2")], "g", [X], [Y]
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 5)], ir_version=8
    )
    assert retarget(model, runtime_for("1.17", "1.32.0")) == ["ai.onnx.ml opset 5 -> 4"]


def test_a_model_that_loads_there_is_bundled_as_given(tmp_path, mgedump):
    model = sample("cnn.onnx")
    out = tmp_path / "b.mgetest"
    assert mgedump(model.path, "-d", model.spec, "--target-runtime", "1.17", "-o", out).code == 0
    assert bundle_member(out, "model.onnx") == model.path.read_bytes()
    assert bundle_manifest(out)["target_runtime"] == {
        "onnxruntime": "1.17",
        "ir_version": 9,
        "opset": 20,
        "ml_opset": 4,
        "converted": [],
    }


def test_pack_writes_the_converted_model_and_proves_it(tmp_path, mgedump, mgerun):
    path = tmp_path / "ir10.onnx"
    onnx.save(ir10_model(), path)
    out = tmp_path / "b.mgetest"
    result = mgedump(path, "-d", "#rand(0,1)", "-d", "#rand(-1,1)", "--target-runtime", "1.17", "-o", out)
    assert result.code == 0, result.err
    assert "written for onnxruntime 1.17: ai.onnx opset 21 -> 20, IR version 10 -> 9" in result.err
    bundled = onnx.load_from_string(bundle_member(out, "model.onnx"))
    assert bundled.ir_version == 9 and bundled.opset_import[0].version == 20
    manifest = bundle_manifest(out)
    assert manifest["target_runtime"]["converted"] == ["ai.onnx opset 21 -> 20", "IR version 10 -> 9"]
    assert manifest["model"]["sha256"] != manifest["model"]["source_sha256"]
    assert mgerun(out, "--iter", "1").code == 0


def test_pack_refuses_an_operator_the_target_lacks(tmp_path, mgedump):
    path = tmp_path / "rms.onnx"
    onnx.save(rms_model(), path)
    out = tmp_path / "b.mgetest"
    result = mgedump(path, "-d", "#rand(0,1)", "--target-runtime", "1.17", "-o", out)
    assert result.code == 2
    assert result.err.splitlines()[0].startswith("mgedump: error: operator RMSNormalization (node 'rms') is ai.onnx")
    assert "Traceback" not in result.err and not out.exists()
