"""Serialize and parse ONNX ``TensorProto`` test-data files without importing onnx.

Importing onnx costs about 0.2 s, as much as a small model's whole run, and
packing needs only this one message. The encoder writes exactly the fields
``onnx.numpy_helper.from_array`` writes, in the same order (dims, data_type,
name, raw_data; string_data for strings), so the bytes are the same; the test
suite checks that. The decoder reads what that writes and hands anything else
(typed data fields, segments, external data) to onnx itself.
"""

from __future__ import annotations

import sys

import numpy as np

# onnx.TensorProto.DataType
_CODES = {
    np.dtype("float32"): 1, np.dtype("uint8"): 2, np.dtype("int8"): 3, np.dtype("uint16"): 4, np.dtype("int16"): 5,
    np.dtype("int32"): 6, np.dtype("int64"): 7, np.dtype("bool"): 9, np.dtype("float16"): 10, np.dtype("float64"): 11,
    np.dtype("uint32"): 12, np.dtype("uint64"): 13, np.dtype("complex64"): 14, np.dtype("complex128"): 15,
}
_DTYPES = {code: dtype for dtype, code in _CODES.items()}
STRING = 8


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def encode(array: np.ndarray, name: str) -> bytes:
    """A serialized TensorProto holding array, named name.

    Raises:
        TypeError: a dtype ONNX has no tensor type for (object arrays other than strings).
    """
    array = np.asarray(array)
    parts = [_varint(1 << 3) + _varint(int(d)) for d in array.shape]
    if array.dtype.kind in "USO":
        parts.append(_varint(2 << 3) + _varint(STRING))
        items = [x.encode("utf-8") if isinstance(x, str) else bytes(x) for x in array.reshape(-1).tolist()]
        parts += [_field(6, item) for item in items]
        if name:
            parts.append(_field(8, name.encode("utf-8")))
        return b"".join(parts)
    code = _CODES.get(array.dtype.newbyteorder("=") if array.dtype.byteorder not in "=|" else array.dtype)
    if code is None:
        raise TypeError(f"no ONNX tensor type for numpy dtype {array.dtype}")
    parts.append(_varint(2 << 3) + _varint(code))
    if name:
        parts.append(_field(8, name.encode("utf-8")))
    data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False)
    parts.append(_field(9, data.tobytes()))
    return b"".join(parts)


def read_varint(buf: memoryview, pos: int, end: int | None = None) -> tuple[int, int]:
    """Read a protobuf varint at pos (before end); return it and the position after it.

    Raises:
        ValueError: the varint is truncated or longer than 64 bits.
    """
    end = len(buf) if end is None else end
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


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
    pos = 0
    try:
        while pos < len(buf):
            key, pos = read_varint(buf, pos)
            number, wire = key >> 3, key & 7
            if wire == 0:
                value, pos = read_varint(buf, pos)
                if number == 1:
                    dims.append(value)
                elif number == 2:
                    dtype_code = value
                else:
                    other = True
            elif wire == 2:
                length, pos = read_varint(buf, pos)
                if pos + length > len(buf):
                    raise ValueError("field runs past the end")
                payload = buf[pos : pos + length]
                pos += length
                if number == 8:
                    name = bytes(payload).decode("utf-8")
                elif number == 9:
                    raw = payload
                else:
                    other = True
            else:
                other = True
                break
    except (ValueError, UnicodeDecodeError):
        other = True
    dtype = _DTYPES.get(dtype_code)
    if other or raw is None or dtype is None:
        return _decode_with_onnx(data)
    count = int(np.prod(dims)) if dims else 1
    if count * dtype.itemsize != len(raw):
        raise ValueError(f"raw data holds {len(raw)} bytes, but dims {dims} of {dtype} need {count * dtype.itemsize}")
    array = np.frombuffer(raw, dtype=dtype.newbyteorder("<")).reshape(dims)
    if sys.byteorder != "little":
        array = array.astype(dtype)
    return array.copy(), name


def _decode_with_onnx(data: bytes) -> tuple[np.ndarray, str]:
    from google.protobuf.message import DecodeError
    from onnx import TensorProto, numpy_helper

    proto = TensorProto()
    try:
        proto.ParseFromString(data)
        if proto.data_location == TensorProto.EXTERNAL:
            raise ValueError("the tensor refers to external data")
        return numpy_helper.to_array(proto), proto.name
    except (DecodeError, TypeError, RuntimeError, AssertionError) as exc:
        raise ValueError(f"{type(exc).__name__}: {exc}") from None
