"""The AssertEqual metric of sequences, maps and optionals (docs/assertion.md, "Sequences, maps and optionals").

Two values agree in structure or not at all: a sequence must have the same
length, a map the same keys, an optional be empty on both sides or on
neither; anything else is an infinite error whose reason says where
(``sequence length differs at [2]: expect 3, get 2``). Where the structure
agrees, every tensor in it is compared with :func:`~mgedump.measure.assertion.measure`,
and the value's error is the worst of theirs. The worst element is named by
its path: ``[3][1]`` is key 1 of the map at index 3 of the sequence, followed
by the index inside a tensor that is not a scalar (``[0][2, 5]``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..model.valuetype import path_text
from .assertion import Measure, OutputCheck, assert_equal, measure

Path = tuple[int | str, ...]


def _broken(path: Path, reason: str, expect: Any = None, got: Any = None) -> Measure:
    return Measure(
        math.inf,
        reason=f"{reason} at {path_text(path) or 'the top'}",
        path=path_text(path),
        expect_value=expect,
        got_value=got,
    )


def _is_tensor(value: Any) -> bool:
    """A tensor (an array, or a numpy scalar a 0-d array's arithmetic gives), not a sequence, a map or None."""
    return not isinstance(value, (list, dict)) and value is not None


def _walk(expect: Any, got: Any, path: Path, labels: tuple[str, str]) -> Measure:
    e_name, g_name = labels
    if expect is None or got is None:
        if expect is None and got is None:
            return Measure(0.0, exact=True, path=path_text(path))
        side = e_name if expect is None else g_name
        return _broken(path, f"the optional is empty in {side} only")
    if _is_tensor(expect) or _is_tensor(got):
        if not (_is_tensor(expect) and _is_tensor(got)):
            return _broken(path, f"{e_name} holds {type(expect).__name__}, {g_name} {type(got).__name__}")
        m = measure(np.asarray(expect), np.asarray(got), labels)
        inner = f"[{', '.join(map(str, m.index))}]" if m.index else ""
        m.path, m.index = path_text(path) + inner, None
        return m
    if isinstance(expect, list) and isinstance(got, list):
        if len(expect) != len(got):
            return _broken(path, f"sequence length differs: {e_name} {len(expect)}, {g_name} {len(got)}")
        parts = [_walk(a, b, (*path, k), labels) for k, (a, b) in enumerate(zip(expect, got, strict=True))]
        return _worst(parts, path)
    if isinstance(expect, dict) and isinstance(got, dict):
        if set(expect) != set(got):
            only = sorted(set(expect) ^ set(got), key=repr)[:3]
            return _broken(
                path, f"map keys differ: {e_name} {len(expect)} keys, {g_name} {len(got)}; not in both: {only}"
            )
        parts = [_walk(expect[k], got[k], (*path, k), labels) for k in sorted(expect, key=repr)]
        return _worst(parts, path)
    return _broken(path, f"{e_name} holds {type(expect).__name__}, {g_name} {type(got).__name__}")


def _worst(parts: list[Measure], path: Path) -> Measure:
    """The worst of a sequence's or a map's elements (the first of equals); an empty one agrees exactly."""
    if not parts:
        return Measure(0.0, exact=True, path=path_text(path))
    worst = max(parts, key=lambda m: m.err)  # max keeps the first of equals
    worst.exact = all(m.exact for m in parts)
    worst.expect_absmax = max(m.expect_absmax for m in parts)
    worst.got_inf_where_expect_finite = any(m.got_inf_where_expect_finite for m in parts)
    if worst.exact and worst.err and worst.reason is None:
        worst.reason = f"{sum(1 for m in parts if m.err)} of {len(parts)} elements differ (exact comparison)"
    return worst


def measure_value(expect: Any, got: Any, labels: tuple[str, str] = ("expect", "get")) -> Measure:
    """The AssertEqual metric of two values of any type mgedump handles (a tensor's as :func:`measure` gives it)."""
    if _is_tensor(expect) and _is_tensor(got):
        return measure(np.asarray(expect), np.asarray(got), labels)
    with np.errstate(all="ignore"):
        return _walk(expect, got, (), labels)


def check_value(name: str, expect: Any, got: Any, maxerr: float, stat: str = "max") -> OutputCheck:
    """Check one output of any type against its expected value (:func:`~mgedump.measure.assertion.assert_equal`
    for a tensor, its bound applying to ``stat`` of the element errors)."""
    if _is_tensor(expect) and _is_tensor(got):
        return assert_equal(name, expect, got, maxerr, stat)
    m = measure_value(expect, got)
    passed = m.passes(maxerr)
    err = m.err if math.isfinite(m.err) else None
    check = OutputCheck(name, passed, err, maxerr, m.reason, None, m.expect_value, m.got_value, {}, worst_path=m.path)
    return check
