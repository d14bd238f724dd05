"""--optimize-for-inference and the --enable-* flags, the pack-time self-check, --discard-var-name and strip info."""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import SAMPLES, light_models
from mgedump import optimize as optimize_module


def _bundled_model(bundle) -> onnx.ModelProto:
    with zipfile.ZipFile(bundle) as zf:
        return onnx.load_from_string(zf.read("model.onnx"))


def _manifest(bundle) -> dict:
    with zipfile.ZipFile(bundle) as zf:
        return json.loads(zf.read("mgedump.json"))


def _ops(model) -> list[tuple[str, str]]:
    return [(n.domain, n.op_type) for n in model.graph.node]


def test_optimize_folds_batchnorm_and_stays_standard(tmp_path, mgedump, mgerun):
    out = tmp_path / "o.mgetest"
    result = mgedump(SAMPLES / "cnn.onnx", "-d", f"@{SAMPLES / 'testcases.txt'}", "--optimize-for-inference", "-o", out)
    assert result.code == 0, result.err
    model = _bundled_model(out)
    assert "BatchNormalization" not in [op for _, op in _ops(model)]
    assert all(domain == "" for domain, _ in _ops(model))
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 13)]
    onnx.checker.check_model(model)
    manifest = _manifest(out)
    assert manifest["optimizations"] == ["optimize-for-inference"] and manifest["requirements"] == []
    assert manifest["model"]["sha256"] != manifest["model"]["source_sha256"]
    assert mgerun(out, "--iter", "1").code == 0


@pytest.mark.parametrize("model", light_models(), ids=os.path.basename)
def test_reference_ir3_models_optimize_and_verify(model, tmp_path, mgedump, mgerun):
    out = tmp_path / "o.mgetest"
    assert mgedump(model, "-d", "#rand(0,1)", "--optimize-for-inference", "-o", out).code == 0
    optimized = _bundled_model(out)
    assert optimized.ir_version == 3
    assert "BatchNormalization" not in [op for _, op in _ops(optimized)]
    onnx.checker.check_model(optimized)
    result = mgerun(out, "--iter", "1", "--warmup-iter", "0")
    assert result.code == 0, result.out + result.err


def test_io16xc32_float16_io_and_the_maxerr_hint(tmp_path, mgedump, mgerun):
    spec = "#randn(0,1)"
    failed = mgedump(SAMPLES / "cnn.onnx", "-d", spec, "--optimize-for-inference", "--enable-io16xc32", "-o", tmp_path / "f.mgetest")
    assert failed.code == 2 and not (tmp_path / "f.mgetest").exists()
    assert "misses --maxerr 0.0001: err=" in failed.err and "(name=prob" in failed.err and "--maxerr" in failed.err.split("hint:")[1]
    suggested = float(failed.err.split("hint: --maxerr ")[1].split()[0])
    out = tmp_path / "o.mgetest"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", spec, "--optimize-for-inference", "--enable-io16xc32", "--maxerr", "1e-2", "-o", out).code == 0
    model = _bundled_model(out)
    io_types = {v.name: v.type.tensor_type.elem_type for v in list(model.graph.input) + list(model.graph.output)}
    assert io_types == {"data": TensorProto.FLOAT16, "prob": TensorProto.FLOAT16}
    # the first computing operator reads float16 data through a Cast to float32
    first = model.graph.node[0]
    assert first.op_type == "Cast" and first.input[0] == "data"
    assert next(a.i for a in first.attribute if a.name == "to") == TensorProto.FLOAT
    assert [a.name for a in first.attribute] == ["to"]
    manifest = _manifest(out)
    assert manifest["inputs"][0]["dtype"] == "float16"
    with zipfile.ZipFile(out) as zf:
        stored = onnx.TensorProto.FromString(zf.read("test_data_set_0/input_0.pb"))
    assert stored.data_type == TensorProto.FLOAT16
    assert mgerun(out, "--iter", "1").code == 0
    assert suggested <= 1e-2 and mgedump(SAMPLES / "cnn.onnx", "-d", spec, "--optimize-for-inference", "--enable-io16xc32",
                                          "--maxerr", str(suggested), "-o", tmp_path / "s.mgetest").code == 0


def _wide_mlp(path):
    rng = np.random.default_rng(1)
    weights = [numpy_helper.from_array((rng.standard_normal(s) * 0.05).astype(np.float32), n)
               for n, s in (("W1", (256, 256)), ("W2", (256, 16)))]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "W2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_ioc16_halves_the_model_and_verifies(tmp_path, mgedump, mgerun):
    source = _wide_mlp(tmp_path / "mlp.onnx")
    out = tmp_path / "o.mgetest"
    result = mgedump(source, "-d", "#rand(0,1)", "--optimize-for-inference", "--enable-ioc16", "--maxerr", "1e-2", "-o", out)
    assert result.code == 0, result.err
    model = _bundled_model(out)
    with zipfile.ZipFile(out) as zf:
        size = zf.getinfo("model.onnx").file_size
    assert 0.45 < size / source.stat().st_size < 0.6
    assert {init.data_type for init in model.graph.initializer} == {TensorProto.FLOAT16}
    assert model.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    onnx.checker.check_model(model)
    assert mgerun(out, "--iter", "1").code == 0


def test_ioc16_on_a_float16_model_does_not_crash(tmp_path):
    src = tmp_path / "half.onnx"
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), src)
    options = optimize_module.OptimizeOptions.from_flags(optimize_for_inference=True, enable_ioc16=True)
    result = optimize_module.optimize_file(str(src), str(tmp_path / "o.onnx"), options)
    assert "float16 already" in " ".join(result.notes)


def test_fuse_conv_bias_nonlinearity_is_onnxruntime_only(tmp_path, mgedump, mgerun):
    out = tmp_path / "o.mgetest"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--optimize-for-inference", "--enable-fuse-conv-bias-nonlinearity", "-o", out).code == 0
    assert ("com.microsoft", "FusedConv") in _ops(_bundled_model(out))
    assert _manifest(out)["requirements"] == ["onnxruntime"]
    assert mgerun(out, "--iter", "1").code == 0


@pytest.mark.skipif(not optimize_module.cpu_has_avx2(), reason="NCHWc needs an AVX2 CPU")
def test_nchw88_gives_nchwc_nodes_on_avx2(tmp_path, mgedump, mgerun):
    out = tmp_path / "o.mgetest"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--optimize-for-inference", "--enable-nchw88", "-o", out).code == 0
    assert any(domain == "com.microsoft.nchwc" for domain, _ in _ops(_bundled_model(out)))
    assert _manifest(out)["requirements"] == ["onnxruntime", "onnxruntime-cpu", "x86-avx2"]
    assert mgerun(out, "--iter", "1").code == 0
    other = [p for p in __import__("onnxruntime").get_available_providers() if p != "CPUExecutionProvider"]
    if other:
        refused = mgerun(out, "--provider", other[0])
        assert refused.code == 2 and "CPU-only" in refused.err


def test_nchw88_without_avx2_is_a_clear_error_at_pack_and_at_run(tmp_path, mgedump, mgerun, monkeypatch):
    if optimize_module.cpu_has_avx2():
        out = tmp_path / "o.mgetest"
        assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--optimize-for-inference", "--enable-nchw88", "-o", out).code == 0
    monkeypatch.setattr(optimize_module, "cpu_has_avx2", lambda: False)
    packed = mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--optimize-for-inference", "--enable-nchw88", "-o", tmp_path / "x.mgetest")
    assert packed.code == 2 and "this CPU has no AVX2" in packed.err
    if (tmp_path / "o.mgetest").exists():
        ran = mgerun(tmp_path / "o.mgetest", "--iter", "1")
        assert ran.code == 2 and "no AVX2" in ran.err and len(ran.err.strip().splitlines()) == 1


@pytest.mark.parametrize("flag, target", [
    ("--enable-hwcd4", "OpenCL"), ("--enalbe-hwcd4", "OpenCL"), ("--enable-nchw4", "CUDA"), ("--enable-nchw44", "ARM"),
    ("--enable-nchw44-dot", "dot-product"), ("--enable-nchw32", "CUDA"), ("--enable-chwn4", "CUDA"),
    ("--enable-fuse-conv-bias-with-z", "CUDA"),
])
def test_flags_for_megengine_kernels_are_refused(flag, target, tmp_path, mgedump):
    result = mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--optimize-for-inference", flag, "-o", tmp_path / "o")
    assert result.code == 2 and target in result.err and "refuses" in result.err
    assert len(result.err.strip().splitlines()) == 1


@pytest.mark.parametrize("flag", ["--enable-io16xc32", "--enable-ioc16", "--enable-fuse-conv-bias-nonlinearity", "--enable-nchw88", "--enable-hwcd4"])
def test_enable_flags_need_optimize_for_inference(flag, tmp_path, mgedump):
    result = mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", flag, "-o", tmp_path / "o")
    assert result.code == 2 and "needs --optimize-for-inference" in result.err or "refuses" in result.err


def test_io16xc32_and_ioc16_exclude_each_other(tmp_path, mgedump):
    result = mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--optimize-for-inference", "--enable-io16xc32", "--enable-ioc16", "-o", tmp_path / "o")
    assert result.code == 2 and "exclude each other" in result.err


def _names(model) -> set[str]:
    graph = model.graph
    io = {v.name for v in graph.input} - {i.name for i in graph.initializer} | {v.name for v in graph.output}
    names = {i.name for i in graph.initializer} | {n.name for n in graph.node if n.name}
    names |= {o for n in graph.node for o in n.output}
    return names - io


def test_discard_var_name_leaves_no_source_name(tmp_path, mgedump, mgerun):
    source = onnx.load(str(SAMPLES / "cnn.onnx"))
    secret = _names(source)
    assert len(secret) > 10
    for flags in ([], ["--optimize-for-inference"]):
        out = tmp_path / "o.mgetest"
        assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--discard-var-name", *flags, "-o", out).code == 0
        model = _bundled_model(out)
        assert not (_names(model) & secret)
        with zipfile.ZipFile(out) as zf:
            raw = zf.read("model.onnx")
        assert not [name for name in secret if name.encode() in raw]
        assert [v.name for v in model.graph.input] == ["data"] and [v.name for v in model.graph.output] == ["prob"]
        assert mgerun(out, "--iter", "1").code == 0


def test_strip_info_lists_exactly_the_bundled_operators(tmp_path, mgedump):
    out = tmp_path / "o.mgetest"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--optimize-for-inference", "--enable-fuse-conv-bias-nonlinearity",
                   "--output-strip-info", "-o", out).code == 0
    model = _bundled_model(out)
    info = json.loads((tmp_path / "o.mgetest.json").read_text())
    opsets = {(o.domain or "ai.onnx"): o.version for o in model.opset_import}
    want = sorted({(n.domain or "ai.onnx", opsets[n.domain or "ai.onnx"], n.op_type) for n in model.graph.node})
    assert [(o["domain"], o["opset"], o["op_type"]) for o in info["operators"]] == want
    assert info["models"][0]["sha256"] == _manifest(out)["model"]["sha256"]
    assert info["dtypes"] == ["float32"]
    config = (tmp_path / "o.mgetest.required_operators.config").read_text().splitlines()
    lines = [line for line in config if not line.startswith("#")]
    assert lines == ["ai.onnx;13;Flatten,Gemm,GlobalAveragePool,MaxPool,Softmax", "com.microsoft;1;FusedConv"]


def test_strip_info_counts_subgraph_ops_and_appends(tmp_path):
    from mgedump.stripinfo import write_strip_info

    then = helper.make_graph([helper.make_node("Neg", ["x"], ["a"])], "then", [], [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2])])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["b"])], "else", [], [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    path = tmp_path / "if.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    info = write_strip_info(str(path), str(tmp_path / "s.json"))
    assert [o["op_type"] for o in info["operators"]] == ["Abs", "If", "Neg"]
    merged = write_strip_info(str(SAMPLES / "gray.onnx"), str(tmp_path / "s.json"), append=True)
    assert len(merged["models"]) == 2
    assert {o["op_type"] for o in merged["operators"]} >= {"Abs", "If", "Neg", "Conv", "Relu"}
    assert "ai.onnx;13;Abs,Conv,Flatten,GlobalAveragePool,If,Neg,Relu" in (tmp_path / "s.required_operators.config").read_text()


def test_ioc16_repairs_the_converters_duplicate_casts(tmp_path, mgedump, mgerun):
    """A tensor read by two float32-only nodes gets two same-named Casts from the converter; the result must be valid."""
    from collections import Counter

    from onnxruntime.transformers.float16 import convert_float_to_float16

    rng = np.random.default_rng(0)
    weight = lambda name, shape: numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)  # noqa: E731
    nodes = [helper.make_node("Conv", ["x", "W0"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p", "W1"], ["a"]), helper.make_node("Conv", ["p", "W2"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["y"])]
    graph = helper.make_graph(nodes, "fan", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [weight("W0", (4, 3, 3, 3)), weight("W1", (4, 4, 1, 1)), weight("W2", (4, 4, 1, 1))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, tmp_path / "fan.onnx")
    raw = convert_float_to_float16(model, keep_io_types=False, op_block_list=["Conv", "MaxPool", "Add"], force_fp16_initializers=True)
    assert any(n > 1 for n in Counter(o for node in raw.graph.node for o in node.output).values())  # the converter's bug
    out = tmp_path / "o.mgetest"
    assert mgedump(tmp_path / "fan.onnx", "-d", "#rand(0,1)", "--optimize-for-inference", "--enable-ioc16", "--maxerr", "1e-2", "-o", out).code == 0
    onnx.checker.check_model(_bundled_model(out))
    assert mgerun(out, "--iter", "1").code == 0
