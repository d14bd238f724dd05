"""The float16 pass (--enable-io16xc32, --enable-ioc16): what the model becomes, and that it always loads and runs."""

from __future__ import annotations

import copy
import zipfile
from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from mgedump.optimize import optimize_file
from mgedump.optimize.float16 import IO16XC32, IOC16, convert, cpu_float16_ops
from mgedump.options import OptimizeOptions
from tests.support import SAMPLES, bundle_manifest, bundled_model, sample


def test_io16xc32_float16_io_and_the_maxerr_hint(tmp_path, mgedump, mgerun):
    spec = "#randn(0,1)"
    failed = mgedump(
        SAMPLES / "cnn.onnx", "-d", spec, "--optimize-for-inference", "--enable-io16xc32", "-o", tmp_path / "f.mgetest"
    )
    assert failed.code == 2 and not (tmp_path / "f.mgetest").exists()
    assert (
        "misses --maxerr 0.0001: err=" in failed.err
        and "(name=prob" in failed.err
        and "--maxerr" in failed.err.split("hint:")[1]
    )
    suggested = float(failed.err.split("hint: --maxerr ")[1].split()[0])
    out = tmp_path / "o.mgetest"
    assert (
        mgedump(
            SAMPLES / "cnn.onnx",
            "-d",
            spec,
            "--optimize-for-inference",
            "--enable-io16xc32",
            "--maxerr",
            "1e-2",
            "-o",
            out,
        ).code
        == 0
    )
    model = bundled_model(out)
    io_types = {v.name: v.type.tensor_type.elem_type for v in list(model.graph.input) + list(model.graph.output)}
    assert io_types == {"data": TensorProto.FLOAT16, "prob": TensorProto.FLOAT16}
    # the first computing operator reads float16 data through a Cast to float32
    first = model.graph.node[0]
    assert first.op_type == "Cast" and first.input[0] == "data"
    assert next(a.i for a in first.attribute if a.name == "to") == TensorProto.FLOAT
    assert [a.name for a in first.attribute] == ["to"]
    manifest = bundle_manifest(out)
    assert manifest["inputs"][0]["dtype"] == "float16"
    with zipfile.ZipFile(out) as zf:
        stored = onnx.TensorProto.FromString(zf.read("test_data_set_0/input_0.pb"))
    assert stored.data_type == TensorProto.FLOAT16
    assert mgerun(out, "--iter", "1").code == 0
    assert (
        suggested <= 1e-2
        and mgedump(
            SAMPLES / "cnn.onnx",
            "-d",
            spec,
            "--optimize-for-inference",
            "--enable-io16xc32",
            "--maxerr",
            str(suggested),
            "-o",
            tmp_path / "s.mgetest",
        ).code
        == 0
    )


def test_ioc16_halves_the_model_and_verifies(tmp_path, mgedump, mgerun):
    source = sample("wide_mlp.onnx").path
    out = tmp_path / "o.mgetest"
    result = mgedump(
        source, "-d", "#rand(0,1)", "--optimize-for-inference", "--enable-ioc16", "--maxerr", "1e-2", "-o", out
    )
    assert result.code == 0, result.err
    model = bundled_model(out)
    with zipfile.ZipFile(out) as zf:
        size = zf.getinfo("model.onnx").file_size
    assert 0.45 < size / source.stat().st_size < 0.6
    assert {init.data_type for init in model.graph.initializer} == {TensorProto.FLOAT16}
    assert model.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    onnx.checker.check_model(model)
    assert mgerun(out, "--iter", "1").code == 0


def test_ioc16_on_a_float16_model_does_not_crash(tmp_path):
    src = sample("half_relu.onnx").path
    options = OptimizeOptions(optimize_for_inference=True, precision="ioc16")
    result = optimize_file(str(src), str(tmp_path / "o.onnx"), options)
    assert "float16 already" in " ".join(result.notes)


def test_a_tensor_read_by_several_nodes_gets_one_cast(tmp_path, mgedump, mgerun):
    """Fan-out with unnamed nodes (what broke onnxruntime's own converter): a valid bundle, every output name unique."""
    out = tmp_path / "o.mgetest"
    fan = sample("fan.onnx")
    packed = mgedump(
        fan.path, "-d", fan.spec, "--optimize-for-inference", "--enable-ioc16", "--maxerr", "1e-2", "-o", out
    )
    assert packed.code == 0, packed.err
    model = bundled_model(out)
    onnx.checker.check_model(model)
    assert max(Counter(o for node in model.graph.node for o in node.output).values()) == 1
    assert mgerun(out, "--iter", "1").code == 0


def _run(model, feeds):
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.mark.parametrize("mode", [IOC16, IO16XC32])
@pytest.mark.parametrize("name", ["if_branches.onnx", "float16/if_float.onnx", "float16/loop_float.onnx"])
def test_control_flow_converts_consistently(name, mode):
    """Subgraphs keep float32 at their boundary and convert inside: onnx.checker passes and onnxruntime runs it."""
    model = onnx.load(str(sample(name).path))
    reference = copy.deepcopy(model)
    convert(model, mode)  # raises if onnx.checker refuses the result
    feeds = {"c": np.array(True), "x": np.random.default_rng(0).uniform(-1, 1, (1, 6) if "float16/" in name else (2,))}
    feeds = {k: v for k, v in feeds.items() if k in {i.name for i in model.graph.input}}
    want = _run(reference, {k: v.astype(np.float32) if v.dtype.kind == "f" else v for k, v in feeds.items()})[0]
    got = _run(model, {k: v.astype(np.float16) if v.dtype.kind == "f" else v for k, v in feeds.items()})[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=1e-2)


def test_a_control_flow_node_kept_float32_keeps_its_subgraphs_whole():
    model = onnx.load(str(sample("float16/if_float.onnx").path))
    convert(model, IO16XC32, {"choose": "test"})
    branch = next(n for n in model.graph.node if n.op_type == "If")
    inside = [n for a in branch.attribute for n in a.g.node]
    casts = [n for n in inside if n.op_type == "Cast"]
    assert casts and all(a.i == TensorProto.FLOAT for n in casts for a in n.attribute)  # reads of the float16 input
    assert {i.data_type for i in model.graph.initializer if i.name == "W"} == {TensorProto.FLOAT}


@pytest.mark.parametrize(
    "values, why",
    [
        (np.array([1.0, 7e4], np.float32), "beyond float16's 65504"),
        (np.array([1e-12], np.float32), "float16 stores them as zero"),
    ],
)
def test_weights_float16_cannot_hold_stay_float32(values, why):
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(values.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(values.shape))],
        [numpy_helper.from_array(values, "w")],
    )
    model = helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 13)])
    result = convert(model, IOC16)
    assert why in result.weights32["w"]
    assert model.graph.initializer[0].data_type == TensorProto.FLOAT
    np.testing.assert_array_equal(numpy_helper.to_array(model.graph.initializer[0]), values)  # not clamped, not flushed


def test_ioc16_computes_in_float16_only_where_onnxruntime_has_kernels():
    """Data movement between the float16 input and output computes in float16 (onnxruntime has those kernels);
    Conv has no float16 kernel on the CPU and never does."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], name="move", perm=[0, 2, 1]),
        helper.make_node("Reshape", ["t", "shape"], ["y"], name="flat"),
    ]
    graph = helper.make_graph(
        nodes,
        "moves",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 24])],
        initializer=[numpy_helper.from_array(np.array([1, 24], np.int64), "shape")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    result = convert(model, IOC16)
    assert set(result.computes16) == {"move", "flat"} and result.casts == 0
    assert {"Transpose", "Reshape"} <= cpu_float16_ops()
    cnn = onnx.load(str(sample("cnn.onnx").path))
    result = convert(cnn, IOC16)
    assert "Conv" not in {n.op_type for n in cnn.graph.node if n.name in result.computes16}
    assert result.weights16 == len(cnn.graph.initializer) - len(result.weights32)


def test_ioc16_islands_between_float32_ops_compute_in_float32():
    """A Relu or a Reshape between two float32 ops would cost a Cast pair each: they join their neighbours, so the
    only Casts of activations are the model's float16 input and output."""
    model = onnx.load(str(sample("cnn.onnx").path))
    result = convert(model, IOC16)
    weights = {init.name for init in model.graph.initializer}
    activation_casts = [n for n in model.graph.node if n.op_type == "Cast" and n.input[0] not in weights]
    assert result.computes16 == [] and len(activation_casts) == 2


@pytest.mark.parametrize("mode", ["ioc16", "io16xc32"])
def test_weights_listed_as_inputs_change_type_with_their_initializer(tmp_path, mode):
    """IR 3 models list every weight as a graph input too: a weight stored float16 must be declared float16 there,
    or onnxruntime refuses the model ("Tensor element type mismatch")."""
    out = tmp_path / "m.onnx"
    optimize_file(
        str(sample("ir3_mlp.onnx").path), str(out), OptimizeOptions(optimize_for_inference=True, precision=mode)
    )
    model = onnx.load(str(out))
    stored = {init.name: init.data_type for init in model.graph.initializer}
    declared = {v.name: v.type.tensor_type.elem_type for v in model.graph.input if v.name in stored}
    assert declared and declared == {name: stored[name] for name in declared}
    if mode == "enable_ioc16":
        assert TensorProto.FLOAT16 in declared.values()
    import onnxruntime as ort

    ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])  # loads
