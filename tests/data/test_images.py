"""Images laid out for an input: NCHW, NHWC, gray, resized, symbolic H and W, the Pillow fallback."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from mgedump.base.errors import DataError
from mgedump.model.runtime import TensorInfo
from tests.data.support import build


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
    with pytest.raises(DataError, match="resize_input"):
        build([str(samples / "images" / "dog.jpg")], [TensorInfo("x", "float32", (1, 3, 32, 32))])


def test_pillow_fallback_for_formats_opencv_does_not_read(tmp_path):
    from PIL import Image

    pixels = np.zeros((4, 6, 3), np.uint8)
    pixels[..., 0] = 200  # red in RGB
    path = tmp_path / "red.gif"
    Image.fromarray(pixels).save(path)
    (case,) = build([str(path)], [TensorInfo("x", "uint8", (1, 4, 6, 3))])
    assert case["x"][0, 0, 0].tolist() == [0, 0, 200]  # BGR
