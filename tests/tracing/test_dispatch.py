"""mgedump.tracing.dispatch: apply, the registry of the traced call in progress, and the registered Tensor class."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from mgedump import Tensor, tensor
from mgedump.jit import exclude_from_trace, trace
from mgedump.tracing import dispatch
from mgedump.tracing.graph import Recorder


def test_apply_computes_eagerly_with_no_trace_running():
    out = dispatch.apply("add", [tensor([1.0, 2.0]), tensor([3.0, 4.0])], {})
    assert type(out) is Tensor and out.tolist() == [4.0, 6.0]
    assert out._call is None and out._vid is None and out._origin is None
    assert not out._data.flags.writeable  # results are immutable
    assert dispatch.current() is None and dispatch.intercepting() is None


def test_the_traced_call_receives_operations_except_inside_exclude_from_trace():
    seen = {}

    @trace
    def f(x):
        call = dispatch.current()
        seen["call"] = type(call)
        seen["intercepting"] = dispatch.intercepting() is call
        seen["recorded"] = dispatch.apply("mul", [x, x], {})._call is call
        seen["const"] = tensor([1.0])._origin
        with exclude_from_trace():
            seen["excluded_current"] = dispatch.current() is call
            seen["excluded_intercepting"] = dispatch.intercepting()
            eager = dispatch.apply("mul", [x, x], {})
            seen["eager"] = (eager._call is call, eager._vid, eager._origin)
        return x

    f(tensor([2.0]))
    assert seen == {
        "call": Recorder,
        "intercepting": True,
        "recorded": True,
        "const": dispatch.ORIGIN_CONST,
        "excluded_current": True,
        "excluded_intercepting": None,
        "eager": (True, None, dispatch.ORIGIN_EXCLUDED),  # computed now; an input of the graph if it is used
    }
    assert [op.name for op in f._program.ops] == ["mul"]
    assert dispatch.current() is None


def test_the_current_call_belongs_to_one_thread():
    started, release = threading.Event(), threading.Event()
    seen = {}

    @trace
    def f(x):
        started.set()
        release.wait(10)
        return x + 1

    worker = threading.Thread(target=lambda: seen.setdefault("out", f(tensor([1.0]))))
    worker.start()
    try:
        assert started.wait(10)
        assert dispatch.current() is None  # this thread computes eagerly meanwhile
        assert (tensor([1.0]) * 3).tolist() == [3.0]
    finally:
        release.set()
        worker.join(10)
    assert seen["out"].tolist() == [2.0] and [op.name for op in f._program.ops] == ["add"]


class Probe(dispatch.TracedCall):
    """A traced call that notes each operation it is given and answers with zeros."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, dict]] = []

    def apply(self, op, inputs, attrs):
        self.ops.append((op, attrs))
        return dispatch.wrap(np.zeros_like(inputs[0]._value()))

    def read_value(self, t):
        raise AssertionError("not used")

    def note_read(self, vid):
        raise AssertionError("not used")

    def note_name(self, vid, name):
        raise AssertionError("not used")


def test_a_registered_call_receives_every_operation_until_it_leaves():
    probe = Probe()
    dispatch.enter_call(probe)
    try:
        assert dispatch.current() is probe and dispatch.intercepting() is probe and probe.active
        assert (tensor([1.0, 2.0]) + 1).tolist() == [0.0, 0.0]  # operators reach the call through apply
        probe.excluded = 1
        assert dispatch.intercepting() is None and (tensor([1.0]) + 1).tolist() == [2.0]
        probe.excluded = 0
        with pytest.raises(RuntimeError, match="already in progress"):
            dispatch.enter_call(Probe())
    finally:
        dispatch.leave_call(probe)
    assert probe.ops == [("add", {})]
    assert dispatch.current() is None and not probe.active
    assert (tensor([1.0]) + 1).tolist() == [2.0]


def test_a_value_of_an_ended_call_cannot_be_read():
    leak = {}

    @trace(symbolic=True)
    def f(x):
        leak["t"] = x * 2
        return x

    f(tensor([1.0]))
    with pytest.raises(RuntimeError, match="has ended and has no value"):
        leak["t"].numpy()


def test_the_registered_tensor_type_is_the_public_tensor():
    assert dispatch.tensor_type() is Tensor
    assert issubclass(Tensor, dispatch.TensorBase) and Tensor.__slots__ == ()
    t = dispatch.wrap(np.arange(3), name="w")
    assert type(t) is Tensor and t.name == "w" and t.dtype == np.int64  # wrap keeps the dtype, tensor() would not
    with pytest.raises(TypeError, match="subclass of TensorBase"):
        dispatch.register_tensor_type(int)
    assert dispatch.tensor_type() is Tensor
