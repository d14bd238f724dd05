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
        dynamic: ``dynamic(attrs)``: the positions of the inputs whose values (not
            only shapes) decide the result's shape: a boolean mask, a shape given
            as a tensor, the boxes of non-maximum suppression.
        shape_only: the result depends on the input's shape only (``shape``).
        random: the result is random: computed afresh on every call, never reused.
        training: it computes as in training (batch statistics): a graph holding it is not dumped.
    """

    name: str
    compute: Callable[[Sequence[np.ndarray], dict[str, Any]], np.ndarray]
    emit: Callable[..., None]
    dynamic: Callable[[dict[str, Any]], Sequence[int]] | None = None
    shape_only: bool = False
    random: bool = False
    training: bool = False


OPS: dict[str, OpDef] = {}


def _register(name: str, compute: Callable[..., Any], emit: Callable[..., None], **flags: Any) -> None:
    OPS[name] = OpDef(name, compute, emit, **flags)


# MegEngine's operator names, for the nodes of a dumped graph (``net.fc.MatrixMul``)
DISPLAY_NAMES = {
    **{k: k.upper() for k in ("add", "sub", "mul", "mod", "pow", "abs", "exp", "log", "sqrt", "tanh", "sin", "cos")},
    **{k: k.upper() for k in ("floor", "ceil", "round", "relu", "sigmoid")},
    "div": "TRUE_DIV",
    "floordiv": "FLOOR_DIV",
    "maximum": "MAX",
    "minimum": "MIN",
    "neg": "NEGATE",
    "greater": "LT",
    "greater_equal": "LEQ",
    "less": "LT",
    "less_equal": "LEQ",
    "equal": "EQ",
    "not_equal": "NEQ",
    "logical_and": "AND",
    "logical_or": "OR",
    "logical_xor": "XOR",
    "logical_not": "NOT",
    "where": "Where",
    "matmul": "MatrixMul",
    "linear": "MatrixMul",
    "conv2d": "Convolution",
    "batch_norm": "BatchNorm",
    "batch_norm_train": "BatchNorm",
    "warp_perspective": "WarpPerspective",
    "max_pool2d": "Pooling",
    "avg_pool2d": "Pooling",
    "reshape": "Reshape",
    "reshape_dyn": "Reshape",
    "flatten": "Reshape",
    "transpose": "Dimshuffle",
    "expand_dims": "AddAxis",
    "squeeze": "RemoveAxis",
    "getitem": "Subtensor",
    "index": "IndexingMultiAxisVec",
    "argmax": "Argmax",
    "argmin": "Argmin",
    "softmax": "Softmax",
    "log_softmax": "LogSoftmax",
    "concat": "Concat",
    "stack": "Concat",
    "cast": "TypeCvt",
    "clip": "Clip",
    "shape": "GetVarShape",
    "broadcast_to": "Broadcast",
    "broadcast_to_dyn": "Broadcast",
    "topk": "TopK",
    "repeat": "Repeat",
    "repeat_dyn": "Repeat",
    "nms": "NMSKeep",
    "random_uniform": "UniformRNG",
    "random_normal": "GaussianRNG",
    "ones_like": "Fill",
    "logaddexp": "LogSumExp",
    "identity": "Identity",
}


def display_name(op: str, attrs: dict[str, Any]) -> str:
    """MegEngine's name for an operation (a reduction by its mode: a sum is ``SUM``)."""
    if op == "reduce":
        return str(attrs["kind"]).upper()
    return DISPLAY_NAMES.get(op, op)


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


for _name, (_binary_fn, _onnx) in _BINARY.items():
    _register(_name, (lambda fn: lambda a, attrs: fn(a[0], a[1]))(_binary_fn), _binary_emitter(_name, _onnx))


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


INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Ref:
    """A tensor inside an index: ``k`` is its position among the operation's inputs.

    Attributes:
        kind: ``adv`` (an integer index array), ``mask`` (a boolean mask over
            ``ndim`` axes) or ``bound`` (a slice's start or stop).
    """

    k: int
    kind: str
    ndim: int = 0


def normalize_index(key: Any, shape: tuple[int, ...]) -> tuple[tuple[Any, ...], ...]:
    """An index as a tuple with one entry per input axis (a mask: per its axes) plus one per new axis.

    Entries: ``("int", i)``, ``("slice", start, stop, step)`` (each bound an int,
    None, or ``("t", k)`` for a tensor input), ``("new",)``, ``("adv", k)`` (an
    index array input) and ``("mask", k, ndim)``. Ellipsis is expanded and
    missing trailing axes get full slices. Integers and bounds are kept as
    given (negative ones too), so that the entries do not depend on the
    dims: a trace indexes a tensor of any batch size alike.

    Raises:
        TypeError: an item that is not an index (a float, a string, a bool).
        IndexError: an integer out of range, or too many indices.
        ValueError: a slice step of zero.
    """
    if not isinstance(key, tuple):
        key = (key,)
    for item in key:
        if not (item is None or item is Ellipsis or isinstance(item, (slice, Ref)) or _is_int(item)):
            raise TypeError(
                f"index {item!r} ({type(item).__name__}) is not supported: use integers, slices, None, ..., "
                "integer tensors or lists, or a boolean mask"
            )
    if sum(1 for item in key if item is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")

    def width(item: Any) -> int:
        if item is None or item is Ellipsis:
            return 0
        return item.ndim if isinstance(item, Ref) and item.kind == "mask" else 1

    used = sum(width(item) for item in key)
    if used > len(shape):
        raise IndexError(f"too many indices for a tensor of rank {len(shape)}: {used} were given")
    full = ("slice", None, None, None)
    out: list[tuple[Any, ...]] = []
    axis = 0
    for item in key:
        if item is Ellipsis:
            out.extend([full] * (len(shape) - used))
            axis += len(shape) - used
        elif item is None:
            out.append(("new",))
        elif isinstance(item, slice):
            bounds: list[Any] = []
            for v in (item.start, item.stop, item.step):
                if isinstance(v, Ref):
                    bounds.append(("t", v.k))
                elif v is None or _is_int(v):
                    bounds.append(None if v is None else int(v))
                else:
                    raise TypeError(f"slice {item!r} has a bound that is not an integer or an integer tensor")
            if bounds[2] == 0:
                raise ValueError("slice step cannot be zero")
            if isinstance(bounds[2], tuple):
                raise TypeError("a slice step must be an int (a tensor step cannot be traced)")
            out.append(("slice", *bounds))
            axis += 1
        elif isinstance(item, Ref):
            if item.kind == "mask":
                out.append(("mask", item.k, item.ndim))
                axis += item.ndim
            else:
                out.append(("adv", item.k))
                axis += 1
        else:
            dim, i = shape[axis], int(item)
            if not -dim <= i < dim:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {dim}")
            out.append(("int", i))
            axis += 1
    if Ellipsis not in key:
        out.extend([full] * (len(shape) - used))
    return tuple(out)


def index_key(key: tuple[tuple[Any, ...], ...], arrays: Sequence[np.ndarray] = ()) -> tuple[Any, ...]:
    """numpy's index for a normalized key (see :func:`normalize_index`), with the tensor inputs' values."""

    def bound(v: Any) -> Any:
        return int(np.asarray(arrays[v[1]]).reshape(-1)[0]) if isinstance(v, tuple) else v

    out: list[Any] = []
    for item in key:
        tag = item[0]
        if tag == "int":
            out.append(item[1])
        elif tag == "slice":
            out.append(slice(bound(item[1]), bound(item[2]), item[3]))
        elif tag == "new":
            out.append(None)
        elif tag == "adv":
            out.append(np.asarray(arrays[item[1]]).astype(np.int64))
        else:
            out.append(np.asarray(arrays[item[1]]).astype(np.bool_))
    return tuple(out)


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_full(item: tuple[Any, ...]) -> bool:
    return item[0] == "slice" and item[1] in (None, 0) and item[2] is None and item[3] in (None, 1)


def _int64_1d(b: Any, v: Any, ins: Sequence[str]) -> str:
    """A 1-element int64 tensor: a constant, or a tensor bound's value."""
    if not isinstance(v, tuple):
        return str(b.const(np.array([v], np.int64), "bound"))
    flat, cast = b.tmp("bound"), b.tmp("bound")
    b.node("Reshape", [ins[v[1]], b.const(np.array([1], np.int64), "shape")], [flat])
    b.node("Cast", [flat], [cast], to=onnx_type(np.int64))
    return str(cast)


def _slice_axes(b: Any, x: str, key: tuple[tuple[Any, ...], ...], ins: Sequence[str], advanced: bool) -> str:
    """Slice ``x`` on the axes that slices cut (and integers, outside advanced indexing), keeping every axis."""
    params: list[tuple[Any, Any, int, int]] = []
    axis = 0
    for item in key:
        tag = item[0]
        if tag == "new":
            continue
        if tag == "mask":
            axis += item[2]
            continue
        if tag == "int" and not advanced:
            i = item[1]
            params.append((i, INT64_MAX if i == -1 else i + 1, axis, 1))
        elif tag == "slice" and not _is_full(item):
            _, start, stop, step = item
            step = 1 if step is None else step
            if start is None:
                start = 0 if step > 0 else INT64_MAX
            if stop is None:
                stop = INT64_MAX if step > 0 else INT64_MIN
            params.append((start, stop, axis, step))
        axis += 1
    if not params:
        return x
    starts, ends, axes, steps = zip(*params, strict=True)
    names = []
    for values, hint in ((starts, "starts"), (ends, "ends")):
        if all(not isinstance(v, tuple) for v in values):
            names.append(b.const(np.array(values, np.int64), hint))
        else:
            parts = [_int64_1d(b, v, ins) for v in values]
            names.append(b.tmp(hint))
            b.node("Concat", parts, [names[-1]], axis=0)
    sliced = b.tmp("slice")
    b.node(
        "Slice",
        [x, *names, b.const(np.array(axes, np.int64), "axes"), b.const(np.array(steps, np.int64), "steps")],
        [sliced],
    )
    return str(sliced)


def _finish(b: Any, x: str, out: str, steps: list[tuple[str, str, dict[str, Any]]]) -> None:
    """Apply (op, extra input, attrs) steps to x, the last one writing ``out``."""
    if not steps:
        b.node("Identity", [x], [out])
        return
    for n, (op, extra, attrs) in enumerate(steps):
        y = out if n == len(steps) - 1 else b.tmp(op.lower())
        b.node(op, [x, extra] if extra else [x], [y], **attrs)
        x = y


def _getitem_emit(b, ins, out, attrs, infos, oinfo):
    key = attrs["key"]
    x = _slice_axes(b, ins[0], key, ins, advanced=False)
    squeeze, news = [], []
    axis = pos = 0
    for item in key:
        if item[0] == "new":
            news.append(pos)
            pos += 1
            continue
        if item[0] == "int":
            squeeze.append(axis)
        else:
            pos += 1
        axis += 1
    steps = []
    if squeeze:
        steps.append(("Squeeze", b.const(np.array(squeeze, np.int64), "axes"), {}))
    if news:
        steps.append(("Unsqueeze", b.const(np.array(news, np.int64), "axes"), {}))
    _finish(b, x, out, steps)


def _index_emit(b, ins, out, attrs, infos, oinfo):
    """Advanced indexing as numpy does it: slices first, then one GatherND over the advanced axes.

    The advanced indices (integer arrays, integers, a mask's nonzero
    coordinates) broadcast together to a shape B; the result has B's dims
    where the first advanced index stood if they are adjacent in the index,
    else in front.
    """
    key = attrs["key"]
    if not any(item[0] in ("adv", "mask") for item in key):  # only tensors as slice bounds
        _getitem_emit(b, ins, out, attrs, infos, oinfo)
        return
    rank = len(infos[0][0])
    x = _slice_axes(b, ins[0], key, ins, advanced=True)
    rows, adv_axes, brank = _index_rows(b, x, key, ins, infos)
    perm = adv_axes + [a for a in range(rank) if a not in adv_axes]
    if perm != list(range(rank)):
        moved = b.tmp("transpose")
        b.node("Transpose", [x], [moved], perm=perm)
        x = moved
    gathered = b.tmp("gather")
    b.node("GatherND", [x, _stacked_indices(b, rows)], [gathered])
    _finish(b, gathered, out, _index_layout(b, key, brank))


def _index_rows(b, x, key, ins, infos) -> tuple[list[str], list[int], int]:
    """Each advanced index as a row of int64 coordinates (negative ones wrapped), the axes they index, and the
    rank of their broadcast shape."""
    shape = b.tmp("shape")
    b.node("Shape", [x], [shape])
    adv_axes: list[int] = []
    rows: list[str] = []
    brank = 0
    axis = 0
    for item in key:
        tag = item[0]
        if tag == "new":
            continue
        if tag in ("int", "adv"):
            if tag == "int":
                idx = b.const(np.array(item[1], np.int64), "index")
                negative = item[1] < 0
            else:
                idx = b.tmp("index")
                b.node("Cast", [ins[item[1]]], [idx], to=onnx_type(np.int64))
                negative = True
                brank = max(brank, len(infos[item[1]][0]))
            if negative:  # i + dim where i < 0
                dim, below, wrapped, fixed = b.tmp("dim"), b.tmp("neg"), b.tmp("wrapped"), b.tmp("index")
                b.node("Gather", [shape, b.const(np.array(axis, np.int64), "axis")], [dim], axis=0)
                b.node("Less", [idx, b.const(np.array(0, np.int64), "zero")], [below])
                b.node("Add", [idx, dim], [wrapped])
                b.node("Where", [below, wrapped, idx], [fixed])
                idx = fixed
            rows.append(idx)
            adv_axes.append(axis)
            axis += 1
        elif tag == "mask":
            nz = b.tmp("nonzero")
            b.node("NonZero", [ins[item[1]]], [nz])
            for j in range(item[2]):
                row = b.tmp("index")
                b.node("Gather", [nz, b.const(np.array(j, np.int64), "row")], [row], axis=0)
                rows.append(row)
                adv_axes.append(axis + j)
            brank = max(brank, 1)
            axis += item[2]
        else:
            axis += 1
    return rows, adv_axes, brank


def _stacked_indices(b, rows: list[str]) -> str:
    """The rows broadcast to one shape and stacked on a last axis: GatherND's indices."""
    if len(rows) > 1:  # broadcast the index arrays to one shape
        zero = b.const(np.array(0, np.int64), "zero")
        acc = None
        for row in rows:
            z = b.tmp("zeros")
            b.node("Mul", [row, zero], [z])
            if acc is not None:
                total = b.tmp("zeros")
                b.node("Add", [acc, z], [total])
                z = total
            acc = z
        broadcast = []
        for row in rows:
            r = b.tmp("index")
            b.node("Add", [row, acc], [r])
            broadcast.append(r)
        rows = broadcast
    last = b.const(np.array([-1], np.int64), "axes")
    columns = []
    for row in rows:
        c = b.tmp("index")
        b.node("Unsqueeze", [row, last], [c])
        columns.append(c)
    if len(columns) == 1:
        return columns[0]
    stacked = b.tmp("indices")
    b.node("Concat", columns, [stacked], axis=-1)
    return stacked


def _index_layout(b, key, brank: int) -> list[tuple[str, Any, dict[str, Any]]]:
    """The steps that put GatherND's result in numpy's layout: the broadcast dims where the first advanced index
    stood (if the advanced indices are adjacent), and the new axes."""
    tags = [item[0] for item in key]
    adv_pos = [i for i, t in enumerate(tags) if t in ("int", "adv", "mask")]
    adjacent = adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1))
    n_slices = tags.count("slice")
    steps: list[tuple[str, Any, dict[str, Any]]] = []
    if adjacent:
        before = tags[: adv_pos[0]].count("slice")
        if before:
            perm = (
                list(range(brank, brank + before)) + list(range(brank)) + list(range(brank + before, brank + n_slices))
            )
            steps.append(("Transpose", "", {"perm": perm}))
    news = []
    pos = 0 if adjacent else brank
    for i, tag in enumerate(tags):
        if tag == "new":
            news.append(pos)
            pos += 1
        elif tag == "slice":
            pos += 1
        elif adjacent and i == adv_pos[0]:
            pos += brank
    if news:
        steps.append(("Unsqueeze", b.const(np.array(news, np.int64), "axes"), {}))
    return steps


def _index_dynamic(attrs: dict[str, Any]) -> Sequence[int]:
    found = []
    for item in attrs["key"]:
        if item[0] == "mask":
            found.append(item[1])
        elif item[0] == "slice":
            found.extend(v[1] for v in item[1:3] if isinstance(v, tuple))
    return found


_register("getitem", lambda a, attrs: np.array(a[0][index_key(attrs["key"])]), _getitem_emit)
_register("index", lambda a, attrs: np.array(a[0][index_key(attrs["key"], a)]), _index_emit, dynamic=_index_dynamic)

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


def _batch_stats_compute(a, attrs):
    x, w, bias = a
    axes = (0, *range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = x.mean(axis=axes, keepdims=True)
    var = np.square(x - mean).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + np.asarray(attrs["eps"], x.dtype)) * w.reshape(shape) + bias.reshape(shape)
    return y.astype(x.dtype, copy=False)


def _batch_stats_emit(b, ins, out, attrs, infos, oinfo):
    """BatchNorm in training mode: normalised by the batch's own mean and (biased) variance."""
    x, w, bias = ins
    ndim, dtype = len(infos[0][0]), infos[0][1]
    axes = [0, *range(2, ndim)]
    mean, diff, square, var, shifted, std, normed, scaled = (
        b.tmp(h) for h in ("mean", "diff", "square", "var", "var_eps", "std", "normed", "scaled")
    )
    b.node("ReduceMean", [x], [mean], axes=axes, keepdims=1)
    b.node("Sub", [x, mean], [diff])
    b.node("Mul", [diff, diff], [square])
    b.node("ReduceMean", [square], [var], axes=axes, keepdims=1)
    b.node("Add", [var, b.const(np.array(attrs["eps"], dtype), "eps")], [shifted])
    b.node("Sqrt", [shifted], [std])
    b.node("Div", [diff, std], [normed])
    per_channel = b.const(np.array(axes, np.int64), "axes")
    w4, bias4 = b.tmp("weight"), b.tmp("bias")
    b.node("Unsqueeze", [w, per_channel], [w4])
    b.node("Unsqueeze", [bias, per_channel], [bias4])
    b.node("Mul", [normed, w4], [scaled])
    b.node("Add", [scaled, bias4], [out])


_register("batch_norm_train", _batch_stats_compute, _batch_stats_emit, training=True)


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


# ------------------------------------------------------------------ shapes as tensors, broadcasting, selection


def _shape_emit(b, ins, out, attrs, infos, oinfo):
    shape = b.tmp("shape")
    b.node("Shape", ins, [shape])
    b.node("Cast", [shape], [out], to=onnx_type(np.int32))


_register("shape", lambda a, attrs: np.array(a[0].shape, np.int32), _shape_emit, shape_only=True)


def _flatten_compute(a, attrs):
    x = a[0]
    start, end = attrs["start"], attrs["end"]
    return x.reshape(x.shape[:start] + (-1,) + x.shape[end + 1 :])


def _flatten_emit(b, ins, out, attrs, infos, oinfo):
    # 0 keeps an input dim (opset 13): the leading dims stay free, as in a batch
    spec = [0] * attrs["start"] + [-1] + list(infos[0][0][attrs["end"] + 1 :])
    b.node("Reshape", [ins[0], b.const(np.array(spec, np.int64), "shape")], [out])


_register("flatten", _flatten_compute, _flatten_emit)


def _dyn_shape(b: Any, name: str) -> str:
    cast = b.tmp("shape")
    b.node("Cast", [name], [cast], to=onnx_type(np.int64))
    return str(cast)


def _reshape_dyn_emit(b, ins, out, attrs, infos, oinfo):
    b.node("Reshape", [ins[0], _dyn_shape(b, ins[1])], [out])


def _shape_dynamic(attrs: dict[str, Any]) -> Sequence[int]:
    return (1,)


_register(
    "reshape_dyn", lambda a, attrs: a[0].reshape(tuple(int(v) for v in a[1])), _reshape_dyn_emit, dynamic=_shape_dynamic
)


def _broadcast_emit(b, ins, out, attrs, infos, oinfo):
    b.node("Expand", [ins[0], b.const(np.array(attrs["shape"], np.int64), "shape")], [out])


def _broadcast_dyn_emit(b, ins, out, attrs, infos, oinfo):
    b.node("Expand", [ins[0], _dyn_shape(b, ins[1])], [out])


_register("broadcast_to", lambda a, attrs: np.array(np.broadcast_to(a[0], attrs["shape"])), _broadcast_emit)
_register(
    "broadcast_to_dyn",
    lambda a, attrs: np.array(np.broadcast_to(a[0], tuple(int(v) for v in a[1]))),
    _broadcast_dyn_emit,
    dynamic=_shape_dynamic,
)


def _topk_compute(a, attrs):
    x, k = a[0], min(attrs["k"], a[0].shape[-1])  # k beyond the size: all of them, as MegEngine
    key = -x.astype(np.float64) if attrs["largest"] else x
    order = np.argsort(key, axis=-1, kind="stable")[..., :k]  # ties: the lower index first, as onnxruntime
    if attrs["output"] == 1:
        return order.astype(np.int32)
    return np.take_along_axis(x, order, axis=-1)


def _topk_emit(b, ins, out, attrs, infos, oinfo):
    values, indices, shape, size, k = (b.tmp(h) for h in ("values", "indices", "shape", "size", "k"))
    b.node("Shape", [ins[0]], [shape])
    ends = b.const(np.array([INT64_MAX], np.int64), "ends")
    b.node("Slice", [shape, b.const(np.array([-1], np.int64), "starts"), ends], [size])
    b.node("Min", [b.const(np.array([attrs["k"]], np.int64), "k"), size], [k])  # k beyond the size: all
    b.node("TopK", [ins[0], k], [values, indices], axis=-1, largest=int(attrs["largest"]), sorted=1)
    if attrs["output"] == 1:
        b.node("Cast", [indices], [out], to=onnx_type(np.int32))
    else:
        b.node("Identity", [values], [out])


_register("topk", _topk_compute, _topk_emit)


def _repeat_nodes(b, x: str, reps: str, out: str, axis: int, ndim: int) -> None:
    """x repeated ``reps`` (an int64 tensor of one value) times along axis: tiled on a new axis, then merged."""
    expanded, tiled, shape, before, mid, after, scaled, target, tile = (
        b.tmp(h) for h in ("unsqueeze", "tile", "shape", "before", "dim", "after", "dim", "shape", "repeats")
    )
    b.node("Unsqueeze", [x, b.const(np.array([axis + 1], np.int64), "axes")], [expanded])
    ones = [b.const(np.ones(n, np.int64), "ones") for n in (axis + 1, ndim - axis - 1)]
    b.node("Concat", [ones[0], reps, ones[1]], [tile], axis=0)
    b.node("Tile", [expanded, tile], [tiled])
    b.node("Shape", [x], [shape])

    def part(name: str, lo: int, hi: int) -> None:
        b.node(
            "Slice",
            [shape, b.const(np.array([lo], np.int64), "starts"), b.const(np.array([hi], np.int64), "ends")],
            [name],
        )

    part(before, 0, axis)
    part(mid, axis, axis + 1)
    part(after, axis + 1, INT64_MAX)
    b.node("Mul", [mid, reps], [scaled])
    b.node("Concat", [before, scaled, after], [target], axis=0)
    b.node("Reshape", [tiled, target], [out])


def _repeat_emit(b, ins, out, attrs, infos, oinfo):
    reps = b.const(np.array([attrs["repeats"]], np.int64), "repeats")
    _repeat_nodes(b, ins[0], reps, out, attrs["axis"], len(infos[0][0]))


def _repeat_dyn_emit(b, ins, out, attrs, infos, oinfo):
    reps = b.tmp("repeats")
    b.node("Reshape", [_dyn_shape(b, ins[1]), b.const(np.array([1], np.int64), "shape")], [reps])
    _repeat_nodes(b, ins[0], reps, out, attrs["axis"], len(infos[0][0]))


def _repeat_dyn_compute(a, attrs):
    count = int(np.asarray(a[1]).reshape(-1)[0])
    if count < 0:
        raise ValueError(f"repeat: repeats must be >= 0, got {count}")
    return np.repeat(a[0], count, axis=attrs["axis"])


_register("repeat_dyn", _repeat_dyn_compute, _repeat_dyn_emit, dynamic=lambda attrs: (1,))
_register("repeat", lambda a, attrs: np.repeat(a[0], attrs["repeats"], axis=attrs["axis"]), _repeat_emit)


# ------------------------------------------------------------------ warp_perspective (MegEngine's F.vision)

# the four neighbours of a sampling point, with the weight each takes: (dx, dy, weight of x, weight of y)
_CORNERS = ((0, 0, False, False), (1, 0, True, False), (0, 1, False, True), (1, 1, True, True))


def _warp_points(mat: np.ndarray, out_hw: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Where each output pixel samples the input: mat maps (w, h, 1) to (x * d, y * d, d), as MegEngine's."""
    oh, ow = out_hw
    ys, xs = np.meshgrid(np.arange(oh, dtype=np.float32), np.arange(ow, dtype=np.float32), indexing="ij")
    grid = np.stack([xs.ravel(), ys.ravel(), np.ones(oh * ow, np.float32)])  # (3, P)
    src = np.matmul(mat, grid)  # (N, 3, P)
    return src[:, 0] / src[:, 2], src[:, 1] / src[:, 2]


def _warp_compute(a, attrs):
    x, mat = a[0], a[1]
    n, c, h, w = x.shape
    flat = x.reshape(n, c, h * w)
    with np.errstate(all="ignore"):
        sx, sy = _warp_points(mat, attrs["out"])
        if attrs["interp"] == "nearest":
            sx, sy = np.floor(sx + np.float32(0.5)), np.floor(sy + np.float32(0.5))
        x0, y0 = np.floor(sx), np.floor(sy)
        fx, fy = sx - x0, sy - y0
    total = np.zeros((n, c, sx.shape[1]), np.float32)
    for dx, dy, use_fx, use_fy in _CORNERS:
        ix, iy = x0 + np.float32(dx), y0 + np.float32(dy)
        weight = (fx if use_fx else 1 - fx) * (fy if use_fy else 1 - fy)
        cx, cy = np.clip(np.nan_to_num(ix), 0, w - 1), np.clip(np.nan_to_num(iy), 0, h - 1)
        index = (cy.astype(np.int64) * w + cx.astype(np.int64))[:, None, :]
        value = np.take_along_axis(flat, np.broadcast_to(index, (n, c, index.shape[2])), axis=2)
        if attrs["border"] == "constant":
            inside = ((ix >= 0) & (ix <= w - 1) & (iy >= 0) & (iy <= h - 1))[:, None, :]
            value = np.where(inside, value, np.float32(attrs["border_val"]))
        total += value * weight[:, None, :]
    return total.reshape(n, c, *attrs["out"]).astype(np.float32)


def _f32(b, value: float, hint: str) -> str:
    return str(b.const(np.array(value, np.float32), hint))


def _i64(b, values: Sequence[int], hint: str) -> str:
    return str(b.const(np.array(values, np.int64), hint))


def _warp_sample_points(b, mat: str, out_hw: tuple[int, int], nearest: bool) -> tuple[str, str, str, str]:
    """The integer part (floor) and the fraction of each sampling point's x and y, each (N, P)."""
    oh, ow = out_hw
    ys, xs = np.meshgrid(np.arange(oh, dtype=np.float32), np.arange(ow, dtype=np.float32), indexing="ij")
    grid = b.const(np.stack([xs.ravel(), ys.ravel(), np.ones(oh * ow, np.float32)]), "grid")
    src = b.tmp_node("MatMul", [mat, grid])
    den = b.tmp_node("Gather", [src, b.const(np.array(2, np.int64), "row")], axis=1)
    parts: list[str] = []
    for row in (0, 1):
        coord = b.tmp_node("Gather", [src, b.const(np.array(row, np.int64), "row")], axis=1)
        coord = b.tmp_node("Div", [coord, den])
        if nearest:
            coord = b.tmp_node("Floor", [b.tmp_node("Add", [coord, _f32(b, 0.5, "half")])])
        whole = b.tmp_node("Floor", [coord])
        parts += [whole, b.tmp_node("Sub", [coord, whole])]
    return parts[0], parts[1], parts[2], parts[3]


def _warp_corner(b, flat: str, spread: str, xy: tuple[str, str], hw: tuple[int, int], attrs: dict) -> str:
    """The input's values at one neighbour (N, C, P): clamped to the border, or the border value outside."""
    (ix, iy), (h, w) = xy, hw
    zero = _f32(b, 0, "zero")
    safe_x = b.tmp_node("Where", [b.tmp_node("IsNaN", [ix]), zero, ix])  # a degenerate matrix: no index out of range
    safe_y = b.tmp_node("Where", [b.tmp_node("IsNaN", [iy]), zero, iy])
    cx = b.tmp_node("Clip", [safe_x, _f32(b, 0, "low"), _f32(b, w - 1, "high")])
    cy = b.tmp_node("Clip", [safe_y, _f32(b, 0, "low"), _f32(b, h - 1, "high")])
    index = b.tmp_node("Add", [b.tmp_node("Mul", [cy, _f32(b, w, "width")]), cx])
    index = b.tmp_node("Cast", [index], to=onnx_type(np.int64))
    index = b.tmp_node("Expand", [b.tmp_node("Unsqueeze", [index, _i64(b, [1], "axes")]), spread])
    value = b.tmp_node("GatherElements", [flat, index], axis=2)
    if attrs["border"] != "constant":
        return str(value)
    checks = [
        b.tmp_node("GreaterOrEqual", [ix, _f32(b, 0, "low")]),
        b.tmp_node("LessOrEqual", [ix, _f32(b, w - 1, "high")]),
        b.tmp_node("GreaterOrEqual", [iy, _f32(b, 0, "low")]),
        b.tmp_node("LessOrEqual", [iy, _f32(b, h - 1, "high")]),
    ]
    inside = b.tmp_node("And", [b.tmp_node("And", checks[:2]), b.tmp_node("And", checks[2:])])
    inside = b.tmp_node("Unsqueeze", [inside, _i64(b, [1], "axes")])
    return str(b.tmp_node("Where", [inside, value, _f32(b, attrs["border_val"], "border")]))


def _warp_emit(b, ins, out, attrs, infos, oinfo):
    (h, w), (oh, ow) = infos[0][0][2:], attrs["out"]
    x0, fx, y0, fy = _warp_sample_points(b, ins[1], (oh, ow), attrs["interp"] == "nearest")
    flat = b.tmp_node("Reshape", [ins[0], _i64(b, [0, 0, h * w], "shape")])
    lead = b.tmp_node("Slice", [b.tmp_node("Shape", [ins[0]]), _i64(b, [0], "starts"), _i64(b, [2], "ends")])
    spread = b.tmp_node("Concat", [lead, _i64(b, [oh * ow], "points")], axis=0)
    one = _f32(b, 1, "one")
    total = None
    for dx, dy, use_fx, use_fy in _CORNERS:
        ix = b.tmp_node("Add", [x0, one]) if dx else x0
        iy = b.tmp_node("Add", [y0, one]) if dy else y0
        wx = fx if use_fx else b.tmp_node("Sub", [one, fx])
        wy = fy if use_fy else b.tmp_node("Sub", [one, fy])
        weight = b.tmp_node("Unsqueeze", [b.tmp_node("Mul", [wx, wy]), _i64(b, [1], "axes")])
        term = b.tmp_node("Mul", [_warp_corner(b, flat, spread, (ix, iy), (h, w), attrs), weight])
        total = term if total is None else b.tmp_node("Add", [total, term])
    assert total is not None
    b.node("Reshape", [total, _i64(b, [0, 0, oh, ow], "shape")], [out])


_register("warp_perspective", _warp_compute, _warp_emit)


def _nms_compute(a, attrs):
    boxes, scores = a[0].astype(np.float32), a[1].astype(np.float32)
    x1, x2 = np.minimum(boxes[:, 0], boxes[:, 2]), np.maximum(boxes[:, 0], boxes[:, 2])
    y1, y2 = np.minimum(boxes[:, 1], boxes[:, 3]), np.maximum(boxes[:, 1], boxes[:, 3])
    area = (x2 - x1) * (y2 - y1)
    keep: list[int] = []
    for i in np.argsort(-scores, kind="stable"):  # ties: the lower index first, as onnxruntime
        if len(keep) >= attrs["max_output"]:
            break
        if keep:
            k = np.array(keep)
            w = np.maximum(np.minimum(x2[k], x2[i]) - np.maximum(x1[k], x1[i]), np.float32(0))
            h = np.maximum(np.minimum(y2[k], y2[i]) - np.maximum(y1[k], y1[i]), np.float32(0))
            inter = w * h
            union = area[k] + area[i] - inter
            with np.errstate(divide="ignore", invalid="ignore"):
                iou = np.where(union > 0, inter / union, np.float32(0))
            if np.any(iou > np.float32(attrs["iou_thresh"])):
                continue
        keep.append(int(i))
    return np.array(keep, np.int32)


def _nms_emit(b, ins, out, attrs, infos, oinfo):
    boxes, scores, selected, column = b.tmp("boxes"), b.tmp("scores"), b.tmp("selected"), b.tmp("index")
    b.node("Unsqueeze", [ins[0], b.const(np.array([0], np.int64), "axes")], [boxes])
    b.node("Reshape", [ins[1], b.const(np.array([1, 1, -1], np.int64), "shape")], [scores])
    b.node(
        "NonMaxSuppression",
        [
            boxes,
            scores,
            b.const(np.array([attrs["max_output"]], np.int64), "max_output"),
            b.const(np.array([attrs["iou_thresh"]], np.float32), "iou_thresh"),
        ],
        [selected],
    )
    b.node("Gather", [selected, b.const(np.array(2, np.int64), "column")], [column], axis=1)
    b.node("Cast", [column], [out], to=onnx_type(np.int32))


_register("nms", _nms_compute, _nms_emit, dynamic=lambda attrs: (0, 1))

# ------------------------------------------------------------------ random numbers

RNG = [np.random.default_rng()]  # numpy's generator for eager random operations (mgedump.random.seed resets it)


def _random_emitter(op: str, keys: tuple[str, str]) -> Callable[..., None]:
    def emit(b, ins, out, attrs, infos, oinfo):
        params = {keys[0]: float(attrs["a"]), keys[1]: float(attrs["b"])}
        b.node(op, [], [out], dtype=onnx_type(np.float32), shape=list(attrs["shape"]), **params)

    return emit


_register(
    "random_uniform",
    lambda a, attrs: RNG[0].uniform(attrs["a"], attrs["b"], attrs["shape"]).astype(np.float32),
    _random_emitter("RandomUniform", ("low", "high")),
    random=True,
)
_register(
    "random_normal",
    lambda a, attrs: RNG[0].normal(attrs["a"], attrs["b"], attrs["shape"]).astype(np.float32),
    _random_emitter("RandomNormal", ("mean", "scale")),
    random=True,
)

# ------------------------------------------------------------------ graph rewrites (trace's opt_level)


def _ones_like_emit(b, ins, out, attrs, infos, oinfo):
    from onnx import numpy_helper

    shape = b.tmp("shape")
    b.node("Shape", ins, [shape])
    b.node("ConstantOfShape", [shape], [out], value=numpy_helper.from_array(np.ones(1, infos[0][1])))


_register("ones_like", lambda a, attrs: np.ones_like(a[0]), _ones_like_emit)


def _logaddexp_emit(b, ins, out, attrs, infos, oinfo):
    dtype = infos[0][1]
    top, diff, dist, neg, e, one_plus, log = (b.tmp(h) for h in ("max", "sub", "abs", "neg", "exp", "add", "log"))
    b.node("Max", ins, [top])
    b.node("Sub", ins, [diff])
    b.node("Abs", [diff], [dist])
    b.node("Neg", [dist], [neg])
    b.node("Exp", [neg], [e])
    b.node("Add", [e, b.const(np.ones((), dtype), "one")], [one_plus])
    b.node("Log", [one_plus], [log])
    b.node("Add", [top, log], [out])


_register("logaddexp", lambda a, attrs: np.logaddexp(a[0], a[1]), _logaddexp_emit)


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
