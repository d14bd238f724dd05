"""The op table: for each traced operation, a numpy implementation and an ONNX (opset 13) emitter.

Every operation goes through :func:`mgedump.tracing.dispatch.apply` with a key
of :data:`OPS`: the dispatch layer runs ``compute`` eagerly, and the graph
builder (:mod:`mgedump.tracing.graph`) calls ``emit`` to write the nodes. An
operation receives arrays of the dtypes :mod:`mgedump.tracing.functional`
already cast them to (ONNX has no implicit type promotion), and its attributes
are plain Python values (ints, floats, bools, strings and tuples of them), so
two calls can be compared attribute by attribute.

This module imports no other module of the project.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

Info = tuple[tuple[int, ...], np.dtype]  # shape and dtype of a value
INT64_MIN = -(2**63)


@dataclass(frozen=True)
class OpDef:
    """One operation.

    Attributes:
        name: the name users see in messages (``conv2d``, ``add``).
        compute: ``compute(arrays, attrs) -> array`` with numpy.
        emit: ``emit(builder, input_names, output_name, attrs, input_infos, output_info)``
            appends the ONNX nodes that compute it.
    """

    name: str
    compute: Callable[[Sequence[np.ndarray], dict[str, Any]], np.ndarray]
    emit: Callable[..., None]


OPS: dict[str, OpDef] = {}


def _register(name: str, compute: Callable, emit: Callable) -> None:
    OPS[name] = OpDef(name, compute, emit)


# ------------------------------------------------------------------ elementwise


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (1 / (1 + np.exp(-x))).astype(x.dtype, copy=False)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.zeros((), x.dtype))


_UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    "neg": (np.negative, "Neg"),
    "abs": (np.abs, "Abs"),
    "exp": (np.exp, "Exp"),
    "log": (np.log, "Log"),
    "sqrt": (np.sqrt, "Sqrt"),
    "tanh": (np.tanh, "Tanh"),
    "sin": (np.sin, "Sin"),
    "cos": (np.cos, "Cos"),
    "floor": (np.floor, "Floor"),
    "ceil": (np.ceil, "Ceil"),
    "round": (np.rint, "Round"),
    "sign": (np.sign, "Sign"),
    "reciprocal": (np.reciprocal, "Reciprocal"),
    "logical_not": (np.logical_not, "Not"),
    "sigmoid": (_sigmoid, "Sigmoid"),
    "relu": (_relu, "Relu"),
    "identity": (np.array, "Identity"),
}


def _unary_emitter(onnx_op: str) -> Callable:
    def emit(b, ins, out, attrs, infos, oinfo):
        dtype = infos[0][1]
        if onnx_op == "Relu" and dtype.kind != "f":
            b.node("Max", [ins[0], b.const(np.zeros((), dtype), "zero")], [out])
        else:
            b.node(onnx_op, ins, [out])

    return emit


for _name, (_fn, _onnx) in _UNARY.items():
    _register(_name, (lambda fn: lambda a, attrs: fn(a[0]))(_fn), _unary_emitter(_onnx))


def _floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.floor_divide(a, b)


def _mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.remainder(a, b)


_BINARY: dict[str, tuple[Callable[[np.ndarray, np.ndarray], np.ndarray], str]] = {
    "add": (np.add, "Add"),
    "sub": (np.subtract, "Sub"),
    "mul": (np.multiply, "Mul"),
    "div": (np.true_divide, "Div"),
    "floordiv": (_floordiv, ""),
    "mod": (_mod, ""),
    "pow": (np.power, "Pow"),
    "maximum": (np.maximum, "Max"),
    "minimum": (np.minimum, "Min"),
    "greater": (np.greater, "Greater"),
    "greater_equal": (np.greater_equal, "GreaterOrEqual"),
    "less": (np.less, "Less"),
    "less_equal": (np.less_equal, "LessOrEqual"),
    "equal": (np.equal, "Equal"),
    "not_equal": (np.not_equal, ""),
    "logical_and": (np.logical_and, "And"),
    "logical_or": (np.logical_or, "Or"),
    "logical_xor": (np.logical_xor, "Xor"),
    "matmul": (np.matmul, "MatMul"),
}

# numpy's arithmetic on bools is logic; ONNX's arithmetic has no bool kernels
_BOOL_EQUIVALENT = {"Add": "Or", "Mul": "And", "Max": "Or", "Min": "And"}


def _binary_emitter(name: str, onnx_op: str) -> Callable:
    def emit(b, ins, out, attrs, infos, oinfo):
        dtype = infos[0][1]
        if name == "not_equal":
            eq = b.tmp("eq")
            b.node("Equal", ins, [eq])
            b.node("Not", [eq], [out])
        elif name == "floordiv":
            if dtype.kind == "f":
                q = b.tmp("div")
                b.node("Div", ins, [q])
                b.node("Floor", [q], [out])
            else:  # integers: in float64, exact below 2**53
                fa, fb, q, fq = b.tmp("a"), b.tmp("b"), b.tmp("div"), b.tmp("floor")
                b.node("Cast", [ins[0]], [fa], to=onnx_type(np.float64))
                b.node("Cast", [ins[1]], [fb], to=onnx_type(np.float64))
                b.node("Div", [fa, fb], [q])
                b.node("Floor", [q], [fq])
                b.node("Cast", [fq], [out], to=onnx_type(dtype))
        elif name == "mod":
            if dtype.kind == "f":  # a - floor(a / b) * b: the sign of b, as numpy
                q, fq, m = b.tmp("div"), b.tmp("floor"), b.tmp("mul")
                b.node("Div", ins, [q])
                b.node("Floor", [q], [fq])
                b.node("Mul", [fq, ins[1]], [m])
                b.node("Sub", [ins[0], m], [out])
            else:
                b.node("Mod", ins, [out], fmod=0)
        else:
            op = _BOOL_EQUIVALENT.get(onnx_op, onnx_op) if dtype == np.bool_ else onnx_op
            b.node(op, ins, [out])

    return emit


for _name, (_fn, _onnx) in _BINARY.items():
    _register(_name, (lambda fn: lambda a, attrs: fn(a[0], a[1]))(_fn), _binary_emitter(_name, _onnx))


def _where_emit(b, ins, out, attrs, infos, oinfo):
    b.node("Where", ins, [out])


_register("where", lambda a, attrs: np.where(a[0], a[1], a[2]), _where_emit)


def _clip_compute(a, attrs):
    lo = a[1] if attrs["lower"] else None
    hi = a[1 + attrs["lower"]] if attrs["upper"] else None
    x = a[0]
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    return x


def _clip_emit(b, ins, out, attrs, infos, oinfo):
    lo = ins[1] if attrs["lower"] else None
    hi = ins[1 + attrs["lower"]] if attrs["upper"] else None
    bounds = infos[1:]
    if all(shape == () for shape, _ in bounds):
        b.node("Clip", [ins[0], lo or "", hi or ""], [out])
        return
    x = ins[0]
    if lo is not None:
        y = b.tmp("max") if hi is not None else out
        b.node("Max", [x, lo], [y])
        x = y
    if hi is not None:
        b.node("Min", [x, hi], [out])


_register("clip", _clip_compute, _clip_emit)


def _cast_emit(b, ins, out, attrs, infos, oinfo):
    b.node("Cast", ins, [out], to=onnx_type(np.dtype(attrs["dtype"])))


_register("cast", lambda a, attrs: a[0].astype(attrs["dtype"]), _cast_emit)

# ------------------------------------------------------------------ reductions

_REDUCE = {
    "sum": (np.sum, "ReduceSum"),
    "mean": (np.mean, "ReduceMean"),
    "max": (np.max, "ReduceMax"),
    "min": (np.min, "ReduceMin"),
    "prod": (np.prod, "ReduceProd"),
}


def _reduce_compute(a, attrs):
    fn = _REDUCE[attrs["kind"]][0]
    return np.asarray(fn(a[0], axis=attrs["axes"], keepdims=attrs["keepdims"]))


def _reduce_emit(b, ins, out, attrs, infos, oinfo):
    axes = list(attrs["axes"])
    if not axes:
        b.node("Identity", ins, [out])
        return
    op = _REDUCE[attrs["kind"]][1]
    keep = int(attrs["keepdims"])
    if op == "ReduceSum":  # axes is an input from opset 13
        b.node(op, [ins[0], b.const(np.array(axes, np.int64), "axes")], [out], keepdims=keep)
    else:
        b.node(op, ins, [out], axes=axes, keepdims=keep)


_register("reduce", _reduce_compute, _reduce_emit)


def _arg_compute(a, attrs):
    fn = np.argmax if attrs["kind"] == "argmax" else np.argmin
    return np.asarray(fn(a[0], axis=attrs["axis"], keepdims=attrs["keepdims"]))


def _arg_emit(b, ins, out, attrs, infos, oinfo):
    op = "ArgMax" if attrs["kind"] == "argmax" else "ArgMin"
    if attrs["axis"] is None:
        flat, idx = b.tmp("flat"), b.tmp("idx")
        b.node("Reshape", [ins[0], b.const(np.array([-1], np.int64), "shape")], [flat])
        b.node(op, [flat], [idx], axis=0, keepdims=0)
        b.node("Reshape", [idx, b.const(np.array(oinfo[0], np.int64), "shape")], [out])
    else:
        b.node(op, ins, [out], axis=attrs["axis"], keepdims=int(attrs["keepdims"]))


_register("argmax", _arg_compute, _arg_emit)
_register("argmin", _arg_compute, _arg_emit)

# ------------------------------------------------------------------ shapes


def _reshape_emit(b, ins, out, attrs, infos, oinfo):
    b.node("Reshape", [ins[0], b.const(np.array(attrs["shape"], np.int64), "shape")], [out])


_register("reshape", lambda a, attrs: a[0].reshape(attrs["shape"]), _reshape_emit)


def _transpose_emit(b, ins, out, attrs, infos, oinfo):
    b.node("Transpose", ins, [out], perm=list(attrs["perm"]))


_register("transpose", lambda a, attrs: np.transpose(a[0], attrs["perm"]), _transpose_emit)


def _expand_emit(b, ins, out, attrs, infos, oinfo):
    b.node("Unsqueeze", [ins[0], b.const(np.array(attrs["axes"], np.int64), "axes")], [out])


_register("expand_dims", lambda a, attrs: np.expand_dims(a[0], attrs["axes"]), _expand_emit)


def _squeeze_emit(b, ins, out, attrs, infos, oinfo):
    if not attrs["axes"]:
        b.node("Identity", ins, [out])
    else:
        b.node("Squeeze", [ins[0], b.const(np.array(attrs["axes"], np.int64), "axes")], [out])


_register("squeeze", lambda a, attrs: np.squeeze(a[0], attrs["axes"]), _squeeze_emit)


def _concat_emit(b, ins, out, attrs, infos, oinfo):
    b.node("Concat", ins, [out], axis=attrs["axis"])


_register("concat", lambda a, attrs: np.concatenate(list(a), axis=attrs["axis"]), _concat_emit)


def _stack_emit(b, ins, out, attrs, infos, oinfo):
    axes = b.const(np.array([attrs["axis"]], np.int64), "axes")
    parts = []
    for name in ins:
        parts.append(b.tmp("unsqueeze"))
        b.node("Unsqueeze", [name, axes], [parts[-1]])
    b.node("Concat", parts, [out], axis=attrs["axis"])


_register("stack", lambda a, attrs: np.stack(list(a), axis=attrs["axis"]), _stack_emit)


def index_key(key: tuple) -> tuple:
    """numpy's basic index from a normalized ``getitem`` key (see :func:`normalize_index`)."""
    out = []
    for item in key:
        if item[0] == "int":
            out.append(item[1])
        elif item[0] == "slice":
            out.append(slice(item[1], item[2], item[3]))
        else:
            out.append(None)
    return tuple(out)


def normalize_index(key: Any, shape: tuple[int, ...]) -> tuple:
    """A basic numpy index as a tuple of ``("int", i)``, ``("slice", start, stop, step)``, ``("new",)``.

    Ellipsis is expanded, every input axis gets an entry, and starts and stops
    are resolved against ``shape`` (a stop of None means "past the start" for a
    negative step).

    Raises:
        TypeError: an index that is not basic (an array, a list, a tensor).
        IndexError: an integer out of range, or too many indices.
    """
    if not isinstance(key, tuple):
        key = (key,)
    for item in key:
        if not (item is None or item is Ellipsis or isinstance(item, slice) or _is_int(item)):
            raise TypeError(
                f"index {item!r} ({type(item).__name__}) is not supported: only basic indexing "
                "(integers, slices, None, ...) can be traced"
            )
    real = sum(1 for item in key if item is not None and item is not Ellipsis)
    if sum(1 for item in key if item is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if real > len(shape):
        raise IndexError(f"too many indices for a tensor of rank {len(shape)}: {real} were given")
    expanded: list[Any] = []
    for item in key:
        if item is Ellipsis:
            expanded.extend([slice(None)] * (len(shape) - real))
        else:
            expanded.append(item)
    if Ellipsis not in key:
        expanded.extend([slice(None)] * (len(shape) - real))
    out: list[tuple] = []
    axis = 0
    for item in expanded:
        if item is None:
            out.append(("new",))
            continue
        dim = shape[axis]
        if isinstance(item, slice):
            if not all(v is None or _is_int(v) for v in (item.start, item.stop, item.step)):
                raise TypeError(f"slice {item!r} has non-integer bounds; only integer slices can be traced")
            start, stop, step = item.indices(dim)
            if not len(range(start, stop, step)):
                out.append(("slice", 0, 0, 1))  # empty (indices() may give a start of -1: "before the first")
            else:
                out.append(("slice", start, None if stop < 0 else stop, step))
        else:
            i = int(item)
            if not -dim <= i < dim:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {dim}")
            out.append(("int", i % dim))
        axis += 1
    return tuple(out)


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _getitem_emit(b, ins, out, attrs, infos, oinfo):
    slices = []  # (start, end, axis, step) of each axis that is cut
    axis = 0
    shape = infos[0][0]
    for item in attrs["key"]:
        if item[0] == "new":
            continue
        if item[0] == "int":
            slices.append((item[1], item[1] + 1, axis, 1))
        else:
            _, start, stop, step = item
            if not (start == 0 and stop == shape[axis] and step == 1):
                slices.append((start, INT64_MIN if stop is None else stop, axis, step))
        axis += 1
    x = ins[0]
    if slices:
        sliced = b.tmp("slice")
        starts, ends, axes, steps = zip(*slices, strict=True)
        params = [
            b.const(np.array(v, np.int64), hint)
            for v, hint in ((starts, "starts"), (ends, "ends"), (axes, "axes"), (steps, "steps"))
        ]
        b.node("Slice", [x, *params], [sliced])
        x = sliced
    b.node("Reshape", [x, b.const(np.array(oinfo[0], np.int64), "shape")], [out])


_register("getitem", lambda a, attrs: np.array(a[0][index_key(attrs["key"])]), _getitem_emit)

# ------------------------------------------------------------------ neural network


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


_register(
    "softmax",
    lambda a, attrs: _softmax(a[0], attrs["axis"]),
    lambda b, ins, out, attrs, infos, oinfo: b.node("Softmax", ins, [out], axis=attrs["axis"]),
)
_register(
    "log_softmax",
    lambda a, attrs: _log_softmax(a[0], attrs["axis"]),
    lambda b, ins, out, attrs, infos, oinfo: b.node("LogSoftmax", ins, [out], axis=attrs["axis"]),
)


def _windows(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int]) -> np.ndarray:
    """(N, C, OH, OW, KH, KW) windows of an NCHW array (already padded)."""
    kh, kw = kernel
    dh, dw = dilation
    win = sliding_window_view(x, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))
    return win[:, :, :: stride[0], :: stride[1], ::dh, ::dw]


def _pad(x: np.ndarray, padding: tuple[int, int], value: float = 0) -> np.ndarray:
    ph, pw = padding
    if not (ph or pw):
        return x
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)


def _conv2d_compute(a, attrs):
    x, w = a[0], a[1]
    groups = attrs["groups"]
    n = x.shape[0]
    oc, icg, kh, kw = w.shape
    win = _windows(_pad(x, attrs["padding"]), (kh, kw), attrs["stride"], attrs["dilation"])
    oh, ow = win.shape[2:4]
    outs = []
    ocg = oc // groups
    for g in range(groups):
        cols = win[:, g * icg : (g + 1) * icg].transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, icg * kh * kw)
        wg = w[g * ocg : (g + 1) * ocg].reshape(ocg, icg * kh * kw)
        outs.append((cols @ wg.T).reshape(n, oh, ow, ocg))
    y = (outs[0] if groups == 1 else np.concatenate(outs, axis=3)).transpose(0, 3, 1, 2)
    if len(a) > 2:
        y = y + a[2].reshape(1, oc, 1, 1)
    return np.ascontiguousarray(y, dtype=x.dtype)


def _conv2d_emit(b, ins, out, attrs, infos, oinfo):
    ph, pw = attrs["padding"]
    kh, kw = infos[1][0][2:]
    b.node(
        "Conv",
        ins,
        [out],
        kernel_shape=[kh, kw],
        strides=list(attrs["stride"]),
        pads=[ph, pw, ph, pw],
        dilations=list(attrs["dilation"]),
        group=attrs["groups"],
    )


_register("conv2d", _conv2d_compute, _conv2d_emit)


def _max_pool_compute(a, attrs):
    x = a[0]
    low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    win = _windows(_pad(x, attrs["padding"], low), attrs["kernel"], attrs["stride"], (1, 1))
    return np.ascontiguousarray(win.max(axis=(4, 5)))


def _avg_pool_compute(a, attrs):
    x = a[0]
    win = _windows(_pad(x, attrs["padding"]), attrs["kernel"], attrs["stride"], (1, 1))
    total = win.sum(axis=(4, 5))
    if attrs["count_include_pad"] or not any(attrs["padding"]):
        count = attrs["kernel"][0] * attrs["kernel"][1]
        return np.ascontiguousarray((total / count).astype(x.dtype))
    ones = np.ones((1, 1) + x.shape[2:], x.dtype)
    count = _windows(_pad(ones, attrs["padding"]), attrs["kernel"], attrs["stride"], (1, 1)).sum(axis=(4, 5))
    return np.ascontiguousarray((total / count).astype(x.dtype))


def _pool_emitter(op: str) -> Callable:
    def emit(b, ins, out, attrs, infos, oinfo):
        ph, pw = attrs["padding"]
        extra = {"count_include_pad": int(attrs["count_include_pad"])} if op == "AveragePool" else {}
        b.node(
            op,
            ins,
            [out],
            kernel_shape=list(attrs["kernel"]),
            strides=list(attrs["stride"]),
            pads=[ph, pw, ph, pw],
            **extra,
        )

    return emit


_register("max_pool2d", _max_pool_compute, _pool_emitter("MaxPool"))
_register("avg_pool2d", _avg_pool_compute, _pool_emitter("AveragePool"))


def _batch_norm_compute(a, attrs):
    x, mean, var, w, bias = a
    shape = (1, -1) + (1,) * (x.ndim - 2)
    scale = w / np.sqrt(var + np.asarray(attrs["eps"], var.dtype))
    y = (x - mean.reshape(shape)) * scale.reshape(shape) + bias.reshape(shape)
    return y.astype(x.dtype, copy=False)


def _batch_norm_emit(b, ins, out, attrs, infos, oinfo):
    x, mean, var, w, bias = ins
    b.node("BatchNormalization", [x, w, bias, mean, var], [out], epsilon=float(attrs["eps"]))


_register("batch_norm", _batch_norm_compute, _batch_norm_emit)


def _linear_compute(a, attrs):
    y = np.matmul(a[0], a[1].T)
    if len(a) > 2:
        y = y + a[2]
    return y


def _linear_emit(b, ins, out, attrs, infos, oinfo):
    if len(infos[0][0]) == 2 and (len(ins) < 3 or len(infos[2][0]) <= 1):
        b.node("Gemm", ins, [out], transB=1)
        return
    wt = b.tmp("weight_t")
    b.node("Transpose", [ins[1]], [wt], perm=[1, 0])
    if len(ins) < 3:
        b.node("MatMul", [ins[0], wt], [out])
        return
    mm = b.tmp("matmul")
    b.node("MatMul", [ins[0], wt], [mm])
    b.node("Add", [mm, ins[2]], [out])


_register("linear", _linear_compute, _linear_emit)


# ------------------------------------------------------------------ dtypes onnxruntime's CPU kernels lack

_SMALL_INTS = {np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16)}
_HALF_INTS = {np.dtype(np.int16), np.dtype(np.uint16)}
_I32, _I64 = np.dtype(np.int32), np.dtype(np.int64)


def compute_dtype(name: str, dtype: np.dtype) -> np.dtype | None:
    """The dtype to compute ``name`` in on onnxruntime's CPU provider when it has no kernel for ``dtype``.

    numpy computes these dtypes directly; the graph casts to a wider type, runs
    the operation, and casts back, which gives the same values (integer
    arithmetic wraps alike modulo 2**n). None: no widening needed.
    """
    if name in ("add", "sub", "mul", "div", "matmul"):
        return _I32 if dtype in _SMALL_INTS else None
    if name == "pow":
        return _I32 if dtype in _SMALL_INTS else _I64 if dtype == np.uint32 else None
    if name == "neg":
        return _I64 if dtype.kind == "u" and dtype.itemsize < 8 else None
    if name in ("maximum", "minimum", "relu", "clip"):
        return _I32 if dtype in _HALF_INTS else None
    if name in ("greater", "greater_equal", "less", "less_equal"):
        return _I32 if dtype == np.bool_ else None
    if name == "where":
        return _I32 if dtype in _HALF_INTS or dtype == np.bool_ else None
    if name in ("argmax", "argmin", "reduce"):
        return _I32 if dtype in _SMALL_INTS else _I64 if dtype.kind == "u" else None
    return None


def widened_inputs(name: str, n: int) -> range:
    """Which inputs of ``name`` carry the dtype that :func:`compute_dtype` widens."""
    return range(1, 3) if name == "where" else range(n)


def onnx_type(dtype: Any) -> int:
    """The ONNX ``TensorProto`` element type of a numpy dtype."""
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
