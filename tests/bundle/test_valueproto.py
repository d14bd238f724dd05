"""SequenceProto, MapProto and OptionalProto test data: onnx reads what mgedump writes (ZipMap's byte for byte as
onnx's own helper writes it), mgedump reads what onnx writes, and hostile bytes are refused."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from mgedump.base.errors import DataError
from mgedump.bundle.valueproto import decode_value, encode_value
from mgedump.measure.structured import measure_value
from mgedump.model.protowire import write_varint
from mgedump.model.valuetype import parse

ZIPMAP = parse("seq(map(int64,tensor(float)))")


def _zipmap_value() -> list[dict[int, np.ndarray]]:
    rows = np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], np.float32)
    return [{k: np.asarray(p) for k, p in enumerate(row)} for row in rows]


def test_zipmap_output_is_what_onnx_writes():
    value = _zipmap_value()
    data = encode_value(value, ZIPMAP, "probabilities")
    plain = [{k: v[()] for k, v in row.items()} for row in value]  # onnx's helper takes numpy scalars
    assert data == numpy_helper.from_list(plain, "probabilities").SerializeToString()
    decoded, name = decode_value(data, ZIPMAP)
    assert name == "probabilities" and measure_value(value, decoded).err == 0


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("seq(tensor(float))", [np.ones((2, 3), np.float32), np.zeros((1, 3), np.float32)]),
        ("seq(tensor(int64))", []),
        ("seq(tensor(string))", [np.array(["a", "bé"], dtype=object)]),
        ("map(string,tensor(double))", {"cat": np.asarray(0.25), "dog": np.asarray(0.75)}),
        ("map(int32,tensor(int64))", {-3: np.asarray(4), 7: np.asarray(-1)}),
        ("optional(tensor(float))", None),
        ("optional(tensor(float))", np.arange(4, dtype=np.float32)),
        ("optional(seq(tensor(float)))", [np.ones(2, np.float32)]),
        ("seq(seq(tensor(float)))", [[np.ones(2, np.float32)], []]),
    ],
)
def test_values_round_trip_through_onnx(text, value):
    vtype = parse(text)
    data = encode_value(value, vtype, "v")
    message = {"seq": onnx.SequenceProto, "map": onnx.MapProto, "optional": onnx.OptionalProto}[vtype.kind]()
    message.ParseFromString(data)
    assert message.name == "v"
    back, _ = decode_value(message.SerializeToString(), vtype)  # what onnx writes, read back
    m = measure_value(value, back)
    assert m.err == 0 and m.reason is None


def test_a_value_of_another_type_is_refused():
    data = encode_value([np.ones(2, np.float32)], parse("seq(tensor(float))"))
    with pytest.raises(ValueError, match="expected"):
        decode_value(data, parse("seq(tensor(int64))"))
    with pytest.raises(ValueError, match="elem_type"):
        decode_value(data, ZIPMAP)


@pytest.mark.parametrize(
    "data",
    [
        b"\x10\x04\x32\x05",  # a map value whose length runs past the message
        b"\x10\x04\x32\x02\x10",  # a truncated varint inside a map
        b"\x10\x04\x32\x04\x10\x07\x18\x01",  # a map with a key and no value
        b"\x10\x04\x1a\x00",  # a tensor field in a sequence of maps
        b"\x10\x04" + b"\x32\x00" * 3,  # empty maps are fine: 3 of them
    ],
)
def test_hostile_sequences_are_refused_or_read(data):
    try:
        value, _ = decode_value(data, ZIPMAP)
    except ValueError:
        return
    assert value == [{}, {}, {}]


def test_a_sequence_asking_for_far_more_memory_than_its_bytes_is_refused(monkeypatch):
    import mgedump.base.limits as limits

    monkeypatch.setattr(limits, "available_memory", lambda: 1 << 20)
    data = b"\x10\x01" + b"\x1a\x00" * 50_000  # 50 000 empty tensors in 100 kB
    with pytest.raises(DataError, match="a seq of 100002 bytes"):
        decode_value(data, parse("seq(tensor(float))"))


def test_duplicate_map_keys_are_refused():
    values = encode_value([np.asarray(1.0, np.float32)] * 2, parse("seq(tensor(float))"))
    data = b"\x10\x07" + b"\x18\x01" * 2 + b"\x2a" + write_varint(len(values)) + values
    with pytest.raises(ValueError, match="distinct: 1"):
        decode_value(data, parse("map(int64,tensor(float))"))
