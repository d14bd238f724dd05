"""Shapes: the shape a generator draws for an input, data checked against the dims the model fixes, and the shapes
``--input-shape`` gives."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..base.errors import DataError, SpecError, UsageError
from ..base.limits import require_memory
from ..base.log import warn_once
from ..base.naming import option_name
from ..model.runtime import TensorInfo
from .spec import Generator


def generator_shape(gen: Generator, info: TensorInfo, defaulted: list[str] | None = None) -> tuple[int, ...]:
    """The shape a generator draws for an input: its own dims, or its leading dims and the model's for the rest
    (a symbolic dim set to 1, with a warning, and recorded in ``defaulted``).

    Raises:
        SpecError: dims that do not fit the input's rank or fixed dims, no shape to take the rest from, or more
            data than memory holds.
    """
    model = info.shape
    if gen.dims is not None and not gen.rest:
        shape = gen.dims
        if model is not None and len(model) != len(shape):
            raise SpecError(
                f"{gen.text} gives {len(shape)} dims, but input {info.name!r} has rank {len(model)} "
                f"(shape {info.shape_text()})"
            )
    else:
        shape = _with_model_dims(gen, info, defaulted)
    if model is not None:
        for axis, (want, got) in enumerate(zip(model, shape, strict=True)):
            if isinstance(want, int) and want >= 0 and want != got:
                raise SpecError(
                    f"{gen.text}: dim {axis} is {got}, but input {info.name!r} fixes it to {want} "
                    f"(shape {info.shape_text()})"
                )
    # the generator draws float64 (8 bytes an element) and casts to the input's dtype
    require_memory(
        math.prod(shape) * (8 + info.np_dtype.itemsize),
        f"{gen.text} for input {info.name!r} ({list(shape)})",
        SpecError,
    )
    return shape


def _with_model_dims(gen: Generator, info: TensorInfo, defaulted: list[str] | None) -> tuple[int, ...]:
    """The generator's leading dims (if any), then the model's dims; a symbolic one is 1."""
    model = info.shape
    lead = gen.dims or ()
    if model is None:
        raise SpecError(
            f"input {info.name!r} has no known shape in the model; give the full shape",
            hint=f"{info.name}:#{gen.kind}(...,d0,d1,...)",
        )
    if len(lead) > len(model):
        raise SpecError(f"{gen.text} gives {len(lead)} dims, but input {info.name!r} has rank {len(model)}")
    tail = []
    for axis in range(len(lead), len(model)):
        dim = model[axis]
        if isinstance(dim, int) and dim >= 0:
            tail.append(dim)
            continue
        label = repr(dim) if dim is not None else "unnamed"
        placeholders = [str(d) if isinstance(d, int) else f"<{d or '?'}>" for d in model]
        warn_once(
            f"input {info.name!r} dim {axis} ({label}) is symbolic: using 1; give the dims the model leaves "
            f"free with {option_name('input_shapes')} {info.name}:{','.join(placeholders)} or in the spec, e.g. "
            f"{info.name}:#{gen.kind}({','.join(str(p) for p in gen.params)},{','.join(placeholders)})"
        )
        if defaulted is not None:
            defaulted.append(f"{info.name!r} dim {axis} ({label})")
        tail.append(1)
    return tuple(lead) + tuple(tail)


def check_shape(array: np.ndarray, info: TensorInfo, what: str, repeat: int = 1) -> None:
    """Check data against the input's rank and the dims the model fixes (a batch made by ``--repeat`` warns).

    Raises:
        DataError: another rank, or another size of a fixed dim.
    """
    model = info.shape
    if model is None:
        return
    if array.ndim != len(model):
        raise DataError(
            f"input {info.name!r} has rank {len(model)} (shape {info.shape_text()}), but {what} has shape "
            f"{list(array.shape)} (rank {array.ndim})"
        )
    for axis, (want, got) in enumerate(zip(model, array.shape, strict=True)):
        if not isinstance(want, int) or want < 0 or want == got:
            continue
        if axis == 0 and repeat > 1:
            warn_once(
                f"input {info.name!r}: batch dim is {got} after {option_name('repeat')} {repeat}, but the model fixes it to {want}"
            )
            continue
        raise DataError(
            f"input {info.name!r} fixes dim {axis} to {want} (shape {info.shape_text()}), but {what} has shape "
            f"{list(array.shape)}"
        )


def with_input_shapes(
    inputs: Sequence[TensorInfo], shapes: Sequence[tuple[str | None, tuple[int, ...]]]
) -> list[TensorInfo]:
    """The model's inputs with the shapes ``--input-shape`` gives (which fix symbolic dims for every source).

    Raises:
        UsageError: an unknown input, a shape of another rank, or one that contradicts a dim the model fixes.
    """
    by_name = {info.name: info for info in inputs}
    seen: set[str] = set()
    for name, dims in shapes:
        if name is None:
            if len(inputs) != 1:
                raise UsageError(
                    f"{option_name('input_shapes')} without a name needs a one-input model; give NAME:d0,d1,... for one of "
                    f"{', '.join(repr(i.name) for i in inputs)}"
                )
            name = inputs[0].name
        info = by_name.get(name)
        if info is None:
            raise UsageError(
                f"{option_name('input_shapes')} names {name!r}; the model's inputs are {', '.join(repr(i.name) for i in inputs)}"
            )
        if name in seen:
            raise UsageError(f"{option_name('input_shapes')} gives input {name!r} twice")
        seen.add(name)
        if info.shape is not None:
            if len(info.shape) != len(dims):
                raise UsageError(
                    f"{option_name('input_shapes')} gives {name!r} {len(dims)} dims, but it has rank {len(info.shape)} ({info.shape_text()})"
                )
            for axis, (model_dim, dim) in enumerate(zip(info.shape, dims, strict=True)):
                if isinstance(model_dim, int) and model_dim >= 0 and model_dim != dim:
                    raise UsageError(
                        f"{option_name('input_shapes')} gives {name!r} dim {axis} = {dim}, but the model fixes it to {model_dim} "
                        f"({info.shape_text()})"
                    )
        by_name[name] = TensorInfo(info.name, info.dtype, tuple(dims))
    return [by_name[info.name] for info in inputs]
