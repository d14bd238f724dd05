"""mgedump.tracing.functional: every function, eager (== numpy) and traced (== eager), on every dtype."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import mgedump.functional as F
from mgedump import Tensor, tensor
from mgedump.jit import trace
from mgedump.random import normal, uniform
from tests.tracing.support import check_eager_and_traced, check_outputs


def _softmax(a: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


RNG = np.random.default_rng(0)
A = RNG.standard_normal((2, 3, 4)).astype(np.float32)
B = RNG.standard_normal((2, 3, 4)).astype(np.float32)
POS = (np.abs(A) + 0.5).astype(np.float32)
INTS = RNG.integers(-5, 6, (3, 4)).astype(np.int32)
DIVS = RNG.integers(1, 4, (3, 4)).astype(np.int32)
IMG = RNG.standard_normal((2, 4, 7, 6)).astype(np.float32)
W = RNG.standard_normal((6, 2, 3, 3)).astype(np.float32)
CB = RNG.standard_normal(6).astype(np.float32)

HOMOGRAPHY = np.array(
    [[[0.9, 0.1, 0.5], [-0.2, 1.1, 0.25], [0.01, -0.02, 1.0]], [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]],
    np.float32,
)


def _warp_reference(img: np.ndarray, mat: np.ndarray, out_hw: tuple, border: str = "replicate") -> np.ndarray:
    """warp_perspective pixel by pixel: mat maps (w, h, 1) to the input point, sampled bilinearly."""
    n, c, h, w = img.shape
    out = np.zeros((n, c, *out_hw), np.float64)
    for b in range(n):
        for oy in range(out_hw[0]):
            for ox in range(out_hw[1]):
                px, py, d = mat[b].astype(np.float64) @ np.array([ox, oy, 1.0])
                x, y = px / d, py / d
                x0, y0 = int(np.floor(x)), int(np.floor(y))
                for xi, yi, wgt in (
                    (x0, y0, (1 - (x - x0)) * (1 - (y - y0))),
                    (x0 + 1, y0, (x - x0) * (1 - (y - y0))),
                    (x0, y0 + 1, (1 - (x - x0)) * (y - y0)),
                    (x0 + 1, y0 + 1, (x - x0) * (y - y0)),
                ):
                    inside = 0 <= xi < w and 0 <= yi < h
                    if border == "constant" and not inside:
                        value = np.zeros(c)
                    else:
                        value = img[b, :, min(max(yi, 0), h - 1), min(max(xi, 0), w - 1)]
                    out[b, :, oy, ox] += wgt * value
    return out.astype(np.float32)


def _batch_stats_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mean, var = x.mean(axis=(0, 2, 3), keepdims=True), x.var(axis=(0, 2, 3), keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * w[None, :, None, None] + b[None, :, None, None]


# name -> (function of tensors, input arrays, numpy reference of the input arrays or None)
CASES = {
    "add_scalar": (lambda x: x + 1, [A], lambda a: a + 1),
    "radd_rsub_rmul": (lambda x: (2 - x) * 3 + 1.5, [A], lambda a: (2 - a) * 3 + 1.5),
    "div_pow": (lambda x, y: x / (y * y + 1) ** 0.5, [A, B], lambda a, b: a / (b * b + 1) ** 0.5),
    "int_true_div": (lambda i, j: i / j, [INTS, DIVS], lambda i, j: i / j),
    "int_floordiv_mod": (lambda i, j: (i // j, i % j, -i % j), [INTS, DIVS], lambda i, j: (i // j, i % j, -i % j)),
    "float_floordiv_mod": (lambda x: (x // 0.7, x % 0.7), [A], lambda a: (a // np.float32(0.7), a % np.float32(0.7))),
    "int_float_promotion": (lambda i, x: i + x[0, :3, :], [INTS, A], lambda i, a: i + a[0, :3, :]),
    "int_times_float_scalar": (lambda i: i * 1.5, [INTS], lambda i: i * 1.5),
    "compare": (
        lambda x, y: (x > y, x >= 0, x < y, x <= y, x == x, x != y),
        [A, B],
        lambda a, b: (a > b, a >= 0, a < b, a <= b, a == a, a != b),
    ),
    "logic": (
        lambda x, y: ((x > 0) & (y > 0), (x > 0) | (y > 0), (x > 0) ^ (y > 0), ~(x > 0)),
        [A, B],
        lambda a, b: ((a > 0) & (b > 0), (a > 0) | (b > 0), (a > 0) ^ (b > 0), ~(a > 0)),
    ),
    "bool_arith": (lambda x: (x > 0) * 2.0 + (x > 1), [A], lambda a: (a > 0) * 2.0 + (a > 1)),
    "unary": (
        lambda x: (
            -x,
            abs(x),
            F.exp(x),
            F.log(x),
            F.sqrt(x),
            F.tanh(x),
            F.sin(x),
            F.cos(x),
            F.floor(x),
            F.ceil(x),
            F.round(x * 3),
            F.sign(x - 1),
        ),
        [POS],
        lambda a: (
            -a,
            np.abs(a),
            np.exp(a),
            np.log(a),
            np.sqrt(a),
            np.tanh(a),
            np.sin(a),
            np.cos(a),
            np.floor(a),
            np.ceil(a),
            np.rint(a * 3),
            np.sign(a - 1),
        ),
    ),
    "int_unary": (
        lambda i: (-i, abs(i), F.floor(i), F.relu(i), F.sqrt(i * i)),
        [INTS],
        lambda i: (-i, np.abs(i), i, np.maximum(i, 0), np.sqrt(i * i)),
    ),
    "activations": (
        lambda x: (F.relu(x), F.sigmoid(x), F.softmax(x, axis=2), F.log_softmax(x, axis=1), F.softmax(x[0])),
        [A],
        lambda a: (np.maximum(a, 0), 1 / (1 + np.exp(-a)), _softmax(a, 2), np.log(_softmax(a, 1)), _softmax(a[0], 1)),
    ),
    "minmax_clip_where": (
        lambda x, y: (
            F.maximum(x, y),
            F.minimum(x, 0),
            F.clip(x, -0.5, 0.5),
            F.clip(x, upper=y),
            F.clip(x, lower=0),
            F.where(x > y, x, y),
            F.where(x > 0, x, 0),
        ),
        [A, B],
        lambda a, b: (
            np.maximum(a, b),
            np.minimum(a, 0),
            np.clip(a, -0.5, 0.5),
            np.minimum(a, b),
            np.maximum(a, 0),
            np.where(a > b, a, b),
            np.where(a > 0, a, 0),
        ),
    ),
    "reductions": (
        lambda x: (
            x.sum(),
            x.sum(axis=1),
            x.mean(axis=(0, 2), keepdims=True),
            x.max(axis=-1),
            x.min(axis=0, keepdims=True),
            x.prod(axis=2),
            x.argmax(),
            x.argmax(axis=1),
            x.argmin(axis=2, keepdims=True),
            F.argmax(x, 0, keepdims=True),
        ),
        [A],
        lambda a: (
            a.sum(),
            a.sum(axis=1),
            a.mean(axis=(0, 2), keepdims=True),
            a.max(axis=-1),
            a.min(axis=0, keepdims=True),
            a.prod(axis=2),
            a.argmax(),
            a.argmax(axis=1),
            a.argmin(axis=2, keepdims=True),
            np.argmax(a, 0, keepdims=True),
        ),
    ),
    "int_reductions": (
        lambda i: (i.sum(), i.mean(axis=0), i.max(), (i > 0).sum(axis=1)),
        [INTS],
        lambda i: (i.sum(), i.mean(axis=0), i.max(), (i > 0).sum(axis=1)),
    ),
    "shapes": (
        lambda x: (
            x.reshape(6, -1),
            x.reshape((4, 6)),
            x.transpose(),
            x.transpose(1, 0, 2),
            x.T,
            F.flatten(x),
            F.flatten(x, 1),
            x.flatten(),
            F.expand_dims(x, (0, -1)),
            F.squeeze(x[:, :1], 1),
            x.astype(np.int32),
            x.astype("float16"),
        ),
        [A],
        lambda a: (
            a.reshape(6, -1),
            a.reshape(4, 6),
            a.T,
            a.transpose(1, 0, 2),
            a.T,
            a.reshape(-1),
            a.reshape(2, -1),
            a.reshape(-1),
            a[None, ..., None],
            a[:, 0],
            a.astype(np.int32),
            a.astype(np.float16),
        ),
    ),
    "indexing": (
        lambda x: (
            x[0],
            x[-1, 1:],
            x[:, ::2, 1],
            x[..., ::-1],
            x[None, 1, ..., -1],
            x[:, -2:0:-1],
            x[1, 2, 3],
            x[:, None, :, 1:3],
        ),
        [A],
        lambda a: (
            a[0],
            a[-1, 1:],
            a[:, ::2, 1],
            a[..., ::-1],
            a[None, 1, ..., -1],
            a[:, -2:0:-1],
            a[1, 2, 3],
            a[:, None, :, 1:3],
        ),
    ),
    "concat_stack": (
        lambda x, y: (
            F.concat([x, y], axis=1),
            F.concat([x, y[:, :1]], axis=-2),
            F.stack([x, y]),
            F.stack([x, y], axis=-1),
        ),
        [A, B],
        lambda a, b: (
            np.concatenate([a, b], 1),
            np.concatenate([a, b[:, :1]], -2),
            np.stack([a, b]),
            np.stack([a, b], -1),
        ),
    ),
    "matmul_linear": (
        lambda x, y: (
            x @ y.transpose(0, 2, 1),
            F.matmul(x, y, transpose_b=True),
            x[0] @ y[0, 0],
            F.linear(x, y[0], y[1, :, 0]),
            F.linear(x[0], y[1]),
            F.matmul(x[0], x[1], True),
        ),
        [A, B],
        lambda a, b: (
            a @ b.transpose(0, 2, 1),
            a @ b.transpose(0, 2, 1),
            a[0] @ b[0, 0],
            a @ b[0].T + b[1, :, 0],
            a[0] @ b[1].T,
            a[0].T @ a[1],
        ),
    ),
    "conv2d": (
        lambda x, w, b: (
            F.conv2d(x, w, b, groups=2),
            F.conv2d(x, w, None, stride=2, padding=1, groups=2),
            F.conv2d(x[:, :2], w, b),
            F.conv2d(x[:, :2], w[:, :, :1, :2], b, padding=(0, 1)),
            F.conv2d(x, w, b.reshape(1, 6, 1, 1), stride=(1, 2), padding=(2, 1), dilation=2, groups=2),
        ),
        [IMG, W, CB],
        None,
    ),
    "pooling": (
        lambda x: (
            F.max_pool2d(x, 2),
            F.max_pool2d(x, 3, stride=2, padding=1),
            F.avg_pool2d(x, 2),
            F.avg_pool2d(x, 3, 2, 1),
            F.avg_pool2d(x, (2, 3), padding=1, mode="average"),
        ),
        [IMG],
        None,
    ),
    "batch_norm": (
        lambda x, m, v: (
            F.batch_norm(x, m, v + 1),
            F.batch_norm(x, m, v + 1, v, m, eps=1e-3),
            F.batch_norm(x[:, :, 0, 0], m, v + 1),
        ),
        [IMG, np.abs(A[0, 0]), np.abs(B[0, 0])],
        None,
    ),
    "constants_inside": (
        lambda x: x * tensor([1.0, 2.0, 3.0, 4.0]) + Tensor(x) * 0 + tensor(2.0),
        [A],
        lambda a: a * np.array([1, 2, 3, 4], np.float32) + 2,
    ),
    # x.shape is a tensor in a trace (symbolic_shape), a tuple eagerly: both reshape alike
    "shape_tensor_reshape": (lambda x: x.reshape(x.shape[0], -1), [A], lambda a: a.reshape(2, -1)),
    "broadcast": (
        lambda x: (
            F.broadcast_to(x[:, :1], (2, 3, 4)),
            F.broadcast_to(x[0], (x.shape[0], 3, 4)),
            x[:1]._broadcast((3, 3, 4)),
            F.zeros_like(x) + F.ones_like(x) * F.full_like(x, 2.0),
        ),
        [A],
        lambda a: (
            np.broadcast_to(a[:, :1], (2, 3, 4)),
            np.broadcast_to(a[0], (2, 3, 4)),
            np.broadcast_to(a[:1], (3, 3, 4)),
            np.full_like(a, 2.0),
        ),
    ),
    "topk": (
        lambda x: (*F.topk(x[0], 2), *F.topk(x[0, 0], 3, descending=True), F.topk(x[0], 2, kth_only=True)[0]),
        [A],
        lambda a: (
            np.sort(a[0])[:, :2],
            np.argsort(a[0], kind="stable")[:, :2].astype(np.int32),
            -np.sort(-a[0, 0])[:3],
            np.argsort(-a[0, 0], kind="stable")[:3].astype(np.int32),
            np.sort(a[0])[:, 1],
        ),
    ),
    "topk_k_beyond_the_size": (  # MegEngine clamps k to the size: all the values, sorted
        lambda x: (*F.topk(x[0], 7), F.topk(x[0, 0], 9, kth_only=True)[0]),
        [A],
        lambda a: (np.sort(a[0]), np.argsort(a[0], kind="stable").astype(np.int32), np.sort(a[0, 0])[-1]),
    ),
    "repeat_by_a_tensor": (
        lambda x, r: (F.repeat(x, r, axis=1), F.repeat(x[0], r)),
        [A, np.array(3, np.int32)],
        lambda a, r: (np.repeat(a, 3, axis=1), np.repeat(a[0], 3)),
    ),
    "warp_perspective": (
        lambda x, m: (
            F.vision.warp_perspective(x, m, (5, 4)),
            F.vision.warp_perspective(x, m, (3, 6), border_mode="constant"),
        ),
        [IMG, HOMOGRAPHY],
        lambda a, m: (_warp_reference(a, m, (5, 4)), _warp_reference(a, m, (3, 6), "constant")),
    ),
    "batch_norm_batch_statistics": (
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        [IMG, np.abs(A[0, 0]) + 0.5, B[0, 0]],
        _batch_stats_reference,
    ),
    "repeat_split": (
        lambda x: (F.repeat(x, 2, axis=1), F.repeat(x[0], 3), *F.split(x, 2), *F.split(x, [1, 3], axis=2)),
        [A],
        lambda a: (np.repeat(a, 2, axis=1), np.repeat(a[0], 3), *np.split(a, 2), *np.split(a, [1, 3], axis=2)),
    ),
    "advanced_index": (
        lambda x, i: (x[i], x[[1, 0]], x[x > 0], x[:, i[:2]], x[i[0], :, i[1:3]], x[0, i, 1:3], x[i[0] : i[0] + 2]),
        [A, np.array([1, 0, 1], np.int32)],
        lambda a, i: (a[i], a[[1, 0]], a[a > 0], a[:, i[:2]], a[i[0], :, i[1:3]], a[0, i, 1:3], a[i[0] : i[0] + 2]),
    ),
    "nms": (
        lambda b, s: (F.vision.nms(b, s, 0.5), F.vision.nms(b, s, 0.3, max_output=2)),
        [
            np.array([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 9, 9], [21, 21, 29, 31]], np.float32),
            np.array([0.9, 0.8, 0.7, 0.95, 0.6], np.float32),
        ],
        lambda b, s: (np.array([3, 2], np.int32), np.array([3, 2], np.int32)),
    ),
    "random": (
        lambda x: x + uniform(size=(2, 3, 4)) * 0 + normal(size=x.shape) * 0,
        [A],
        lambda a: a,
    ),
    # MegEngine's rewrites at opt_level >= 1 (the traced graph) give what the plain formulas give here
    "rewrites": (
        lambda x, y: (F.log(F.exp(x) + F.exp(y)), F.log(F.exp(x)), (lambda z: z / z)(x * 2)),
        [A, B],
        lambda a, b: (np.logaddexp(a, b), a, np.ones_like(a)),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_eager_matches_numpy_and_traced(name):
    fn, arrays, reference = CASES[name]
    check_eager_and_traced(name, fn, arrays, reference)


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
                    out[:, oc, i, j] = (
                        np.sum(x[:, g * 2 : (g + 1) * 2, i : i + 3, j : j + 3] * w[oc], axis=(1, 2, 3)) + CB[oc]
                    )
    got = F.conv2d(tensor(IMG), tensor(W), tensor(CB), groups=2).numpy()
    np.testing.assert_allclose(got, out, rtol=1e-4, atol=1e-4)
    pooled = F.max_pool2d(tensor(IMG), 2).numpy()
    np.testing.assert_array_equal(pooled, IMG[:, :, :6, :6].reshape(2, 4, 3, 2, 3, 2).max(axis=(3, 5)))
    avg = F.avg_pool2d(tensor(IMG), 3, stride=2, padding=1).numpy()
    assert avg[0, 0, 0, 0] == pytest.approx(IMG[0, 0, :2, :2].mean(), rel=1e-5)  # padding not counted
    avg_in = F.avg_pool2d(tensor(IMG), 3, stride=2, padding=1, mode="average").numpy()
    assert avg_in[0, 0, 0, 0] == pytest.approx(IMG[0, 0, :2, :2].sum() / 9, rel=1e-5)
    # batch norm by the definition: (x - mean) / sqrt(var + eps) * weight + bias, per channel
    mean, var, weight, bias = (RNG.standard_normal(4) for _ in range(4))
    var = np.abs(var) + 0.1
    normed = F.batch_norm(tensor(IMG), mean, var, weight, bias, eps=1e-3).numpy()
    c = (slice(None), None, None)
    expect = (x - mean[c]) / np.sqrt(var[c] + 1e-3) * weight[c] + bias[c]
    np.testing.assert_allclose(normed, expect, rtol=1e-4, atol=1e-5)


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
    with pytest.raises(ValueError, match="weight"):
        F.batch_norm(x, None, None, tensor(np.ones(3)), training=True)
    with pytest.raises(ValueError, match="running_mean"):
        F.batch_norm(x, tensor(np.zeros(3)), tensor(np.ones(4)))
    with pytest.raises(ValueError, match="linear"):
        F.linear(x, tensor(np.ones((3, 5))))
    with pytest.raises(ValueError, match="lower or an upper"):
        F.clip(x)
    with pytest.raises(ValueError, match="concat"):
        F.concat([tensor(A), tensor(INTS)], axis=0)
    with pytest.raises(ValueError, match="permutation"):
        tensor(A).transpose(0, 0, 1)
    with pytest.raises(ValueError, match="squeeze"):
        F.squeeze(tensor(A), 0)


def _dtype_ops(x):
    """The operations of the dtype test on a Tensor (the numpy version is _dtype_ops_numpy)."""
    outs = [
        x + 1,
        x - x,
        x * 2,
        x // 2,
        x % 3,
        x**2,
        F.maximum(x, 1),
        F.minimum(x, 1),
        F.relu(x),
        x > 1,
        x <= 2,
        x == 2,
        F.where(x > 1, x, x * 0),
        x.sum(),
        x.max(axis=0),
        x.min(),
        x.argmax(),
        x.argmin(axis=1),
        x.mean(),
        x.prod(axis=1),
        -x,
        abs(x),
        F.clip(x, 1, 3),
        x @ x.T,
        x[::-1, 1:],
        F.concat([x, x]),
        x.reshape(-1),
        F.stack([x, x], axis=1).transpose(2, 0, 1),
        x / 2,
    ]
    if x.dtype.kind == "f":
        outs += [F.exp(x / 8), F.sqrt(x), F.sigmoid(x), F.softmax(x, axis=1)]
    return tuple(outs)


def _dtype_ops_numpy(a):
    outs = [
        a + 1,
        a - a,
        a * 2,
        a // 2,
        a % 3,
        a**2,
        np.maximum(a, 1),
        np.minimum(a, 1),
        np.maximum(a, 0),
        a > 1,
        a <= 2,
        a == 2,
        np.where(a > 1, a, a * 0),
        a.sum(),
        a.max(axis=0),
        a.min(),
        a.argmax(),
        a.argmin(axis=1),
        a.mean(),
        a.prod(axis=1),
        -a,
        np.abs(a),
        np.clip(a, 1, 3),
        a @ a.T,
        a[::-1, 1:],
        np.concatenate([a, a]),
        a.reshape(-1),
        np.stack([a, a], axis=1).transpose(2, 0, 1),
        a / 2,
    ]
    if a.dtype.kind == "f":
        outs += [np.exp(a / 8), np.sqrt(a), 1 / (1 + np.exp(-a)), _softmax(a, 1)]
    return tuple(outs)


@pytest.mark.parametrize(
    "dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "float16", "float32", "float64"]
)
def test_every_dtype_compiles_and_matches_numpy(dtype):
    a = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    x = tensor(a, dtype)
    eager = _dtype_ops(x)
    check_outputs(eager, _dtype_ops_numpy(a), f"dtype {dtype} (eager vs numpy)")
    f = trace(_dtype_ops)
    check_outputs(f(x), eager, f"dtype {dtype} (first call)")
    check_outputs(f(x), eager, f"dtype {dtype} (compiled)")


def test_float64_conv_and_avg_pool_compute_in_float32():
    x = tensor(IMG.astype(np.float64), np.float64)
    w = tensor(W.astype(np.float64), np.float64)
    f = trace(lambda x, w: (F.conv2d(x, w, groups=2), F.avg_pool2d(x, 2), F.max_pool2d(x, 2)))
    eager = f(x, w)
    assert [t.dtype for t in eager] == [np.float32, np.float32, np.float64]
    check_outputs(f(x, w), eager, "float64 conv/pool")


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


@settings(max_examples=40, deadline=None, derandomize=True)  # deterministic: the same examples every run
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
