"""mgedump.tracing.numpy_api: numpy calls on tensors are traced, or refused while tracing, never baked in."""

from __future__ import annotations

import numpy as np
import pytest

from mgedump import tensor
from mgedump.jit import exclude_from_trace, trace
from mgedump.tracing import numpy_api
from tests.tracing.support import check_eager_and_traced

RNG = np.random.default_rng(0)
A = RNG.standard_normal((2, 3, 4)).astype(np.float32)
B = RNG.standard_normal((2, 3, 4)).astype(np.float32)

# name -> (function of tensors, input arrays, numpy reference of the input arrays)
CASES = {
    "numpy_ufuncs": (
        lambda x, y: (
            np.exp(x),
            np.maximum(x, 0),
            np.add(x, y),
            np.subtract(1, x),
            np.multiply(x, 2),
            np.true_divide(x, y),
            np.power(np.abs(x), 2),
            np.negative(x),
            np.absolute(x),
            np.tanh(x),
            np.greater(x, y),
            np.less(x, 0),
            np.equal(x, y),
            np.minimum(x, y),
            np.sqrt(np.abs(x)),
            np.log(np.abs(x) + 1),
            np.matmul(x, y.transpose(0, 2, 1)),
            np.square(x),
            np.logical_and(x > 0, y > 0),
            np.logical_not(x > 0),
            x**2 + np.ones(4),
            np.ones(4, np.float32) * x,
            np.reciprocal(x),
            np.positive(x),
            np.logical_or(x > 0, y > 0),
            np.logical_xor(x > 0, y > 0),
        ),
        [A, B],
        lambda a, b: (
            np.exp(a),
            np.maximum(a, 0),
            a + b,
            1 - a,
            a * 2,
            a / b,
            np.abs(a) ** 2,
            -a,
            np.abs(a),
            np.tanh(a),
            a > b,
            a < 0,
            a == b,
            np.minimum(a, b),
            np.sqrt(np.abs(a)),
            np.log(np.abs(a) + 1),
            a @ b.transpose(0, 2, 1),
            a * a,
            (a > 0) & (b > 0),
            ~(a > 0),
            a**2 + np.ones(4),
            np.ones(4, np.float32) * a,
            1 / a,
            a,
            (a > 0) | (b > 0),
            (a > 0) ^ (b > 0),
        ),
    ),
    "numpy_functions": (
        lambda x, y: (
            np.concatenate([x, y]),
            np.stack([x, y], axis=1),
            np.where(x > 0, x, y),
            np.reshape(x, (4, 6)),
            np.transpose(x, (2, 0, 1)),
            np.sum(x, axis=1),
            np.mean(x),
            np.max(x, axis=0),
            np.min(x, keepdims=True),
            np.argmax(x, axis=2),
            np.clip(x, -1, 1),
            np.expand_dims(x, 1),
            np.squeeze(x[:1]),
            np.ravel(x),
            np.dot(x[0], y[0].T),
            np.swapaxes(x, 0, 2),
            np.prod(x, axis=0),
            np.round(x),
            np.concatenate([x, np.zeros((1, 3, 4), np.float32)]),
        ),
        [A, B],
        lambda a, b: (
            np.concatenate([a, b]),
            np.stack([a, b], axis=1),
            np.where(a > 0, a, b),
            a.reshape(4, 6),
            a.transpose(2, 0, 1),
            a.sum(1),
            a.mean(),
            a.max(0),
            a.min(keepdims=True),
            a.argmax(2),
            np.clip(a, -1, 1),
            a[:, None],
            a[0],
            a.ravel(),
            a[0] @ b[0].T,
            a.transpose(2, 1, 0),
            a.prod(0),
            np.rint(a),
            np.concatenate([a, np.zeros((1, 3, 4), np.float32)]),
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_numpy_calls_are_traced(name):
    fn, arrays, reference = CASES[name]
    check_eager_and_traced(name, fn, arrays, reference)


def test_supported_lists_name_numpy_functions():
    assert {"np.exp", "np.add", "np.matmul", "np.logical_not", "np.square"} <= set(numpy_api.SUPPORTED_UFUNCS)
    assert {"np.sum", "np.concatenate", "np.where", "np.reshape", "np.dot"} <= set(numpy_api.SUPPORTED_FUNCTIONS)
    assert "np.cumsum" not in numpy_api.SUPPORTED_FUNCTIONS


def test_unsupported_numpy_function_raises_while_tracing():
    @trace
    def f(x):
        return np.cumsum(x)

    with pytest.raises(TypeError, match=r"numpy function np\.cumsum is not supported by mgedump tracing"):
        f(tensor([1.0, 2.0]))

    @trace
    def g(x):
        return tensor(np.asarray(x) * 2)  # would bake x in as a constant

    with pytest.raises(TypeError, match="converted to a numpy array"):
        g(tensor([1.0]))

    @trace
    def h(x):
        return np.add.reduce(x)

    with pytest.raises(TypeError, match=r"np\.add\.reduce is not supported"):
        h(tensor([1.0]))

    # outside a trace and inside exclude_from_trace, numpy runs on the values
    assert np.cumsum(tensor([1.0, 2.0])).tolist() == [1.0, 3.0]

    @trace
    def k(x):
        with exclude_from_trace():
            c = tensor(np.cumsum(x))
        return c * 2

    assert k(tensor([1.0, 2.0])).numpy().tolist() == [2.0, 6.0]
    assert k(tensor([2.0, 2.0])).numpy().tolist() == [4.0, 8.0]


def test_supported_function_with_unsupported_arguments_is_refused_while_tracing():
    @trace
    def f(x):
        return np.sum(x, dtype=np.float64)

    with pytest.raises(TypeError, match=r"numpy function np\.sum\(with these arguments\) is not supported"):
        f(tensor([1.0, 2.0]))
    result = np.sum(tensor([1.0, 2.0]), dtype=np.float64)  # no trace running: numpy on the values
    assert not hasattr(result, "numpy") and result == 3.0 and result.dtype == np.float64
