"""Strip info: the operators and dtypes a bundled model uses, and onnxruntime's reduced-build config."""

from __future__ import annotations

import json

from mgedump.model.stripinfo import write_strip_info
from tests.support import SAMPLES, bundle_manifest, bundled_model, sample


def test_strip_info_lists_exactly_the_bundled_operators(tmp_path, mgedump):
    out = tmp_path / "o.mgetest"
    assert (
        mgedump(
            SAMPLES / "cnn.onnx",
            "-d",
            "#rand(0,1)",
            "--optimize-for-inference",
            "--enable-fuse-conv-bias-nonlinearity",
            "--output-strip-info",
            "-o",
            out,
        ).code
        == 0
    )
    model = bundled_model(out)
    info = json.loads((tmp_path / "o.mgetest.json").read_text())
    opsets = {(o.domain or "ai.onnx"): o.version for o in model.opset_import}
    want = sorted({(n.domain or "ai.onnx", opsets[n.domain or "ai.onnx"], n.op_type) for n in model.graph.node})
    assert [(o["domain"], o["opset"], o["op_type"]) for o in info["operators"]] == want
    assert info["models"][0]["sha256"] == bundle_manifest(out)["model"]["sha256"]
    assert info["dtypes"] == ["float32"]
    config = (tmp_path / "o.mgetest.required_operators.config").read_text().splitlines()
    lines = [line for line in config if not line.startswith("#")]
    assert lines == ["ai.onnx;13;Flatten,Gemm,GlobalAveragePool,MaxPool,Softmax", "com.microsoft;1;FusedConv"]


def test_strip_info_counts_subgraph_ops_and_appends(tmp_path):
    path = sample("if_branches.onnx").path
    info = write_strip_info(str(path), str(tmp_path / "s.json"))
    assert [o["op_type"] for o in info["operators"]] == ["Abs", "If", "Neg"]
    merged = write_strip_info(str(SAMPLES / "gray.onnx"), str(tmp_path / "s.json"), append=True)
    assert len(merged["models"]) == 2
    assert {o["op_type"] for o in merged["operators"]} >= {"Abs", "If", "Neg", "Conv", "Relu"}
    assert (
        "ai.onnx;13;Abs,Conv,Flatten,GlobalAveragePool,If,Neg,Relu"
        in (tmp_path / "s.required_operators.config").read_text()
    )
