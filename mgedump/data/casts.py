"""Data cast to an input's dtype: refused where a cast would corrupt it silently, warned where it rounds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..base.errors import DataError
from ..base.log import warn_once
from ..model.runtime import TensorInfo

_NOT_NUMBERS = {"c": "complex numbers", "M": "dates", "m": "time spans", "V": "raw or structured records"}


def cast_to(array: np.ndarray, info: TensorInfo, what: str) -> np.ndarray:
    """Cast data to an input's dtype, warning when the cast rounds values.

    Raises:
        DataError: data a cast would silently corrupt: complex numbers, dates,
            time spans, records, objects; strings for a numeric input and back;
            values outside the input dtype's range (or NaN for an integer input).
    """
    target = info.np_dtype
    kind = array.dtype.kind
    if kind in _NOT_NUMBERS or (kind == "O" and info.dtype != "str"):
        held = _NOT_NUMBERS.get(kind, "Python objects")
        raise DataError(f"input {info.name!r} takes {info.dtype}, but {what} holds {held} ({array.dtype})")
    if info.dtype == "str":
        if array.dtype.kind not in "USO":
            raise DataError(f"input {info.name!r} takes strings, but {what} holds {array.dtype}")
        return array.astype(object)
    if array.dtype.kind in "USO":
        raise DataError(f"input {info.name!r} takes {info.dtype}, but {what} holds strings")
    if array.dtype == target:
        return array
    _check_range(array, info, what)
    with np.errstate(all="ignore"):
        out = array.astype(target)
        if array.dtype.kind in "fc" and target.kind in "fc":
            changed = int(np.count_nonzero(np.isfinite(array) & ~np.isfinite(out)))
        elif array.size:
            changed = int(array.size - np.count_nonzero(out.astype(array.dtype) == array))
        else:
            changed = 0
    if changed:
        warn_once(
            f"input {info.name!r}: casting {what} from {array.dtype} to {info.dtype} changes "
            f"{changed} of {array.size} values"
        )
    return out


def _check_range(array: np.ndarray, info: TensorInfo, what: str) -> None:
    """Refuse values the input's dtype cannot hold: a cast would wrap them, or make them infinite."""
    target = info.np_dtype
    if not array.size or target.kind not in "iuf" or array.dtype.kind not in "iuf":
        return
    with np.errstate(all="ignore"):
        if target.kind == "f":
            if array.dtype.kind != "f" or np.finfo(target).max >= np.finfo(array.dtype).max:
                return
            top = float(np.finfo(target).max)
            outside = np.isfinite(array) & (np.abs(array) > top)
            bounds = f"[{-top:g}, {top:g}]"
        else:
            lo, hi = int(np.iinfo(target).min), int(np.iinfo(target).max)
            if array.dtype.kind == "f":  # the bounds as floats are powers of two (exact): hi + 1 is the first too big
                outside = ~np.isfinite(array) | (array < float(lo)) | (array >= float(hi) + 1)
            else:
                outside = (array < lo) | (array > hi)
            bounds = f"[{lo}, {hi}]"
        count = int(np.count_nonzero(outside))
    if count:
        raise DataError(
            f"input {info.name!r} takes {info.dtype}, but {what} holds {count} value(s) outside its range {bounds}",
            hint="give data within the input's range",
        )


def as_inputs_of(
    arrays: Sequence[tuple[str, Any]], given: Sequence[TensorInfo], bundled: Sequence[TensorInfo]
) -> list[tuple[str, Any]]:
    """A test case's inputs, stored for one model (``given``), in the dtypes another takes (``bundled``: a
    float16 variant of it)."""
    by_name = {info.name: info for info in bundled}
    feeds = []
    for (name, array), info in zip(arrays, given, strict=True):
        target = by_name.get(name, info)
        feeds.append((name, cast_to(array, target, "the test data") if target.dtype != info.dtype else array))
    return feeds
