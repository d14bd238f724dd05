"""Numbers and text as the JSON reports hold them: numbers that are not finite named (``"inf"``, ``"-inf"``,
``"nan"``: JSON has no NaN or infinity) and read back, text through :func:`mgedump.base.text.json` (no lone
surrogate), complex numbers as their text (``"(1+2j)"``: JSON has none; a crafted io dump or bundle can hold
them), tensor elements as plain values; :func:`dumps` writes a document as strict JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from ..base import text


def finite_or_name(value: Any) -> Any:
    """A float JSON can hold as it is, or the string naming it (``"inf"``, ``"-inf"``, ``"nan"``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def number(value: Any) -> Any:
    """The inverse of :func:`finite_or_name`: ``"inf"``, ``"-inf"`` and ``"nan"`` back to floats."""
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    return value


def json_ready(value: Any) -> Any:
    """A JSON-ready value that strict JSON parsers accept: numbers that are not finite named
    (:func:`finite_or_name`), complex numbers as text, numpy scalars as Python values, every string and key
    cleaned by :func:`mgedump.base.text.json`, tuples as lists."""
    if (
        value is not None
        and not isinstance(value, (bool, int, float, str, dict, list, tuple))
        and hasattr(value, "item")
    ):
        value = value.item()  # a numpy scalar
    if isinstance(value, complex):
        return str(value)
    if isinstance(value, dict):
        return {text.json(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, str):
        return text.json(value)
    if isinstance(value, float):
        return finite_or_name(value)
    return value


def dumps(document: dict[str, Any]) -> str:
    """A report as the JSON text ``mgerun`` writes: strict JSON, keys sorted, one item a line."""
    return json.dumps(json_ready(document), indent=1, sort_keys=True, allow_nan=False) + "\n"


def floats(values: Sequence[Any]) -> list[float]:
    """Every value as a float."""
    return [float(v) for v in values]


def optional(value: Any) -> float | None:
    """A float, or None; ``"inf"``, ``"-inf"`` and ``"nan"`` read back as floats."""
    return None if value is None else float(number(value))


def element(value: Any) -> Any:
    """One tensor element as JSON holds it: a Python number, bool or text (bytes decoded, their bytes that are not
    UTF-8 kept), NaN and the infinities named."""
    if value is not None and not isinstance(value, (bool, int, float, str, bytes)) and hasattr(value, "item"):
        value = value.item()
    if isinstance(value, (bytes, bytearray)):
        return text.decoded(value)
    if isinstance(value, complex):
        return str(value)
    return finite_or_name(value)
