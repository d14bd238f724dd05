"""The registry of precision modes: a mode added in one place packs, proves and verifies like the built-in ones."""

from __future__ import annotations

import numpy as np
import pytest

from mgedump import OptimizeOptions, PackOptions, pack
from mgedump.base.errors import OptimizeError
from mgedump.optimize.precisions import Job, Made, Precision, register, registry, unregister
from tests.support import SAMPLES, bundle_manifest


def _bfloat16_weights(job: Job) -> Made:
    """Round every float32 weight to bfloat16's 8 significant bits (kept float32): a mode in a dozen lines."""
    from onnx import numpy_helper

    rounded = 0
    for init in job.model.graph.initializer:
        values = numpy_helper.to_array(init)
        if values.dtype != np.float32:
            continue
        bits = values.view(np.uint32) + np.uint32(0x8000)  # round to nearest on the 16 bits dropped
        init.CopyFrom(numpy_helper.from_array((bits & np.uint32(0xFFFF0000)).view(np.float32), init.name))
        rounded += 1
    return Made(job.model, {"mode": "bf16w", "weights_rounded": rounded}, [f"bf16w: {rounded} weight(s) rounded"])


BF16W = Precision(
    name="bf16w",
    about="weights rounded to bfloat16, stored float32",
    make=_bfloat16_weights,
    manifest_key="bf16w",
    rank=1,
    requirements=lambda record: [],
    lines=lambda record: [f"bf16w: {record['weights_rounded']} weight(s) rounded to bfloat16"],
)


@pytest.fixture
def bf16w():
    register(BF16W)
    yield BF16W
    unregister("bf16w")


def test_a_mode_registered_in_one_place_packs_and_verifies(bf16w, tmp_path, mgerun):
    out = tmp_path / "b.mgetest"
    options = PackOptions(
        cases=["#rand(0,1)", "#rand(0,1)"],
        maxerr=0.05,
        optimize=OptimizeOptions(optimize_for_inference=True, precision="bf16w"),
    )
    result = pack(str(SAMPLES / "cnn.onnx"), out, options)
    manifest = bundle_manifest(out)
    assert manifest["optimizations"] == ["optimize-for-inference", "bf16w"]
    assert manifest["bf16w"]["weights_rounded"] >= 4 and manifest["requirements"] == []
    assert result.notes[0] == f"bf16w: {manifest['bf16w']['weights_rounded']} weight(s) rounded to bfloat16"
    assert 0 < max(check["err"] for check in result.self_check) <= 0.05  # proved: it differs, within maxerr
    assert mgerun(out, "--iter", "1").code == 0


def test_a_registered_mode_is_held_to_maxerr_like_any_other(bf16w, tmp_path):
    options = PackOptions(
        cases=["#rand(0,1)"], maxerr=1e-7, optimize=OptimizeOptions(optimize_for_inference=True, precision="bf16w")
    )
    with pytest.raises(OptimizeError, match="the optimised model misses maxerr 1e-07"):
        pack(str(SAMPLES / "cnn.onnx"), tmp_path / "b.mgetest", options)
    assert not (tmp_path / "b.mgetest").exists()


def test_the_built_in_modes_and_a_name_taken_twice():
    assert list(registry())[:4] == ["ioc16", "io16xc32", "int8", "int8-dynamic"]
    with pytest.raises(ValueError, match="registered already"):
        register(registry()["ioc16"])
