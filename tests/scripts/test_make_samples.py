"""scripts/make_samples.py makes exactly the committed samples, and its registry lists every sample model."""

from __future__ import annotations

import filecmp
import subprocess
import sys

from tests.support import MODELS, ROOT, SAMPLES


def test_the_script_makes_the_committed_samples_byte_for_byte(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_samples.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    made = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(p.relative_to(SAMPLES).as_posix() for p in SAMPLES.rglob("*") if p.is_file())
    assert made == committed
    _, mismatch, errors = filecmp.cmpfiles(tmp_path, SAMPLES, made, shallow=False)
    assert mismatch == [] and errors == []


def test_the_registry_lists_every_sample_model():
    on_disk = sorted(p.relative_to(SAMPLES).as_posix() for p in SAMPLES.rglob("*.onnx"))
    assert on_disk == sorted(MODELS)
    for model in MODELS.values():
        assert model.spec and model.about
        assert (model.kind == "bad") is bool(model.error)
        assert all((SAMPLES / f).is_file() for f in model.files)
