"""--optimize-for-inference and onnxruntime's fusions and layouts: what the bundled model becomes, and that it verifies."""

from __future__ import annotations

import os
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.support import SAMPLES, bundle_manifest, bundled_model, light_models

# two reference models in the default run (DenseNet's BatchNorms after Concat take the Mul+Add path); all nine with -m full
QUICK_REFERENCE = ("light_densenet121.onnx", "light_inception_v1.onnx")


def _ops(model) -> list[tuple[str, str]]:
    return [(n.domain, n.op_type) for n in model.graph.node]


def test_optimize_folds_batchnorm_and_stays_standard(tmp_path, mgedump, mgerun):
    out = tmp_path / "o.mgetest"
    result = mgedump(SAMPLES / "cnn.onnx", "-d", f"@{SAMPLES / 'testcases.txt'}", "--optimize-for-inference", "-o", out)
    assert result.code == 0, result.err
    model = bundled_model(out)
    assert "BatchNormalization" not in [op for _, op in _ops(model)]
    assert all(domain == "" for domain, _ in _ops(model))
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 13)]
    onnx.checker.check_model(model)
    manifest = bundle_manifest(out)
    assert manifest["optimizations"] == ["optimize-for-inference"] and manifest["requirements"] == []
    assert manifest["model"]["sha256"] != manifest["model"]["source_sha256"]
    assert mgerun(out, "--iter", "1").code == 0


@pytest.mark.parametrize(
    "model",
    [pytest.param(m, marks=() if os.path.basename(m) in QUICK_REFERENCE else pytest.mark.full) for m in light_models()],
    ids=os.path.basename,
)
def test_reference_ir3_models_optimize_and_verify(model, tmp_path, mgedump, mgerun):
    out = tmp_path / "o.mgetest"
    assert mgedump(model, "-d", "#rand(0,1)", "--optimize-for-inference", "-o", out).code == 0
    optimized = bundled_model(out)
    assert optimized.ir_version == 3
    assert "BatchNormalization" not in [op for _, op in _ops(optimized)]
    onnx.checker.check_model(optimized)
    result = mgerun(out, "--iter", "1", "--warmup-iter", "0")
    assert result.code == 0, result.out + result.err


def test_fuse_conv_bias_nonlinearity_is_onnxruntime_only(tmp_path, mgedump, mgerun):
    out = tmp_path / "o.mgetest"
    assert (
        mgedump(
            SAMPLES / "cnn.onnx",
            "-d",
            "#rand(0,1)",
            "--optimize-for-inference",
            "--enable-fuse-conv-bias-nonlinearity",
            "-o",
            out,
        ).code
        == 0
    )
    assert ("com.microsoft", "FusedConv") in _ops(bundled_model(out))
    assert bundle_manifest(out)["requirements"] == ["onnxruntime"]
    assert mgerun(out, "--iter", "1").code == 0


def test_optimize_keeps_weight_only_int8_weights_int8(tmp_path, mgedump, mgerun):
    """Constant folding would turn int8 -> Cast -> Mul into float32 weights, four times the size."""
    source = SAMPLES / "int8" / "weight_only.onnx"
    out = tmp_path / "o.mgetest"
    result = mgedump(source, "-d", "#rand(0,1)", "--optimize-for-inference", "-o", out)
    assert result.code == 0, result.err
    model = bundled_model(out)
    types = {init.name: init.data_type for init in model.graph.initializer}
    assert types["W1_q"] == onnx.TensorProto.INT8 and types["W2_q"] == onnx.TensorProto.INT8
    assert [v.name for v in model.graph.input] == ["x"]
    assert len(model.SerializeToString()) < 1.2 * os.path.getsize(source)
    onnx.checker.check_model(model)
    assert mgerun(out, "--iter", "1").code == 0


def _external_chain(folder, dim: int = 64, layers: int = 3) -> str:
    """A MatMul + Tanh chain on one input row, each weight in its own external data file (a big model's layout)."""
    rng = np.random.default_rng(0)
    weights, nodes, current = [], [], "x"
    for k in range(layers):
        values = (rng.standard_normal((dim, dim)) / np.sqrt(dim)).astype(np.float32)
        weights.append(numpy_helper.from_array(values, f"w{k}"))
        out = "y" if k == layers - 1 else f"t{k}"
        nodes += [helper.make_node("MatMul", [current, f"w{k}"], [f"m{k}"]), helper.make_node("Tanh", [f"m{k}"], [out])]
        current = out
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, dim])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, dim])],
        weights,
    )
    path = str(folder / "chain.onnx")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=False, size_threshold=0)
    return path


@pytest.mark.parametrize(
    "flags",
    [["--optimize-for-inference"], ["--optimize-for-inference", "--enable-ioc16", "--maxerr", "1e-2"]],
    ids=["portable", "ioc16"],
)
def test_a_model_past_protobufs_limit_is_checked_and_saved_by_path(tmp_path, mgedump, mgerun, monkeypatch, flags):
    """Past protobuf's 2 GiB a model in memory cannot be serialised (onnx.checker on it ends in EncodeError): with
    the limit made small, every model is big, and each rewrite checks and saves by path, never in memory."""
    from mgedump.optimize import passes

    model = _external_chain(tmp_path)
    monkeypatch.setattr(passes, "PROTOBUF_LIMIT", 1024)
    checked = []
    real = onnx.checker.check_model

    def by_path_only(model, *args, **kwargs):
        if not isinstance(model, (str, os.PathLike)):
            raise AssertionError("a big model checked in memory")
        checked.append(model)
        return real(model, *args, **kwargs)

    monkeypatch.setattr(onnx.checker, "check_model", by_path_only)
    out = tmp_path / "o.mgetest"
    result = mgedump(model, "-d", "#rand(0,1)", *flags, "-o", out)
    assert result.code == 0, result.err
    assert checked, "the optimised model was checked, by path"
    with zipfile.ZipFile(out) as bundle:
        assert "model.onnx.data" in bundle.namelist(), "saved with its weights outside"
    assert mgerun(out, "--iter", "1").code == 0


@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_int8_of_an_ir3_model_lists_the_quantizers_new_weights_as_inputs(mode, tmp_path, mgedump, mgerun):
    """IR 3 lists every weight as a graph input: the scales and quantized weights int8 adds are listed too, so the
    model passes onnx.checker and packs (dynamic int8 was refused: 'W1_scale in initializer but not in graph
    input')."""
    out = tmp_path / "o.mgetest"
    result = mgedump(
        SAMPLES / "ir3_mlp.onnx", "-d", "#rand(0,1)", "--quantize", "int8", "--quantize-mode", mode, "--maxerr", "10",
        "-o", out,
    )  # fmt: skip
    assert result.code == 0, result.err
    model = bundled_model(out)
    assert model.ir_version == 3
    assert {init.name for init in model.graph.initializer} <= {value.name for value in model.graph.input}
    assert {"MatMulInteger", "DequantizeLinear"} & {op for _, op in _ops(model)}
    onnx.checker.check_model(model)
    assert mgerun(out, "--iter", "1").code == 0
