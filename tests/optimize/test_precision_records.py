"""A precision variant is what its record and name say, read off the operators of the model made: a Gemm kept
float under dynamic int8 is float; a double-only model has no float16 variant; a model quantized already has no
int8 variant, and says so; two variants that are one model are one variant."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime import quantization

from mgedump.optimize.precisions import registry
from mgedump.optimize.quantize_ort import INTEGER_OPS
from tests.support import bundle_manifest, bundled_model

GEMM = "/pair/proj/proj.0/Gemm"


def _save(nodes, inputs, outputs, weights, path, opset=17) -> str:
    graph = helper.make_graph(nodes, "g", inputs, outputs, weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return str(path)


def _gemm_model(path) -> str:
    """A Gemm (transB, bias) whose int8 error dominates, then a small MatMul: funcnet's pair projection."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array((rng.standard_normal((32, 16)) * 10).astype(np.float32), "W1"),
        numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "B1"),
        numpy_helper.from_array((rng.standard_normal((32, 8)) * 0.1).astype(np.float32), "W2"),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "B1"], ["h"], name=GEMM, transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "W2"], ["y"], name="mm"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    return _save(nodes, [x], [y], weights, path)


def _double_model(path) -> str:
    """A double in, double out model (a tree ensemble's types): nothing in it is float32."""
    weight = numpy_helper.from_array(np.random.default_rng(1).standard_normal((4, 3)), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"), helper.make_node("Relu", ["m"], ["y"])]
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [1, 3])
    return _save(nodes, [x], [y], [weight], path)


def _qdq_model(tmp_path) -> str:
    """A float model quantized by onnxruntime (QDQ), as a model shipped int8 already is."""
    rng = np.random.default_rng(2)
    weights = [
        numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((16, 4)).astype(np.float32), "W2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["m"], name="/attention/MatMul"),
        helper.make_node("Relu", ["m"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "W2"], ["y"], name="mm2"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    float_path = _save(nodes, [x], [y], weights, tmp_path / "float.onnx")

    class Reader(quantization.CalibrationDataReader):
        def __init__(self) -> None:
            self.cases = iter([{"x": rng.random((1, 16)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.cases, None)

    out = str(tmp_path / "qdq.onnx")
    quantization.quantize_static(float_path, out, Reader(), quant_format=quantization.QuantFormat.QDQ)
    return out


def _ops(model) -> list[str]:
    return [node.op_type for node in model.graph.node]


def test_a_gemm_kept_float_under_dynamic_int8_is_float(tmp_path, mgedump, mgerun):
    """The dynamic quantizer renames a Gemm to <name>_MatMul before it reads its exclusion list: the Gemm named by
    --fp32-nodes is float in the model made, and the record says only what the model holds."""
    model = _gemm_model(tmp_path / "gemm.onnx")
    out = tmp_path / "o.mgetest"
    args = ["-d", "#rand(0,1)", "-d", "#rand(0,1)", "--quantize", "int8", "--quantize-mode", "dynamic"]
    result = mgedump(model, *args, "--fp32-nodes", "Gemm", "--maxerr", "1", "-o", out)
    assert result.code == 0, result.err
    assert "1 node(s) quantized, 1 kept float" in result.err
    made = bundled_model(out)
    integer = [node.name for node in made.graph.node if node.op_type in INTEGER_OPS]
    assert integer == ["mm_quant"], "only the MatMul computes in integers"
    record = bundle_manifest(out)["int8"]
    assert [entry["node"] for entry in record["kept_float32"]] == [GEMM] and record["quantized_nodes"] == 1
    assert mgerun(out, "--iter", "1").code == 0


def test_every_node_float_is_float_so_a_bound_float32_meets_is_met(tmp_path, mgedump):
    """With the Gemm float the search's last candidate is the float model: a bound only int8 misses is never
    refused as "even with every node float the model misses"."""
    model = _gemm_model(tmp_path / "gemm.onnx")
    out = tmp_path / "o.mgetest"
    args = ["-d", "#rand(0,1)", "--quantize", "int8", "--quantize-mode", "dynamic", "--fp32-nodes", "Gemm"]
    result = mgedump(model, *args, "--maxerr", "1e-5", "-o", out)
    assert result.code != 0 and not out.exists()
    assert "even with every node float" not in result.err
    assert "int8 would have too little left to speed up" in result.err


def test_a_double_model_has_no_float16_variant(tmp_path, mgedump):
    """ioc16 and io16xc32 of a model with nothing float32 would be the model under other names: left out, saying
    so; asked alone, refused with the same line."""
    model = _double_model(tmp_path / "double.onnx")
    out = tmp_path / "o.mgetest"
    result = mgedump(model, "-d", "#rand(0,1)", "--variants", "auto", "-o", out)
    assert result.code == 0, result.err
    assert [v["name"] for v in bundle_manifest(out)["variants"]] == ["fp32"]
    for mode in ("ioc16", "io16xc32"):
        assert (
            f"variant {mode} left out: --enable-{mode} converts nothing: no tensor of the model made is float16 "
            "(the model's floating-point tensors are double)" in result.err
        )
    assert "every node converted" not in result.err
    alone = mgedump(
        model, "-d", "#rand(0,1)", "--enable-ioc16", "--optimize-for-inference", "-o", out.with_suffix(".b")
    )
    assert alone.code != 0 and "--enable-ioc16 converts nothing" in alone.err


def test_int8_on_a_model_quantized_already_says_so(tmp_path, mgedump):
    """Dynamic int8 adds no integer op to a QDQ model, and static int8 would quantize its scales again: both say
    the model is quantized already (no count of nodes the quantizer merely renamed, no raw key)."""
    model = _qdq_model(tmp_path)
    out = tmp_path / "o.mgetest"
    dynamic = mgedump(model, "-d", "#rand(0,1)", "--quantize", "int8", "--quantize-mode", "dynamic", "-o", out)
    assert dynamic.code != 0 and not out.exists()
    assert (
        "the model is quantized already (DequantizeLinear, QuantizeLinear); onnxruntime's quantizer adds no "
        "integer operator to it" in dynamic.err
    )
    static = mgedump(model, "-d", "#rand(0,1)", "--quantize", "int8", "-o", out)
    assert static.code == 2 and not out.exists()
    assert "--quantize int8 (static): the model is quantized already" in static.err
    assert "_scale'" not in static.err and "node(s) quantized" not in static.err
    both = mgedump(model, "-d", "#rand(0,1)", "--variants", "fp32,int8,int8-dynamic", "-o", out)
    assert both.code == 0 and [v["name"] for v in bundle_manifest(out)["variants"]] == ["fp32"]
    assert both.err.count("the model is quantized already") == 2


def test_two_variants_that_are_one_model_are_one_variant(tmp_path, mgedump, monkeypatch):
    """A variant byte for byte another's is left out naming it (two float16 modes made alike here)."""
    from mgedump.optimize.precisions import float16_modes

    alike = dataclasses.replace(registry()["io16xc32"], make=float16_modes.float16_maker("ioc16"))
    monkeypatch.setitem(registry(), "io16xc32", alike)
    model = _gemm_model(tmp_path / "gemm.onnx")
    out = tmp_path / "o.mgetest"
    result = mgedump(model, "-d", "#rand(0,1)", "--variants", "fp32,ioc16,io16xc32", "--maxerr", "1", "-o", out)
    assert result.code == 0, result.err
    assert "variant io16xc32 left out: its model is byte for byte variant ioc16's" in result.err
    assert [v["name"] for v in bundle_manifest(out)["variants"]] == ["fp32", "ioc16"]


@pytest.mark.parametrize("mode", ["int8", "ioc16"])
def test_a_record_that_misdescribes_its_model_is_refused(tmp_path, mgedump, monkeypatch, mode):
    """The pipeline checks each mode's record against the model made: a record claiming a quantized node the
    model computes float (or a float16 model with none) is refused, not packed."""
    entry = registry()[mode]
    real = entry.make

    def lying(job):
        made = real(job)
        if mode == "int8":
            made.record["quantized_nodes"] = 0
        else:
            made.model = job.model  # the float32 model under the float16 record
        return made

    monkeypatch.setitem(registry(), mode, dataclasses.replace(entry, make=lying))
    out = tmp_path / "o.mgetest"
    flag = ["--quantize", "int8"] if mode == "int8" else ["--enable-ioc16", "--optimize-for-inference"]
    result = mgedump(_gemm_model(tmp_path / "gemm.onnx"), "-d", "#rand(0,1)", *flag, "--maxerr", "1", "-o", out)
    assert result.code != 0 and not out.exists()
    assert "the model made is not what its record says" in result.err


def test_the_gemm_model_runs_as_built(tmp_path):
    session = ort.InferenceSession(_gemm_model(tmp_path / "g.onnx"), providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": np.ones((1, 16), np.float32)})[0].shape == (1, 8)
    assert _ops(onnx.load(_qdq_model(tmp_path))).count("DequantizeLinear") >= 2
