"""MegEngine's jit.trace semantics: its keywords, TraceError reasons, new shapes, its functional API, graph breaks,
opt_level rewrites and the profile's shape; each as a MegEngine user would write it."""

from __future__ import annotations

import numpy as np
import pytest

import mgedump as mge
import mgedump.functional as F
import mgedump.module as M
from mgedump import tensor
from mgedump.jit import TraceError, TraceMismatchError, exclude_from_trace, trace
from mgedump.random import normal, seed, uniform
from tests.tracing.support import raises_trace_error

# ---------------------------------------------------------------- keywords


def test_without_host_runs_the_graph_not_the_function():
    calls = {"n": 0}

    @trace(without_host=True)
    def f(x, k=1.0):
        calls["n"] += 1
        return F.relu(x) * 2 + k

    assert f(tensor([1.0, -1.0])).numpy().tolist() == [3.0, 1.0]
    assert f(tensor([4.0, -2.0])).numpy().tolist() == [9.0, 1.0]
    assert calls["n"] == 1  # later calls ran the recorded graph only
    with raises_trace_error("argument mismatch", r"^f: argument \['k'\] is 3\.0"):
        f(tensor([1.0, 1.0]), k=3.0)  # the Python value cannot be followed without running the function
    assert f(tensor([1.0, 2.0, 3.0])).numpy().tolist() == [3.0, 5.0, 7.0]  # a new shape is traced afresh
    assert calls["n"] == 2

    @trace(without_host=True)
    def g(x):
        with exclude_from_trace():
            pass
        return x

    with pytest.raises(RuntimeError, match=r"trace\(without_host=True\) runs later calls without the Python function"):
        g(tensor([1.0]))


def test_imperative_computes_each_recorded_op_with_numpy():
    calls = {"n": 0}

    @trace(imperative=True)
    def f(x):
        calls["n"] += 1
        return F.relu(x) * 2

    for v in (1.0, -3.0, 2.5):
        assert f(tensor([v])).numpy().tolist() == [max(v, 0) * 2]
    assert calls["n"] == 3 and not f._program.sessions  # checked against the record, no onnxruntime session
    h = trace(lambda x: x + 1, imperative=True, without_host=True)
    assert [h(tensor([v])).item() for v in (1.0, 5.0)] == [2.0, 6.0]


def test_megengine_only_options_are_refused_by_name():
    for key in ("sublinear_memory_config", "dtr_config", "graph_opt_config"):
        with pytest.raises(NotImplementedError, match=rf"trace\({key}=\.\.\.\) is MegEngine's"):
            trace(lambda x: x, **{key: object()})
    with pytest.raises(NotImplementedError, match="record_only"):
        trace(lambda x: x, record_only=True)


def test_symbolic_shape_makes_shape_a_tensor_inside_the_trace():
    seen = {}

    def body(x):
        seen["shape"] = x.shape
        return x.reshape(x.shape[0], -1)

    trace(body, symbolic_shape=False)(tensor(np.ones((2, 3, 4), np.float32)))
    assert seen["shape"] == (2, 3, 4)
    f = trace(body, symbolic=True)  # MegEngine's default: symbolic_shape=True
    assert f(tensor(np.ones((2, 3, 4), np.float32))).shape == (2, 12)
    shape = seen["shape"]
    assert isinstance(shape, mge.Tensor) and shape.numpy().tolist() == [2, 3, 4] and shape.dtype == np.int32
    assert tensor(np.ones((2, 3))).shape == (2, 3)  # outside a trace: a tuple

    @trace(symbolic=True)
    def first_dim_is_zero(x):
        b = x.shape[0]
        assert b.ndim == 0  # a scalar tensor, as MegEngine's
        return b == 0

    for _ in range(3):
        assert first_dim_is_zero(tensor([0], dtype=np.int32)).numpy().tolist() is False


# ---------------------------------------------------------------- TraceError


PAIRS = [  # (traced expression, a later call's expression, MegEngine's reason)
    ("x + y + z", "x + y - z", "operator mismatch"),
    ("x + y + 1", "x + y + 2", "tensors not equals"),
    ("((x + y), (y + z))[0]", "x + y", "mismature end"),
    ("x + y + z", "z + (x + y)", "expect internal node, got external"),
    ("z + (x + y)", "x + y + z", "expect external node, got internal"),
    ("x + y + z", "x + y + z + z", "too many instructions"),
    ("((x + y), (y + z))[1]", "((x + y), (y + z))[0]", "data unreadable"),
    ("((x + y), (y + z))[1] + x", "((x + y), (y + z))[0] + x", "input id mismatch"),
]


@pytest.mark.parametrize(("normal_expr", "other_expr", "reason"), PAIRS)
@pytest.mark.parametrize("symbolic", [False, True])
def test_trace_error_carries_megengine_reason(normal_expr, other_expr, reason, symbolic):
    x, y, z = tensor([1, 2, 3, 4]), tensor([5, 6, 7, 8]), tensor([9, 0, 1, 2])
    mode = {"other": False}

    @trace(symbolic=symbolic)
    def fn(x, y, z):
        return eval(other_expr if mode["other"] else normal_expr)

    expect = eval(normal_expr).numpy()
    np.testing.assert_array_equal(fn(x, y, z).numpy(), expect)
    mode["other"] = True
    with raises_trace_error(reason, r"^fn: ") as caught:
        fn(x, y, z)
    assert TraceError is TraceMismatchError and isinstance(caught.value, RuntimeError)
    mode["other"] = False
    np.testing.assert_array_equal(fn(x, y, z).numpy(), expect)  # the trace is still usable


def test_data_unreadable_a_later_call_reads_only_what_the_first_call_read():
    mode = {"first": False, "peek": False}
    x, y, z = tensor([1, 2]), tensor([3, 4]), tensor([5, 6])

    @trace
    def fn(x, y, z):
        pair = (x + y, y + z)
        if mode["peek"]:
            pair[0].numpy()  # a read of a value the first call never read
        return pair[0] if mode["first"] else pair[1]

    assert fn(x, y, z).numpy().tolist() == [8, 10]
    mode["first"] = True
    with raises_trace_error("data unreadable", r"^fn: this call reads or returns the result of op #0 \(add\)"):
        fn(x, y, z)
    mode.update(first=False, peek=True)
    with raises_trace_error("data unreadable", r"op #0 \(add\), which the first call neither read nor returned"):
        fn(x, y, z)

    @trace
    def reads(x):
        y = x * 2
        with exclude_from_trace():
            seen.append(y.numpy().tolist())  # inside exclude_from_trace anything may be read
        return x + y

    seen: list = []
    assert [reads(tensor([v])).item() for v in (1, 2)] == [3, 6] and seen == [[2], [4]]
    mode["peek"] = False
    assert fn(x, y, z).numpy().tolist() == [8, 10]  # the trace is still usable


def test_exceptions_in_the_function_pass_through_and_the_structure_is_checked():
    state = {"raise": False, "tuple": False}

    class Boom(Exception):
        pass

    @trace
    def fn(x):
        y = x * 2
        if state["raise"]:
            raise Boom
        return (y,) if state["tuple"] else y

    fn(tensor([1.0]))
    state["raise"] = True
    with pytest.raises(Boom):
        fn(tensor([1.0]))
    state.update({"raise": False, "tuple": True})
    with raises_trace_error("output structure mismatch", "fn returned a tuple of 1 tensor"):
        fn(tensor([1.0]))
    state["tuple"] = False
    assert fn(tensor([3.0])).item() == 6.0


# ---------------------------------------------------------------- new input shapes


@pytest.mark.parametrize("symbolic", [False, True])
def test_a_new_batch_size_is_traced_afresh(symbolic):
    f = trace(lambda x: x.reshape(x.shape[0], 100) * 2, symbolic=symbolic, capture_as_const=True)
    for n in (2, 4, 8, 4):
        x = np.random.default_rng(n).standard_normal((n, 10, 10)).astype(np.float32)
        np.testing.assert_allclose(f(tensor(x)).numpy(), x.reshape(n, 100) * 2)
    assert len(f._programs) == 3


def test_broadcast_to_with_shape_tensors_as_arguments():
    @trace
    def f(x, shape):
        return F.broadcast_to(x, shape)

    shape = (tensor([2]), tensor([2]))
    assert f(tensor(np.ones((1, 1))), shape).shape == (2, 2)
    assert f(tensor(np.full((1, 2), 3.0)), shape).numpy().tolist() == [[3.0, 3.0], [3.0, 3.0]]
    with pytest.raises(ValueError, match=r"cannot broadcast a tensor of shape \(3,\) to \(2, 2\)"):
        F.broadcast_to(tensor([1, 2, 3]), (2, 2))


# ---------------------------------------------------------------- functional API


def test_nms_on_new_sizes_and_inside_exclude_from_trace():
    rng = np.random.default_rng(0)

    def inputs(n):
        boxes = np.zeros((n, 4))
        boxes[:, :2] = rng.random((n, 2)) * 100
        boxes[:, 2:] = rng.random((n, 2)) * 100 + 100
        return tensor(boxes), tensor(rng.random(n))

    seen = []

    @trace
    def f(boxes, scores):
        kept = F.vision.nms(boxes, scores=scores, iou_thresh=0.5, max_output=20)
        with exclude_from_trace():
            seen.append(F.vision.nms(boxes, scores=scores, iou_thresh=0.5).shape[0])
        return kept

    for n in (10, 20, 30, 30):
        boxes, scores = inputs(n)
        kept = f(boxes, scores)
        np.testing.assert_array_equal(kept.numpy(), F.vision.nms(boxes, scores, 0.5, max_output=20).numpy())
        assert kept.dtype == np.int32 and len(kept) <= 20
    assert len(seen) == 4


KEYS = {  # name -> (function of x and index tensors, index values)
    "int_tensor": (lambda x, i: x[i], {"i": 4}),
    "two_ints": (lambda x, i, j: x[i, j], {"i": 4, "j": 2}),
    "ints_apart": (lambda x, i, j: x[i, :, j, ...], {"i": 4, "j": 2}),
    "tensor_bounds": (lambda x, a, b: x[a:b], {"a": 1, "b": 3}),
    "bounds_and_ints": (lambda x, a, b: x[:, 0, a:b, ..., 1], {"a": 1, "b": 3}),
    "list": (lambda x, v: x[v], {"v": [1, 2, 3]}),
    "list_apart": (lambda x, v: x[v, ..., 0, 1:3], {"v": [1, 2, 3]}),
    "list_and_its_items": (lambda x, v: x[v, v[0], v[1]], {"v": [1, 2, 3]}),
    "everything": (lambda x, i, a, b, v: x[i, ..., :, v, a:b], {"i": 4, "a": 1, "b": 3, "v": [1, 2, 3]}),
    "negative": (lambda x, v: x[v, -1], {"v": [-1, 0, -5]}),
    "mask": (lambda x, m: x[m], {"m": None}),
}


@pytest.mark.parametrize("name", sorted(KEYS))
@pytest.mark.parametrize("symbolic_shape", [False, True])
def test_advanced_indexing_matches_numpy(name, symbolic_shape):
    fn, values = KEYS[name]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 5, 5, 5, 5)).astype(np.float32)
    arrays = {k: (x >= 0 if v is None else np.array(v)) for k, v in values.items()}
    expect = fn(x, **arrays)
    tensors = {k: tensor(v) for k, v in arrays.items()}
    np.testing.assert_array_equal(fn(tensor(x), **tensors).numpy(), expect)
    f = trace(fn, symbolic_shape=symbolic_shape)
    for _ in range(3):
        np.testing.assert_array_equal(f(tensor(x), **tensors).numpy(), expect)


def test_mask_length_follows_the_values_on_later_calls():
    f = trace(lambda x: x[x > 0] * 2)
    assert f(tensor([1.0, -1.0, 2.0])).numpy().tolist() == [2.0, 4.0]
    assert f(tensor([-1.0, -1.0, 3.0])).numpy().tolist() == [6.0]
    assert f(tensor([-1.0, -1.0, -3.0])).numpy().tolist() == []


def test_random_draws_afresh_and_seed_repeats_eager_values():
    seed(3)
    a = uniform(0, 1, size=(4,)).numpy()
    seed(3)
    assert uniform(0, 1, size=(4,)).numpy().tolist() == a.tolist()
    assert normal(size=(2, 2)).dtype == np.float32

    @trace(symbolic=True)
    def f():
        out = uniform(size=[10, 10]) + normal(mean=5.0, std=0.1, size=[10, 10]) * 0
        assert out.shape.numpy().tolist() == [10, 10]
        return out

    draws = [f().numpy() for _ in range(3)]
    assert all(d.shape == (10, 10) and d.min() >= 0 and d.max() < 1 for d in draws)
    assert not np.array_equal(draws[1], draws[2])  # onnxruntime draws new values every call


def test_small_functions_megengine_code_uses():
    x = F.arange(8).reshape(2, 4)
    assert x.dtype == np.float32 and x.numpy().tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert F.arange(1, 7, 2).numpy().tolist() == [1, 3, 5]
    assert x.detach() is x
    f = trace(lambda x: (x.detach() ** 2, x[:, 1::2]))
    f(x)
    squares, odd = f(x)  # a strided slice returned from a trace
    assert squares.numpy().tolist() == [[0, 1, 4, 9], [16, 25, 36, 49]] and odd.numpy().tolist() == [[1, 3], [5, 7]]
    with pytest.raises(ValueError, match="3 parts do not divide axis 1 of size 4"):
        F.split(x, 3, axis=1)
    with pytest.raises(ValueError, match="topk: k must be at least 1, got 0"):
        F.topk(x, 0)
    assert mge.Parameter([1.0], dtype=np.float32).numpy().tolist() == [1.0]


# ---------------------------------------------------------------- exclude_from_trace: a graph break


@pytest.mark.parametrize("symbolic", [False, True])
def test_exclude_from_trace_is_a_graph_break(symbolic):
    state = {"i": 0}

    @trace(symbolic=symbolic)
    def f(x):
        x = -x
        with exclude_from_trace():
            if state["i"] % 2:
                x = -x  # rebinds x on odd calls only
        y = x * 10
        return -x, y

    for i in range(4):
        state["i"] = i
        sign = -1 if i % 2 else 1
        neg, y = f(tensor([1]))
        assert neg.numpy().tolist() == [sign] and y.numpy().tolist() == [-10 * sign]


# ---------------------------------------------------------------- opt_level and profile


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the eager first calls compute 0 / 0 and exp(1e4)
def test_opt_level_applies_megengine_rewrites():
    def ratio(x):
        y = 2.0 * x
        return y / y

    def log_sum_exp(x, y):
        return F.log(F.exp(x) + F.exp(y))

    zero, big = tensor(0.0), tensor(1.0e4)
    for symbolic in (True, False):
        plain, rewritten = trace(ratio, symbolic=symbolic, opt_level=0), trace(ratio, symbolic=symbolic, opt_level=1)
        plain(zero), rewritten(zero)  # (a first eager call computes as written, as MegEngine's)
        assert not np.isfinite(plain(zero).numpy()) and rewritten(zero).item() == 1.0
        plain, rewritten = trace(log_sum_exp, opt_level=0, symbolic=symbolic), trace(log_sum_exp, symbolic=symbolic)
        plain(big, zero), rewritten(big, zero)
        assert not np.isfinite(plain(big, zero).numpy())
        np.testing.assert_allclose(rewritten(big, zero).numpy(), 1.0e4)


def test_get_profile_has_megengine_shape():
    class Net(M.Module):
        def __init__(self):
            super().__init__(name="net")
            self.fc = M.Linear(3, 2)

        def forward(self, x):
            return F.relu(self.fc(x))

    net = Net()
    f = trace(lambda x: net(x), profiling=True, opt_level=1)  # (2 and 3 fuse the product and the relu)
    x = tensor(np.ones((2, 3), np.float32))
    for _ in range(3):
        f(x)
    profile = f.get_profile()
    device = profile["profiler"]["device"]
    assert set(device) == {"net.fc.MatrixMul", "net.fc.ADD", "net.RELU"}  # named as in a dump: scope, MegEngine's op
    record = device["net.fc.MatrixMul"]["cpu0"]
    assert record["runs"] >= 2 and record["kern"] >= 0 and record["end"] >= record["start"]
    assert profile["graph_exec"]["operator"]["net.fc.MatrixMul"]["type"] == "Gemm"
    assert profile["files"] and profile["events"]
