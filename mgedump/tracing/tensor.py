"""The public tensor: :class:`Tensor` and :func:`tensor` (MegEngine's ``megengine.Tensor`` and ``megengine.tensor``).

A :class:`Tensor` wraps an immutable numpy array. Its value mechanics come
from :class:`~mgedump.tracing.dispatch.TensorBase`; this class adds the
constructor, the operators and methods, and numpy interoperability. Operators
and methods go through :mod:`mgedump.tracing.functional`, and the numpy
functions it supports (through ``__array_ufunc__`` and ``__array_function__``)
through :mod:`mgedump.tracing.numpy_api`, so inside a function decorated with
:func:`mgedump.jit.trace` every one of them is recorded into the static graph.
The class registers itself with the dispatch layer, which makes every tensor
an operation returns a Tensor.

Like MegEngine, :func:`tensor` turns float64 data into float32 and int64 data
into int32 unless a ``dtype`` is given. Arithmetic follows numpy's promotion
rules (a Python scalar adopts the tensor's dtype).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import numpy as np

from . import functional as _F
from . import numpy_api as _numpy_api
from .dispatch import TensorBase, freeze, intercepting, register_tensor_type

__all__ = ["Parameter", "Tensor", "tensor"]

_DEFAULT_CAST = {np.dtype(np.float64): np.dtype(np.float32), np.dtype(np.int64): np.dtype(np.int32)}


def _as_tensor(t: TensorBase) -> Tensor:
    """A result of the functional layer as the Tensor it is: every tensor made at run time is one."""
    return cast(Tensor, t)


@register_tensor_type
class Tensor(TensorBase):
    """An n-dimensional array with eager numpy semantics that a trace can record.

    Args:
        data: anything ``numpy.asarray`` takes, or another Tensor.
        dtype: the dtype to store. Defaults to the data's, with float64 stored
            as float32 and int64 as int32.
        name: a name for messages and dumped graphs (modules name their parameters).

    Raises:
        TypeError: the data is not bool, integer or floating-point.

    Tensors are immutable: operations return new tensors.
    """

    __slots__ = ()

    def __init__(self, data: Any, dtype: Any = None, device: Any = None, *, name: str | None = None) -> None:
        if isinstance(data, TensorBase):
            if intercepting() is not None:  # a traced copy, not a constant of its value
                copied = _F.unary("identity", data) if dtype is None else _F.astype(data, dtype)
                self._init(copied._data, copied._shape, copied._dtype, copied._vid, copied._call, copied._origin)
                if name is not None:
                    self.name = name
                return
            data = data._value()
        array = np.array(data, dtype=dtype, copy=True)
        if dtype is None and array.dtype in _DEFAULT_CAST:
            array = array.astype(_DEFAULT_CAST[array.dtype])
        if array.dtype.kind not in "biuf":
            raise TypeError(f"a tensor holds bool, integer or floating-point data, not {array.dtype}")
        self._init(freeze(array), array.shape, array.dtype, None)
        if name is not None:
            self.name = name

    def __iter__(self) -> Iterator[Tensor]:
        for i in range(len(self)):
            yield self[i]

    @property
    def shape(self) -> Any:
        """The shape: a tuple of ints, or inside ``trace(symbolic_shape=True)`` an int32 tensor the graph computes."""
        call = intercepting()
        if call is not None and call.symbolic_shape:
            return _F.shape_of(self)
        return self._shape

    def __index__(self) -> int:
        if self._dtype.kind not in "iu":
            raise TypeError(f"only integer tensors can be used as an index, not {self._dtype}")
        return int(self.item())

    def detach(self) -> Tensor:
        """The tensor itself (there are no gradients to cut off: tracing is for inference)."""
        return self

    def _broadcast(self, shape: Any) -> Tensor:
        return _as_tensor(_F.broadcast_to(self, shape))

    def broadcast_to(self, shape: Any) -> Tensor:
        return _as_tensor(_F.broadcast_to(self, shape))

    __hash__ = object.__hash__

    # ------------------------------------------------------------ methods

    def reshape(self, *shape: Any) -> Tensor:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _as_tensor(_F.reshape(self, shape))

    def transpose(self, *axes: Any) -> Tensor:
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return _as_tensor(_F.transpose(self, axes or None))

    @property
    def T(self) -> Tensor:
        return _as_tensor(_F.transpose(self, None))

    def flatten(self) -> Tensor:
        return _as_tensor(_F.flatten(self))

    def astype(self, dtype: Any) -> Tensor:
        return _as_tensor(_F.astype(self, dtype))

    def sum(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _as_tensor(_F.sum(self, axis, keepdims))

    def mean(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _as_tensor(_F.mean(self, axis, keepdims))

    def max(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _as_tensor(_F.max(self, axis, keepdims))

    def min(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _as_tensor(_F.min(self, axis, keepdims))

    def prod(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _as_tensor(_F.prod(self, axis, keepdims))

    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        return _as_tensor(_F.argmax(self, axis, keepdims))

    def argmin(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        return _as_tensor(_F.argmin(self, axis, keepdims))

    def clip(self, lower: Any = None, upper: Any = None) -> Tensor:
        return _as_tensor(_F.clip(self, lower, upper))

    def squeeze(self, axis: Any = None) -> Tensor:
        return _as_tensor(_F.squeeze(self, axis))

    def __getitem__(self, key: Any) -> Tensor:
        return _as_tensor(_F.getitem(self, key))

    def __setitem__(self, key: Any, value: Any) -> None:
        raise TypeError("tensors are immutable; build a new tensor (e.g. with F.where or F.concat)")

    # ------------------------------------------------------------ operators

    def __add__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("add", self, other))

    def __radd__(self, other: Any) -> Tensor:  # the tensor first, as MegEngine (ADD(x, const)): the same sum
        return _as_tensor(_F.binary("add", self, other))

    def __sub__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("sub", self, other))

    def __rsub__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("sub", other, self))

    def __mul__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("mul", self, other))

    def __rmul__(self, other: Any) -> Tensor:  # the tensor first, as MegEngine (MUL(x, const)): the same product
        return _as_tensor(_F.binary("mul", self, other))

    def __truediv__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("div", self, other))

    def __rtruediv__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("div", other, self))

    def __floordiv__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("floordiv", self, other))

    def __rfloordiv__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("floordiv", other, self))

    def __mod__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("mod", self, other))

    def __rmod__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("mod", other, self))

    def __pow__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("pow", self, other))

    def __rpow__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("pow", other, self))

    def __matmul__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("matmul", self, other))

    def __rmatmul__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("matmul", other, self))

    def __and__(self, other: Any) -> Tensor:
        return _as_tensor(_F.logical("logical_and", self, other))

    def __rand__(self, other: Any) -> Tensor:
        return _as_tensor(_F.logical("logical_and", other, self))

    def __or__(self, other: Any) -> Tensor:
        return _as_tensor(_F.logical("logical_or", self, other))

    def __ror__(self, other: Any) -> Tensor:
        return _as_tensor(_F.logical("logical_or", other, self))

    def __xor__(self, other: Any) -> Tensor:
        return _as_tensor(_F.logical("logical_xor", self, other))

    def __rxor__(self, other: Any) -> Tensor:
        return _as_tensor(_F.logical("logical_xor", other, self))

    def __invert__(self) -> Tensor:
        return _as_tensor(_F.logical_not(self))

    def __neg__(self) -> Tensor:
        return _as_tensor(_F.unary("neg", self))

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return _as_tensor(_F.unary("abs", self))

    def __lt__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("less", self, other))

    def __le__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("less_equal", self, other))

    def __gt__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("greater", self, other))

    def __ge__(self, other: Any) -> Tensor:
        return _as_tensor(_F.binary("greater_equal", self, other))

    def __eq__(self, other: object) -> Tensor:  # type: ignore[override]
        return _as_tensor(_F.binary("equal", self, other))

    def __ne__(self, other: object) -> Tensor:  # type: ignore[override]
        return _as_tensor(_F.binary("not_equal", self, other))

    # ------------------------------------------------------------ numpy interoperability

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return _numpy_api.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _numpy_api.array_function(func, args, kwargs)


class Parameter(Tensor):
    """A tensor meant as a module's weight (MegEngine's ``Parameter``; here a plain Tensor: no gradients)."""

    __slots__ = ()


def tensor(data: Any, dtype: Any = None, device: Any = None, *, name: str | None = None) -> Tensor:
    """Make a tensor (MegEngine's ``megengine.tensor``).

    Args:
        data: a number, a (nested) list, a numpy array or a Tensor; it is copied.
        dtype: the dtype to store. Defaults to the data's, with float64 stored
            as float32 and int64 as int32.
        device: accepted for MegEngine's signature and ignored (everything runs on the CPU).
        name: a name for messages and dumped graphs (a dumped input is named after it).

    Returns:
        A new Tensor. Made inside a traced function, it is a constant of the graph.

    Raises:
        TypeError: the data is not bool, integer or floating-point.
    """
    return Tensor(data, dtype, name=name)
