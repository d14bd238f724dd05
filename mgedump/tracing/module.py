"""Modules for writing a network imperatively (MegEngine's ``megengine.module``), for inference.

    import mgedump.module as M
    import mgedump.functional as F

    class Net(M.Module):
        def __init__(self):
            super().__init__()
            self.conv = M.Conv2d(3, 8, 3, padding=1)
            self.bn = M.BatchNorm2d(8)
            self.fc = M.Linear(8 * 16 * 16, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
            return F.softmax(self.fc(F.flatten(x, 1)))

    net = Net().eval()

Tensors set as attributes (or in lists, tuples and dicts held by attributes)
are the module's parameters (buffers, for BatchNorm's running statistics).
A dump names them, and the operations modules issue, as MegEngine does (see
:class:`Module`): ``net.conv.weight``, ``net.conv.Convolution``. Weights
start random as numpy's global generator gives them (seed it with
``np.random.seed``); load real ones with :meth:`Module.load_state_dict`.

Users import it as ``mgedump.module``.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any, cast

import numpy as np

from . import functional as F
from .dispatch import TensorBase, current, scope
from .tensor import Tensor

__all__ = [
    "AvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv2d",
    "Flatten",
    "Identity",
    "Linear",
    "MaxPool2d",
    "Module",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "Softmax",
    "Tanh",
]


_INTERNAL = frozenset({"_name", "_short", "_parent", "_path", "_layers", "training"})  # Module's own bookkeeping


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix and name else prefix or name


def _expand(key: str, keys: tuple[Any, ...], value: Any) -> Iterator[tuple[str, tuple[Any, ...], Any]]:
    """The modules and tensors an attribute holds, with their keys: the attribute's own, or, inside lists,
    tuples and dicts, the attribute's then the positions or dict keys (``l0.1``, ``l2.l2-1``), as MegEngine."""
    if isinstance(value, (Module, TensorBase)):
        yield key, keys, value
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _expand(f"{key}.{i}", (*keys, i), item)
    elif isinstance(value, dict):
        for k, item in value.items():
            yield from _expand(f"{key}.{k}", (*keys, k), item)


def _scope_keys(key: str, value: Any) -> None:
    """A module reached through attribute ``key`` (or a container in it) is scoped by that path when called."""
    for k, _, leaf in _expand(key, (key,), value):
        if isinstance(leaf, Module):
            object.__setattr__(leaf, "_short", k)


class Module:
    """Base class: set Tensors and Modules as attributes, write ``forward``, call the module.

    Args:
        name: the module's name (MegEngine's ``name``; ``self.name = ...`` after
            ``super().__init__()`` works too).

    Names, as MegEngine gives them in a dump: the operations a module issues
    are scoped by the modules being called, outermost first: the outermost by
    its ``name`` (none: no scope), each one inside by its ``name`` if given,
    else by the attribute path its caller reached it by (``linear``, or
    ``l0.1`` and ``l2.key`` for modules in lists, tuples and dicts). A tensor
    a module holds is named after the module's path and its own name, else its
    attribute path (``net.fc.weight``, ``net.k``).

    Plain attributes may be set before ``super().__init__()``, as in MegEngine.
    """

    _buffer_names: tuple[str, ...] = ()
    _name: str | None
    _short: str  # the key its parent holds it by ("" for none)
    _parent: str  # its parent's path
    _path: str  # its path: the parent's, then its name or key
    training: bool

    def __init__(self, name: str | None = None) -> None:
        self._start()
        object.__setattr__(self, "training", True)
        if name is not None:
            self.name = name

    def _start(self) -> None:
        if "_path" not in self.__dict__:
            for key, value in (("_name", None), ("_short", ""), ("_parent", ""), ("_path", ""), ("training", True)):
                object.__setattr__(self, key, value)

    @property
    def name(self) -> str | None:
        """The module's name (scopes its operations and tensors in a dump); None: its attribute path does."""
        return self._name

    @name.setter
    def name(self, value: str | None) -> None:
        if value is not None and not isinstance(value, str):
            raise TypeError(f"a module's name is a str or None, not {type(value).__name__}")
        object.__setattr__(self, "_name", value or None)
        self._rename(self._parent, self._short)

    def __setattr__(self, key: str, value: Any) -> None:
        self._start()
        object.__setattr__(self, key, value)
        if key not in _INTERNAL:
            for k, _, leaf in _expand(key, (key,), value):
                self._adopt(k, leaf, set())

    def __getattribute__(self, key: str) -> Any:
        value = object.__getattribute__(self, key)
        if key[0] != "_" and isinstance(value, (Module, list, tuple, dict)):
            _scope_keys(key, value)
        return value

    def _adopt(self, key: str, leaf: Any, seen: set[int]) -> None:
        if isinstance(leaf, TensorBase):
            leaf._prefix, leaf._key = self._path, key
        elif id(leaf) not in seen and leaf is not self:
            leaf._rename(self._path, key, seen)

    def _rename(self, parent: str, key: str, seen: set[int] | None = None) -> None:
        """Name this module, its tensors and its submodules after its parent's path and the key it holds it by."""
        seen = set() if seen is None else seen
        seen.add(id(self))
        object.__setattr__(self, "_parent", parent)
        object.__setattr__(self, "_short", key)
        object.__setattr__(self, "_path", _join(parent, self._name or key))
        for k, _, leaf in self._children():
            self._adopt(k, leaf, seen)

    def _children(self) -> Iterator[tuple[str, tuple[Any, ...], Any]]:
        """The tensors and modules this module holds (in attributes, lists, tuples and dicts), in the order set."""
        for key, value in list(vars(self).items()):
            if key not in _INTERNAL:
                yield from _expand(key, (key,), value)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if current() is None:
            return self.forward(*args, **kwargs)
        names = scope()
        names.append((self._name or self._short) if names else (self._name or ""))
        try:
            return self.forward(*args, **kwargs)
        finally:
            names.pop()

    # ------------------------------------------------------------ tree

    def _walk(self, prefix: str, seen: set[int]) -> Iterator[tuple[str, Any, Module, tuple[Any, ...]]]:
        """(path, tensor or module, the module holding it, its keys there) of everything below, each object once."""
        for key, keys, leaf in self._children():
            if id(leaf) in seen:
                continue
            seen.add(id(leaf))
            path = _join(prefix, key)
            yield path, leaf, self, keys
            if isinstance(leaf, Module):
                yield from leaf._walk(path, seen)

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen: set[int] = {id(self)}
        for key, _, leaf in self._children():
            if isinstance(leaf, Module) and id(leaf) not in seen:
                seen.add(id(leaf))
                yield key, leaf

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        yield prefix, self
        for path, leaf, _, _ in self._walk(prefix, {id(self)}):
            if isinstance(leaf, Module):
                yield path, leaf

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_tensors(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """Every parameter and buffer, by attribute path."""
        for path, leaf, _, _ in self._walk(prefix, {id(self)}):
            if isinstance(leaf, TensorBase):
                yield path, cast(Tensor, leaf)

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """The learnable tensors (weights and biases), by attribute path."""
        for path, leaf, owner, keys in self._walk(prefix, {id(self)}):
            if isinstance(leaf, TensorBase) and keys[0] not in owner._buffer_names:
                yield path, cast(Tensor, leaf)

    def parameters(self) -> Iterator[Tensor]:
        for _, t in self.named_parameters():
            yield t

    def named_buffers(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """The non-learnable state (BatchNorm's running statistics), by attribute path."""
        for path, leaf, owner, keys in self._walk(prefix, {id(self)}):
            if isinstance(leaf, TensorBase) and keys[0] in owner._buffer_names:
                yield path, cast(Tensor, leaf)

    def buffers(self) -> Iterator[Tensor]:
        for _, t in self.named_buffers():
            yield t

    # ------------------------------------------------------------ mode and state

    def train(self, mode: bool = True) -> Module:
        """Set training mode on this module and every submodule; returns self."""
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self) -> Module:
        """Set inference mode; returns self."""
        return self.train(False)

    def state_dict(self) -> OrderedDict[str, np.ndarray]:
        """Every parameter and buffer as a numpy array, by attribute path."""
        return OrderedDict((name, t.numpy()) for name, t in self.named_tensors())

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Replace parameters and buffers with new tensors holding these values.

        Raises:
            KeyError: with ``strict``, a missing or unexpected key.
            ValueError: a value whose shape differs from the parameter's.
        """
        own = {path: (leaf, owner, keys) for path, leaf, owner, keys in self._walk("", {id(self)})}
        own = {path: entry for path, entry in own.items() if isinstance(entry[0], TensorBase)}
        if strict:
            missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
            if missing or unexpected:
                raise KeyError(f"state_dict mismatch: missing {missing}, unexpected {unexpected}")
        for name, value in state.items():
            if name not in own:
                continue
            old, owner, keys = own[name]
            array = value.numpy() if isinstance(value, TensorBase) else np.asarray(value)
            if array.shape != old.shape:
                raise ValueError(f"{name}: shape {array.shape} does not fit the parameter's {old.shape}")
            new = type(old)(array, old.dtype) if isinstance(old, Tensor) else Tensor(array, old.dtype)
            new._name = old._name
            setattr(owner, keys[0], _replaced(getattr(owner, keys[0]), keys[1:], new))

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}({self._extra_repr()})"]
        for name, m in self.named_children():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {sub}")
        return "\n".join(lines) if len(lines) > 1 else lines[0]

    def _extra_repr(self) -> str:
        return ""


def _replaced(container: Any, keys: tuple[Any, ...], new: Any) -> Any:
    """``container`` with the item at ``keys`` (positions and dict keys) replaced: lists and dicts in place,
    tuples rebuilt."""
    if not keys:
        return new
    head, rest = keys[0], keys[1:]
    item = _replaced(container[head], rest, new)
    if isinstance(container, tuple):
        return (*container[:head], item, *container[head + 1 :])
    container[head] = item
    return container


def _tensor(t: TensorBase) -> Tensor:
    """A result of the functional layer as the Tensor it is (every tensor made at run time is one)."""
    return cast(Tensor, t)


def _uniform(shape: tuple[int, ...], fan_in: int) -> Tensor:
    bound = 1.0 / math.sqrt(max(fan_in, 1))
    return Tensor(np.random.uniform(-bound, bound, size=shape).astype(np.float32))


class Sequential(Module):
    """Modules applied in order; built from modules, or from an ordered dict of them."""

    def __init__(self, *modules: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if len(modules) == 1 and isinstance(modules[0], dict):
            items = list(modules[0].items())
        else:
            items = [(str(i), m) for i, m in enumerate(modules)]
        for _, m in items:
            if not isinstance(m, Module):
                raise TypeError(f"Sequential takes modules, got {type(m).__name__}")
        object.__setattr__(self, "_layers", [m for _, m in items])
        for name, m in items:
            setattr(self, str(name), m)

    def forward(self, x: Any) -> Any:
        for m in self._layers:
            x = m(x)
        return x

    def __len__(self) -> int:
        return len(self._layers)

    def __getitem__(self, index: int) -> Module:
        return cast(Module, self._layers[index])


class Linear(Module):
    """y = x @ weight.T + bias; weight is (out_features, in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.in_features, self.out_features = in_features, out_features
        self.weight = _uniform((out_features, in_features), in_features)
        self.bias = _uniform((out_features,), in_features) if bias else None

    def forward(self, x: Any) -> Tensor:
        return _tensor(F.linear(x, self.weight, self.bias))

    def _extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Conv2d(Module):
    """2-D convolution over NCHW input; weight is (out, in / groups, kh, kw), bias (out,)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"in_channels {in_channels} and out_channels {out_channels} must be divisible by groups {groups}"
            )
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (kh, kw)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        fan_in = in_channels // groups * kh * kw
        self.weight = _uniform((out_channels, in_channels // groups, kh, kw), fan_in)
        self.bias = _uniform((out_channels,), fan_in) if bias else None

    def forward(self, x: Any) -> Tensor:
        return _tensor(F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups))

    def _extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"padding={self.padding}, groups={self.groups}"
        )


class BatchNorm2d(Module):
    """Batch normalization over NCHW input: with the running statistics after ``eval()``; in training mode (the
    default, as MegEngine) with the batch's own, which a dump refuses (the running statistics are not updated)."""

    _buffer_names = ("running_mean", "running_var")

    def __init__(
        self, num_features: int, eps: float = 1e-5, momentum: float = 0.9, affine: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.weight = Tensor(np.ones(num_features, np.float32)) if affine else None
        self.bias = Tensor(np.zeros(num_features, np.float32)) if affine else None
        self.running_mean = Tensor(np.zeros(num_features, np.float32))
        self.running_var = Tensor(np.ones(num_features, np.float32))

    _ndims: tuple[int, ...] = (4,)

    def forward(self, x: Any) -> Tensor:
        kind = type(self).__name__
        ndim = x.ndim if isinstance(x, Tensor) else np.ndim(x)
        if ndim not in self._ndims:
            raise ValueError(f"{kind} takes input of rank {' or '.join(map(str, self._ndims))}, got rank {ndim}")
        stats = (self.running_mean, self.running_var)
        return _tensor(F.batch_norm(x, *stats, self.weight, self.bias, training=self.training, eps=self.eps))

    def _extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}"


class BatchNorm1d(BatchNorm2d):
    """Batch normalization over (N, C) or (N, C, L) input with running statistics (inference only)."""

    _ndims = (2, 3)


class ReLU(Module):
    def forward(self, x: Any) -> Tensor:
        return _tensor(F.relu(x))


class Sigmoid(Module):
    def forward(self, x: Any) -> Tensor:
        return _tensor(F.sigmoid(x))


class Tanh(Module):
    def forward(self, x: Any) -> Tensor:
        return _tensor(F.tanh(x))


class Softmax(Module):
    def __init__(self, axis: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.axis = axis

    def forward(self, x: Any) -> Tensor:
        return _tensor(F.softmax(x, self.axis))


class MaxPool2d(Module):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: Any) -> Tensor:
        return _tensor(F.max_pool2d(x, self.kernel_size, self.stride, self.padding))


class AvgPool2d(Module):
    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        mode: str = "average_count_exclude_padding",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kernel_size, self.stride, self.padding, self.mode = kernel_size, stride, padding, mode

    def forward(self, x: Any) -> Tensor:
        return _tensor(F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.mode))


class Flatten(Module):
    def __init__(self, start_axis: int = 1, end_axis: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_axis, self.end_axis = start_axis, end_axis

    def forward(self, x: Any) -> Tensor:
        return _tensor(F.flatten(x, self.start_axis, self.end_axis))


class Identity(Module):
    def forward(self, x: Any) -> Any:
        return x
