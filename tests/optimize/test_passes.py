"""Our own graph passes: --discard-var-name."""

from __future__ import annotations

import onnx

from tests.support import SAMPLES, bundle_member, bundled_model


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
        model = bundled_model(out)
        assert not (_names(model) & secret)
        raw = bundle_member(out, "model.onnx")
        assert not [name for name in secret if name.encode() in raw]
        assert [v.name for v in model.graph.input] == ["data"] and [v.name for v in model.graph.output] == ["prob"]
        assert mgerun(out, "--iter", "1").code == 0
