"""The ONNX types of model inputs and outputs that mgedump feeds and checks, and their values in Python.

onnxruntime names a type as text: ``tensor(float)``, ``seq(tensor(int64))``,
``map(int64,tensor(float))``, ``seq(map(string,tensor(float)))`` (what
scikit-learn classifiers exported with ZipMap give), ``optional(tensor(float))``.
:func:`parse` reads that text into a :class:`ValueType`; a type mgedump does
not handle (a sparse tensor, a map value that is not a tensor) is refused.

A value of such a type, as mgedump holds it (:func:`normalize` makes it from
what onnxruntime returns):

- a tensor: a numpy array;
- a sequence: a list of its elements;
- a map: a dict from key (an int, or a str for string keys) to value, a map
  value being a 0-d numpy array (onnxruntime returns Python scalars);
- an optional: None when empty, else its element.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

# TensorProto.DataType -> (onnxruntime's name of the element type, or None where it has none; the numpy dtype's name)
ELEMENT_TYPES = {
    1: ("float", "float32"),
    2: ("uint8", "uint8"),
    3: ("int8", "int8"),
    4: ("uint16", "uint16"),
    5: ("int16", "int16"),
    6: ("int32", "int32"),
    7: ("int64", "int64"),
    8: ("string", "string"),
    9: ("bool", "bool"),
    10: ("float16", "float16"),
    11: ("double", "float64"),
    12: ("uint32", "uint32"),
    13: ("uint64", "uint64"),
    14: (None, "complex64"),
    15: (None, "complex128"),
    16: (None, "bfloat16"),
}

# onnxruntime's type strings for tensors, and the numpy dtype of each.
ORT_DTYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(int8)": "int8",
    "tensor(int16)": "int16",
    "tensor(int32)": "int32",
    "tensor(int64)": "int64",
    "tensor(uint8)": "uint8",
    "tensor(uint16)": "uint16",
    "tensor(uint32)": "uint32",
    "tensor(uint64)": "uint64",
    "tensor(bool)": "bool",
    "tensor(string)": "str",
}
_TENSOR_TEXT = {dtype: text for text, dtype in ORT_DTYPES.items()}
# map keys: onnxruntime writes the element type alone (int64, string)
MAP_KEYS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "string"}
MAX_DEPTH = 8  # nesting of seq / map / optional in one type: far beyond any exporter's


@dataclass(frozen=True)
class ValueType:
    """One input's or output's type.

    Attributes:
        kind: ``tensor``, ``seq``, ``map`` or ``optional``.
        dtype: a tensor's numpy dtype name (``float32``, ``str``); a map's key type (``int64``, ``string``).
        elem: a sequence's or an optional's element; a map's value.
    """

    kind: str
    dtype: str = ""
    elem: ValueType | None = None

    @property
    def text(self) -> str:
        """onnxruntime's name of the type (``seq(map(int64,tensor(float)))``)."""
        if self.kind == "tensor":
            return _TENSOR_TEXT[self.dtype]
        assert self.elem is not None
        if self.kind == "map":
            return f"map({self.dtype},{self.elem.text})"
        return f"{self.kind}({self.elem.text})"

    @property
    def is_tensor(self) -> bool:
        return self.kind == "tensor"

    def tensor(self) -> ValueType:
        """The tensor type at the bottom of the nesting (a map's values)."""
        return self if self.elem is None else self.elem.tensor()


def tensor_type(dtype: str) -> ValueType:
    return ValueType("tensor", dtype)


def is_structured(dtype: str) -> bool:
    """Whether a manifest's or io dump's ``dtype`` names a sequence, a map or an optional (else a tensor's dtype)."""
    return "(" in dtype


def parse(text: str) -> ValueType:
    """onnxruntime's type text as a :class:`ValueType`.

    Raises:
        ValueError: a type mgedump does not handle, or text that is not a type.
    """
    value, rest = _parse(text.replace(" ", ""), 0)
    if rest:
        raise ValueError(f"unexpected {rest!r} after the type")
    return value


def _parse(text: str, depth: int) -> tuple[ValueType, str]:
    if depth > MAX_DEPTH:
        raise ValueError("nested too deep")
    match = re.match(r"tensor\((\w+)\)", text)
    if match:
        dtype = ORT_DTYPES.get(match.group(0))
        if dtype is None:
            raise ValueError(f"no numpy type for {match.group(0)}")
        return ValueType("tensor", dtype), text[match.end() :]
    for kind in ("seq", "optional"):
        if text.startswith(kind + "("):
            elem, rest = _parse(text[len(kind) + 1 :], depth + 1)
            if not rest.startswith(")"):
                raise ValueError(f"{kind}( is not closed")
            return ValueType(kind, elem=elem), rest[1:]
    match = re.match(r"map\((\w+),", text)
    if match:
        if match.group(1) not in MAP_KEYS:
            raise ValueError(f"map keys of type {match.group(1)}")
        elem, rest = _parse(text[match.end() :], depth + 1)
        if not elem.is_tensor or not rest.startswith(")"):
            raise ValueError("a map's values must be tensors")
        return ValueType("map", match.group(1), elem), rest[1:]
    if not text:
        raise ValueError("the type ends early")
    raise ValueError(f"{text.split(')')[0]}) is not a type mgedump handles")


def normalize(value: Any, vtype: ValueType, what: str) -> Any:
    """What onnxruntime returned for a value of this type, as mgedump holds it (the module's docstring).

    Raises:
        TypeError: the value is not of the type (naming ``what`` and where in it).
    """
    if vtype.kind == "tensor":
        if not isinstance(value, np.ndarray):
            raise TypeError(f"{what} is not a tensor ({type(value).__name__})")
        return value
    assert vtype.elem is not None
    if vtype.kind == "optional":
        return None if value is None else normalize(value, vtype.elem, what)
    if vtype.kind == "seq":
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{what} is not a sequence ({type(value).__name__})")
        return [normalize(item, vtype.elem, f"{what}[{k}]") for k, item in enumerate(value)]
    if not isinstance(value, dict):
        raise TypeError(f"{what} is not a map ({type(value).__name__})")
    dtype = np.dtype(object) if vtype.elem.dtype == "str" else np.dtype(vtype.elem.dtype)
    return {_key(key, vtype.dtype): np.asarray(item, dtype=dtype) for key, item in value.items()}


def _key(key: Any, key_type: str) -> int | str:
    if key_type == "string":
        return key.decode("utf-8", "surrogateescape") if isinstance(key, bytes) else str(key)
    return int(key)


def path_text(path: tuple[int | str, ...]) -> str:
    """Where an element is in a value: ``[3][1]`` (sequence index 3, map key 1), ``[0]['cat']``."""
    return "".join(f"[{p!r}]" if isinstance(p, str) else f"[{p}]" for p in path)


def leaves(value: Any) -> list[np.ndarray]:
    """Every tensor of a value, in order (sequences in order, maps by their keys in order)."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, list):
        return [leaf for item in value for leaf in leaves(item)]
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in leaves(value[key])]
    return []


def describe(value: Any) -> str:
    """A value's extent in a few words: ``a sequence of 4 maps``, ``an empty optional``."""
    if value is None:
        return "an empty optional"
    if isinstance(value, list):
        kinds = {type(item).__name__ for item in value}
        what = {"dict": "maps", "list": "sequences", "ndarray": "tensors"}.get(kinds.pop(), "values") if kinds else ""
        return f"a sequence of {len(value)} {what}".rstrip()
    if isinstance(value, dict):
        return f"a map of {len(value)} keys"
    return "a tensor"
