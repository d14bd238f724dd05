"""Eager tensors backed by numpy arrays, recorded when a trace is active.

A :class:`Tensor` wraps an immutable numpy array. Its operators, methods and
the numpy functions it supports (through ``__array_ufunc__`` and
``__array_function__``) all go through :mod:`mgedump.functional`, so inside a
function decorated with :func:`mgedump.jit.trace` every one of them is recorded
into the static graph.

Like MegEngine, :func:`tensor` turns float64 data into float32 and int64 data
into int32 unless a ``dtype`` is given. Arithmetic follows numpy's promotion
rules (a Python scalar adopts the tensor's dtype).
"""

from __future__ import annotations

import math
import sys
import types
from collections.abc import Iterator
from typing import Any

import numpy as np

_DEFAULT_CAST = {np.dtype(np.float64): np.dtype(np.float32), np.dtype(np.int64): np.dtype(np.int32)}

# the origin of a tensor made while a traced function runs
ORIGIN_CONST = "const"  # made in the function from data: a graph constant
ORIGIN_EXCLUDED = "excluded"  # made inside exclude_from_trace: fed to the graph as an input


def _frozen(array: np.ndarray) -> np.ndarray:
    if array.flags.writeable:
        array.flags.writeable = False
    return array


class Tensor:
    """An n-dimensional array with eager numpy semantics that a trace can record.

    Args:
        data: anything ``numpy.asarray`` takes, or another Tensor.
        dtype: the dtype to store. Defaults to the data's, with float64 stored
            as float32 and int64 as int32.
        name: a name for messages and dumped graphs (modules name their parameters).

    Tensors are immutable: operations return new tensors.
    """

    __slots__ = ("__weakref__", "_call", "_data", "_dtype", "_origin", "_shape", "_vid", "name")

    def __init__(self, data: Any, dtype: Any = None, *, name: str | None = None) -> None:
        if isinstance(data, Tensor):
            call = _graph.current()
            if call is not None and not call.excluded:  # a traced copy, not a constant of its value
                copied = _F.unary("identity", data) if dtype is None else _F.astype(data, dtype)
                self._init(copied._data, copied._shape, copied._dtype, copied._vid, copied._call, copied._origin)
                self.name = name
                return
            data = data._value()
        array = np.array(data, dtype=dtype, copy=True)
        if dtype is None and array.dtype in _DEFAULT_CAST:
            array = array.astype(_DEFAULT_CAST[array.dtype])
        if array.dtype.kind not in "biuf":
            raise TypeError(f"a tensor holds bool, integer or floating-point data, not {array.dtype}")
        self._init(_frozen(array), array.shape, array.dtype, None)
        self.name = name

    def _init(self, data: np.ndarray | None, shape: tuple[int, ...], dtype: np.dtype, vid: int | None,
              call: Any = None, origin: str | None = None) -> None:
        self._data = data
        self._shape = tuple(shape)
        self._dtype = dtype
        self._vid = vid
        if call is None and vid is None:
            call = _graph.current()
            if call is not None:
                origin = ORIGIN_EXCLUDED if call.excluded else ORIGIN_CONST
        self._call = call
        self._origin = origin

    @classmethod
    def _wrap(cls, array: np.ndarray, name: str | None = None) -> Tensor:
        """A tensor on an array that nobody else writes to (no copy, no dtype change)."""
        t = object.__new__(cls)
        array = np.asarray(array)
        t._init(_frozen(array), array.shape, array.dtype, None)
        t.name = name
        return t

    @classmethod
    def _traced(cls, data: np.ndarray | None, shape: tuple[int, ...], dtype: np.dtype, vid: int, call: Any) -> Tensor:
        """A value of a trace: computed (``data``) or not (a placeholder or a replayed value)."""
        t = object.__new__(cls)
        t._init(None if data is None else _frozen(data), shape, dtype, vid, call)
        t.name = None
        return t

    # ------------------------------------------------------------ values

    def _value(self) -> np.ndarray:
        if self._data is not None:
            return self._data
        call = self._call
        if call is None or not call.active:
            raise RuntimeError(
                "this tensor was made inside a traced call that has ended and has no value; "
                "return it from the traced function to get its value"
            )
        return call.read_value(self)

    def numpy(self) -> np.ndarray:
        """A copy of the value as a numpy array (reads the value: see :mod:`mgedump.jit`)."""
        return np.array(self._value(), copy=True)

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number."""
        value = self._value()
        if value.size != 1:
            raise ValueError(f"item() needs a tensor with one element; this one has shape {self._shape}")
        return value.item()

    def tolist(self) -> Any:
        return self._value().tolist()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        call = _graph.current()
        if call is not None and not call.excluded:
            raise TypeError(
                "a tensor was converted to a numpy array (np.asarray, np.array, or a numpy function mgedump "
                "does not support) inside a traced function, which would bake its value into the graph; use "
                "mgedump.functional or a supported numpy function, .numpy() to read a value on purpose, or "
                "`with jit.exclude_from_trace():`"
            )
        value = self._value()
        if dtype is not None and np.dtype(dtype) != value.dtype:
            return value.astype(dtype)
        return np.array(value, copy=True) if copy else value

    def __bool__(self) -> bool:
        value = self._value()
        if value.size != 1:
            raise ValueError(f"the truth value of a tensor of shape {self._shape} is ambiguous")
        return bool(value.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    # ------------------------------------------------------------ metadata

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return math.prod(self._shape)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        label = f", name={self.name!r}" if self.name else ""
        if self._data is None:
            return f"Tensor(<no value yet>, shape={self._shape}, dtype={self._dtype}{label})"
        body = np.array2string(self._data, separator=", ", prefix="Tensor(")
        return f"Tensor({body}, dtype={self._dtype}{label})"

    __hash__ = object.__hash__

    # ------------------------------------------------------------ methods

    def reshape(self, *shape: Any) -> Tensor:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _F.reshape(self, shape)

    def transpose(self, *axes: Any) -> Tensor:
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return _F.transpose(self, axes or None)

    @property
    def T(self) -> Tensor:
        return _F.transpose(self, None)

    def flatten(self) -> Tensor:
        return _F.flatten(self)

    def astype(self, dtype: Any) -> Tensor:
        return _F.astype(self, dtype)

    def sum(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _F.sum(self, axis, keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _F.mean(self, axis, keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _F.max(self, axis, keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _F.min(self, axis, keepdims)

    def prod(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _F.prod(self, axis, keepdims)

    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        return _F.argmax(self, axis, keepdims)

    def argmin(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        return _F.argmin(self, axis, keepdims)

    def clip(self, lower: Any = None, upper: Any = None) -> Tensor:
        return _F.clip(self, lower, upper)

    def squeeze(self, axis: Any = None) -> Tensor:
        return _F.squeeze(self, axis)

    def __getitem__(self, key: Any) -> Tensor:
        return _F.getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise TypeError("tensors are immutable; build a new tensor (e.g. with F.where or F.concat)")

    # ------------------------------------------------------------ operators

    def __add__(self, other: Any) -> Tensor:
        return _F.binary("add", self, other)

    def __radd__(self, other: Any) -> Tensor:
        return _F.binary("add", other, self)

    def __sub__(self, other: Any) -> Tensor:
        return _F.binary("sub", self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return _F.binary("sub", other, self)

    def __mul__(self, other: Any) -> Tensor:
        return _F.binary("mul", self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return _F.binary("mul", other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return _F.binary("div", self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return _F.binary("div", other, self)

    def __floordiv__(self, other: Any) -> Tensor:
        return _F.binary("floordiv", self, other)

    def __rfloordiv__(self, other: Any) -> Tensor:
        return _F.binary("floordiv", other, self)

    def __mod__(self, other: Any) -> Tensor:
        return _F.binary("mod", self, other)

    def __rmod__(self, other: Any) -> Tensor:
        return _F.binary("mod", other, self)

    def __pow__(self, other: Any) -> Tensor:
        return _F.binary("pow", self, other)

    def __rpow__(self, other: Any) -> Tensor:
        return _F.binary("pow", other, self)

    def __matmul__(self, other: Any) -> Tensor:
        return _F.binary("matmul", self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return _F.binary("matmul", other, self)

    def __and__(self, other: Any) -> Tensor:
        return _F.logical("logical_and", self, other)

    def __rand__(self, other: Any) -> Tensor:
        return _F.logical("logical_and", other, self)

    def __or__(self, other: Any) -> Tensor:
        return _F.logical("logical_or", self, other)

    def __ror__(self, other: Any) -> Tensor:
        return _F.logical("logical_or", other, self)

    def __xor__(self, other: Any) -> Tensor:
        return _F.logical("logical_xor", self, other)

    def __rxor__(self, other: Any) -> Tensor:
        return _F.logical("logical_xor", other, self)

    def __invert__(self) -> Tensor:
        return _F.logical_not(self)

    def __neg__(self) -> Tensor:
        return _F.unary("neg", self)

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return _F.unary("abs", self)

    def __lt__(self, other: Any) -> Tensor:
        return _F.binary("less", self, other)

    def __le__(self, other: Any) -> Tensor:
        return _F.binary("less_equal", self, other)

    def __gt__(self, other: Any) -> Tensor:
        return _F.binary("greater", self, other)

    def __ge__(self, other: Any) -> Tensor:
        return _F.binary("greater_equal", self, other)

    def __eq__(self, other: object) -> Tensor:  # type: ignore[override]
        return _F.binary("equal", self, other)

    def __ne__(self, other: object) -> Tensor:  # type: ignore[override]
        return _F.binary("not_equal", self, other)

    # ------------------------------------------------------------ numpy interoperability

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return _numpy_api.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _numpy_api.array_function(func, args, kwargs)


def tensor(data: Any, dtype: Any = None) -> Tensor:
    """Make a tensor (MegEngine's ``megengine.tensor``).

    Args:
        data: a number, a (nested) list, a numpy array or a Tensor; it is copied.
        dtype: the dtype to store. Defaults to the data's, with float64 stored
            as float32 and int64 as int32.

    Returns:
        A new Tensor. Made inside a traced function, it is a constant of the graph.
    """
    return Tensor(data, dtype)


class _CallableModule(types.ModuleType):
    """``mgedump.tensor`` is both this module and the function: once the module is
    imported, Python binds the package attribute to the module, so the module
    itself must be callable for ``mgedump.tensor([1, 2])`` to keep working."""

    def __call__(self, data: Any, dtype: Any = None) -> Tensor:
        return tensor(data, dtype)


sys.modules[__name__].__class__ = _CallableModule

from . import (
    _graph,
    _numpy_api,
)
from . import functional as _F
