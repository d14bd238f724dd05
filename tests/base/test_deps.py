"""Optional dependencies: imported when present, one line naming the install when not.

Missing modules are made missing the way Python itself does it: ``None`` in
``sys.modules`` stops an import with ModuleNotFoundError. ``tests/test_install.py``
checks the same in a venv where onnx is really not installed.
"""

from __future__ import annotations

import sys

import pytest

from mgedump.base.deps import PROVIDERS, require
from mgedump.base.errors import EXIT_USAGE, UsageError


@pytest.mark.parametrize("module", ["onnx", "onnx.helper", "cv2", "PIL.Image", "onnxruntime"])
def test_a_present_dependency_is_imported(module):
    imported = require(module)
    assert imported.__name__ == module
    assert sys.modules[module] is imported


@pytest.mark.parametrize(
    "module, expected",
    [
        ("onnx", "onnx is not installed: this needs pip install 'mgedump[pack]'"),
        ("onnx.helper", "onnx is not installed: this needs pip install 'mgedump[pack]'"),
        ("cv2", "OpenCV (cv2) is not installed: this needs pip install 'mgedump[pack]'"),
        ("PIL.Image", "Pillow (PIL) is not installed: this needs pip install 'mgedump[pack]'"),
        (
            "onnxruntime",
            "onnxruntime is not installed: this needs pip install 'mgedump[cpu]' (or 'mgedump[gpu]' for CUDA)",
        ),
    ],
)
def test_a_missing_dependency_names_its_install(module, expected, monkeypatch):
    top = module.partition(".")[0]
    for name in [n for n in sys.modules if n == top or n.startswith(f"{top}.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, top, None)
    with pytest.raises(UsageError) as caught:
        require(module)
    assert caught.value.one_line() == expected
    assert caught.value.exit_code == EXIT_USAGE
    assert isinstance(caught.value.__cause__, ModuleNotFoundError)


def test_the_purpose_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(UsageError, match=r"^onnx is not installed: naming the first divergence needs pip install"):
        require("onnx", purpose="naming the first divergence")


def test_an_installed_dependency_missing_its_own_dependency_says_so(tmp_path, monkeypatch):
    broken = tmp_path / "cv2"
    broken.mkdir()
    (broken / "__init__.py").write_text("import mgedump_no_such_module\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [n for n in sys.modules if n == "cv2" or n.startswith("cv2.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(UsageError) as caught:
        require("cv2")
    assert caught.value.one_line() == (
        "OpenCV (cv2) is installed but cannot be imported: No module named 'mgedump_no_such_module' "
        "(hint: pip install 'mgedump[pack]' installs it with what it needs)"
    )


def test_a_dependency_that_fails_to_load_is_one_line(tmp_path, monkeypatch):
    broken = tmp_path / "onnx"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('libonnx.so: cannot open shared object file')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [n for n in sys.modules if n == "onnx" or n.startswith("onnx.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(UsageError, match=r"^onnx is installed but cannot be imported: libonnx.so: cannot open"):
        require("onnx")


def test_only_optional_dependencies_are_known():
    assert set(PROVIDERS) == {"onnx", "cv2", "PIL", "onnxruntime"}
    with pytest.raises(ValueError, match="'json' is not an optional dependency"):
        require("json")
