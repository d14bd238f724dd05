"""--target-runtime 1.17 against a real onnxruntime 1.17: bundles packed here (onnxruntime 1.32, onnx 1.23) verify
with ``mgerun`` in a venv of this test run that holds onnxruntime 1.17.3, numpy < 2 and click, and this package
installed without its dependencies (no onnx: ``mgerun`` needs none).

Marked ``full``: it installs from the package index (about a minute).
"""

from __future__ import annotations

import sys
from pathlib import Path

import onnx
import pytest

from scripts.check_old_runtime import old_runtime_mgerun, run
from tests.model.test_target import ir10_model
from tests.support import good_models

pytestmark = pytest.mark.full

OLD_RUNTIME = "1.17.3"


@pytest.fixture(scope="module")
def old_mgerun(tmp_path_factory) -> Path:
    """mgerun in a fresh venv with onnxruntime 1.17.3 (installed once for the module)."""
    if sys.version_info >= (3, 13):
        pytest.skip("onnxruntime 1.17.3 has no wheel for Python 3.13 and later")
    mgerun = old_runtime_mgerun(tmp_path_factory.mktemp("ort117"), OLD_RUNTIME)
    assert run(mgerun.parent / "python", "-c", "import onnx").returncode != 0  # mgerun there has no onnx
    return mgerun


def _models(tmp_path: Path) -> list[tuple[str, Path, str]]:
    ir10 = tmp_path / "ir10.onnx"
    onnx.save(ir10_model(), ir10)
    return [(m.id, m.path, m.spec) for m in good_models()] + [("ir10", ir10, "#rand(-1,1)")]


def test_bundles_packed_for_1_17_verify_under_onnxruntime_1_17(old_mgerun, tmp_path, mgedump):
    failures = []
    converted = []
    for name, path, spec in _models(tmp_path):
        out = tmp_path / f"{name.replace('/', '_')}.mgetest"
        packed = mgedump(path, "-d", spec, "-d", spec, "--target-runtime", "1.17", "-o", out)
        assert packed.code == 0, f"{name}: {packed.err}"
        if "written for onnxruntime 1.17" in packed.err:
            converted.append(name)
        done = run(old_mgerun, out, "--iter", "1")
        if done.returncode != 0:
            failures.append(f"{name}: exit {done.returncode}: {done.stdout[-300:]} {done.stderr[-300:]}")
    assert not failures, "\n".join(failures)
    assert "ir10" in converted


def test_the_same_ir10_bundle_without_a_target_is_refused_there(old_mgerun, tmp_path, mgedump):
    """The reason for --target-runtime: onnxruntime 1.17 refuses what onnx 1.16 and later write."""
    path = tmp_path / "ir10.onnx"
    onnx.save(ir10_model(), path)
    out = tmp_path / "plain.mgetest"
    assert mgedump(path, "-d", "#rand(-1,1)", "-o", out).code == 0
    done = run(old_mgerun, out, "--iter", "1")
    assert done.returncode == 2
    assert "IR version 10 is newer than this onnxruntime supports (at most 9)" in done.stderr
