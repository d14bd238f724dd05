"""Test data for inputs that are not tensors: a sequence of tensors, an optional tensor (docs/data-specs.md).

A ``-d`` source (a generator, a file) makes a tensor; for an input of type
``seq(tensor(T))`` it is the one element of the sequence, for
``optional(tensor(T))`` the value held. :func:`element_info` is the tensor
input the source is built for, :func:`wrap` puts the tensor where the input
takes it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base.errors import SpecError
from ..base.log import program
from ..model.runtime import TensorInfo
from ..model.valuetype import leaves


def element_info(info: TensorInfo) -> TensorInfo:
    """The tensor a ``-d`` source makes for this input: the input itself, or the tensor its sequence or optional
    holds.

    Raises:
        SpecError: an input of another type (a map, a sequence of sequences), which no source makes; the message
            names the command that refuses it.
    """
    if info.is_tensor:
        return info
    vtype = info.value_type
    if vtype.kind in ("seq", "optional") and vtype.elem is not None and vtype.elem.is_tensor:
        return TensorInfo(info.name, vtype.elem.dtype, info.shape)
    raise SpecError(
        f"input {info.name!r} has type {info.dtype}, which {program()} cannot feed: -d makes tensors, and "
        "sequences and optionals of tensors"
    )


def wrap(info: TensorInfo, array: np.ndarray) -> Any:
    """The input's value from the tensor a source made: a one-element sequence, or the optional's value."""
    if info.is_tensor or info.value_type.kind == "optional":
        return array
    return [array]


def value_bytes(value: Any) -> int:
    """The bytes a value's tensors hold."""
    return sum(int(leaf.nbytes) for leaf in leaves(value))
