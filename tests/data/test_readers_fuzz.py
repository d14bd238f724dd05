"""Fuzzing the data readers: mutated and truncated .npy, .npz, .pb and image files give an array or one DataError.

Any other exception (a ValueError from numpy, a RuntimeError from zipfile, an
error from OpenCV or Pillow) would reach the user as a traceback. The runs are
derandomized: the same examples every time.
"""

from __future__ import annotations

import io
import os
import struct
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mgedump.base.errors import MgeError
from mgedump.data import load_file
from mgedump.model.runtime import TensorInfo
from mgedump.options import DataOptions
from tests.support import SAMPLES

FUZZ = settings(
    max_examples=120, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
IMAGE_INPUT = TensorInfo("x", "float32", (1, 3, 32, 32))


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _npz(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def _pb(array: np.ndarray) -> bytes:
    from mgedump.bundle.tensorproto import encode

    return encode(array, "x")


_ARRAY = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
SEEDS = {
    ".npy": _npy(_ARRAY),
    ".npz": _npz(x=_ARRAY, y=_ARRAY.astype(np.int64)),
    ".pb": _pb(_ARRAY),
    ".png": (SAMPLES / "images" / "cat.png").read_bytes()[:4096],
    ".jpg": (SAMPLES / "images" / "dog.jpg").read_bytes()[:4096],
}


@st.composite
def mutated(draw, seed: bytes) -> bytes:
    """The seed with a few bytes replaced, a run inserted or deleted, and maybe truncated."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(data) - 1))
        kind = draw(st.sampled_from(["set", "insert", "delete", "int", "float"]))
        if kind == "set":
            data[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        elif kind == "int":  # a size or count field pushed to an extreme
            data[at : at + 4] = draw(st.sampled_from([b"\xff\xff\xff\xff", b"\x00\x00\x00\x00", b"\xff\xff\xff\x7f"]))
        else:  # a value of the data changed (any float32, NaN and infinities included)
            data[at : at + 4] = struct.pack("<f", draw(st.floats(width=32)))
        if not data:
            break
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


def _read(suffix: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"x{suffix}")
        with open(path, "wb") as f:
            f.write(data)
        try:
            array, _ = load_file(path, IMAGE_INPUT, DataOptions(resize_input=True))
        except MgeError as exc:
            assert exc.exit_code == 2
            assert "\n" not in exc.one_line()
        else:
            assert isinstance(array, np.ndarray)


@pytest.mark.parametrize("suffix", sorted(SEEDS))
def test_a_mutated_file_gives_an_array_or_one_data_error(suffix):
    @FUZZ
    @given(mutated(SEEDS[suffix]))
    def check(data):
        _read(suffix, data)

    check()


@pytest.mark.parametrize("suffix", sorted(SEEDS))
def test_random_bytes_give_an_array_or_one_data_error(suffix):
    @FUZZ
    @given(st.binary(max_size=512))
    def check(data):
        _read(suffix, data)

    check()
