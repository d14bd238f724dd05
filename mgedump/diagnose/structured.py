"""Values of an io dump that are not tensors: sequences, maps and optionals (docs/io-dump.md).

A run's sequence, map or optional is held with its type (:class:`Structured`)
until it is written: as the ``SequenceProto``, ``MapProto`` or ``OptionalProto``
of ONNX's test data, its index entry giving onnxruntime's name of its type as
``dtype`` and statistics over every tensor it holds.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..bundle.valueproto import encode_value
from ..model.valuetype import ELEMENT_TYPES, ValueType, leaves, normalize, parse


@dataclass(frozen=True)
class Structured:
    """A value of the run that is not a tensor (a sequence, a map, an optional), with its type."""

    value: Any
    vtype: ValueType

    def flat(self) -> np.ndarray:
        """Every number the value holds, in one 1-d array (empty for strings, or for tensors of mixed dtypes):
        what the index's statistics are over."""
        numeric = [leaf.reshape(-1) for leaf in leaves(self.value) if leaf.dtype.kind in "biuf"]
        if not numeric or len({a.dtype for a in numeric}) != 1:
            return np.zeros(0, np.float32)
        return np.concatenate(numeric)


def structured(value: Any, type_text: str, name: str) -> Structured | None:
    """What onnxruntime returned for a value of a sequence, map or optional type, held as
    :mod:`mgedump.model.valuetype` says; None for a type mgedump does not handle (it is left out)."""
    try:
        vtype = parse(type_text)
        return Structured(normalize(value, vtype, f"{name!r}"), vtype)
    except (ValueError, TypeError):
        return None


def value_nbytes(value: Any) -> int:
    """The bytes of a feed: an array's, or every tensor's of a sequence."""
    return sum(int(leaf.nbytes) for leaf in leaves(value.value if isinstance(value, Structured) else value))


def value_key(value: Any) -> tuple[Any, ...]:
    """A feed's shape and dtype (a sequence's: each element's), for caching by input shapes."""
    if isinstance(value, (list, Structured)):
        return tuple(
            (leaf.shape, str(leaf.dtype)) for leaf in leaves(value.value if isinstance(value, Structured) else value)
        ), "seq"
    return np.shape(value), str(np.asarray(value).dtype)


def write_structured(staging: str, file: str, name: str, value: Structured, stats: dict[str, Any]) -> dict[str, Any]:
    """Write a value's file into the case's staging folder; return its index entry."""
    data = encode_value(value.value, value.vtype, name)
    with open(os.path.join(staging, file), "wb") as f:
        f.write(data)
    return {
        "name": name,
        "file": file,
        "dtype": value.vtype.text,
        "shape": [],
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        **stats,
    }


# TensorProto.DataType -> onnxruntime's name of the element type
_ELEM_NAMES = {number: ort for number, (ort, _) in ELEMENT_TYPES.items() if ort is not None}


def type_text(type_proto: Any) -> str | None:
    """An ONNX ``TypeProto`` as onnxruntime names it (``seq(tensor(float))``); None for what it has no name for."""
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        name = _ELEM_NAMES.get(type_proto.tensor_type.elem_type)
        return f"tensor({name})" if name else None
    if kind in ("sequence_type", "optional_type"):
        inner = type_text(getattr(type_proto, kind).elem_type)
        return f"{'seq' if kind == 'sequence_type' else 'optional'}({inner})" if inner else None
    if kind == "map_type":
        key = _ELEM_NAMES.get(type_proto.map_type.key_type)
        inner = type_text(type_proto.map_type.value_type)
        return f"map({key},{inner})" if key and inner else None
    return None
