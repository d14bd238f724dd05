"""The installed console scripts as a user runs them: help, imports, python -m, stderr at the fd level."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import SAMPLES, loaded_by, run_script


@pytest.mark.parametrize("prog", ["mgedump", "mgerun"])
def test_help_imports_no_heavy_module(prog):
    heavy, result = loaded_by(prog, ["--help"], ("onnx", "onnxruntime", "cv2", "numpy", "PIL"))
    assert heavy == []
    assert "Usage:" in result.stdout


def test_console_scripts_and_python_m(tmp_path):
    out = tmp_path / "cnn.mgetest"
    packed = run_script("mgedump", SAMPLES / "cnn.onnx", "-d", f"@{SAMPLES / 'testcases.txt'}", "-o", out)
    assert packed.returncode == 0, packed.stderr
    checked = run_script("mgerun", out, "--iter", "2")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.count("AssertEqual: err=") == 4
    module = subprocess.run([sys.executable, "-m", "mgedump", "--version"], capture_output=True, text=True, timeout=120)
    assert module.returncode == 0 and "mgedump" in module.stdout


@pytest.mark.parametrize(
    "prog, args",
    [
        ("mgedump", ["{samples}/bad/gather_index.onnx", "-d", "#rand(0,100)", "-o", "{tmp}/g.mgetest"]),
        ("mgedump", ["{samples}/ir3_mlp.onnx", "-d", "#rand(0,1,2,...)", "-o", "{tmp}/x.mgetest"]),
        ("mgerun", ["{samples}/cnn.onnx"]),
    ],
)
def test_process_stderr_is_one_line(prog, args, tmp_path):
    result = run_script(prog, *[a.format(tmp=tmp_path, samples=SAMPLES) for a in args])
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
