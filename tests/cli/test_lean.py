"""A lean install (``mgedump[cpu]``: no onnx, OpenCV or Pillow; or the core alone: no onnxruntime) stops with one
line naming the extra to install, never a ModuleNotFoundError traceback."""

from __future__ import annotations

import sys

import pytest

from tests.support import sample


@pytest.fixture
def without(monkeypatch):
    """Make modules unimportable, as if their distribution were not installed."""

    def hide(*names: str) -> None:
        for name in names:
            for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
                monkeypatch.delitem(sys.modules, loaded)
            monkeypatch.setitem(sys.modules, name, None)

    return hide


def test_packing_without_onnx_names_the_pack_extra(tmp_path, mgedump, without):
    without("onnx")
    cnn = sample("cnn.onnx")
    result = mgedump(cnn.path, "-d", cnn.spec, "-o", tmp_path / "o.mgetest")
    assert result.code == 2 and result.err.strip().splitlines() == [
        "mgedump: error: onnx is not installed: packing a model needs pip install 'mgedump[pack]'"
    ]
    assert not (tmp_path / "o.mgetest").exists()


def test_running_without_onnxruntime_names_the_runtime_extras(tmp_path, mgedump, mgerun, without):
    cnn = sample("cnn.onnx")
    assert mgedump(cnn.path, "-d", cnn.spec, "-o", tmp_path / "c.mgetest").code == 0
    without("onnxruntime")
    result = mgerun(tmp_path / "c.mgetest")
    assert result.code == 2 and len(result.err.strip().splitlines()) == 1
    assert "onnxruntime is not installed" in result.err and "mgedump[cpu]" in result.err and "[gpu]" in result.err


def test_an_image_without_opencv_names_the_pack_extra(tmp_path, mgerun, without):
    from tests.support import SAMPLES

    image = next((SAMPLES / "images").iterdir())
    without("cv2", "PIL")
    result = mgerun(sample("cnn.onnx").path, "-d", image, "--resize-input")
    assert result.code == 2 and len(result.err.strip().splitlines()) == 1
    assert "is not installed: reading images needs pip install 'mgedump[pack]'" in result.err
