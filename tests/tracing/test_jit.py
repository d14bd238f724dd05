"""mgedump.tracing.jit: trace's record and replay semantics, exclude_from_trace, and every error case."""

from __future__ import annotations

import numpy as np
import pytest

import mgedump.functional as F
from mgedump import tensor
from mgedump.jit import TraceMismatchError, exclude_from_trace, trace
from mgedump.tracing.ops import OPS, OpDef
from tests.tracing.support import batch, make_cnn, raises_trace_error


@pytest.mark.parametrize("symbolic", [False, True])
def test_exclude_from_trace_reference_example(symbolic):
    state = {"i": 0}

    @trace(symbolic=symbolic)
    def f(x):
        ret = x + 1
        with exclude_from_trace():
            if state["i"] % 2 == 0:
                ret += 1
        return ret

    got = []
    for i in range(3):
        state["i"] = i
        got.append(f(tensor([1])).numpy().tolist())
    assert got == [[3], [2], [3]]


def test_exclude_block_feeds_the_rest_of_the_graph():
    scale = {"k": 2.0}

    @trace
    def f(x):
        y = x * 3
        with exclude_from_trace():
            z = y * scale["k"] + float(y.sum().numpy())  # real values, read from the graph on later calls
        return F.relu(z - 1), y

    x = tensor([1.0, -2.0])
    for k in (2.0, 5.0, -1.0):
        scale["k"] = k
        out, y = f(x)
        y_ref = np.array([3.0, -6.0], np.float32)
        np.testing.assert_allclose(y.numpy(), y_ref)
        np.testing.assert_allclose(out.numpy(), np.maximum(y_ref * k + y_ref.sum() - 1, 0), rtol=1e-6)


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("capture_as_const", [False, True])
def test_cnn_traced_equals_eager(cnn, symbolic, capture_as_const):
    x1, x2 = batch(seed=1), batch(seed=2)
    f = trace(lambda x: cnn(x), symbolic=symbolic, capture_as_const=capture_as_const)
    for x in (x1, x2, x1):
        expect = cnn(x).numpy()
        got = f(x).numpy()
        assert got.shape == (2, 10) and got.dtype == np.float32
        np.testing.assert_allclose(got, expect, atol=1e-5, rtol=0)


def test_later_calls_run_the_compiled_graph_not_numpy(monkeypatch):
    computed = []

    def counting(op: OpDef) -> OpDef:
        def compute(arrays, attrs):
            computed.append(op.name)
            return op.compute(arrays, attrs)

        return OpDef(op.name, compute, op.emit)

    for name in ("mul", "add"):
        monkeypatch.setitem(OPS, name, counting(OPS[name]))
    calls = {"python": 0}

    @trace
    def f(x):
        with exclude_from_trace():
            calls["python"] += 1
        return x * 2 + 1

    for v in (1.0, 2.0, 3.0):
        assert f(tensor([v])).numpy().tolist() == [v * 2 + 1]
    assert calls["python"] == 3  # the Python function is replayed every call
    assert computed == ["mul", "add"]  # numpy computed the first call only; later calls ran onnxruntime
    assert len(f._program.sessions) == 1  # one compiled session, reused


def test_externals_are_inputs_or_constants():
    w = {"t": tensor([1.0, 2.0])}

    @trace
    def fed(x):
        return x * w["t"]

    @trace(capture_as_const=True)
    def const(x):
        return x * w["t"]

    x = tensor([1.0, 1.0])
    assert fed(x).numpy().tolist() == [1, 2] and const(x).numpy().tolist() == [1, 2]
    w["t"] = tensor([3.0, 4.0])  # a new value: fed as an input on every call
    assert fed(x).numpy().tolist() == [3, 4]
    with pytest.raises(
        TraceMismatchError, match=r"captured constant external tensor #0 .*changed.*\[1\.0, 2\.0\].*\[3\.0, 4\.0\]"
    ):
        const(x)
    w["t"] = tensor([1.0, 2.0])  # the same value in a new tensor is fine
    assert const(x).numpy().tolist() == [1, 2]


def test_captured_module_weight_change_names_the_parameter():
    net = make_cnn(seed=3)
    f = trace(lambda x: net(x), capture_as_const=True)
    f(batch())
    net.fc.weight = tensor(net.fc.weight.numpy() * 2)
    with pytest.raises(
        TraceMismatchError, match=r"op #\d+ \(linear\).*captured constant external tensor 'fc.weight' changed"
    ):
        f(batch())


def test_changed_op_sequence_is_a_mismatch():
    mode = {"act": "relu"}

    @trace
    def f(x):
        y = x + 1
        return F.relu(y) if mode["act"] == "relu" else F.sigmoid(y)

    f(tensor([1.0]))
    mode["act"] = "sigmoid"
    with raises_trace_error("operator mismatch", r"^f: op #1: the trace has relu, this call issues sigmoid$"):
        f(tensor([1.0]))


def test_mismatch_messages_name_what_differed():
    cfg = {"n": 1, "axis": 0, "extra": False, "short": False}

    @trace
    def f(x):
        y = x + cfg["n"]
        if cfg["short"]:
            return y
        z = y.sum(axis=cfg["axis"])
        if cfg["extra"]:
            z = z * 2
        return z

    x = tensor(np.ones((2, 3), np.float32))
    f(x)
    cfg["n"] = 2
    with raises_trace_error(
        "tensors not equals", r"op #0 \(add\): input 1: a constant changed: traced 1\.0 \(float32\), got 2\.0"
    ):
        f(x)
    cfg.update(n=1, axis=1)
    with raises_trace_error(
        "operator mismatch", r"op #1 \(reduce\): attributes differ \(axes: traced \(0,\), got \(1,\)\)"
    ):
        f(x)
    cfg.update(axis=0, extra=True)
    with raises_trace_error("too many instructions", r"op #2 \(mul\) was not in the trace"):
        f(x)
    cfg.update(extra=False, short=True)
    with raises_trace_error("mismature end", r"issued 1 operation\(s\), the trace has 2: op #1 \(reduce\)"):
        f(x)
    cfg.update(short=False)
    assert f(tensor(np.ones((3, 3), np.float32))).numpy().tolist() == [6.0, 6.0, 6.0]  # new shapes: traced afresh
    with raises_trace_error(
        "argument mismatch", r"^f was traced with tensor arguments at \[0\]; this call gives them at \[0\], \[1\]"
    ):
        f(x, x)
    assert f(x).numpy().tolist() == [4.0, 4.0, 4.0]  # still usable


def test_mismatch_when_an_input_comes_from_elsewhere():
    use_x = {"v": True}

    @trace
    def f(x, y):
        a = x * 2
        b = y * 3
        return (a if use_x["v"] else b) + 1

    f(tensor([1.0]), tensor([1.0]))
    use_x["v"] = False
    with pytest.raises(
        TraceMismatchError,
        match=r"op #2 \(add\): input 0: the trace has the result of op #0 \(mul\), this call gives the result of op #1 \(mul\)",
    ):
        f(tensor([1.0]), tensor([1.0]))


def test_value_reads_are_computed_and_branches_checked():
    @trace
    def f(x):
        s = x.sum()
        if s.item() > 0:  # a value read outside exclude_from_trace: computed from the graph
            return x * 2
        return -x

    assert f(tensor([1.0, 2.0])).numpy().tolist() == [2, 4]
    assert f(tensor([3.0, 2.0])).numpy().tolist() == [6, 4]
    with pytest.raises(TraceMismatchError, match="op #1: the trace has mul, this call issues neg"):
        f(tensor([-3.0, 2.0]))  # the other branch


def test_keyword_inputs_and_passthrough_and_structures():
    @trace
    def f(x, *, bias, scale=1.0, mode="tuple"):
        y = x * scale + bias
        if mode == "dict":
            return {"y": y, "neg": -y}
        return (y, y.sum()) if mode == "tuple" else [y]

    x, b = tensor([1.0, 2.0]), tensor([0.5, 0.5])
    y, s = f(x, bias=b, scale=2.0)
    assert y.numpy().tolist() == [2.5, 4.5] and s.item() == 7.0
    y, s = f(tensor([0.0, 1.0]), bias=tensor([1.0, 1.0]), scale=2.0)
    assert y.numpy().tolist() == [1.0, 3.0] and s.item() == 4.0
    with pytest.raises(TraceMismatchError, match="constant changed"):
        f(x, bias=b, scale=3.0)
    with raises_trace_error("argument mismatch", r"\['bias'\]"):
        f(x, scale=2.0, bias=1.0)

    g = trace(lambda x: {"a": x + 1, "b": x * 2})
    out = g(x)
    assert set(out) == {"a", "b"} and out["b"].numpy().tolist() == [2, 4]
    assert g(x)["a"].numpy().tolist() == [2, 3]


def test_symbolic_placeholders_refuse_value_reads():
    @trace(symbolic=True)
    def f(x):
        return x * float(x.sum().numpy())

    with pytest.raises(RuntimeError, match=r"symbolic=True.*trace\(symbolic=False\).*exclude_from_trace"):
        f(tensor([1.0]))

    @trace(symbolic=True)
    def g(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(RuntimeError, match="symbolic=True"):
        g(tensor([1.0]))


def test_symbolic_first_call_runs_on_placeholders():
    seen = {}

    @trace(symbolic=True)
    def f(x):
        y = F.exp(x)
        seen["value"] = y._data
        seen["shape"] = y.shape
        return y

    out = f(tensor([0.0, 1.0]))
    assert seen["value"] is None and seen["shape"].numpy().tolist() == [2]  # symbolic_shape: a shape tensor
    np.testing.assert_allclose(out.numpy(), np.exp([0.0, 1.0]), rtol=1e-6)


def test_outputs_are_plain_tensors_after_the_call():
    leak = {}

    @trace
    def f(x):
        leak["t"] = x * 2
        return leak["t"] + 1

    f(tensor([1.0]))
    assert leak["t"].numpy().tolist() == [2.0]  # computed in the first (eager) call
    out = f(tensor([2.0]))
    assert out.numpy().tolist() == [5.0] and out._call is None
    with pytest.raises(RuntimeError, match="has ended and has no value"):
        leak["t"].numpy()  # replayed: it never had a value


def test_opt_level_and_profiling(tmp_path):
    with pytest.raises(ValueError, match="opt_level"):
        trace(lambda x: x, opt_level=4)
    f = trace(lambda x: F.relu(x) * 2, opt_level=3, profiling=True)
    f(tensor([1.0, -1.0]))
    f(tensor([1.0, -1.0]))
    profile = f.get_profile()
    assert profile["files"] and any(e.get("cat") == "Node" for e in profile["events"])
    assert f(tensor([2.0, -1.0])).numpy().tolist() == [4.0, 0.0]  # recompiled after the profile ended
    with pytest.raises(RuntimeError, match="profiling=True"):
        trace(lambda x: x).get_profile()


def test_decorator_forms():
    @trace
    def a(x):
        return x + 1

    @trace()
    def b(x):
        return x + 1

    c = trace(lambda x: x + 1, capture_as_const=True)
    for f in (a, b, c):
        assert f(tensor([1])).numpy().tolist() == [2]
    assert a.__name__ == "a" and "not called" in repr(trace(lambda x: x))


def test_exclude_with_capture_as_const_and_nested_traces_are_refused():
    @trace(capture_as_const=True)
    def f(x):
        with exclude_from_trace():
            pass
        return x

    with pytest.raises(RuntimeError, match="exclude_from_trace cannot be used.*capture_as_const=True"):
        f(tensor([1.0]))

    inner = trace(lambda x: x + 1)

    @trace
    def outer(x):
        return inner(x) * 2

    with pytest.raises(RuntimeError, match="nested traces are not supported"):
        outer(tensor([1.0]))
    with exclude_from_trace():  # outside any trace: nothing to exclude
        assert (tensor([1]) + 1).numpy().tolist() == [2]


def test_arguments_that_are_not_tensors_pass_through_and_outputs_are_tensors():
    f = trace(lambda x, n: x * n)
    assert f(tensor([1.0]), 3).numpy().tolist() == [3.0]
    assert f(tensor([2.0]), 3).numpy().tolist() == [6.0]
    with raises_trace_error("tensors not equals", "a constant changed"):
        f(tensor([2.0]), 4)  # the number became a constant of the graph
    g = trace(lambda x: (x, 3))
    with pytest.raises(TypeError, match="must return a Tensor.*a int at position 1"):
        g(tensor([1.0]))
