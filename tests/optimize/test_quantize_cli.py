"""mgedump --quantize int8 from the command line: calibration from -d and from --calibrate, the search, the refusal,
--fp32-nodes, the manifest's int8 entry and requirement, what the pack prints, determinism, and mgerun on the bundle."""

from __future__ import annotations

import json

import jsonschema
import onnx
import pytest

from tests.support import ROOT, SAMPLES, bundle_manifest, bundled_model, sample

CNN = ["-d", "#rand(0,1)", "-d", "#rand(0,1)"]


def _pack(mgedump, tmp_path, model: str, *args, name: str = "o.mgetest"):
    out = tmp_path / name
    return mgedump(SAMPLES / model, *args, "-o", out), out


def test_int8_packs_the_sample_cnn_and_mgerun_verifies_it(tmp_path, mgedump, mgerun):
    result, out = _pack(mgedump, tmp_path, "cnn.onnx", *CNN, "--quantize", "int8", "--maxerr", "0.05")
    assert result.code == 0, result.err
    manifest = bundle_manifest(out)
    assert manifest["optimizations"] == ["optimize-for-inference", "int8"]
    assert manifest["requirements"] == ["int8-qdq"]
    int8 = manifest["int8"]
    assert int8["mode"] == "static" and int8["format"] == "QDQ" and int8["opset"] == 13
    assert int8["method"] == "minmax" and int8["per_channel"] is True and int8["activations"] == "uint8"
    assert int8["calibration"] == {"cases": 2, "from": ["the test cases"]}
    assert int8["kept_float32"] == [] and int8["quantized_nodes"] > 0
    (prob,) = int8["outputs"]
    assert prob["name"] == "prob" and prob["top1_agreement"] == 1.0 and prob["max_abs_err"] <= 0.05
    validator = jsonschema.Draft202012Validator(
        json.loads((ROOT / "mgedump" / "bundle" / "manifest.schema.json").read_text(encoding="utf-8"))
    )
    assert list(validator.iter_errors(manifest)) == []
    ops = {n.op_type for n in bundled_model(out).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv"} <= ops
    onnx.checker.check_model(bundled_model(out))
    # what the pack prints: how, the error per output, to pick --maxerr knowingly
    assert "needs int8-qdq" in result.err
    assert "int8 (static QDQ, minmax ranges from 2 case(s) (the test cases), weights per channel)" in result.err
    assert "output 'prob': max abs err" in result.err and "top-1 agreement 100.0% of 2" in result.err
    checked = mgerun(out, "--iter", "2")
    assert checked.code == 0, checked.out + checked.err


def test_calibrate_specs_set_the_ranges_and_are_recorded(tmp_path, mgedump, mgerun):
    _, own = _pack(mgedump, tmp_path, "cnn.onnx", *CNN, "--quantize", "int8", "--maxerr", "0.1", name="own.mgetest")
    cat = SAMPLES / "images" / "cat.png"
    result, out = _pack(
        mgedump,
        tmp_path,
        "cnn.onnx",
        *CNN,
        "--quantize",
        "int8",
        "--maxerr",
        "0.1",
        "--calibrate",
        "#rand(0,0.5)",
        "--calibrate",
        str(cat),
        "--input-transform",
        "data / 255",
        "-d",
        str(cat),
    )
    assert result.code == 0, result.err
    calibration = bundle_manifest(out)["int8"]["calibration"]
    assert calibration == {"cases": 2, "from": ["--calibrate #rand(0,0.5)", f"--calibrate {cat}"]}
    assert bundled_model(out).SerializeToString() != bundled_model(own).SerializeToString()
    assert mgerun(out, "--iter", "1").code == 0


def test_the_same_command_writes_the_same_bytes(tmp_path, mgedump):
    args = [*CNN, "--quantize", "int8", "--maxerr", "0.05"]
    first = _pack(mgedump, tmp_path, "cnn.onnx", *args, name="a.mgetest")[1].read_bytes()
    second = _pack(mgedump, tmp_path, "cnn.onnx", *args, name="b.mgetest")[1].read_bytes()
    assert first == second


def test_the_search_keeps_a_node_float_and_says_why(tmp_path, mgedump, mgerun):
    model = sample("int8/mild_outlier.onnx")
    result, out = _pack(
        mgedump, tmp_path, model.file, "-d", model.spec, "-d", model.spec, "--quantize", "int8", "--maxerr", "0.1"
    )
    assert result.code == 0, result.err
    kept = bundle_manifest(out)["int8"]["kept_float32"]
    assert [k["node"] for k in kept] == ["head"] and kept[0]["op_type"] == "MatMul"
    assert "node 'head' (MatMul) kept float: int8 err" in result.err
    assert mgerun(out, "--iter", "1").code == 0


def test_a_model_int8_destroys_is_searched_and_fp32_nodes_still_names_it(tmp_path, mgedump, mgerun):
    model = sample("int8/weight_outlier.onnx")
    args = ["-d", model.spec, "-d", model.spec, "--quantize", "int8", "--maxerr", "0.2"]
    searched, out = _pack(mgedump, tmp_path, model.file, *args)
    assert searched.code == 0, searched.err
    int8 = bundle_manifest(out)["int8"]
    assert [k["node"] for k in int8["kept_float32"]] == ["head"] and int8["search"]["ranked_by"] == "benefit"
    assert "int8 search: ranked by what each node kept float buys on the outputs" in searched.err
    assert "the nodes kept float carry 20% of the model's multiply-accumulates" in searched.err
    assert mgerun(out, "--iter", "1").code == 0
    packed, out = _pack(mgedump, tmp_path, model.file, *args, "--fp32-nodes", "head")
    assert packed.code == 0, packed.err
    assert bundle_manifest(out)["int8"]["kept_float32"] == [
        {"node": "head", "op_type": "MatMul", "why": "--fp32-nodes head"}
    ]
    assert mgerun(out, "--iter", "1").code == 0


def test_dynamic_mode_quantizes_matmul_weights(tmp_path, mgedump, mgerun):
    model = sample("int8/mild_outlier.onnx")
    result, out = _pack(
        mgedump,
        tmp_path,
        model.file,
        "-d",
        model.spec,
        "--quantize",
        "int8",
        "--quantize-mode",
        "dynamic",
        "--maxerr",
        "0.5",
    )
    assert result.code == 0, result.err
    manifest = bundle_manifest(out)
    assert manifest["requirements"] == ["int8-integer-ops"]
    assert manifest["int8"]["mode"] == "dynamic" and manifest["int8"]["calibration"] is None
    assert "MatMulInteger" in {n.op_type for n in bundled_model(out).graph.node}
    assert mgerun(out, "--iter", "1").code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--quantize-mode", "dynamic"], "--quantize-mode applies to --quantize int8"),
        (["--calibrate", "#rand(0,1)"], "--calibrate gives calibration data to int8's static calibration"),
        (
            ["--quantize", "int8", "--quantize-mode", "dynamic", "--calibrate", "#rand(0,1)"],
            "--calibrate gives calibration data to int8's static calibration",
        ),
        (
            ["--quantize", "int8", "--optimize-for-inference", "--enable-ioc16"],
            "--quantize int8 and --enable-ioc16 exclude each other",
        ),
        (["--quantize", "int4"], "int4"),
        (["--quantize", "int8", "--fp32-nodes", "nothing*"], "--fp32-nodes 'nothing*' matches no node"),
    ],
)
def test_bad_int8_options_are_one_line_and_exit_2(args, message, tmp_path, mgedump):
    result, out = _pack(mgedump, tmp_path, "cnn.onnx", *CNN, *args)
    assert result.code == 2 and not out.exists()
    assert message in result.err and "Traceback" not in result.err


def test_an_int8_candidate_that_crashes_onnxruntime_is_a_refusal(tmp_path, mgedump, monkeypatch):
    from mgedump.optimize import isolate

    monkeypatch.setattr(isolate, "_CHILD", "import os, signal, sys\nfor line in sys.stdin:\n    os.abort()\n")
    result, out = _pack(mgedump, tmp_path, "cnn.onnx", *CNN, "--quantize", "int8", "--maxerr", "0.05")
    assert result.code == 2 and not out.exists()
    assert "--quantize int8 (static), candidate 1 (0 node(s) kept float): onnxruntime crashes (SIGABRT)" in result.err


def test_int8_holds_each_output_to_its_own_maxerr(tmp_path, mgedump, mgerun):
    """--maxerr NAME:X: the search holds that output to its own bound, not to the tightest of all."""
    model = sample("int8/mild_outlier.onnx")
    args = ["-d", model.spec, "-d", model.spec, "--quantize", "int8", "--maxerr", "1e-4", "--maxerr", "logits:0.1"]
    result, out = _pack(mgedump, tmp_path, model.file, *args)
    assert result.code == 0, result.err
    assert [k["node"] for k in bundle_manifest(out)["int8"]["kept_float32"]] == ["head"]
    assert mgerun(out, "--iter", "1").code == 0
