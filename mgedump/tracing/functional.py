"""Tensor functions (MegEngine's ``megengine.functional``), eager and traceable.

Each function computes with numpy right away, and inside a traced function is
recorded as one operation of the graph. Arithmetic follows numpy's dtype
promotion (a Python scalar takes the tensor's dtype); the graph gets explicit
casts where numpy would convert.

    import mgedump.functional as F
    y = F.relu(F.conv2d(x, w, b, padding=1))

Every function ends in :func:`mgedump.tracing.dispatch.apply`. This module sits
below the public Tensor class (whose operators and methods call it), so it
works on :class:`~mgedump.tracing.dispatch.TensorBase`; the tensors it returns
are public Tensors (see :mod:`mgedump.tracing.dispatch`). Users import it as
``mgedump.functional``.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .dispatch import TensorBase, apply, wrap
from .ops import RNG, Ref, normalize_index

__all__ = [
    "BroadcastError",
    "abs",
    "add",
    "arange",
    "argmax",
    "argmin",
    "as_tensor",
    "astype",
    "avg_pool2d",
    "batch_norm",
    "broadcast_to",
    "ceil",
    "clip",
    "concat",
    "conv2d",
    "cos",
    "div",
    "equal",
    "exp",
    "expand_dims",
    "flatten",
    "floor",
    "full",
    "full_like",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "linear",
    "log",
    "log_softmax",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "matmul",
    "max",
    "max_pool2d",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mul",
    "neg",
    "nms",
    "not_equal",
    "ones",
    "ones_like",
    "pow",
    "prod",
    "relu",
    "repeat",
    "reshape",
    "round",
    "sigmoid",
    "sign",
    "sin",
    "softmax",
    "split",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "sub",
    "sum",
    "tanh",
    "topk",
    "transpose",
    "vision",
    "warp_perspective",
    "where",
    "zeros",
    "zeros_like",
]

_UFUNCS: dict[str, np.ufunc] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "floordiv": np.floor_divide,
    "mod": np.remainder,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "matmul": np.matmul,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
    "neg": np.negative,
    "abs": np.absolute,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "tanh": np.tanh,
    "sin": np.sin,
    "cos": np.cos,
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.rint,
    "sign": np.sign,
    "reciprocal": np.reciprocal,
}
_RESOLVED: dict[tuple, tuple[np.dtype, ...]] = {}


# ------------------------------------------------------------------ operands and dtypes


def as_tensor(x: Any, dtype: Any = None) -> TensorBase:
    """x as a Tensor: a Tensor as is (cast if dtype differs), other data as a new tensor keeping its dtype."""
    if isinstance(x, TensorBase):
        return x if dtype is None else astype(x, dtype)
    return wrap(np.array(x, dtype=dtype, copy=True))


def _dtype_of(x: Any) -> Any:
    if isinstance(x, TensorBase):
        return x.dtype
    if isinstance(x, np.generic):  # numpy scalars are strong (np.float64 is also a float)
        if x.dtype.kind == "c":
            raise TypeError("complex numbers are not supported")
        return x.dtype
    if isinstance(x, bool):
        return np.dtype(np.bool_)
    if isinstance(x, (int, float)):
        return type(x)  # a weak Python scalar: takes the other operand's dtype
    if isinstance(x, complex) or np.iscomplexobj(x):
        raise TypeError("complex numbers are not supported")
    return np.asarray(x).dtype


def _operand(x: Any, dtype: np.dtype) -> TensorBase:
    if isinstance(x, TensorBase):
        return x if x.dtype == dtype else apply("cast", [x], {"dtype": dtype.name})
    return wrap(np.array(x, dtype=dtype, copy=True))


def _resolve(op: str, dtypes: tuple) -> tuple[np.dtype, ...]:
    key = (op, *dtypes)
    found = _RESOLVED.get(key)
    if found is None:
        try:
            found = _UFUNCS[op].resolve_dtypes((*dtypes, None))
        except (TypeError, np.exceptions.DTypePromotionError) as exc:
            names = ", ".join(getattr(d, "__name__", str(d)) for d in dtypes)
            raise TypeError(f"{op} is not defined for operands of type {names}: {exc}") from None
        _RESOLVED[key] = found
    return found


_WEAK_EXAMPLE = {bool: False, int: 0, float: 0.0}
_RESULT_DTYPE: dict[tuple, np.dtype] = {}


def _result_dtype(*operands: Any) -> np.dtype:
    """numpy's result dtype of the operands (Python scalars are weak: they take the others' dtype)."""
    key = tuple(_dtype_of(x) for x in operands)
    found = _RESULT_DTYPE.get(key)
    if found is None:
        examples: list[Any] = [_WEAK_EXAMPLE.get(k, k) for k in key]
        found = _RESULT_DTYPE[key] = np.result_type(*examples)
    return found


def _float_dtype(*operands: Any) -> np.dtype:
    dtype = _result_dtype(*operands)
    return dtype if dtype.kind == "f" else np.dtype(np.float32)


class BroadcastError(ValueError, RuntimeError):
    """Operands whose shapes do not broadcast together (numpy's rules).

    A ValueError, as numpy raises, and a RuntimeError, as MegEngine raises it:
    code written for either catches it.
    """


_BROADCAST: dict[tuple[tuple[int, ...], tuple[int, ...]], bool] = {}
_COMMUTATIVE = frozenset({"add", "mul", "maximum", "minimum", "equal", "not_equal", "logical_and", "logical_or"})


def _shape_of(x: Any) -> tuple[int, ...]:
    return x._shape if isinstance(x, TensorBase) else np.shape(x)


def _check_broadcast(op: str, a: Any, b: Any) -> None:
    """Raises BroadcastError naming the operation and both shapes when they do not broadcast together."""
    sa, sb = _shape_of(a), _shape_of(b)
    if sa == sb or not sa or not sb:
        return
    fits = _BROADCAST.get((sa, sb))
    if fits is None:
        try:
            np.broadcast_shapes(sa, sb)
            fits = True
        except ValueError:
            fits = False
        _BROADCAST[(sa, sb)] = fits
    if not fits:
        raise BroadcastError(
            f"{op}: operands of shapes {list(sa)} and {list(sb)} cannot be broadcast together (from the last "
            "dim on, each pair of dims must be equal or one of them 1)"
        )


def binary(op: str, a: Any, b: Any) -> TensorBase:
    """An elementwise binary operation (or matmul) with numpy's dtype promotion.

    Args:
        op: add, sub, mul, div, floordiv, mod, pow, maximum, minimum, greater,
            greater_equal, less, less_equal, equal, not_equal, matmul,
            logical_and, logical_or, logical_xor.
        a, b: tensors, numbers or arrays (at least one a tensor, usually).

    Raises:
        BroadcastError: elementwise operands whose shapes do not broadcast together.
    """
    if op != "matmul":
        _check_broadcast(op, a, b)
        if op in _COMMUTATIVE and len(_shape_of(a)) < len(_shape_of(b)):
            a, b = b, a  # the operand of higher rank first, as MegEngine's graph has it (MUL(x, k)): the same result
    if op.startswith("logical_"):
        a, b = astype(a, np.bool_), astype(b, np.bool_)
    in_a, in_b, _ = _resolve(op, (_dtype_of(a), _dtype_of(b)))
    return apply(op, [_operand(a, in_a), _operand(b, in_b)], {})


def unary(op: str, x: Any) -> TensorBase:
    """An elementwise unary operation, converting the input as numpy does."""
    x = as_tensor(x)
    if op in ("sigmoid", "relu", "identity"):
        if op == "sigmoid" and x.dtype.kind != "f":
            x = _operand(x, np.dtype(np.float32))
        return apply(op, [x], {})
    in_dtype, _ = _resolve(op, (x.dtype,))
    if op in ("floor", "ceil", "round") and in_dtype.kind != "f":
        return x  # already integral
    if op == "reciprocal" and in_dtype.kind != "f":
        raise TypeError(
            f"reciprocal of an integer tensor ({x.dtype}) is not supported; divide a float instead: 1.0 / x"
        )
    return apply(op, [_operand(x, in_dtype)], {})


def logical(op: str, a: Any, b: Any) -> TensorBase:
    """``&``, ``|`` and ``^``: on bool tensors only (ONNX opset 13 has no bitwise operations)."""
    for x in (a, b):
        dtype = _dtype_of(x)
        if dtype not in (np.dtype(np.bool_), bool):
            raise TypeError(
                f"&, | and ^ need bool tensors, got {getattr(dtype, '__name__', dtype)}; bitwise operations on integers cannot be traced"
            )
    return binary(op, a, b)


def _axis(axis: int, ndim: int, what: str = "axis") -> int:
    axis = int(axis)
    if not -ndim <= axis < builtins.max(ndim, 1):
        raise ValueError(f"{what} {axis} is out of range for a tensor of rank {ndim}")
    return axis % builtins.max(ndim, 1)


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = tuple(sorted(_axis(a, ndim) for a in axes))
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis}")
    return out


def _pair(v: Any, what: str) -> tuple[int, int]:
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    pair = tuple(int(x) for x in v)
    if len(pair) != 2:
        raise ValueError(f"{what} must be an int or a pair of ints, got {v!r}")
    return pair[0], pair[1]


# ------------------------------------------------------------------ elementwise


def add(x: Any, y: Any) -> TensorBase:
    """x + y."""
    return binary("add", x, y)


def sub(x: Any, y: Any) -> TensorBase:
    """x - y."""
    return binary("sub", x, y)


def mul(x: Any, y: Any) -> TensorBase:
    """x * y."""
    return binary("mul", x, y)


def div(x: Any, y: Any) -> TensorBase:
    """x / y (true division)."""
    return binary("div", x, y)


def pow(x: Any, y: Any) -> TensorBase:
    """x ** y."""
    return binary("pow", x, y)


def maximum(x: Any, y: Any) -> TensorBase:
    """Elementwise maximum."""
    return binary("maximum", x, y)


def minimum(x: Any, y: Any) -> TensorBase:
    """Elementwise minimum."""
    return binary("minimum", x, y)


def equal(x: Any, y: Any) -> TensorBase:
    return binary("equal", x, y)


def not_equal(x: Any, y: Any) -> TensorBase:
    return binary("not_equal", x, y)


def greater(x: Any, y: Any) -> TensorBase:
    return binary("greater", x, y)


def greater_equal(x: Any, y: Any) -> TensorBase:
    return binary("greater_equal", x, y)


def less(x: Any, y: Any) -> TensorBase:
    return binary("less", x, y)


def less_equal(x: Any, y: Any) -> TensorBase:
    return binary("less_equal", x, y)


def logical_and(x: Any, y: Any) -> TensorBase:
    return binary("logical_and", x, y)


def logical_or(x: Any, y: Any) -> TensorBase:
    return binary("logical_or", x, y)


def logical_xor(x: Any, y: Any) -> TensorBase:
    return binary("logical_xor", x, y)


def logical_not(x: Any) -> TensorBase:
    """Elementwise not (the input is converted to bool)."""
    return apply("logical_not", [astype(x, np.bool_)], {})


def neg(x: Any) -> TensorBase:
    return unary("neg", x)


def abs(x: Any) -> TensorBase:
    return unary("abs", x)


def exp(x: Any) -> TensorBase:
    """e ** x."""
    return unary("exp", x)


def log(x: Any) -> TensorBase:
    """Natural logarithm."""
    return unary("log", x)


def sqrt(x: Any) -> TensorBase:
    """Square root."""
    return unary("sqrt", x)


def square(x: Any) -> TensorBase:
    x = as_tensor(x)
    return binary("mul", x, x)


def tanh(x: Any) -> TensorBase:
    """Hyperbolic tangent."""
    return unary("tanh", x)


def sin(x: Any) -> TensorBase:
    return unary("sin", x)


def cos(x: Any) -> TensorBase:
    return unary("cos", x)


def floor(x: Any) -> TensorBase:
    return unary("floor", x)


def ceil(x: Any) -> TensorBase:
    return unary("ceil", x)


def round(x: Any) -> TensorBase:
    """Round half to even (numpy's ``rint``)."""
    return unary("round", x)


def sign(x: Any) -> TensorBase:
    return unary("sign", x)


def relu(x: Any) -> TensorBase:
    """max(x, 0)."""
    return unary("relu", x)


def sigmoid(x: Any) -> TensorBase:
    """1 / (1 + exp(-x)); integer input is computed in float32."""
    return unary("sigmoid", x)


def clip(inp: Any, lower: Any = None, upper: Any = None) -> TensorBase:
    """Clamp values to [lower, upper]; either bound may be None (not both).

    Raises:
        ValueError: both bounds are None.
    """
    if lower is None and upper is None:
        raise ValueError("clip needs a lower or an upper bound")
    bounds = [b for b in (lower, upper) if b is not None]
    dtype = _result_dtype(inp, *bounds)
    operands = [_operand(inp, dtype)] + [_operand(b, dtype) for b in bounds]
    return apply("clip", operands, {"lower": lower is not None, "upper": upper is not None})


def where(mask: Any, x: Any, y: Any) -> TensorBase:
    """x where mask is true, else y (mask is converted to bool)."""
    dtype = _result_dtype(x, y)
    return apply("where", [astype(mask, np.bool_), _operand(x, dtype), _operand(y, dtype)], {})


def astype(x: Any, dtype: Any) -> TensorBase:
    """x converted to dtype (x itself when it already has that dtype)."""
    x = as_tensor(x)
    dtype = np.dtype(dtype)
    if dtype.kind not in "biuf":
        raise TypeError(f"a tensor holds bool, integer or floating-point data, not {dtype}")
    return x if x.dtype == dtype else apply("cast", [x], {"dtype": dtype.name})


# ------------------------------------------------------------------ reductions

_REDUCE_DTYPE: dict[tuple[str, np.dtype], np.dtype] = {}


def _reduce(kind: str, x: Any, axis: Any, keepdims: bool) -> TensorBase:
    x = as_tensor(x)
    axes = _axes(axis, x.ndim)
    key = (kind, x.dtype)
    out_dtype = _REDUCE_DTYPE.get(key)
    if out_dtype is None:
        fn: Callable[..., Any] = getattr(np, kind)  # np.sum, np.mean, np.max, np.min, np.prod
        out_dtype = _REDUCE_DTYPE[key] = np.asarray(fn(np.ones(1, x.dtype))).dtype
    if out_dtype != x.dtype:
        x = apply("cast", [x], {"dtype": out_dtype.name})
    return apply("reduce", [x], {"kind": kind, "axes": axes, "keepdims": bool(keepdims)})


def sum(inp: Any, axis: Any = None, keepdims: bool = False) -> TensorBase:
    """Sum over axis (an int, a tuple of ints, or None for all); numpy's result dtype."""
    return _reduce("sum", inp, axis, keepdims)


def mean(inp: Any, axis: Any = None, keepdims: bool = False) -> TensorBase:
    """Mean over axis; integer input gives float64, as numpy."""
    return _reduce("mean", inp, axis, keepdims)


def max(inp: Any, axis: Any = None, keepdims: bool = False) -> TensorBase:
    """Maximum over axis."""
    return _reduce("max", inp, axis, keepdims)


def min(inp: Any, axis: Any = None, keepdims: bool = False) -> TensorBase:
    """Minimum over axis."""
    return _reduce("min", inp, axis, keepdims)


def prod(inp: Any, axis: Any = None, keepdims: bool = False) -> TensorBase:
    """Product over axis."""
    return _reduce("prod", inp, axis, keepdims)


def _arg(kind: str, x: Any, axis: int | None, keepdims: bool) -> TensorBase:
    x = as_tensor(x)
    if x.size == 0:
        raise ValueError(f"{kind} of an empty tensor")
    return apply(
        kind, [x], {"kind": kind, "axis": None if axis is None else _axis(axis, x.ndim), "keepdims": bool(keepdims)}
    )


def argmax(inp: Any, axis: int | None = None, keepdims: bool = False) -> TensorBase:
    """Index of the maximum (first occurrence) along axis, or of the flattened tensor; int64."""
    return _arg("argmax", inp, axis, keepdims)


def argmin(inp: Any, axis: int | None = None, keepdims: bool = False) -> TensorBase:
    """Index of the minimum (first occurrence) along axis, or of the flattened tensor; int64."""
    return _arg("argmin", inp, axis, keepdims)


# ------------------------------------------------------------------ shapes


def _shape_operand(shape: Any) -> TensorBase | None:
    """A target shape given with tensors (a shape tensor, or a sequence holding some) as one int32 tensor; None if plain ints."""
    if isinstance(shape, TensorBase):
        return astype(flatten(shape) if shape.ndim != 1 else shape, np.int32)
    if isinstance(shape, (int, np.integer)) or not any(isinstance(s, TensorBase) for s in shape):
        return None
    parts = [
        astype(reshape(s, (1,)), np.int32) if isinstance(s, TensorBase) else wrap(np.array([int(s)], np.int32))
        for s in shape
    ]
    return concat(parts) if len(parts) > 1 else parts[0]


def reshape(inp: Any, target_shape: Any) -> TensorBase:
    """The same values in a new shape; one dim may be -1.

    ``target_shape`` is a sequence of ints, or holds tensors (``x.shape[0]``
    with ``trace(symbolic_shape=True)``, a shape tensor): the graph then
    computes the shape, and a trace serves every batch size alike.

    Raises:
        ValueError: the sizes do not match.
    """
    x = as_tensor(inp)
    dyn = _shape_operand(target_shape)
    if dyn is not None:
        if dyn._data is not None:  # a known value: check it now
            _check_reshape(x, [int(v) for v in dyn._data])
        return apply("reshape_dyn", [x, dyn], {})
    if isinstance(target_shape, (int, np.integer)):
        target_shape = (target_shape,)
    shape = [int(s) for s in target_shape]
    _check_reshape(x, shape)
    return apply("reshape", [x], {"shape": tuple(shape)})  # -1 kept: the graph infers it for any batch size


def _check_reshape(x: TensorBase, target: list[int]) -> None:
    shape = list(target)
    if shape.count(-1) > 1:
        raise ValueError(f"can only specify one unknown dimension (-1) in {tuple(shape)}")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or x.size % known:
            raise ValueError(f"cannot reshape a tensor of shape {x._shape} into {tuple(shape)}")
        shape[shape.index(-1)] = x.size // known
    if math.prod(shape) != x.size or builtins.min(shape, default=0) < 0:
        raise ValueError(f"cannot reshape a tensor of shape {x._shape} into {tuple(target)}")


def flatten(inp: Any, start_axis: int = 0, end_axis: int = -1) -> TensorBase:
    """Merge the dims from start_axis to end_axis (inclusive) into one."""
    x = as_tensor(inp)
    if x.ndim == 0:
        return reshape(x, (1,))
    start, end = _axis(start_axis, x.ndim, "start_axis"), _axis(end_axis, x.ndim, "end_axis")
    if start > end:
        raise ValueError(f"start_axis {start_axis} comes after end_axis {end_axis}")
    if x.size == 0:
        return reshape(x, x._shape[:start] + (math.prod(x._shape[start : end + 1]),) + x._shape[end + 1 :])
    return apply("flatten", [x], {"start": start, "end": end})


def transpose(inp: Any, pattern: Sequence[int] | None = None) -> TensorBase:
    """Permute the dims (reverse them when pattern is None)."""
    x = as_tensor(inp)
    perm = tuple(reversed(range(x.ndim))) if pattern is None else tuple(_axis(a, x.ndim) for a in pattern)
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"{tuple(pattern or ())} is not a permutation of the {x.ndim} dims")
    return apply("transpose", [x], {"perm": perm})


def expand_dims(inp: Any, axis: int | Sequence[int]) -> TensorBase:
    """Insert dims of size 1 at axis (positions in the result)."""
    x = as_tensor(inp)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return apply("expand_dims", [x], {"axes": _axes(axes, x.ndim + len(axes))})


def squeeze(inp: Any, axis: int | Sequence[int] | None = None) -> TensorBase:
    """Remove dims of size 1 (those at axis, or all)."""
    x = as_tensor(inp)
    axes = tuple(i for i, d in enumerate(x._shape) if d == 1) if axis is None else _axes(axis, x.ndim)
    for a in axes:
        if x._shape[a] != 1:
            raise ValueError(f"cannot squeeze axis {a} of size {x._shape[a]} (shape {x._shape})")
    return apply("squeeze", [x], {"axes": axes})


def getitem(inp: TensorBase, key: Any) -> TensorBase:
    """``inp[key]`` as numpy: integers, slices, None and Ellipsis, and advanced indices.

    Advanced indices are integer tensors or lists (gathered), boolean masks
    (the elements where true: the result's length depends on the values), and
    tensors as slice bounds (``x[start:end]``).
    """
    items = key if isinstance(key, tuple) else (key,)
    if not any(_is_advanced(item) for item in items):
        return apply("getitem", [inp], {"key": normalize_index(key, inp._shape)})
    operands: list[TensorBase] = [inp]

    def ref(value: Any, kind: str) -> Ref:
        t = as_tensor(value)
        if kind == "bound":
            if t.size != 1 or t.dtype.kind not in "iu":
                raise TypeError(
                    f"a slice bound must be an int or a one-element integer tensor, got {t.dtype}{list(t._shape)}"
                )
        elif t.dtype == np.bool_:
            kind = "mask"
        elif t.dtype.kind not in "iu":
            raise IndexError(f"arrays used as indices must be of integer or boolean type, got {t.dtype}")
        operands.append(t)
        return Ref(len(operands) - 1, kind, t.ndim)

    converted: list[Any] = []
    for item in items:
        if isinstance(item, slice):
            bounds = [ref(v, "bound") if isinstance(v, TensorBase) else v for v in (item.start, item.stop)]
            converted.append(slice(bounds[0], bounds[1], item.step))
        elif _is_advanced(item):
            converted.append(ref(item, "adv"))
        else:
            converted.append(item)
    return apply("index", operands, {"key": normalize_index(tuple(converted), inp._shape)})


def _is_advanced(item: Any) -> bool:
    if isinstance(item, slice):
        return any(isinstance(v, TensorBase) for v in (item.start, item.stop))
    if isinstance(item, (bool, np.bool_)):
        raise TypeError("a bool as an index is not supported; use a boolean tensor as a mask")
    return isinstance(item, (TensorBase, list, np.ndarray))


def _same_dtype(inps: Sequence[Any]) -> list[TensorBase]:
    if not inps:
        raise ValueError("needs at least one tensor")
    tensors = [as_tensor(x) for x in inps]
    dtype = np.result_type(*[t.dtype for t in tensors])
    return [_operand(t, dtype) for t in tensors]


def concat(inps: Sequence[Any], axis: int = 0) -> TensorBase:
    """Join tensors along an existing axis."""
    tensors = _same_dtype(inps)
    ndim = tensors[0].ndim
    ax = _axis(axis, ndim)
    rest = {t._shape[:ax] + t._shape[ax + 1 :] for t in tensors}
    if any(t.ndim != ndim for t in tensors) or len(rest) != 1:
        raise ValueError(f"concat: shapes {[t._shape for t in tensors]} differ outside axis {axis}")
    return apply("concat", tensors, {"axis": ax})


def stack(inps: Sequence[Any], axis: int = 0) -> TensorBase:
    """Join tensors of one shape along a new axis."""
    tensors = _same_dtype(inps)
    if len({t._shape for t in tensors}) != 1:
        raise ValueError(f"stack needs tensors of one shape, got {[t._shape for t in tensors]}")
    return apply("stack", tensors, {"axis": _axis(axis, tensors[0].ndim + 1)})


# ------------------------------------------------------------------ neural network


def matmul(inp1: Any, inp2: Any, transpose_a: bool = False, transpose_b: bool = False) -> TensorBase:
    """Matrix product with numpy's ``matmul`` broadcasting; optionally transposing the last two dims first."""
    a, b = as_tensor(inp1), as_tensor(inp2)
    if transpose_a:
        a = transpose(a, tuple(range(a.ndim - 2)) + (a.ndim - 1, a.ndim - 2))
    if transpose_b:
        b = transpose(b, tuple(range(b.ndim - 2)) + (b.ndim - 1, b.ndim - 2))
    return binary("matmul", a, b)


def _bias_operand(bias: Any, count: int, op: str, what: str, dtype: np.dtype) -> TensorBase:
    """A bias of count values (any shape holding exactly that many) as a 1-D operand of dtype."""
    b = as_tensor(bias)
    if b.size != count:
        raise ValueError(f"{op}: bias of shape {b._shape} does not fit {count} {what}")
    return _operand(b if b._shape == (count,) else reshape(b, (count,)), dtype)


def linear(inp: Any, weight: Any, bias: Any = None) -> TensorBase:
    """inp @ weight.T + bias, with weight of shape (out_features, in_features)."""
    x, w = as_tensor(inp), as_tensor(weight)
    if w.ndim != 2 or x.ndim < 1 or x._shape[-1] != w._shape[1]:
        raise ValueError(f"linear: input of shape {x._shape} does not fit weight of shape {w._shape} (out, in)")
    dtype = _float_dtype(x, w, *([] if bias is None else [bias]))
    product = apply("linear", [_operand(x, dtype), _operand(w, dtype)], {})
    if bias is None:
        return product
    # two operations, as MegEngine records them (MatrixMul, then ADD): a dump names both
    return apply("add", [product, _bias_operand(bias, w._shape[0], "linear", "output features", dtype)], {})


def conv2d(
    inp: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1
) -> TensorBase:
    """2-D convolution of NCHW input with (out_channels, in_channels / groups, kh, kw) weights.

    Args:
        inp: (N, C, H, W).
        weight: (OC, C / groups, KH, KW).
        bias: OC values, shape (OC,) or (1, OC, 1, 1); optional.
        stride, padding, dilation: an int or an (h, w) pair.
        groups: channel groups.
    """
    x, w = as_tensor(inp), as_tensor(weight)
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"conv2d needs NCHW input and 4-D weight, got shapes {x._shape} and {w._shape}")
    groups = int(groups)
    if groups < 1 or x._shape[1] != w._shape[1] * groups or w._shape[0] % groups:
        raise ValueError(
            f"conv2d: input with {x._shape[1]} channels does not fit weight {w._shape} with groups={groups}"
        )
    stride_, padding_, dilation_ = _pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation")
    for i in range(2):
        span = (w._shape[2 + i] - 1) * dilation_[i] + 1
        if x._shape[2 + i] + 2 * padding_[i] < span or stride_[i] < 1 or dilation_[i] < 1 or padding_[i] < 0:
            raise ValueError(
                f"conv2d: kernel {w._shape[2:]} (dilation {dilation_}) does not fit input {x._shape[2:]} with padding {padding_}, stride {stride_}"
            )
    dtype = _float_dtype(x, w, *([] if bias is None else [bias]))
    if dtype == np.float64:  # onnxruntime has no float64 Conv: compute in float32, eagerly too
        dtype = np.dtype(np.float32)
    operands = [_operand(x, dtype), _operand(w, dtype)]
    if bias is not None:
        operands.append(_bias_operand(bias, w._shape[0], "conv2d", "output channels", dtype))
    return apply("conv2d", operands, {"stride": stride_, "padding": padding_, "dilation": dilation_, "groups": groups})


def _pool_args(x: TensorBase, kernel_size: Any, stride: Any, padding: Any, what: str) -> dict[str, Any]:
    if x.ndim != 4:
        raise ValueError(f"{what} needs NCHW input, got shape {x._shape}")
    if x.dtype.kind != "f":
        raise TypeError(f"{what} needs a floating-point tensor, got {x.dtype}")
    kernel = _pair(kernel_size, "kernel_size")
    stride_ = kernel if stride is None else _pair(stride, "stride")
    padding_ = _pair(padding, "padding")
    for i in range(2):
        if (
            kernel[i] < 1
            or stride_[i] < 1
            or not 0 <= padding_[i] < kernel[i]
            or x._shape[2 + i] + 2 * padding_[i] < kernel[i]
        ):
            raise ValueError(
                f"{what}: kernel {kernel}, stride {stride_}, padding {padding_} do not fit input {x._shape[2:]}"
            )
    return {"kernel": kernel, "stride": stride_, "padding": padding_}


def max_pool2d(inp: Any, kernel_size: Any, stride: Any = None, padding: Any = 0) -> TensorBase:
    """Max pooling over NCHW input; stride defaults to kernel_size."""
    x = as_tensor(inp)
    return apply("max_pool2d", [x], _pool_args(x, kernel_size, stride, padding, "max_pool2d"))


def avg_pool2d(
    inp: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, mode: str = "average_count_exclude_padding"
) -> TensorBase:
    """Average pooling over NCHW input; stride defaults to kernel_size.

    Args:
        mode: ``average_count_exclude_padding`` (MegEngine's default) divides by
            the cells inside the input; ``average`` by the whole window.
    """
    if mode not in ("average", "average_count_exclude_padding"):
        raise ValueError(f"avg_pool2d mode must be 'average' or 'average_count_exclude_padding', got {mode!r}")
    x = as_tensor(inp)
    attrs = _pool_args(x, kernel_size, stride, padding, "avg_pool2d")
    if x.dtype == np.float64:  # onnxruntime has no float64 AveragePool: compute in float32, eagerly too
        x = _operand(x, np.dtype(np.float32))
    attrs["count_include_pad"] = mode == "average"
    return apply("avg_pool2d", [x], attrs)


def batch_norm(
    inp: Any,
    running_mean: Any,
    running_var: Any,
    weight: Any = None,
    bias: Any = None,
    *,
    training: bool = False,
    momentum: float = 0.9,
    eps: float = 1e-5,
    inplace: bool = True,
) -> TensorBase:
    """Batch normalization with running statistics (inference).

    Parameters have C values each (shape (C,) or (1, C, 1, 1)); weight and bias
    default to ones and zeros. ``training=True`` normalises by the batch's own
    mean and variance instead, as MegEngine's training mode, without updating
    the running statistics; a trace holding it computes, but is not dumped.
    """
    x = as_tensor(inp)
    if x.ndim < 2:
        raise ValueError(f"batch_norm needs input with a channel dim (N, C, ...), got shape {x._shape}")
    channels = x._shape[1]
    dtype = _float_dtype(x)

    def param(p: Any, default: float, what: str) -> TensorBase:
        if p is None:
            return wrap(np.full((channels,), default, dtype))
        t = as_tensor(p)
        if t.size != channels:
            raise ValueError(f"batch_norm: {what} of shape {t._shape} does not fit {channels} channels")
        return _operand(t if t._shape == (channels,) else reshape(t, (channels,)), dtype)

    if training:
        operands = [_operand(x, dtype), param(weight, 1.0, "weight"), param(bias, 0.0, "bias")]
        return apply("batch_norm_train", operands, {"eps": float(eps)})
    operands = [
        _operand(x, dtype),
        param(running_mean, 0.0, "running_mean"),
        param(running_var, 1.0, "running_var"),
        param(weight, 1.0, "weight"),
        param(bias, 0.0, "bias"),
    ]
    return apply("batch_norm", operands, {"eps": float(eps)})


def _softmax_axis(axis: int | None, ndim: int) -> int:
    if axis is None:  # MegEngine's default
        axis = 0 if ndim in (0, 1, 3) else 1
    return _axis(axis, ndim)


def softmax(inp: Any, axis: int | None = None) -> TensorBase:
    """exp(x) / sum(exp(x)) along axis (default: MegEngine's, 1 for 2-D and 4-D input)."""
    x = as_tensor(inp)
    x = _operand(x, _float_dtype(x))
    return apply("softmax", [x], {"axis": _softmax_axis(axis, x.ndim)})


def log_softmax(inp: Any, axis: int | None = None) -> TensorBase:
    """log(softmax(x)) along axis, computed stably."""
    x = as_tensor(inp)
    x = _operand(x, _float_dtype(x))
    return apply("log_softmax", [x], {"axis": _softmax_axis(axis, x.ndim)})


# ------------------------------------------------------------------ shapes as tensors, filling, selection


def shape_of(inp: Any) -> TensorBase:
    """The shape of a tensor as an int32 tensor (``Tensor.shape`` inside ``trace(symbolic_shape=True)``)."""
    return apply("shape", [as_tensor(inp)], {})


def broadcast_to(inp: Any, shape: Any) -> TensorBase:
    """inp broadcast to ``shape`` (ints, or tensors: a shape tensor, or a sequence holding some).

    Raises:
        ValueError: the shapes are not compatible (numpy's broadcasting rules).
    """
    x = as_tensor(inp)
    dyn = _shape_operand(shape)
    target = None if dyn is None else None if dyn._data is None else tuple(int(v) for v in dyn._data)
    if dyn is None:
        target = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if target is not None:
        try:
            np.broadcast_shapes(x._shape, target)
            if len(target) < x.ndim or np.broadcast_shapes(x._shape, target) != target:
                raise ValueError
        except ValueError:
            raise ValueError(f"cannot broadcast a tensor of shape {x._shape} to {target}") from None
    if dyn is not None:
        return apply("broadcast_to_dyn", [x, dyn], {})
    return apply("broadcast_to", [x], {"shape": target})


def _fill(shape: Any, value: Any, dtype: Any) -> TensorBase:
    dyn = _shape_operand(shape)
    if dyn is not None and dyn._data is None:  # a shape only the graph knows: broadcast a scalar to it
        return broadcast_to(wrap(np.array(value, dtype=dtype)), dyn)
    dims = tuple(int(v) for v in dyn._data) if dyn is not None and dyn._data is not None else None
    if dims is None:
        dims = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    return wrap(np.full(dims, value, dtype=dtype))


def zeros(shape: Any, dtype: Any = "float32") -> TensorBase:
    """A tensor of zeros (a constant of the graph when made inside a traced function)."""
    return _fill(shape, 0, dtype)


def ones(shape: Any, dtype: Any = "float32") -> TensorBase:
    """A tensor of ones."""
    return _fill(shape, 1, dtype)


def full(shape: Any, value: Any, dtype: Any = "float32") -> TensorBase:
    """A tensor filled with value."""
    return _fill(shape, value, dtype)


def full_like(inp: Any, value: Any) -> TensorBase:
    """A tensor of inp's shape and dtype filled with value (the graph takes the shape from inp)."""
    x = as_tensor(inp)
    return broadcast_to_like(wrap(np.array(value, dtype=x.dtype)), x)


def zeros_like(inp: Any) -> TensorBase:
    return full_like(inp, 0)


def ones_like(inp: Any) -> TensorBase:
    return full_like(inp, 1)


def broadcast_to_like(inp: Any, like: TensorBase) -> TensorBase:
    """inp broadcast to the shape of ``like``, read from ``like`` in the graph."""
    return broadcast_to(inp, shape_of(like))


def arange(start: Any = 0, stop: Any = None, step: Any = 1, dtype: Any = "float32", device: Any = None) -> TensorBase:
    """Evenly spaced values in [start, stop) (MegEngine's default dtype is float32)."""
    if stop is None:
        start, stop = 0, start
    return wrap(np.arange(float(start), float(stop), float(step)).astype(dtype))


def topk(
    inp: Any, k: int, descending: bool = False, kth_only: bool = False, no_sort: bool = False
) -> tuple[TensorBase, TensorBase | None]:
    """The k smallest (or, with ``descending``, largest) values along the last axis, and their int32 indices.

    As MegEngine's ``topk``: for 1-D or 2-D input, sorted, ties broken by the
    lower index. ``no_sort=True`` still returns them sorted (one valid
    order); ``kth_only=True`` returns the k-th value alone and no indices.

    A k larger than the size gives all the values, sorted (MegEngine's
    kernel clamps k to the size); the graph does the same on whatever size
    it is given, so a trace made on a small input serves larger ones.

    Raises:
        ValueError: k < 1, or the input is not 1-D or 2-D.
    """
    x = as_tensor(inp)
    if x.ndim not in (1, 2):
        raise ValueError(f"topk takes a 1-D or 2-D tensor, got shape {x._shape}")
    k = int(k)
    if k < 1:
        raise ValueError(f"topk: k must be at least 1, got {k}")
    if x.dtype.kind not in "iuf":
        raise TypeError(f"topk needs a numeric tensor, got {x.dtype}")
    attrs = {"k": k, "largest": bool(descending)}
    values = apply("topk", [x], {**attrs, "output": 0})
    if kth_only:  # the last of the (at most k) values is the k-th
        return getitem(values, (Ellipsis, -1)), None
    return values, apply("topk", [x], {**attrs, "output": 1})


def repeat(inp: Any, repeats: Any, axis: int | None = None) -> TensorBase:
    """Repeat each element ``repeats`` times along axis (the flattened input when None), as numpy's ``repeat``.

    ``repeats`` is an int (a constant of a trace: a later call with another
    number is a TraceError), or a one-value integer tensor, which a trace
    takes as an input of the graph: later calls may change it, and the
    result's length follows.

    Raises:
        ValueError: a negative count; a tensor of more than one value.
        TypeError: a tensor that is not of integers.
    """
    x = as_tensor(inp)
    if axis is None:
        x, axis = flatten(x), 0
    ax = _axis(axis, x.ndim)
    if isinstance(repeats, TensorBase):
        if repeats.size != 1 or repeats.dtype.kind not in "iu":
            raise TypeError(
                f"repeat: repeats must be one integer, got a {repeats.dtype} tensor of shape {repeats._shape}"
            )
        known = repeats._data  # the value, unless a placeholder of a symbolic first call (the graph then checks)
        if known is not None and int(known.reshape(-1)[0]) < 0:
            raise ValueError(f"repeat: repeats must be >= 0, got {int(known.reshape(-1)[0])}")
        return apply("repeat_dyn", [x, repeats], {"axis": ax})
    count = int(repeats)
    if count < 0:
        raise ValueError(f"repeat: repeats must be >= 0, got {count}")
    return apply("repeat", [x], {"repeats": count, "axis": ax})


def split(inp: Any, nsplits_or_sections: Any, axis: int = 0) -> list[TensorBase]:
    """Split along axis into n equal parts (an int), or at the given indices (a sequence).

    Raises:
        ValueError: n does not divide the dim, or the split points are out of order.
    """
    x = as_tensor(inp)
    ax = _axis(axis, x.ndim)
    dim = x._shape[ax]
    if isinstance(nsplits_or_sections, (int, np.integer)):
        n = int(nsplits_or_sections)
        if n < 1 or dim % n:
            raise ValueError(f"split: {n} parts do not divide axis {ax} of size {dim}")
        points = [dim // n * i for i in range(1, n)]
    else:
        points = [int(p) for p in nsplits_or_sections]
        if any(b < a for a, b in zip([0, *points], [*points, dim], strict=True)):
            raise ValueError(f"split: sections {points} must be increasing within 0..{dim}")
    bounds = zip([0, *points], [*points, dim], strict=True)
    lead = (slice(None),) * ax
    return [getitem(x, (*lead, slice(a, b))) for a, b in bounds]


def nms(boxes: Any, scores: Any, iou_thresh: float, max_output: int | None = None) -> TensorBase:
    """Non-maximum suppression (MegEngine's ``F.vision.nms``): int32 indices of the kept boxes, by score.

    Args:
        boxes: (N, 4) boxes as (x1, y1, x2, y2).
        scores: (N,) scores.
        iou_thresh: a box is dropped when its IoU with a kept box is above this.
        max_output: keep at most this many (default: N, which a trace fixes per input shape).

    The result's length depends on the values: a trace runs it on
    onnxruntime's NonMaxSuppression, computed before anything that reads it.
    """
    b, s = as_tensor(boxes), as_tensor(scores)
    if b.ndim != 2 or b._shape[1] != 4 or s._shape != (b._shape[0],):
        raise ValueError(f"nms takes boxes of shape (N, 4) and scores of shape (N,), got {b._shape} and {s._shape}")
    if not 0.0 <= float(iou_thresh) <= 1.0:
        raise ValueError(f"nms: iou_thresh must be in [0, 1], got {iou_thresh}")
    limit = b._shape[0] if max_output is None else int(max_output)
    f32 = np.dtype(np.float32)
    return apply("nms", [_operand(b, f32), _operand(s, f32)], {"iou_thresh": float(iou_thresh), "max_output": limit})


_BORDERS = ("replicate", "constant")
_INTERPOLATIONS = ("linear", "nearest")


def warp_perspective(
    inp: Any,
    mat: Any,
    out_shape: Any,
    mat_idx: Any = None,
    border_mode: str = "replicate",
    border_val: float = 0.0,
    format: str = "NCHW",
    interp_mode: str = "linear",
) -> TensorBase:
    """Perspective transform of NCHW images (MegEngine's ``F.vision.warp_perspective``).

    ``output[n, c, h, w] = input[n, c, y, x]`` with ``(x * d, y * d, d) =
    mat[n] @ (w, h, 1)``: the matrix maps output pixels to input points (the
    inverse of OpenCV's), sampled bilinearly (``interp_mode="linear"``) or at
    the nearest pixel. Computed in float32; the result is float32.

    Args:
        inp: (N, C, H, W) images.
        mat: (N, 3, 3) matrices, or (M, 3, 3) with ``mat_idx``.
        out_shape: (height, width) of the output (ints, or an int for both).
        mat_idx: (M,) the image each matrix takes (default: one matrix per image).
        border_mode: ``"replicate"`` (the nearest edge pixel) or ``"constant"`` (``border_val``).

    Raises:
        ValueError: shapes that do not fit; ``format`` other than NCHW; a border or
            interpolation mode not listed above (MegEngine's reflect and wrap are not supported).
    """
    x, m = as_tensor(inp), as_tensor(mat)
    if format != "NCHW" or border_mode not in _BORDERS or interp_mode not in _INTERPOLATIONS:
        raise ValueError(
            f"warp_perspective supports format='NCHW', border_mode in {_BORDERS} and interp_mode in "
            f"{_INTERPOLATIONS}; got {format!r}, {border_mode!r} and {interp_mode!r}"
        )
    if mat_idx is not None:
        x = getitem(x, as_tensor(mat_idx))
    if x.ndim != 4 or m._shape != (x._shape[0], 3, 3):
        raise ValueError(f"warp_perspective takes NCHW images and (N, 3, 3) matrices, got {x._shape} and {m._shape}")
    f32 = np.dtype(np.float32)
    attrs = {
        "out": _pair(out_shape, "warp_perspective: out_shape"),
        "border": border_mode,
        "border_val": float(border_val),
        "interp": interp_mode,
    }
    return apply("warp_perspective", [_operand(x, f32), _operand(m, f32)], attrs)


class _Vision:
    """``F.vision``: MegEngine's vision functions that tracing supports."""

    nms = staticmethod(nms)
    warp_perspective = staticmethod(warp_perspective)


vision = _Vision()


# ------------------------------------------------------------------ random numbers (mgedump.random)


def _size(size: Any) -> tuple[int, ...]:
    if size is None:
        return ()
    if isinstance(size, TensorBase):
        if size._data is None:
            raise TypeError(
                "a random tensor's size must be known when it is made (ints, or a shape tensor with a value)"
            )
        return tuple(int(v) for v in size._data)
    return (int(size),) if isinstance(size, (int, np.integer)) else tuple(int(s) for s in size)


def uniform(low: float = 0.0, high: float = 1.0, size: Any = None) -> TensorBase:
    """float32 random values in [low, high) (ONNX RandomUniform in a trace: new values on every call)."""
    return apply("random_uniform", [], {"a": float(low), "b": float(high), "shape": _size(size)})


def normal(mean: float = 0.0, std: float = 1.0, size: Any = None) -> TensorBase:
    """float32 random values from a normal distribution (ONNX RandomNormal in a trace)."""
    return apply("random_normal", [], {"a": float(mean), "b": float(std), "shape": _size(size)})


def seed(value: int) -> None:
    """Seed the generator of eager random values (graphs on onnxruntime draw their own)."""
    RNG[0] = np.random.default_rng(int(value))
