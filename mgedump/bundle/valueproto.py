"""ONNX ``SequenceProto``, ``MapProto`` and ``OptionalProto`` test-data files, without importing onnx.

ONNX's test layout stores a sequence, a map or an optional input or output
as one of these messages (onnx-data.proto), a tensor as a ``TensorProto``;
which one a file holds follows from the model's type for it. The encoder
writes the fields in field-number order, as protobuf (and so
``onnx.numpy_helper.from_list`` / ``from_dict`` / ``from_optional``) does,
each tensor through :mod:`.tensorproto`; the test suite checks that onnx
reads back the same values.

Values are held as :mod:`mgedump.model.valuetype` says (lists, dicts, None,
numpy arrays). The decoder reads untrusted bytes: it follows the declared
type, never the data, for its nesting; every length is checked by the wire
reader; and a message may not ask for far more memory than its bytes justify
(millions of empty tensors in a few bytes each).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base.errors import DataError
from ..base.limits import require_memory
from ..model.protowire import LENGTH_DELIMITED, VARINT, WireError, fields, read_varint, write_varint
from ..model.valuetype import ValueType
from .tensorproto import decode, encode

# SequenceProto / OptionalProto .elem_type, and the field holding each kind
UNDEFINED, TENSOR, SEQUENCE, MAP, OPTIONAL = 0, 1, 3, 4, 5
_ELEM_TYPES = {"tensor": TENSOR, "seq": SEQUENCE, "map": MAP, "optional": OPTIONAL}
_SEQ_FIELDS = {TENSOR: 3, SEQUENCE: 5, MAP: 6, OPTIONAL: 7}
_OPT_FIELDS = {TENSOR: 3, SEQUENCE: 5, MAP: 6, OPTIONAL: 7}
_NAME, _ELEM_TYPE = 1, 2
_MAP_KEY_TYPE, _MAP_KEYS, _MAP_STRING_KEYS, _MAP_VALUES = 2, 3, 4, 5
_KEY_CODES = {"int8": 3, "int16": 5, "int32": 6, "int64": 7, "uint8": 2, "uint16": 4, "uint32": 12, "uint64": 13}
STRING_KEY = 8
OBJECT_BYTES = 128  # what one decoded element takes at least as Python objects (an array, a dict entry)


def _number(number: int, value: int) -> bytes:
    return write_varint(number << 3 | VARINT) + write_varint(value)


def _field(number: int, payload: bytes) -> bytes:
    return write_varint(number << 3 | LENGTH_DELIMITED) + write_varint(len(payload)) + payload


def encode_value(value: Any, vtype: ValueType, name: str = "") -> bytes:
    """A value's test-data file: a TensorProto, SequenceProto, MapProto or OptionalProto named ``name``.

    Raises:
        TypeError: the value is not of the type.
    """
    head = _field(_NAME, name.encode("utf-8")) if name else b""
    if vtype.kind == "tensor":
        if not isinstance(value, np.ndarray):
            raise TypeError(f"a tensor, not {type(value).__name__}")
        return encode(value, name)
    elem = vtype.elem
    assert elem is not None
    if vtype.kind == "seq":
        if not isinstance(value, list):
            raise TypeError(f"a sequence, not {type(value).__name__}")
        code = _ELEM_TYPES[elem.kind]
        items = b"".join(_field(_SEQ_FIELDS[code], encode_value(item, elem)) for item in value)
        return head + _number(_ELEM_TYPE, code) + items
    if vtype.kind == "optional":
        if value is None:
            return head + _number(_ELEM_TYPE, UNDEFINED)
        code = _ELEM_TYPES[elem.kind]
        return head + _number(_ELEM_TYPE, code) + _field(_OPT_FIELDS[code], encode_value(value, elem))
    if not isinstance(value, dict):
        raise TypeError(f"a map, not {type(value).__name__}")
    if vtype.dtype == "string":
        keys = _number(_MAP_KEY_TYPE, STRING_KEY)
        keys += b"".join(_field(_MAP_STRING_KEYS, str(k).encode("utf-8", "surrogateescape")) for k in value)
    else:
        keys = _number(_MAP_KEY_TYPE, _KEY_CODES[vtype.dtype]) + b"".join(_number(_MAP_KEYS, int(k)) for k in value)
    dtype = np.dtype(object) if elem.dtype == "str" else np.dtype(elem.dtype)
    values = [np.asarray(v, dtype=dtype) for v in value.values()]
    return head + keys + _field(_MAP_VALUES, encode_value(values, ValueType("seq", elem=elem)))


def decode_value(data: bytes | memoryview, vtype: ValueType) -> tuple[Any, str]:
    """Parse a test-data file of this type; return the value and the message's name.

    Raises:
        ValueError: the bytes are not such a message, or do not hold a value of the type.
        DataError: a message that asks for far more memory than its bytes justify.
    """
    if vtype.kind == "tensor":
        array, name = decode(bytes(data))
        if vtype.dtype != "str" and array.dtype != np.dtype(vtype.dtype):
            raise ValueError(f"a tensor of {array.dtype}, expected {vtype.dtype}")
        return array, name
    buf = memoryview(data)
    # every element costs at least 2 bytes on the wire and OBJECT_BYTES in memory
    require_memory(len(buf) // 2 * OBJECT_BYTES, f"a {vtype.kind} of {len(buf)} bytes", DataError)
    try:
        return _decode(buf, vtype)
    except (WireError, UnicodeDecodeError) as exc:
        raise ValueError(f"not a valid {vtype.text} ({exc})") from None


def _parts(buf: memoryview) -> tuple[str, int, list[tuple[int, int, Any]]]:
    """A message's name, its elem_type / key_type, and its other fields as (number, wire type, value or payload)."""
    name, code, rest = "", 0, []
    for number, wire, value, end in fields(buf, 0, len(buf)):
        if (number, wire) == (_NAME, LENGTH_DELIMITED):
            name = bytes(buf[value:end]).decode("utf-8")
        elif (number, wire) == (_ELEM_TYPE, VARINT):
            code = value
        else:
            rest.append((number, wire, buf[value:end] if wire == LENGTH_DELIMITED else value))
    return name, code, rest


def _decode(buf: memoryview, vtype: ValueType) -> tuple[Any, str]:
    if vtype.kind == "tensor":
        return decode_value(buf, vtype)
    elem = vtype.elem
    assert elem is not None
    name, code, rest = _parts(buf)
    if vtype.kind == "map":
        return _decode_map(code, rest, vtype), name
    want = _ELEM_TYPES[elem.kind]
    if vtype.kind == "optional" and code == UNDEFINED and not rest:
        return None, name
    if code != want:
        raise ValueError(f"elem_type {code}, expected {want} for {vtype.text}")
    number = (_SEQ_FIELDS if vtype.kind == "seq" else _OPT_FIELDS)[want]
    items = [_decode(payload, elem)[0] for n, w, payload in rest if n == number and w == LENGTH_DELIMITED]
    if any(n != number for n, _, _ in rest):
        raise ValueError(f"a field other than the {elem.kind} values of a {vtype.text}")
    if vtype.kind == "seq":
        return items, name
    if len(items) != 1:
        raise ValueError(f"an optional holds {len(items)} values")
    return items[0], name


def _decode_map(code: int, rest: list[tuple[int, int, Any]], vtype: ValueType) -> dict[int | str, Any]:
    string_keys = vtype.dtype == "string"
    if code != (STRING_KEY if string_keys else _KEY_CODES[vtype.dtype]):
        raise ValueError(f"key_type {code}, expected the {vtype.dtype} keys of {vtype.text}")
    keys: list[int | str] = []
    values = None
    for number, wire, payload in rest:
        if string_keys and (number, wire) == (_MAP_STRING_KEYS, LENGTH_DELIMITED):
            keys.append(bytes(payload).decode("utf-8"))
        elif not string_keys and (number, wire) == (_MAP_KEYS, VARINT):
            keys.append(payload - (1 << 64) if payload >= 1 << 63 else payload)
        elif not string_keys and (number, wire) == (_MAP_KEYS, LENGTH_DELIMITED):  # packed, as protobuf may write
            keys += _packed(payload)
        elif (number, wire) == (_MAP_VALUES, LENGTH_DELIMITED) and values is None:
            assert vtype.elem is not None
            values = _decode(payload, ValueType("seq", elem=vtype.elem))[0]
        else:
            raise ValueError(f"an unexpected field {number} in a map")
    values = values or []
    if len(values) != len(keys) or len(set(keys)) != len(keys):
        raise ValueError(f"a map of {len(keys)} keys (distinct: {len(set(keys))}) and {len(values)} values")
    if any(np.ndim(v) for v in values):
        raise ValueError("a map value that is not a scalar")
    return dict(zip(keys, values, strict=True))


def _packed(payload: memoryview) -> list[int]:
    """Packed int64 keys: varints one after the other."""
    keys, pos = [], 0
    while pos < len(payload):
        value, pos = read_varint(payload, pos)
        keys.append(value - (1 << 64) if value >= 1 << 63 else value)
    return keys
