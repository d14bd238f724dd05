"""The one dispatch point every operation goes through, and the registry of the traced call in progress.

This is the bottom of the tracing framework: it imports only the op table
(:mod:`mgedump.tracing.ops`). It knows neither the tracer nor the public
Tensor class; both register themselves here, so nothing below them imports
them:

- :func:`apply` runs one operation. With no traced call in progress, or
  inside ``exclude_from_trace``, it computes with numpy right away. Otherwise
  it hands the operation to the current :class:`TracedCall`, which records it
  (the first call of a trace) or checks it against the recording (later
  calls). The tracer, :mod:`mgedump.tracing.graph`, makes its calls
  TracedCalls and registers each one as the thread's current call with
  :func:`enter_call` while the traced function runs (MegEngine's tracer hooks
  into its ``apply`` the same way).
- :class:`TensorBase` holds a tensor's value mechanics: the numpy array (or,
  inside a traced call, the value id and the call that can compute it), its
  shape and dtype, and reading its value. The public
  :class:`~mgedump.tracing.tensor.Tensor` subclasses it with operators and
  methods and registers itself once with :func:`register_tensor_type`
  (MegEngine's core does the same with ``set_py_tensor_type``), so every
  tensor made below it, by :func:`apply` or :func:`wrap`, is a public Tensor.
"""

from __future__ import annotations

import abc
import math
import threading
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from .ops import OPS

# the origin of a tensor made while a traced call runs (from data, not by an operation)
ORIGIN_CONST = "const"  # made in the function from data: a graph constant
ORIGIN_EXCLUDED = "excluded"  # made inside exclude_from_trace: fed to the graph as an input

_local = threading.local()  # .call: the traced call running in this thread
_tensor_type: type[TensorBase] | None = None  # the public Tensor class, once registered


# ---------------------------------------------------------------- the traced call in progress


class TracedCall(abc.ABC):
    """One call of a traced function, as the dispatch layer sees it.

    Attributes:
        active: the call is running: its tensors without a value can still compute one.
        excluded: how many ``exclude_from_trace`` blocks are open; while any is,
            operations compute eagerly instead of going to the call.
        symbolic_shape: ``Tensor.shape`` is a traced tensor in this call (MegEngine's ``symbolic_shape``).
    """

    active: bool = False
    excluded: int = 0
    symbolic_shape: bool = False

    @abc.abstractmethod
    def apply(self, op: str, inputs: Sequence[TensorBase], attrs: dict[str, Any]) -> TensorBase:
        """Record or replay one operation and return its result."""

    @abc.abstractmethod
    def read_value(self, t: TensorBase) -> np.ndarray:
        """The value of one of this call's tensors that has none yet."""

    @abc.abstractmethod
    def note_read(self, vid: int) -> None:
        """The user read value ``vid`` of this call, which it had already (MegEngine's data read)."""

    @abc.abstractmethod
    def note_name(self, vid: int, name: str | None) -> None:
        """The user named value ``vid`` of this call (``x.name = "o_x"``: its name in a dump)."""


def current() -> TracedCall | None:
    """The traced call running in this thread, if any (also inside ``exclude_from_trace``)."""
    return getattr(_local, "call", None)


def intercepting() -> TracedCall | None:
    """The traced call that operations go to now: the current one, unless inside ``exclude_from_trace``."""
    call = getattr(_local, "call", None)
    return call if call is not None and not call.excluded else None


def enter_call(call: TracedCall) -> None:
    """Make ``call`` the thread's current traced call.

    Raises:
        RuntimeError: another traced call is in progress in this thread.
    """
    if current() is not None:
        raise RuntimeError("a traced call is already in progress in this thread")
    _local.call = call
    call.active = True


def leave_call(call: TracedCall) -> None:
    """End ``call``: its tensors without a value can no longer compute one."""
    if current() is call:
        _local.call = None
    call.active = False


def with_note(exc: BaseException, note: str) -> BaseException:
    """``exc`` with ``note`` added (shown under the message in tracebacks), keeping ``str(exc)`` as it is."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:  # Python 3.10: the same attribute, which 3.11's tracebacks print
        exc.__notes__ = [*getattr(exc, "__notes__", []), note]  # type: ignore[attr-defined]
    return exc


def scope() -> list[str]:
    """The names of the modules being called in this thread, outermost first (a module pushes its own while it runs).

    Operations recorded meanwhile are scoped by them: the dumped node of a Linear's
    product called from module ``net`` is ``net.linear.MatrixMul``.
    """
    names = getattr(_local, "scope", None)
    if names is None:
        names = _local.scope = []
    return names


# ---------------------------------------------------------------- dispatch


def apply(op: str, inputs: Sequence[TensorBase], attrs: dict[str, Any]) -> TensorBase:
    """Run one operation: eagerly with numpy, or handed to the traced call in progress.

    Args:
        op: a key of :data:`mgedump.tracing.ops.OPS`.
        inputs: the operands, already of the dtypes the operation needs.
        attrs: plain Python attributes (compared between calls of a trace).

    Returns:
        The result, a new tensor.
    """
    call = getattr(_local, "call", None)
    if call is not None and not call.excluded:
        return cast(TensorBase, call.apply(op, inputs, attrs))
    out = OPS[op].compute([t._value() for t in inputs], attrs)
    return wrap(np.asarray(out))


# ---------------------------------------------------------------- tensors


def register_tensor_type(cls: type[TensorBase]) -> type[TensorBase]:
    """Make ``cls`` the class of every tensor made from now on (done once, by the public Tensor class).

    Returns:
        ``cls``, so that this works as a class decorator.

    Raises:
        TypeError: ``cls`` is not a subclass of :class:`TensorBase`.
    """
    global _tensor_type
    if not (isinstance(cls, type) and issubclass(cls, TensorBase)):
        raise TypeError(f"the tensor type must be a subclass of TensorBase, got {cls!r}")
    _tensor_type = cls
    return cls


def tensor_type() -> type[TensorBase]:
    """The registered public Tensor class.

    Raises:
        RuntimeError: none is registered (``mgedump.tracing.tensor`` was not imported).
    """
    if _tensor_type is None:
        raise RuntimeError("no tensor type is registered: import mgedump.tracing.tensor first")
    return _tensor_type


def freeze(array: np.ndarray) -> np.ndarray:
    """The array, made read-only (tensors are immutable)."""
    if array.flags.writeable:
        array.flags.writeable = False
    return array


def wrap(array: Any, name: str | None = None) -> TensorBase:
    """A tensor on an array that nobody else writes to (no copy, no dtype change)."""
    t = object.__new__(tensor_type())
    array = np.asarray(array)
    t._init(freeze(array), array.shape, array.dtype, None)
    t._name = name
    return t


def traced(data: np.ndarray | None, shape: tuple[int, ...], dtype: np.dtype, vid: int, call: TracedCall) -> TensorBase:
    """A value of a traced call: computed (``data``), or not (a placeholder or a replayed value)."""
    t = object.__new__(tensor_type())
    t._init(None if data is None else freeze(data), shape, dtype, vid, call)
    return t


class TensorBase:
    """What every tensor is below the public Tensor class: a value, its shape and dtype, and how to read it.

    A tensor either holds its value (``_data``, a read-only numpy array) or,
    inside a traced call, is value ``_vid`` of that call (``_call``), which
    computes it when it is read. Users see the subclass
    :class:`mgedump.tracing.tensor.Tensor`; every instance made at run time is one.

    A tensor has a name for messages and dumped graphs: the one the user gave
    it (``name``), and, when a module holds it, the module's path and the
    attribute's key (``_prefix``, ``_key``), from which :meth:`path_name`
    makes MegEngine's parameter name (``net.fc.weight``).
    """

    __slots__ = ("__weakref__", "_call", "_data", "_dtype", "_key", "_name", "_origin", "_prefix", "_shape", "_vid")

    _data: np.ndarray | None
    _shape: tuple[int, ...]
    _dtype: np.dtype
    _vid: int | None
    _call: TracedCall | None
    _origin: str | None
    _name: str | None
    _prefix: str | None
    _key: str | None

    def _init(
        self,
        data: np.ndarray | None,
        shape: tuple[int, ...],
        dtype: np.dtype,
        vid: int | None,
        call: TracedCall | None = None,
        origin: str | None = None,
    ) -> None:
        self._data = data
        self._shape = tuple(shape)
        self._dtype = dtype
        self._vid = vid
        if call is None and vid is None:
            call = current()
            if call is not None:
                origin = ORIGIN_EXCLUDED if call.excluded else ORIGIN_CONST
        self._call = call
        self._origin = origin
        self._name = self._prefix = self._key = None

    # ------------------------------------------------------------ names

    @property
    def name(self) -> str | None:
        """The name the user gave, else the attribute path of the module that holds it (``conv1.weight``)."""
        if self._name is not None:
            return self._name
        if self._key is None:
            return None
        return f"{self._prefix}.{self._key}" if self._prefix else self._key

    @name.setter
    def name(self, value: str | None) -> None:
        if value is not None and not isinstance(value, str):
            raise TypeError(f"a tensor's name is a str or None, not {type(value).__name__}")
        self._name = value
        call = self._call
        if call is not None and call.active and self._vid is not None:
            call.note_name(self._vid, value)

    def path_name(self) -> str | None:
        """MegEngine's name of a module's tensor: the module's path, then the tensor's own name or its key."""
        if self._key is None:
            return self._name
        leaf = self._name or self._key
        return f"{self._prefix}.{leaf}" if self._prefix else leaf

    # ------------------------------------------------------------ values

    def _value(self) -> np.ndarray:
        data = self._data
        if data is not None:
            call = self._call
            if call is not None and self._vid is not None and call.active:
                call.note_read(self._vid)
            return data
        call = self._call
        if call is None or not call.active:
            raise RuntimeError(
                "this tensor was made inside a traced call that has ended and has no value; "
                "return it from the traced function to get its value"
            )
        return call.read_value(self)

    def numpy(self) -> np.ndarray:
        """A copy of the value as a numpy array (reads the value: see :mod:`mgedump.tracing.jit`)."""
        return np.array(self._value(), copy=True)

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number.

        Raises:
            ValueError: the tensor has more or fewer than one element.
        """
        value = self._value()
        if value.size != 1:
            raise ValueError(f"item() needs a tensor with one element; this one has shape {self._shape}")
        return value.item()

    def tolist(self) -> Any:
        """The value as (nested) Python lists of numbers."""
        return self._value().tolist()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if intercepting() is not None:
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

    def __repr__(self) -> str:
        label = f", name={self.name!r}" if self.name else ""
        if self._data is None:
            return f"Tensor(<no value yet>, shape={self._shape}, dtype={self._dtype}{label})"
        body = np.array2string(self._data, separator=", ", prefix="Tensor(")
        return f"Tensor({body}, dtype={self._dtype}{label})"
