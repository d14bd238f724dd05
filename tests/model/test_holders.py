"""Large attributes asked of protobuf's parser: a tree ensemble's millions of fields cost a native parse, and an
attribute that holds a tensor or a graph is still walked, whatever else it holds."""

from __future__ import annotations

import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from mgedump.base.errors import ModelError
from mgedump.model import holders
from mgedump.model.holders import PARSE_OVER, may_hold_tensors, native
from mgedump.model.modelfile import external_locations, model_source, uses_external_data

BIG = 50_000  # floats: an attribute far over PARSE_OVER


def _external(name: str, location: str) -> TensorProto:
    tensor = numpy_helper.from_array(np.zeros(4, np.float32), name)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "16")):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def _model(*nodes, outputs=("y",)) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes),
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _save(model: onnx.ModelProto, path) -> str:
    path.write_bytes(model.SerializeToString())
    (path.parent / "w.bin").write_bytes(bytes(16))
    return str(path)


def _floats_node(**extra) -> onnx.NodeProto:
    node = helper.make_node("Identity", ["x"], ["y"])
    attr = helper.make_attribute("values", np.linspace(0, 1, BIG, dtype=np.float32).tolist())
    for key, value in extra.items():
        getattr(attr, key).CopyFrom(value) if key in ("t", "g") else getattr(attr, key).extend(value)
    node.attribute.append(attr)
    return node


def test_protobuf_parses_large_attributes():
    assert native()
    assert PARSE_OVER < BIG * 5


def test_a_large_numbers_attribute_holds_no_tensor(tmp_path):
    path = _save(_model(_floats_node()), tmp_path / "m.onnx")
    attr = onnx.load(path).graph.node[0].attribute[0].SerializeToString()
    assert may_hold_tensors(memoryview(attr)) is False
    assert uses_external_data(path) is False
    assert external_locations(path) == set()
    assert model_source(path, "model.onnx.data").model_bytes is None


@pytest.mark.parametrize("holder", ["t", "tensors", "g"])
def test_a_tensor_beside_a_large_attributes_numbers_is_found(tmp_path, holder):
    """A crafted attribute holds both millions of numbers and a tensor (onnx's checker would refuse it; the scan
    must not miss the tensor, which may point anywhere)."""
    if holder == "g":
        sub = helper.make_graph([], "sub", [], [helper.make_tensor_value_info("w", TensorProto.FLOAT, [4])])
        sub.initializer.append(_external("w", "w.bin"))
        extra = {"g": sub}
    else:
        extra = {"t": _external("c", "w.bin")} if holder == "t" else {"tensors": [_external("c", "w.bin")]}
    path = _save(_model(_floats_node(**extra)), tmp_path / "m.onnx")
    assert uses_external_data(path) is True
    assert external_locations(path) == {"w.bin"}
    assert model_source(path, "model.onnx.data").data_paths == (str(tmp_path / "w.bin"),)


def test_the_native_answer_is_the_python_walks(tmp_path, monkeypatch):
    """With and without protobuf, the scan finds the same tensors (a large Constant's data, a large subgraph)."""
    big_sub = helper.make_graph(
        [helper.make_node("Constant", [], ["k"], value_floats=[0.5] * BIG)],
        "sub",
        [],
        [helper.make_tensor_value_info("k", TensorProto.FLOAT, None)],
    )
    big_sub.initializer.append(_external("w", "w.bin"))
    nodes = [
        _floats_node(),
        helper.make_node("If", ["c"], ["z"], then_branch=big_sub, else_branch=big_sub),
        helper.make_node("Constant", [], ["big"], value=numpy_helper.from_array(np.ones(BIG, np.float32))),
    ]
    path = _save(_model(*nodes), tmp_path / "m.onnx")
    native_answer = (uses_external_data(path), external_locations(path))
    monkeypatch.setattr(holders, "_message_class", None)
    assert not native()
    assert (uses_external_data(path), external_locations(path)) == native_answer == (True, {"w.bin"})


def test_a_truncated_large_attribute_is_not_a_model(tmp_path):
    model = _model(_floats_node())
    data = bytearray(model.SerializeToString())
    attr = model.graph.node[0].attribute[0].SerializeToString()
    start = bytes(data).index(attr)
    data[start + 100 : start + 110] = b"\xff" * 10  # a varint that never ends, inside the floats
    path = tmp_path / "m.onnx"
    path.write_bytes(bytes(data))
    assert uses_external_data(str(path)) is False
    with pytest.raises(ModelError, match="not a valid ONNX model"):
        external_locations(str(path))


def test_a_large_tree_ensemble_is_read_at_native_speed(tmp_path):
    """A random forest of 200 000 nodes in a dozen attributes (about 2 million fields): a Python walk of them
    takes seconds, protobuf's parse a few milliseconds; the bound leaves room for a slow machine. The time is this
    thread's CPU time, which other work on the machine does not lengthen."""
    from scripts.bench.needs import write_tree_ensemble

    path = str(tmp_path / "forest.onnx")
    write_tree_ensemble(path, 200_000)
    began = time.thread_time()
    assert uses_external_data(path) is False
    assert external_locations(path) == set()
    assert time.thread_time() - began < 0.5


@pytest.mark.parametrize(
    "payload",
    [
        b"\x0b" * 100_000,  # start-group tags nested 100 000 deep
        b"\x2a\xff\xff\xff\xff\x0f" + b"x" * 5000,  # a tensor field whose length runs past the attribute
        b"\x3a\x80" * 5000,  # a truncated length, over and over
    ],
)
def test_hostile_large_attributes_are_not_protobuf(payload):
    from mgedump.model.protowire import WireError

    with pytest.raises(WireError):
        may_hold_tensors(memoryview(payload))
