"""The TensorProto codec writes the bytes onnx writes, and reads what onnx reads."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from mgedump.bundle.tensorproto import decode, encode

ARRAYS = [
    np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4) / 7,
    np.array(3, dtype=np.int64),
    np.array([-1, 2**40], dtype=np.int64),
    np.array([[True, False]]),
    np.arange(6, dtype=np.float16).reshape(2, 3),
    np.arange(4, dtype=np.uint8),
    np.arange(4, dtype=np.int8) - 2,
    np.array([1.5, -2.25], dtype=np.float64),
    np.array([7, 8], dtype=np.uint64),
    np.zeros((0, 3), dtype=np.float32),
    np.array(["ab", "\u00e9", ""], dtype=object),
    np.arange(6, dtype=">f4").reshape(2, 3),
]


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: f"{a.dtype}{list(a.shape)}")
@pytest.mark.parametrize("name", ["x", "input:0", ""])
def test_same_bytes_as_onnx_and_round_trip(array, name):
    ours = encode(array, name)
    native = array.astype(array.dtype.newbyteorder("=")) if array.dtype.kind != "O" else array
    theirs = numpy_helper.from_array(native, name).SerializeToString()
    assert ours == theirs
    back, back_name = decode(ours)
    assert back_name == name and back.shape == array.shape
    if array.dtype.kind == "O":
        assert back.tolist() == array.tolist()
    else:
        assert back.dtype == array.dtype.newbyteorder("=") and np.array_equal(back, array)


def test_typed_fields_are_read_through_onnx():
    proto = helper.make_tensor("t", TensorProto.FLOAT, [2], [1.0, 2.0])  # float_data, not raw_data
    array, name = decode(proto.SerializeToString())
    assert name == "t" and array.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("data", [b"\x0a\xff\xff", b"\x08\x02\x10\x01\x4a\x03abc", b"\xff" * 8])
def test_garbage_raises_value_error(data):
    with pytest.raises(ValueError):
        decode(data)
