"""numpy interoperability: which numpy functions act on tensors, and how.

``Tensor.__array_ufunc__`` and ``Tensor.__array_function__`` land here. A
supported ufunc or function becomes the matching :mod:`mgedump.tracing.functional`
call, so it is traced. Anything else raises a TypeError naming it while a trace
records or replays (outside ``exclude_from_trace``); with no trace running it
runs in numpy on the tensors' values and returns a numpy result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import functional as F
from .dispatch import TensorBase, intercepting

_NV = np._NoValue


class _Unsupported(Exception):
    """A supported function called with arguments tracing cannot express."""


def _require(ok: bool) -> None:
    if not ok:
        raise _Unsupported


def _t(x: Any) -> TensorBase:
    return x if isinstance(x, TensorBase) else F.as_tensor(x)


_BINARY_UFUNCS: dict[Any, str] = {
    np.add: "add",
    np.subtract: "sub",
    np.multiply: "mul",
    np.true_divide: "div",
    np.floor_divide: "floordiv",
    np.remainder: "mod",
    np.power: "pow",
    np.maximum: "maximum",
    np.minimum: "minimum",
    np.greater: "greater",
    np.greater_equal: "greater_equal",
    np.less: "less",
    np.less_equal: "less_equal",
    np.equal: "equal",
    np.not_equal: "not_equal",
    np.matmul: "matmul",
}
_LOGICAL_UFUNCS: dict[Any, str] = {
    np.logical_and: "logical_and",
    np.logical_or: "logical_or",
    np.logical_xor: "logical_xor",
}
_UNARY_UFUNCS: dict[Any, str] = {
    np.negative: "neg",
    np.absolute: "abs",
    np.exp: "exp",
    np.log: "log",
    np.sqrt: "sqrt",
    np.tanh: "tanh",
    np.sin: "sin",
    np.cos: "cos",
    np.floor: "floor",
    np.ceil: "ceil",
    np.rint: "round",
    np.sign: "sign",
    np.reciprocal: "reciprocal",
}


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict[str, Any]) -> Any:
    """``Tensor.__array_ufunc__``."""
    name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    if method == "__call__" and not kwargs:
        if ufunc in _BINARY_UFUNCS:
            return F.binary(_BINARY_UFUNCS[ufunc], *inputs)
        if ufunc in _UNARY_UFUNCS:
            return F.unary(_UNARY_UFUNCS[ufunc], inputs[0])
        if ufunc in _LOGICAL_UFUNCS:
            return F.binary(_LOGICAL_UFUNCS[ufunc], *(F.astype(_t(x), np.bool_) for x in inputs))
        if ufunc is np.logical_not:
            return F.logical_not(F.astype(_t(inputs[0]), np.bool_))
        if ufunc is np.positive:
            return _t(inputs[0])
        if ufunc is np.square:
            x = _t(inputs[0])
            return F.binary("mul", x, x)
    return _fallback(name, getattr(ufunc, method), inputs, kwargs)


# ------------------------------------------------------------------ functions


def _sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NV, where=_NV):
    _require(dtype is None and out is None and initial is _NV and where is _NV)
    return F.sum(_t(a), axis, bool(keepdims))


def _mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=_NV):
    _require(dtype is None and out is None and where is _NV)
    return F.mean(_t(a), axis, bool(keepdims))


def _reducer(name: str) -> Callable:
    def handler(a, axis=None, out=None, keepdims=False, initial=_NV, where=_NV):
        _require(out is None and initial is _NV and where is _NV)
        return getattr(F, name)(_t(a), axis, bool(keepdims))

    return handler


def _prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NV, where=_NV):
    _require(dtype is None and out is None and initial is _NV and where is _NV)
    return F.prod(_t(a), axis, bool(keepdims))


def _arg(name: str) -> Callable:
    def handler(a, axis=None, out=None, *, keepdims=False):
        _require(out is None)
        return getattr(F, name)(_t(a), axis, bool(keepdims))

    return handler


def _concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    _require(out is None and dtype is None and axis is not None)
    return F.concat([_t(a) for a in arrays], axis)


def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    _require(out is None and dtype is None)
    return F.stack([_t(a) for a in arrays], axis)


def _where(condition, x=_NV, y=_NV):
    _require(x is not _NV and y is not _NV)
    return F.where(condition, x, y)


def _reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    _require(order == "C" and not copy)
    shape = newshape if shape is None else shape
    return F.reshape(_t(a), (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape))


def _transpose(a, axes=None):
    return F.transpose(_t(a), axes)


def _swapaxes(a, axis1, axis2):
    x = _t(a)
    perm = list(range(x.ndim))
    perm[axis1], perm[axis2] = perm[axis2], perm[axis1]
    return F.transpose(x, perm)


def _clip(a, a_min=_NV, a_max=_NV, out=None, *, min=_NV, max=_NV, **kwargs):
    _require(out is None and not kwargs)
    lower = min if a_min is _NV else a_min
    upper = max if a_max is _NV else a_max
    return F.clip(_t(a), None if lower is _NV else lower, None if upper is _NV else upper)


def _expand_dims(a, axis):
    return F.expand_dims(_t(a), axis)


def _squeeze(a, axis=None):
    return F.squeeze(_t(a), axis)


def _ravel(a, order="C"):
    _require(order == "C")
    return F.reshape(_t(a), (-1,))


def _dot(a, b, out=None):
    a, b = _t(a), _t(b)
    _require(out is None and a.ndim <= 2 and b.ndim <= 2 and a.ndim >= 1 and b.ndim >= 1)
    return F.binary("matmul", a, b)


def _round(a, decimals=0, out=None):
    _require(decimals == 0 and out is None)
    return F.unary("round", _t(a))


def _copy(a, order="K", subok=False):
    return _t(a)


def _astype(x, dtype, /, *, copy=True, device=None):
    _require(device is None)
    return F.astype(_t(x), dtype)


_FUNCTIONS: dict[Any, Callable] = {
    np.sum: _sum,
    np.mean: _mean,
    np.prod: _prod,
    np.max: _reducer("max"),
    np.min: _reducer("min"),
    np.amax: _reducer("max"),
    np.amin: _reducer("min"),
    np.argmax: _arg("argmax"),
    np.argmin: _arg("argmin"),
    np.concatenate: _concatenate,
    np.stack: _stack,
    np.where: _where,
    np.reshape: _reshape,
    np.transpose: _transpose,
    np.swapaxes: _swapaxes,
    np.clip: _clip,
    np.expand_dims: _expand_dims,
    np.squeeze: _squeeze,
    np.ravel: _ravel,
    np.dot: _dot,
    np.round: _round,
    np.around: _round,
    np.copy: _copy,
    np.shape: lambda a: _t(a).shape,
    np.ndim: lambda a: _t(a).ndim,
    np.size: lambda a, axis=None: _t(a).size if axis is None else _t(a).shape[axis],
}
if hasattr(np, "astype"):
    _FUNCTIONS[np.astype] = _astype
if hasattr(np, "concat"):
    _FUNCTIONS[np.concat] = _concatenate
if hasattr(np, "permute_dims"):
    _FUNCTIONS[np.permute_dims] = _transpose

SUPPORTED_FUNCTIONS = sorted({f"np.{f.__name__}" for f in _FUNCTIONS})
SUPPORTED_UFUNCS = sorted(
    {
        f"np.{u.__name__}"
        for u in (*_BINARY_UFUNCS, *_UNARY_UFUNCS, *_LOGICAL_UFUNCS, np.logical_not, np.positive, np.square)
    }
)


def array_function(func: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
    """``Tensor.__array_function__``."""
    handler = _FUNCTIONS.get(func)
    name = f"np.{getattr(func, '__name__', func)}"
    if handler is not None:
        try:
            return handler(*args, **kwargs)
        except _Unsupported:
            name += "(with these arguments)"
    return _fallback(name, func, args, kwargs)


def _fallback(name: str, fn: Callable, args: Any, kwargs: dict[str, Any]) -> Any:
    if intercepting() is not None:
        raise TypeError(
            f"numpy function {name} is not supported by mgedump tracing (it would bake values into the "
            f"graph as constants); use mgedump.functional or a supported numpy function, or run it inside "
            f"`with jit.exclude_from_trace():`"
        )
    return fn(*_values(args), **_values(kwargs))


def _values(x: Any) -> Any:
    if isinstance(x, TensorBase):
        return x._value()
    if isinstance(x, (list, tuple)):
        return type(x)(_values(v) for v in x)
    if isinstance(x, dict):
        return {k: _values(v) for k, v in x.items()}
    return x
