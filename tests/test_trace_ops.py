"""Every traced operation: eager numpy result == onnxruntime result of the traced graph (symbolic and not)."""

from __future__ import annotations

import numpy as np
import pytest

import mgedump.functional as F
from mgedump import Tensor, tensor
from mgedump.jit import trace

RNG = np.random.default_rng(0)
A = RNG.standard_normal((2, 3, 4)).astype(np.float32)
B = RNG.standard_normal((2, 3, 4)).astype(np.float32)
POS = (np.abs(A) + 0.5).astype(np.float32)
I = RNG.integers(-5, 6, (3, 4)).astype(np.int32)
J = RNG.integers(1, 4, (3, 4)).astype(np.int32)
IMG = RNG.standard_normal((2, 4, 7, 6)).astype(np.float32)
W = RNG.standard_normal((6, 2, 3, 3)).astype(np.float32)
CB = RNG.standard_normal(6).astype(np.float32)

# name -> (function of tensors, input arrays, numpy reference of the input arrays or None)
CASES = {
    "add_scalar": (lambda x: x + 1, [A], lambda a: a + 1),
    "radd_rsub_rmul": (lambda x: (2 - x) * 3 + 1.5, [A], lambda a: (2 - a) * 3 + 1.5),
    "div_pow": (lambda x, y: x / (y * y + 1) ** 0.5, [A, B], lambda a, b: a / (b * b + 1) ** 0.5),
    "int_true_div": (lambda i, j: i / j, [I, J], lambda i, j: i / j),
    "int_floordiv_mod": (lambda i, j: (i // j, i % j, -i % j), [I, J], lambda i, j: (i // j, i % j, -i % j)),
    "float_floordiv_mod": (lambda x: (x // 0.7, x % 0.7), [A], lambda a: (a // np.float32(0.7), a % np.float32(0.7))),
    "int_float_promotion": (lambda i, x: i + x[0, :3, :], [I, A], lambda i, a: i + a[0, :3, :]),
    "int_times_float_scalar": (lambda i: i * 1.5, [I], lambda i: i * 1.5),
    "compare": (lambda x, y: (x > y, x >= 0, x < y, x <= y, x == x, x != y), [A, B],
                lambda a, b: (a > b, a >= 0, a < b, a <= b, a == a, a != b)),
    "logic": (lambda x, y: ((x > 0) & (y > 0), (x > 0) | (y > 0), (x > 0) ^ (y > 0), ~(x > 0)), [A, B],
              lambda a, b: ((a > 0) & (b > 0), (a > 0) | (b > 0), (a > 0) ^ (b > 0), ~(a > 0))),
    "bool_arith": (lambda x: (x > 0) * 2.0 + (x > 1), [A], lambda a: (a > 0) * 2.0 + (a > 1)),
    "unary": (lambda x: (-x, abs(x), F.exp(x), F.log(x), F.sqrt(x), F.tanh(x), F.sin(x), F.cos(x), F.floor(x),
                         F.ceil(x), F.round(x * 3), F.sign(x - 1)), [POS],
              lambda a: (-a, np.abs(a), np.exp(a), np.log(a), np.sqrt(a), np.tanh(a), np.sin(a), np.cos(a),
                         np.floor(a), np.ceil(a), np.rint(a * 3), np.sign(a - 1))),
    "int_unary": (lambda i: (-i, abs(i), F.floor(i), F.relu(i), F.sqrt(i * i)), [I],
                  lambda i: (-i, np.abs(i), i, np.maximum(i, 0), np.sqrt(i * i))),
    "activations": (lambda x: (F.relu(x), F.sigmoid(x), F.softmax(x, axis=2), F.log_softmax(x, axis=1),
                               F.softmax(x[0])), [A], None),
    "minmax_clip_where": (lambda x, y: (F.maximum(x, y), F.minimum(x, 0), F.clip(x, -0.5, 0.5), F.clip(x, upper=y),
                                        F.clip(x, lower=0), F.where(x > y, x, y), F.where(x > 0, x, 0)), [A, B],
                          lambda a, b: (np.maximum(a, b), np.minimum(a, 0), np.clip(a, -0.5, 0.5), np.minimum(a, b),
                                        np.maximum(a, 0), np.where(a > b, a, b), np.where(a > 0, a, 0))),
    "reductions": (lambda x: (x.sum(), x.sum(axis=1), x.mean(axis=(0, 2), keepdims=True), x.max(axis=-1),
                              x.min(axis=0, keepdims=True), x.prod(axis=2), x.argmax(), x.argmax(axis=1),
                              x.argmin(axis=2, keepdims=True), F.argmax(x, 0, keepdims=True)), [A],
                   lambda a: (a.sum(), a.sum(axis=1), a.mean(axis=(0, 2), keepdims=True), a.max(axis=-1),
                              a.min(axis=0, keepdims=True), a.prod(axis=2), a.argmax(), a.argmax(axis=1),
                              a.argmin(axis=2, keepdims=True), np.argmax(a, 0, keepdims=True))),
    "int_reductions": (lambda i: (i.sum(), i.mean(axis=0), i.max(), (i > 0).sum(axis=1)), [I],
                       lambda i: (i.sum(), i.mean(axis=0), i.max(), (i > 0).sum(axis=1))),
    "shapes": (lambda x: (x.reshape(6, -1), x.reshape((4, 6)), x.transpose(), x.transpose(1, 0, 2), x.T,
                          F.flatten(x), F.flatten(x, 1), x.flatten(), F.expand_dims(x, (0, -1)), F.squeeze(x[:, :1], 1),
                          x.astype(np.int32), x.astype("float16")), [A],
               lambda a: (a.reshape(6, -1), a.reshape(4, 6), a.T, a.transpose(1, 0, 2), a.T, a.reshape(-1),
                          a.reshape(2, -1), a.reshape(-1), a[None, ..., None], a[:, 0], a.astype(np.int32),
                          a.astype(np.float16))),
    "indexing": (lambda x: (x[0], x[-1, 1:], x[:, ::2, 1], x[..., ::-1], x[None, 1, ..., -1], x[:, -2:0:-1],
                            x[1, 2, 3], x[:, None, :, 1:3]), [A],
                 lambda a: (a[0], a[-1, 1:], a[:, ::2, 1], a[..., ::-1], a[None, 1, ..., -1], a[:, -2:0:-1],
                            a[1, 2, 3], a[:, None, :, 1:3])),
    "concat_stack": (lambda x, y: (F.concat([x, y], axis=1), F.concat([x, y[:, :1]], axis=-2), F.stack([x, y]),
                                   F.stack([x, y], axis=-1)), [A, B],
                     lambda a, b: (np.concatenate([a, b], 1), np.concatenate([a, b[:, :1]], -2), np.stack([a, b]),
                                   np.stack([a, b], -1))),
    "matmul_linear": (lambda x, y: (x @ y.transpose(0, 2, 1), F.matmul(x, y, transpose_b=True), x[0] @ y[0, 0],
                                    F.linear(x, y[0], y[1, :, 0]), F.linear(x[0], y[1]), F.matmul(x[0], x[1], True)), [A, B],
                      lambda a, b: (a @ b.transpose(0, 2, 1), a @ b.transpose(0, 2, 1), a[0] @ b[0, 0],
                                    a @ b[0].T + b[1, :, 0], a[0] @ b[1].T, a[0].T @ a[1])),
    "conv2d": (lambda x, w, b: (F.conv2d(x, w, b, groups=2), F.conv2d(x, w, None, stride=2, padding=1, groups=2),
                                F.conv2d(x[:, :2], w, b), F.conv2d(x[:, :2], w[:, :, :1, :2], b, padding=(0, 1)),
                                F.conv2d(x, w, b.reshape(1, 6, 1, 1), stride=(1, 2), padding=(2, 1), dilation=2, groups=2)),
               [IMG, W, CB], None),
    "pooling": (lambda x: (F.max_pool2d(x, 2), F.max_pool2d(x, 3, stride=2, padding=1), F.avg_pool2d(x, 2),
                           F.avg_pool2d(x, 3, 2, 1), F.avg_pool2d(x, (2, 3), padding=1, mode="average")), [IMG], None),
    "batch_norm": (lambda x, m, v: (F.batch_norm(x, m, v + 1), F.batch_norm(x, m, v + 1, v, m, eps=1e-3),
                                    F.batch_norm(x[:, :, 0, 0], m, v + 1)),
                   [IMG, np.abs(A[0, 0]), np.abs(B[0, 0])], None),
    "numpy_ufuncs": (lambda x, y: (np.exp(x), np.maximum(x, 0), np.add(x, y), np.subtract(1, x), np.multiply(x, 2),
                                   np.true_divide(x, y), np.power(np.abs(x), 2), np.negative(x), np.absolute(x),
                                   np.tanh(x), np.greater(x, y), np.less(x, 0), np.equal(x, y), np.minimum(x, y),
                                   np.sqrt(np.abs(x)), np.log(np.abs(x) + 1), np.matmul(x, y.transpose(0, 2, 1)),
                                   np.square(x), np.logical_and(x > 0, y > 0), np.logical_not(x > 0), x ** 2 + np.ones(4),
                                   np.ones(4, np.float32) * x), [A, B],
                     lambda a, b: (np.exp(a), np.maximum(a, 0), a + b, 1 - a, a * 2, a / b, np.abs(a) ** 2, -a, np.abs(a),
                                   np.tanh(a), a > b, a < 0, a == b, np.minimum(a, b), np.sqrt(np.abs(a)),
                                   np.log(np.abs(a) + 1), a @ b.transpose(0, 2, 1), a * a, (a > 0) & (b > 0), ~(a > 0),
                                   a ** 2 + np.ones(4), np.ones(4, np.float32) * a)),
    "numpy_functions": (lambda x, y: (np.concatenate([x, y]), np.stack([x, y], axis=1), np.where(x > 0, x, y),
                                      np.reshape(x, (4, 6)), np.transpose(x, (2, 0, 1)), np.sum(x, axis=1),
                                      np.mean(x), np.max(x, axis=0), np.min(x, keepdims=True), np.argmax(x, axis=2),
                                      np.clip(x, -1, 1), np.expand_dims(x, 1), np.squeeze(x[:1]), np.ravel(x),
                                      np.dot(x[0], y[0].T), np.swapaxes(x, 0, 2), np.prod(x, axis=0), np.round(x),
                                      np.concatenate([x, np.zeros((1, 3, 4), np.float32)])), [A, B],
                        lambda a, b: (np.concatenate([a, b]), np.stack([a, b], axis=1), np.where(a > 0, a, b),
                                      a.reshape(4, 6), a.transpose(2, 0, 1), a.sum(1), a.mean(), a.max(0),
                                      a.min(keepdims=True), a.argmax(2), np.clip(a, -1, 1), a[:, None], a[0], a.ravel(),
                                      a[0] @ b[0].T, a.transpose(2, 1, 0), a.prod(0), np.rint(a),
                                      np.concatenate([a, np.zeros((1, 3, 4), np.float32)]))),
    "constants_inside": (lambda x: x * tensor([1.0, 2.0, 3.0, 4.0]) + Tensor(x) * 0 + tensor(2.0), [A],
                         lambda a: a * np.array([1, 2, 3, 4], np.float32) + 2),
}


def _flat(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _check(got, expect, name):
    for k, (g, e) in enumerate(zip(_flat(got), _flat(expect))):
        g = g.numpy() if isinstance(g, Tensor) else np.asarray(g)
        e = e.numpy() if isinstance(e, Tensor) else np.asarray(e)
        assert g.shape == e.shape, (name, k, g.shape, e.shape)
        assert g.dtype == e.dtype, (name, k, g.dtype, e.dtype)
        tol = 1e-2 if g.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=tol, atol=tol, err_msg=f"{name} output {k}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_eager_matches_numpy_and_traced(name):
    fn, arrays, reference = CASES[name]
    inputs = [tensor(a, a.dtype) for a in arrays]
    eager = fn(*inputs)
    if reference is not None:
        _check(eager, reference(*arrays), f"{name} (eager vs numpy)")
    for symbolic in (False, True):
        f = trace(fn, symbolic=symbolic)
        _check(f(*inputs), eager, f"{name} (first call, symbolic={symbolic})")
        _check(f(*inputs), eager, f"{name} (compiled, symbolic={symbolic})")


def test_conv_pool_bn_against_direct_formulas():
    x = IMG.astype(np.float64)
    w = W.astype(np.float64)
    # grouped conv by the definition
    out = np.zeros((2, 6, 5, 4))
    for g in range(2):
        for o in range(3):
            oc = g * 3 + o
            for i in range(5):
                for j in range(4):
                    out[:, oc, i, j] = np.sum(x[:, g * 2:(g + 1) * 2, i:i + 3, j:j + 3] * w[oc], axis=(1, 2, 3)) + CB[oc]
    got = F.conv2d(tensor(IMG), tensor(W), tensor(CB), groups=2).numpy()
    np.testing.assert_allclose(got, out, rtol=1e-4, atol=1e-4)
    pooled = F.max_pool2d(tensor(IMG), 2).numpy()
    np.testing.assert_array_equal(pooled, IMG[:, :, :6, :6].reshape(2, 4, 3, 2, 3, 2).max(axis=(3, 5)))
    avg = F.avg_pool2d(tensor(IMG), 3, stride=2, padding=1).numpy()
    assert avg[0, 0, 0, 0] == pytest.approx(IMG[0, 0, :2, :2].mean(), rel=1e-5)  # padding not counted
    avg_in = F.avg_pool2d(tensor(IMG), 3, stride=2, padding=1, mode="average").numpy()
    assert avg_in[0, 0, 0, 0] == pytest.approx(IMG[0, 0, :2, :2].sum() / 9, rel=1e-5)


def test_tensor_basics_and_dtype_policy():
    t = tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.dtype == np.float32 and t.shape == (2, 2) and t.ndim == 2 and t.size == 4 and len(t) == 2
    assert tensor([1, 2]).dtype == np.int32 and tensor(np.arange(3)).dtype == np.int32
    assert tensor([1, 2], dtype=np.int64).dtype == np.int64 and tensor([True]).dtype == np.bool_
    assert tensor(np.ones(2, np.float16)).dtype == np.float16
    assert (t + 1).dtype == np.float32 and (tensor([1]) + 1.5).dtype == np.float64  # numpy's promotion
    assert t[1, 0].item() == 3.0 and float(t[0, 1]) == 2.0 and int(t.sum()) == 10 and bool(t[0, 0])
    assert [row.numpy().tolist() for row in t] == [[1.0, 2.0], [3.0, 4.0]]
    assert "Tensor([[1., 2.]," in repr(t)
    a = np.ones(3, np.float32)
    u = tensor(a)
    a[0] = 5  # tensor() copies
    assert u.numpy().tolist() == [1, 1, 1]
    n = u.numpy()
    n[0] = 7  # numpy() copies
    assert u.numpy().tolist() == [1, 1, 1]
    with pytest.raises(TypeError, match="immutable"):
        u[0] = 1
    with pytest.raises(TypeError, match="basic indexing"):
        u[tensor([0, 1])]
    with pytest.raises(IndexError):
        u[3]
    with pytest.raises(ValueError, match="cannot reshape"):
        u.reshape(2, 2)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(u)
    with pytest.raises(TypeError, match="bool tensors"):
        tensor([1, 2]) & tensor([3, 1])
    with pytest.raises(TypeError, match="complex"):
        t + 1j
    assert isinstance(np.cumsum(u), np.ndarray)  # unsupported numpy function outside a trace: plain numpy
    assert {t: 1}[t] == 1  # hashable by identity


def test_functional_argument_errors():
    x = tensor(IMG)
    with pytest.raises(ValueError, match="does not fit weight"):
        F.conv2d(x, tensor(W[:, :1]))
    with pytest.raises(ValueError, match="bias"):
        F.conv2d(x, tensor(W), tensor(np.ones(5, np.float32)), groups=2)
    with pytest.raises(ValueError, match="do not fit"):
        F.max_pool2d(x, 3, padding=3)
    with pytest.raises(TypeError, match="floating-point"):
        F.max_pool2d(tensor(np.ones((1, 1, 2, 2), np.int32)), 2)
    with pytest.raises(ValueError, match="mode"):
        F.avg_pool2d(x, 2, mode="median")
    with pytest.raises(NotImplementedError, match="eval"):
        F.batch_norm(x, tensor(np.zeros(4)), tensor(np.ones(4)), training=True)
    with pytest.raises(ValueError, match="running_mean"):
        F.batch_norm(x, tensor(np.zeros(3)), tensor(np.ones(4)))
    with pytest.raises(ValueError, match="linear"):
        F.linear(x, tensor(np.ones((3, 5))))
    with pytest.raises(ValueError, match="lower or an upper"):
        F.clip(x)
    with pytest.raises(ValueError, match="concat"):
        F.concat([tensor(A), tensor(I)], axis=0)
    with pytest.raises(ValueError, match="permutation"):
        tensor(A).transpose(0, 0, 1)
    with pytest.raises(ValueError, match="squeeze"):
        F.squeeze(tensor(A), 0)


def _dtype_ops(x):
    outs = [x + 1, x - x, x * 2, x // 2, x % 3, x ** 2, F.maximum(x, 1), F.minimum(x, 1), F.relu(x), x > 1, x <= 2,
            x == 2, F.where(x > 1, x, x * 0), x.sum(), x.max(axis=0), x.min(), x.argmax(), x.argmin(axis=1), x.mean(),
            x.prod(axis=1), -x, abs(x), F.clip(x, 1, 3), x @ x.T, x[::-1, 1:], F.concat([x, x]), x.reshape(-1),
            F.stack([x, x], axis=1).transpose(2, 0, 1), x / 2]
    if x.dtype.kind == "f":
        outs += [F.exp(x / 8), F.sqrt(x), F.sigmoid(x), F.softmax(x, axis=1)]
    return tuple(outs)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "float16", "float32", "float64"])
def test_every_dtype_compiles_and_matches_numpy(dtype):
    x = tensor(np.arange(12).reshape(3, 4) % 5, dtype)
    eager = _dtype_ops(x)
    f = trace(_dtype_ops)
    f(x)
    _check(f(x), eager, f"dtype {dtype}")


def test_float64_conv_and_avg_pool_compute_in_float32():
    x = tensor(IMG.astype(np.float64), np.float64)
    w = tensor(W[:, :4 // 2].astype(np.float64), np.float64)
    f = trace(lambda x, w: (F.conv2d(x, w, groups=2), F.avg_pool2d(x, 2), F.max_pool2d(x, 2)))
    eager = f(x, w)
    assert [t.dtype for t in eager] == [np.float32, np.float32, np.float64]
    _check(f(x, w), eager, "float64 conv/pool")


from hypothesis import example, given, settings
from hypothesis import strategies as st


@st.composite
def _shape_and_index(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    items = []
    for dim in shape:
        kind = draw(st.sampled_from(["int", "slice", "full"]))
        if kind == "int":
            items.append(draw(st.integers(-dim, dim - 1)))
        elif kind == "slice":
            bound = st.none() | st.integers(-dim - 2, dim + 2)
            items.append(slice(draw(bound), draw(bound), draw(st.none() | st.sampled_from([-3, -2, -1, 1, 2, 3]))))
        else:
            items.append(slice(None))
        if draw(st.booleans()) and draw(st.booleans()):
            items.append(None)
    if draw(st.booleans()) and items:  # replace a trailing run by an ellipsis
        cut = draw(st.integers(0, len(items) - 1))
        items = items[:cut] + [Ellipsis]
    return shape, tuple(items)


@settings(max_examples=40, deadline=None)
@given(_shape_and_index())
@example(((1,), (slice(-2, None, -3),)))
@example(((3, 2), (slice(None, None, -1), None, 0)))
def test_basic_indexing_matches_numpy(case):
    shape, key = case
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    expect = a[key]
    t = tensor(a)
    np.testing.assert_array_equal(t[key].numpy(), expect)
    f = trace(lambda x: x[key] + 0)
    f(t)
    got = f(t).numpy()
    assert got.shape == expect.shape
    np.testing.assert_array_equal(got, expect)
