"""What an optimised bundle needs at run time: NCHWc needs an AVX2 CPU and onnxruntime's CPU provider."""

from __future__ import annotations

import onnxruntime
import pytest

from mgedump.bundle import requirements
from tests.support import SAMPLES, bundle_manifest, bundled_model


def _ops(model) -> list[tuple[str, str]]:
    return [(n.domain, n.op_type) for n in model.graph.node]


@pytest.mark.skipif(not requirements.cpu_has_avx2(), reason="NCHWc needs an AVX2 CPU")
def test_nchw88_gives_nchwc_nodes_on_avx2(tmp_path, mgedump, mgerun):
    out = tmp_path / "o.mgetest"
    assert (
        mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--optimize-for-inference", "--enable-nchw88", "-o", out).code
        == 0
    )
    assert any(domain == "com.microsoft.nchwc" for domain, _ in _ops(bundled_model(out)))
    assert bundle_manifest(out)["requirements"] == ["onnxruntime", "onnxruntime-cpu", "x86-avx2"]
    assert mgerun(out, "--iter", "1").code == 0
    other = [p for p in onnxruntime.get_available_providers() if p != "CPUExecutionProvider"]
    if other:
        refused = mgerun(out, "--provider", other[0])
        assert refused.code == 2 and "CPU-only" in refused.err


def test_nchw88_without_avx2_is_a_clear_error_at_pack_and_at_run(tmp_path, mgedump, mgerun, monkeypatch):
    if requirements.cpu_has_avx2():
        out = tmp_path / "o.mgetest"
        assert (
            mgedump(
                SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--optimize-for-inference", "--enable-nchw88", "-o", out
            ).code
            == 0
        )
    monkeypatch.setattr(requirements, "cpu_has_avx2", lambda: False)
    packed = mgedump(
        SAMPLES / "cnn.onnx",
        "-d",
        "#rand(0,1)",
        "--optimize-for-inference",
        "--enable-nchw88",
        "-o",
        tmp_path / "x.mgetest",
    )
    assert packed.code == 2 and "this CPU has no AVX2" in packed.err
    if (tmp_path / "o.mgetest").exists():
        ran = mgerun(tmp_path / "o.mgetest", "--iter", "1")
        assert ran.code == 2 and "no AVX2" in ran.err and len(ran.err.strip().splitlines()) == 1
