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

Tensors set as attributes are the module's parameters (buffers, for
BatchNorm's running statistics); they are named after their attribute path
(``conv.weight``), which :meth:`mgedump.jit.trace.dump` uses with
``keep_param_name=True``. Weights start random as numpy's global generator
gives them (seed it with ``np.random.seed``); load real ones with
:meth:`Module.load_state_dict`.

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


class Module:
    """Base class: set Tensors and Modules as attributes, write ``forward``, call the module.

    Args:
        name: the module's name (MegEngine's ``name``): the nodes of a dumped
            graph are scoped by it when this module is the outermost one called
            (``net.fc.MatrixMul``); inner modules are scoped by their attribute names.

    Plain attributes may be set before ``super().__init__()``, as in MegEngine.
    """

    _buffer_names: tuple[str, ...] = ()
    _tensors: OrderedDict[str, Tensor]
    _modules: OrderedDict[str, Module]
    _path: str
    _name: str | None
    training: bool

    def __init__(self, name: str | None = None) -> None:
        self._start()
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_name", name)

    def _start(self) -> None:
        if "_modules" not in self.__dict__:
            object.__setattr__(self, "_tensors", OrderedDict())
            object.__setattr__(self, "_modules", OrderedDict())
            object.__setattr__(self, "_path", "")
            object.__setattr__(self, "_name", None)
            object.__setattr__(self, "training", True)

    @property
    def name(self) -> str | None:
        return self._name

    def __setattr__(self, name: str, value: Any) -> None:
        self._start()
        self._tensors.pop(name, None)
        self._modules.pop(name, None)
        if isinstance(value, Tensor):
            self._tensors[name] = value
            value.name = self._join(name)
        elif isinstance(value, Module):
            self._modules[name] = value
            value._rename(self._join(name))
        object.__setattr__(self, name, value)

    def _join(self, name: str) -> str:
        return f"{self._path}.{name}" if self._path else name

    def _rename(self, path: str) -> None:
        """Name this module's tensors (and its submodules') after their path from the outermost module."""
        object.__setattr__(self, "_path", path)
        for name, t in self._tensors.items():
            t.name = self._join(name)
        for name, m in self._modules.items():
            m._rename(self._join(name))

    def __delattr__(self, name: str) -> None:
        self._tensors.pop(name, None)
        self._modules.pop(name, None)
        object.__delattr__(self, name)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if current() is None:
            return self.forward(*args, **kwargs)
        names = scope()
        names.append((self._path.rsplit(".", 1)[-1] or self._name or "") if names else (self._name or ""))
        try:
            return self.forward(*args, **kwargs)
        finally:
            names.pop()

    # ------------------------------------------------------------ tree

    def named_children(self) -> Iterator[tuple[str, Module]]:
        yield from self._modules.items()

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_tensors(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """Every parameter and buffer, by attribute path."""
        for name, t in self._tensors.items():
            yield (f"{prefix}.{name}" if prefix else name), t
        for name, m in self._modules.items():
            yield from m.named_tensors(f"{prefix}.{name}" if prefix else name)

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """The learnable tensors (weights and biases), by attribute path."""
        for name, t in self.named_tensors(prefix):
            if name.rsplit(".", 1)[-1] not in self._owner_buffers(name, prefix):
                yield name, t

    def parameters(self) -> Iterator[Tensor]:
        for _, t in self.named_parameters():
            yield t

    def named_buffers(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """The non-learnable state (BatchNorm's running statistics), by attribute path."""
        for name, t in self.named_tensors(prefix):
            if name.rsplit(".", 1)[-1] in self._owner_buffers(name, prefix):
                yield name, t

    def buffers(self) -> Iterator[Tensor]:
        for _, t in self.named_buffers():
            yield t

    def _owner_buffers(self, path: str, prefix: str) -> tuple[str, ...]:
        rel = path[len(prefix) + 1 :] if prefix else path
        owner: Module = self
        for part in rel.split(".")[:-1]:
            owner = owner._modules[part]
        return owner._buffer_names

    # ------------------------------------------------------------ mode and state

    def train(self, mode: bool = True) -> Module:
        """Set training mode on this module and every submodule; returns self."""
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self) -> Module:
        """Set inference mode (needed by BatchNorm2d); returns self."""
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
        own = dict(self.named_tensors())
        if strict:
            missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
            if missing or unexpected:
                raise KeyError(f"state_dict mismatch: missing {missing}, unexpected {unexpected}")
        for name, value in state.items():
            if name not in own:
                continue
            array = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
            if array.shape != own[name].shape:
                raise ValueError(f"{name}: shape {array.shape} does not fit the parameter's {own[name].shape}")
            owner: Module = self
            *path, attr = name.split(".")
            for part in path:
                owner = owner._modules[part]
            setattr(owner, attr, Tensor(array, own[name].dtype))

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}({self._extra_repr()})"]
        for name, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {sub}")
        return "\n".join(lines) if len(lines) > 1 else lines[0]

    def _extra_repr(self) -> str:
        return ""


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
        for name, m in items:
            if not isinstance(m, Module):
                raise TypeError(f"Sequential takes modules, got {type(m).__name__}")
            setattr(self, name, m)

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():
            x = m(x)
        return x

    def __len__(self) -> int:
        return len(self._modules)

    def __getitem__(self, index: int) -> Module:
        return list(self._modules.values())[index]


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
    """Batch normalization over NCHW input with running statistics (inference only: call ``eval()``)."""

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
        if self.training:
            raise RuntimeError(f"{kind} computes with running statistics only (inference): call model.eval() first")
        ndim = x.ndim if isinstance(x, Tensor) else np.ndim(x)
        if ndim not in self._ndims:
            raise ValueError(f"{kind} takes input of rank {' or '.join(map(str, self._ndims))}, got rank {ndim}")
        return _tensor(F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, eps=self.eps))

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
