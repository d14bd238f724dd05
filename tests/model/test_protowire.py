"""The protobuf wire reader: what protobuf itself writes reads back, and truncated or overlong input is refused."""

from __future__ import annotations

import pytest
from onnx import TensorProto

from mgedump.model.protowire import LENGTH_DELIMITED, VARINT, WireError, fields, read_varint, write_varint


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**32, 2**63 - 1])
def test_varints_round_trip(value):
    data = write_varint(value)
    assert read_varint(data, 0) == (value, len(data))


def test_negative_varints_are_ten_bytes_as_in_protobuf():
    proto = TensorProto(dims=[-1])
    assert proto.SerializeToString() == write_varint(1 << 3 | VARINT) + write_varint(-1)


def test_fields_of_a_real_message():
    data = TensorProto(dims=[2, 3], data_type=1, name="x", raw_data=b"\x00" * 24).SerializeToString()
    found = [(number, wire, a, b) for number, wire, a, b in fields(data, 0, len(data))]
    assert [(n, w) for n, w, _, _ in found] == [
        (1, VARINT),
        (1, VARINT),
        (2, VARINT),
        (8, LENGTH_DELIMITED),
        (9, LENGTH_DELIMITED),
    ]
    assert [v for n, w, v, _ in found if n == 1] == [2, 3]
    name = next((a, b) for n, _, a, b in found if n == 8)
    assert data[name[0] : name[1]] == b"x"


@pytest.mark.parametrize("data", [b"\x80", b"\xff" * 11, b"\x0a\x05abc", b"\x0b", b"\x4a\x81"])
def test_broken_input_is_refused(data):
    with pytest.raises(WireError):
        list(fields(data, 0, len(data)))
