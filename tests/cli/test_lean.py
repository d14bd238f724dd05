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


_BLOCK_ONNX = """
import sys


class _NoOnnx:
    def find_spec(self, name, path=None, target=None):
        if name == "onnx" or name.startswith("onnx."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoOnnx())
"""


def test_a_failing_io_dump_bundle_fails_without_onnx(tmp_path):
    """The README's `mgerun w16.mgetest ... # exits 1` on a [cpu] install: the verdict does not need onnx (the
    failure is named, exit 1); only the first divergence does, and the reports say so. In a folder run with
    workers (fresh interpreters, onnx hidden in each) it is a failure, not a bundle that could not run."""
    import os
    import subprocess
    import xml.etree.ElementTree as ET

    from tests.support import run_ok, script
    from tests.zoo import failing_bundle

    cnn = sample("cnn.onnx")
    packed = tmp_path / "io.mgetest"
    run_ok("mgedump", cnn.path, "-d", cnn.spec, "--embed-io-dump", "-o", packed, "-q")
    failing_bundle(packed, tmp_path / "models" / "w16.mgetest")
    (tmp_path / "models" / "ok.mgetest").write_bytes(packed.read_bytes())
    (tmp_path / "block").mkdir()
    (tmp_path / "block" / "sitecustomize.py").write_text(_BLOCK_ONNX)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "block")}
    hidden = subprocess.run([sys.executable, "-c", "import onnx"], env=env, capture_output=True, text=True)
    assert hidden.returncode == 1 and "No module named 'onnx'" in hidden.stderr

    def mgerun(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [script("mgerun"), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )

    one = mgerun("models/w16.mgetest", "--maxerr", "1e-4", "--iter", "1", "--silent")
    assert one.returncode == 1, one.stderr
    assert "AssertEqual: err=0.5 (name=prob) FAILED" in one.stdout
    assert "no diagnosis: onnx is not installed: naming the first divergence needs pip install 'mgedump[pack]'" in (
        one.stdout
    )
    many = mgerun("models/", "-j", "2", "--junit-xml", "junit.xml")
    assert many.returncode == 1, many.stderr
    assert "2 bundle(s): 1 passed, 1 failed, 0 could not run" in many.stdout
    suites = {s.get("name"): s for s in ET.parse(tmp_path / "junit.xml").getroot()}
    assert suites["w16"].get("failures") == "1" and suites["w16"].get("errors") == "0"
    assert "name=prob" in suites["w16"].find("testcase/failure").get("message")
