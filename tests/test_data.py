"""Building input arrays: generators, images in NCHW/NHWC/gray, array files, casts, repeat, transform."""

from __future__ import annotations

import logging

import cv2
import numpy as np
import pytest
from onnx import numpy_helper

from mgedump.base.errors import DataError, SpecError, UsageError
from mgedump.data import build_cases, cast_to
from mgedump.data.spec import CaseSpec, expand_specs
from mgedump.model.runtime import TensorInfo
from mgedump.options import DataOptions


def build(specs, inputs, **opts):
    cases = build_cases(expand_specs(list(specs)), inputs, DataOptions(**opts))
    return [dict(case.inputs) for case in cases]


F32 = TensorInfo("x", "float32", (1, 3, 4, 5))


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


def test_leading_dims_and_symbolic_dims(caplog):
    sym = TensorInfo("x", "float32", ("N", 3, None, 8))
    with caplog.at_level(logging.WARNING, logger="mgedump"):
        (case,) = build(["#rand(0,1,4,...)"], [sym])
    assert case["x"].shape == (4, 3, 1, 8)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "dim 2" in warnings[0] and "symbolic" in warnings[0]
    (case,) = build(["#const(2,5,3,7,8)"], [sym])
    assert case["x"].shape == (5, 3, 7, 8) and np.all(case["x"] == 2)


def test_full_shape_must_fit_fixed_dims_and_rank():
    with pytest.raises(SpecError, match="rank 4"):
        build(["#rand(0,1,3,4,5)"], [F32])
    with pytest.raises(SpecError, match="fixes it to 3"):
        build(["#rand(0,1,1,2,4,5)"], [F32])


def test_const_cast_loss_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="mgedump"):
        (case,) = build(["#const(7.5)"], [TensorInfo("n", "int64", ())])
    assert int(case["n"]) == 7
    assert any("changes 1 of 1 values" in r.getMessage() for r in caplog.records)


def test_cast_to_is_quiet_when_lossless(caplog):
    with caplog.at_level(logging.WARNING, logger="mgedump"):
        out = cast_to(np.arange(5, dtype=np.uint8), TensorInfo("x", "float32", (5,)), "data")
    assert out.dtype == np.float32 and not caplog.records


# ---------------------------------------------------------------- images


def test_image_nchw_matches_hand_computed(samples):
    bgr = cv2.imread(str(samples / "images" / "cat.png"), cv2.IMREAD_COLOR)
    expect = bgr.transpose(2, 0, 1)[None].astype(np.float32)
    (case,) = build([str(samples / "images" / "cat.png")], [TensorInfo("data", "float32", (1, 3, 32, 32))])
    np.testing.assert_array_equal(case["data"], expect)


def test_image_nhwc_matches_hand_computed(samples):
    bgr = cv2.imread(str(samples / "images" / "cat.png"), cv2.IMREAD_COLOR)
    (case,) = build([str(samples / "images" / "cat.png")], [TensorInfo("image", "float32", (1, 32, 32, 3))])
    np.testing.assert_array_equal(case["image"], bgr[None].astype(np.float32))


def test_gray_image_and_resize(samples):
    gray = cv2.imread(str(samples / "images" / "digit.png"), cv2.IMREAD_GRAYSCALE)
    (case,) = build([str(samples / "images" / "digit.png")], [TensorInfo("g", "float32", (1, 1, 28, 28))])
    np.testing.assert_array_equal(case["g"], gray[None, None].astype(np.float32))
    dog = cv2.imread(str(samples / "images" / "dog.jpg"), cv2.IMREAD_COLOR)
    expect = cv2.resize(dog, (32, 32), interpolation=cv2.INTER_LINEAR).transpose(2, 0, 1)[None]
    (case,) = build(
        [str(samples / "images" / "dog.jpg")], [TensorInfo("d", "uint8", (1, 3, 32, 32))], resize_input=True
    )
    np.testing.assert_array_equal(case["d"], expect)


def test_image_fills_symbolic_hw_and_repeat_then_transform(samples):
    dyn = TensorInfo("x", "float32", ("N", 3, "H", "W"))
    (case,) = build([str(samples / "images" / "dog.jpg")], [dyn], repeat=2, input_transform="data / 255 - 0.5")
    assert case["x"].shape == (2, 3, 48, 64)
    assert case["x"].min() >= -0.5 and case["x"].max() <= 0.5
    np.testing.assert_array_equal(case["x"][0], case["x"][1])


def test_image_size_mismatch_says_resize(samples):
    with pytest.raises(DataError, match="--resize-input"):
        build([str(samples / "images" / "dog.jpg")], [TensorInfo("x", "float32", (1, 3, 32, 32))])


def test_pillow_fallback_for_formats_opencv_does_not_read(tmp_path):
    from PIL import Image

    pixels = np.zeros((4, 6, 3), np.uint8)
    pixels[..., 0] = 200  # red in RGB
    path = tmp_path / "red.gif"
    Image.fromarray(pixels).save(path)
    (case,) = build([str(path)], [TensorInfo("x", "uint8", (1, 4, 6, 3))])
    assert case["x"][0, 0, 0].tolist() == [0, 0, 200]  # BGR


# ---------------------------------------------------------------- array files


def test_npy_npz_pb_and_list_file_relative_paths(samples, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    info = TensorInfo("data", "float32", (1, 3, 32, 32))
    cases = build([f"@{samples / 'testcases.txt'}"], [info])
    assert len(cases) == 4
    np.testing.assert_array_equal(cases[2]["data"], np.load(samples / "data" / "cnn_input.npy"))
    tensor = numpy_helper.to_array(__import__("onnx").load_tensor(str(samples / "data" / "cnn_input.pb")))
    np.testing.assert_array_equal(cases[3]["data"], tensor)
    multi = [TensorInfo("input:0", "float32", (1, 16)), TensorInfo("len", "int64", ())]
    (case,) = build([str(samples / "data" / "multi_input.npz")], multi)
    assert int(case["len"]) == 3 and case["input:0"].shape == (1, 16)


def test_pb_with_empty_name_and_cwd_first(tmp_path, monkeypatch):
    array = np.arange(6, dtype=np.float32).reshape(1, 6)
    (tmp_path / "t.pb").write_bytes(numpy_helper.from_array(array).SerializeToString())
    monkeypatch.chdir(tmp_path)
    (case,) = build(["t.pb"], [TensorInfo("x", "float32", (1, 6))])
    np.testing.assert_array_equal(case["x"], array)


def test_repeat_batch_dim_is_a_warning(tmp_path, caplog):
    np.save(tmp_path / "a.npy", np.ones((1, 4), np.float32))
    with caplog.at_level(logging.WARNING, logger="mgedump"):
        (case,) = build([str(tmp_path / "a.npy")], [TensorInfo("x", "float32", (1, 4))], repeat=3)
    assert case["x"].shape == (3, 4)
    assert any("--repeat 3" in r.getMessage() for r in caplog.records)


def test_resize_and_transform_need_file_data():
    with pytest.raises(UsageError, match="--resize-input"):
        build(["#rand(0,1)"], [F32], resize_input=True)
    with pytest.raises(UsageError, match="--input-transform"):
        build(["#rand(0,1)"], [F32], input_transform="data")


def test_transform_has_no_builtins(tmp_path):
    np.save(tmp_path / "a.npy", np.ones((1, 3, 4, 5), np.float32))
    with pytest.raises(SpecError, match="NameError"):
        build([str(tmp_path / "a.npy")], [F32], input_transform="open('x')")
    (case,) = build([str(tmp_path / "a.npy")], [F32], input_transform="np.clip(data * 300, 0, 255)")
    assert case["x"].max() == 255


def test_case_spec_origin_in_errors():
    with pytest.raises(SpecError, match=r"-d #2"):
        build_cases([CaseSpec("#rand(0,1)", "-d #1"), CaseSpec("#rand(1,0)", "-d #2")], [F32], DataOptions())


@pytest.mark.parametrize(
    "data, message",
    [
        (b"\x08\x02\x10\x63\x4a\x08" + b"\x00" * 8, "not a valid ONNX TensorProto file"),  # data_type 99
        (b"\x08\x02\x10\x01\x4a\x03abc", "not a valid ONNX TensorProto file"),  # 2 floats in 3 bytes
        (b"\xff\xff\xff\xff", "not a valid ONNX TensorProto file"),
    ],
)
def test_bad_pb_files_are_data_errors(tmp_path, data, message):
    (tmp_path / "t.pb").write_bytes(data)
    with pytest.raises(DataError, match=message):
        build([str(tmp_path / "t.pb")], [TensorInfo("x", "float32", (2,))])
