"""The package's public names: lazy, cheap to import, and each is what it says whatever was imported first."""

from __future__ import annotations

import subprocess
import sys

import pytest

import mgedump

FUNCTIONS = {"pack": "mgedump.commands.pack", "verify": "mgedump.commands.verify", "tensor": "mgedump.tracing.tensor"}


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("name, module", FUNCTIONS.items())
def test_a_function_stays_a_function_whatever_is_imported_first(name, module):
    out = _run(
        f"import {module}, mgedump, inspect\n"
        f"from mgedump import {name} as a\n"
        f"print(inspect.isfunction(a), inspect.isfunction(mgedump.{name}))\n"
    )
    assert out.split() == ["True", "True"]


def test_import_mgedump_is_cheap():
    out = _run(
        "import sys, mgedump\nprint(sorted(m for m in ('numpy', 'onnx', 'onnxruntime', 'cv2') if m in sys.modules))"
    )
    assert out.strip() == "[]"


def test_every_public_name_resolves():
    for name in mgedump.__all__:
        assert getattr(mgedump, name) is not None, name
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        mgedump.nope  # noqa: B018
