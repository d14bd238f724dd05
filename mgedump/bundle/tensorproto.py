"""Serialize and parse ONNX ``TensorProto`` test-data files without importing onnx.

Importing onnx costs about 0.2 s, as much as a small model's whole run, and
packing needs only this one message. The encoder writes exactly the fields
``onnx.numpy_helper.from_array`` writes, in the same order (dims, data_type,
name, raw_data; string_data for strings), so the bytes are the same; the test
suite checks that. The decoder reads what that writes and hands anything else
(typed data fields, segments, external data) to onnx itself.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from ..base.deps import require
from ..base.errors import DataError
from ..base.limits import require_memory
from ..model.protowire import LENGTH_DELIMITED, VARINT, WireError, fields, write_varint

# onnx.TensorProto.DataType
_CODES: dict[np.dtype[Any], int] = {
    np.dtype("float32"): 1,
    np.dtype("uint8"): 2,
    np.dtype("int8"): 3,
    np.dtype("uint16"): 4,
    np.dtype("int16"): 5,
    np.dtype("int32"): 6,
    np.dtype("int64"): 7,
    np.dtype("bool"): 9,
    np.dtype("float16"): 10,
    np.dtype("float64"): 11,
    np.dtype("uint32"): 12,
    np.dtype("uint64"): 13,
    np.dtype("complex64"): 14,
    np.dtype("complex128"): 15,
}
_DTYPES = {code: dtype for dtype, code in _CODES.items()}
STRING = 8
_DIMS, _DATA_TYPE, _STRING_DATA, _NAME, _RAW_DATA = 1, 2, 6, 8, 9  # TensorProto field numbers


def _number(number: int, value: int) -> bytes:
    return write_varint(number << 3 | VARINT) + write_varint(value)


def _field(number: int, payload: bytes) -> bytes:
    return write_varint(number << 3 | LENGTH_DELIMITED) + write_varint(len(payload)) + payload


def encode(array: np.ndarray, name: str) -> bytes:
    """A serialized TensorProto holding array, named name.

    Raises:
        TypeError: a dtype ONNX has no tensor type for (object arrays other than strings).
    """
    head, payload = encode_parts(array, name)
    return head + bytes(payload)


def encode_parts(array: np.ndarray, name: str) -> tuple[bytes, memoryview]:
    """A serialized TensorProto as its head and its raw data (a view of the array's own bytes where it can be).

    ``head + payload`` is :func:`encode`'s result; writing the two parts one
    after the other spares a copy of a large tensor.

    Raises:
        TypeError: a dtype ONNX has no tensor type for (object arrays other than strings).
    """
    array = np.asarray(array)
    parts = [_number(_DIMS, int(d)) for d in array.shape]
    if array.dtype.kind in "USO":
        parts.append(_number(_DATA_TYPE, STRING))
        items = [x.encode("utf-8") if isinstance(x, str) else bytes(x) for x in array.reshape(-1).tolist()]
        parts += [_field(_STRING_DATA, item) for item in items]
        if name:
            parts.append(_field(_NAME, name.encode("utf-8")))
        return b"".join(parts), memoryview(b"")
    code = _CODES.get(array.dtype.newbyteorder("=") if array.dtype.byteorder not in "=|" else array.dtype)
    if code is None:
        raise TypeError(f"no ONNX tensor type for numpy dtype {array.dtype}")
    parts.append(_number(_DATA_TYPE, code))
    if name:
        parts.append(_field(_NAME, name.encode("utf-8")))
    data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False)
    payload = data.reshape(-1).view(np.uint8).data
    parts.append(write_varint(_RAW_DATA << 3 | LENGTH_DELIMITED) + write_varint(payload.nbytes))
    return b"".join(parts), payload


def decode(data: bytes) -> tuple[np.ndarray, str]:
    """Parse a serialized TensorProto; return the array and the tensor's name.

    Raises:
        ValueError: the bytes are not a TensorProto onnx can read either.
    """
    buf = memoryview(data)
    dims: list[int] = []
    dtype_code = 0
    name = ""
    raw = None
    other = False
    try:
        for number, wire, value, end in fields(buf, 0, len(buf)):
            if (number, wire) == (_DIMS, VARINT):
                dims.append(value - (1 << 64) if value >= 1 << 63 else value)  # int64: two's complement
            elif (number, wire) == (_DATA_TYPE, VARINT):
                dtype_code = value
            elif (number, wire) == (_NAME, LENGTH_DELIMITED):
                name = bytes(buf[value:end]).decode("utf-8")
            elif (number, wire) == (_RAW_DATA, LENGTH_DELIMITED):
                raw = buf[value:end]
            else:
                other = True
    except (WireError, UnicodeDecodeError):
        other = True
    dtype = _DTYPES.get(dtype_code)
    if other or raw is None or dtype is None:
        return _decode_with_onnx(data)
    _check_dims(dims)
    count = math.prod(dims)
    if count * dtype.itemsize != len(raw):
        raise ValueError(f"raw data holds {len(raw)} bytes, but dims {dims} of {dtype} need {count * dtype.itemsize}")
    array = np.frombuffer(raw, dtype=dtype.newbyteorder("<")).reshape(dims)
    if sys.byteorder != "little":
        array = array.astype(dtype)
    return array.copy(), name


PARSED_BYTES_PER_BYTE = 24  # what protobuf's parse may take per byte of a tensor (an empty string: 2 bytes)
STRING_BYTES = 64  # what one element of a string tensor takes as a Python object (with its pointer)
FEW_STRINGS = 1 << 20  # a string tensor up to this many elements is read whatever its bytes


def _check_strings(count: int, n_bytes: int) -> None:
    """A string tensor may not ask for much more memory than its bytes justify: millions of empty strings in a
    few bytes each would take gigabytes as Python objects.

    Raises:
        DataError: too many elements for its bytes, or more memory than this process has.
    """
    if count > FEW_STRINGS and count * 4 > n_bytes:
        raise DataError(
            f"a string tensor of {count} elements in {n_bytes} bytes (mostly empty strings) asks for "
            f"{count * STRING_BYTES / (1 << 30):.1f} GiB as objects: more than its bytes justify"
        )
    require_memory(count * STRING_BYTES, f"a string tensor of {count} elements", DataError)


def _check_dims(dims: list[int]) -> None:
    if any(d < 0 for d in dims):
        raise ValueError(f"negative dim in dims {dims}")


def _decode_with_onnx(data: bytes) -> tuple[np.ndarray, str]:
    onnx = require("onnx", purpose="reading this tensor (a layout only onnx decodes)")
    TensorProto, numpy_helper = onnx.TensorProto, onnx.numpy_helper

    # protobuf holds each element of a repeated field in a few words: bounded by the bytes, before parsing
    require_memory(len(data) * PARSED_BYTES_PER_BYTE, f"a tensor of {len(data)} bytes", DataError)
    proto = TensorProto()
    try:
        proto.ParseFromString(data)
        if proto.data_location == TensorProto.EXTERNAL:
            raise ValueError("the tensor refers to external data")
        _check_dims(list(proto.dims))
        if proto.data_type not in TensorProto.DataType.values():
            raise ValueError(f"unknown data_type {proto.data_type}")
        count = math.prod(proto.dims)
        if proto.data_type == TensorProto.STRING:
            _check_strings(count, len(data))
        return numpy_helper.to_array(proto), proto.name
    except ValueError:
        raise
    except Exception as exc:  # protobuf's DecodeError, onnx's errors for unknown data types and bad field sizes
        raise ValueError(f"{type(exc).__name__}: {exc}") from None
