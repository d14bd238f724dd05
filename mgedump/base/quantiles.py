"""Quantiles of sorted values, as numpy computes them, without numpy: ``numpy.quantile`` and ``numpy.median``
import ``numpy.ma`` on their first call (through ``numpy.unique``), about 10 ms of every ``mgerun``."""

from __future__ import annotations

import math
from collections.abc import Sequence


def quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted values, interpolated between the two nearest as ``numpy.quantile``'s default
    (``linear``) is, to the last bit."""
    count = len(ordered)
    at = (count - 1) * q  # numpy's virtual index for its default method
    if at >= count - 1:
        return float(ordered[-1])
    if at < 0:
        return float(ordered[0])
    low = math.floor(at)
    a, b, t = float(ordered[low]), float(ordered[low + 1]), at - low
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t


def median(ordered: Sequence[float]) -> float:
    """The median of sorted values, as ``numpy.median`` gives it: the middle one, or the mean of the middle two."""
    half = len(ordered) // 2
    return float(ordered[half]) if len(ordered) % 2 else (float(ordered[half - 1]) + float(ordered[half])) / 2
