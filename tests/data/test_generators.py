"""The generators of the registry: ranges, integer and bool inputs, seeds, casts; a generator added in one place."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from mgedump.base.errors import SpecError
from mgedump.bundle import Bundle
from mgedump.data.casts import cast_to
from mgedump.data.generators import GENERATORS, Draw, register_generator
from mgedump.model.runtime import TensorInfo
from tests.data.support import F32, build


def test_rand_uniform_range_and_shape():
    (x,) = build(["#rand(-2,3)"], [F32])
    assert x["x"].shape == (1, 3, 4, 5) and x["x"].dtype == np.float32
    assert x["x"].min() >= -2 and x["x"].max() <= 3 and x["x"].std() > 0.5


def test_integer_inputs_get_inclusive_integers_and_bool_zero_one():
    ints = TensorInfo("i", "int64", (2000,))
    flags = TensorInfo("b", "bool", (2000,))
    (case,) = build(["i:#rand(0,3);b:#rand(0,255)"], [ints, flags])
    assert set(np.unique(case["i"])) == {0, 1, 2, 3}
    assert case["b"].dtype == bool and set(np.unique(case["b"])) == {False, True}


def test_same_seed_same_data_other_seed_other_data():
    first = build(["#rand(0,1)"], [F32], seed=3)[0]["x"]
    again = build(["#rand(0,1)"], [F32], seed=3)[0]["x"]
    other = build(["#rand(0,1)"], [F32], seed=4)[0]["x"]
    assert np.array_equal(first, again) and not np.array_equal(first, other)


def test_one_generator_for_all_inputs_of_every_dtype():
    inputs = [TensorInfo("a:0", "float32", (2, 2)), TensorInfo("n", "int64", ()), TensorInfo("m", "uint8", (3,))]
    (case,) = build(["#rand(1,5)"], inputs)
    assert case["a:0"].dtype == np.float32 and case["n"].dtype == np.int64 and case["n"].shape == ()
    assert 1 <= int(case["n"]) <= 5 and case["m"].dtype == np.uint8


def test_const_cast_loss_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="mgedump"):
        (case,) = build(["#const(7.5)"], [TensorInfo("n", "int64", ())])
    assert int(case["n"]) == 7
    assert any("changes 1 of 1 values" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------- a generator added in one place


def _nonzero_step(params, text):
    if params[1] == 0:
        raise SpecError(f"#arange STEP is 0 in {text!r}")


@pytest.fixture
def arange():
    """``#arange(START,STEP[,dims])``: START, START + STEP, ... in C order; registered here and nowhere else."""

    @register_generator("arange", ("START", "STEP"), check=_nonzero_step)
    def _arange(draw: Draw) -> np.ndarray:
        start, step = draw.params
        values = start + step * np.arange(math.prod(draw.shape), dtype=np.float64).reshape(draw.shape)
        return cast_to(values, draw.info, draw.text)

    yield
    del GENERATORS["arange"]


def test_a_generator_registered_in_one_place_packs_end_to_end(arange, samples, tmp_path, mgedump, mgerun):
    out = tmp_path / "arange.mgetest"
    result = mgedump(
        samples / "cnn.onnx", "-d", "#arange(0.5,0.25)", "-d", "data:#arange(-1,0.001,1,3,32,32)", "-o", out
    )
    assert result.code == 0, result.err
    with Bundle(str(out)) as bundle:
        cases = bundle.manifest.test_cases
        got = [bundle.tensor(case.inputs[0], "data") for case in cases]
    assert [case.spec for case in cases] == ["#arange(0.5,0.25)", "data:#arange(-1,0.001,1,3,32,32)"]
    expected = [0.5 + 0.25 * np.arange(3072), -1 + 0.001 * np.arange(3072)]
    for array, want in zip(got, expected, strict=True):
        assert array.shape == (1, 3, 32, 32) and array.dtype == np.float32
        np.testing.assert_array_equal(array.reshape(-1), want.astype(np.float32))
    assert mgerun(out).code == 0


def test_a_registered_generator_is_parsed_checked_and_listed_like_the_others(arange, samples, tmp_path, mgedump):
    refused = mgedump(samples / "cnn.onnx", "-d", "#arange(1,0)", "-o", tmp_path / "a.mgetest")
    assert refused.code == 2 and "#arange STEP is 0" in refused.err
    missing = mgedump(samples / "cnn.onnx", "-d", "#arange(1)", "-o", tmp_path / "b.mgetest")
    assert missing.code == 2 and "#arange needs START,STEP" in missing.err
    unknown = mgedump(samples / "cnn.onnx", "-d", "#ones(1)", "-o", tmp_path / "c.mgetest")
    assert unknown.code == 2 and "use #rand, #randn, #const or #arange" in unknown.err


def test_the_registry_holds_the_three_built_in_generators():
    assert [(k.name, k.params) for k in GENERATORS.values()][:3] == [
        ("rand", ("MIN", "MAX")),
        ("randn", ("MEAN", "STD")),
        ("const", ("VALUE",)),
    ]
    with pytest.raises(ValueError, match="registered already"):
        register_generator("rand", ("MIN", "MAX"))(lambda draw: draw.rng.uniform(size=draw.shape))
