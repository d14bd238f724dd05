"""Shared fixtures: the sample registry and a way to run the real commands in-process."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"

# The sample models, each with a spec that fits it (the registry the tests share).
SAMPLE_MODELS = {
    "cnn.onnx": "#rand(0,255)",
    "nhwc.onnx": "#rand(0,255)",
    "gray.onnx": "#rand(0,255)",
    "multi_input.onnx": "#rand(0,255)",
    "dynamic_batch.onnx": "#rand(0,255)",
    "ir3_mlp.onnx": "#rand(0,255)",
}


def light_models() -> list[str]:
    """The reference models that the onnx package ships (weights listed as graph inputs)."""
    import onnx

    folder = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    return sorted(glob.glob(os.path.join(folder, "*.onnx")))


@dataclass
class Result:
    code: int
    out: str
    err: str


def _invoke(main, args, capsys) -> Result:
    capsys.readouterr()
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


@pytest.fixture
def mgedump(capsys):
    """Run the mgedump command in-process: mgedump(*args) -> Result."""
    from mgedump.cli import mgedump_main

    return lambda *args: _invoke(mgedump_main, args, capsys)


@pytest.fixture
def mgerun(capsys):
    """Run the mgerun command in-process: mgerun(*args) -> Result."""
    from mgedump.cli import mgerun_main

    return lambda *args: _invoke(mgerun_main, args, capsys)


def script(name: str) -> str:
    """The installed console script, next to this interpreter."""
    found = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    if not found:
        pytest.fail(f"console script {name} is not installed")
    return found


def run_script(name: str, *args, cwd=None, timeout=300) -> subprocess.CompletedProcess:
    """Run an installed console script in a subprocess."""
    return subprocess.run([script(name), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout)


@pytest.fixture
def samples() -> Path:
    return SAMPLES
