"""The mgedump command: what it prints, and its options as the user gives them."""

from __future__ import annotations

from tests.support import SAMPLES, bundle_manifest


def test_the_status_line(tmp_path, mgedump):
    out = tmp_path / "o.mgetest"
    result = mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-d", "#rand(0,2)", "-o", out)
    assert result.code == 0 and result.out == ""
    assert result.err == f"mgedump: wrote {out}: 2 test case(s), 1 input(s), 1 output(s), maxerr 0.0001\n"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", out, "-q").err == ""


def test_the_optimised_line(tmp_path, mgedump):
    out = tmp_path / "o.mgetest"
    result = mgedump(
        SAMPLES / "cnn.onnx",
        "-d",
        "#rand(0,1)",
        "--optimize-for-inference",
        "--enable-fuse-conv-bias-nonlinearity",
        "-o",
        out,
    )
    assert result.code == 0
    assert (
        "mgedump: optimised (optimize-for-inference, fuse-conv-bias-nonlinearity); self-check worst err=" in result.err
    )
    assert result.err.rstrip().endswith("; needs onnxruntime")


def test_options_reach_the_bundle(tmp_path, mgedump):
    out = tmp_path / "o.mgetest"
    assert (
        mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--maxerr", "0.5", "--silent", "--seed", "3", "-o", out).code
        == 0
    )
    manifest = bundle_manifest(out)
    assert manifest["assertion"] == {"enabled": True, "maxerr": 0.5, "verbose": False}
    assert manifest["seed"] == 3
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--no-assert", "-o", out).code == 0
    assert bundle_manifest(out)["assertion"]["enabled"] is False
