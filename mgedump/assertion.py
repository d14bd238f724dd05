"""The AssertEqual metric (docs/assertion.md).

Per output::

    err = max over elements of |expect - get| / max(min(|expect|, |get|), 1)

A NaN or infinity on either side fails; integer, bool and string outputs
compare exactly; shapes and dtypes must match. An output passes when
``err <= maxerr``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class OutputCheck:
    """The result of checking one output.

    Attributes:
        name: the output's name.
        passed: whether it met the assertion.
        err: the AssertEqual error (for exact dtypes: 0 when equal, else the
            count of differing elements); None when it could not be computed.
        maxerr: the threshold it was held to.
        reason: why it failed, when not for err > maxerr.
        worst_index: where the worst element is.
        expect_value, got_value: the two values there.
        stats: per-output numbers for the report.
    """

    name: str
    passed: bool
    err: float | None
    maxerr: float
    reason: str | None = None
    worst_index: tuple[int, ...] | None = None
    expect_value: Any = None
    got_value: Any = None
    stats: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "err": self.err,
            "maxerr": self.maxerr,
            "reason": self.reason,
            "worst_index": None if self.worst_index is None else list(self.worst_index),
            "expect": _plain(self.expect_value),
            "get": _plain(self.got_value),
            "stats": self.stats,
            "failure": None if self.passed else self.failure_lines(),
        }

    def failure_lines(self) -> list[str]:
        """How a failed output is printed (and put in the reports): the err, where the worst element is and
        both values there, and the output's statistics."""
        err = "n/a" if self.err is None else f"{self.err:g}"
        lines = [
            f"AssertEqual: err={err} (name={self.name}) FAILED (maxerr={self.maxerr:g})"
            + (f": {self.reason}" if self.reason else "")
        ]
        if self.worst_index is not None:
            lines.append(
                f"  worst element at {list(self.worst_index)}: "
                f"expect={value_text(self.expect_value)}, get={value_text(self.got_value)}"
            )
        stats = self.stats
        if "abs_err_max" in stats:
            lines.append(
                f"  {stats['dtype']}{stats['shape']}: abs err max={stats['abs_err_max']:g} "
                f"mean={stats['abs_err_mean']:g}; "
                f"expect min={stats['expect_min']:g} max={stats['expect_max']:g} mean={stats['expect_mean']:g}; "
                f"get min={stats['get_min']:g} max={stats['get_max']:g} mean={stats['get_mean']:g}"
            )
        return lines


def value_text(value: Any) -> str:
    """An element as a person reads it: ``0.0935``, not ``np.float32(0.0935)`` (numpy scalars print their shortest
    exact form); text quoted."""
    return repr(value) if isinstance(value, (str, bytes)) else str(value)


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _stats(expect: np.ndarray, got: np.ndarray) -> dict[str, Any]:
    if expect.dtype.kind not in "biuf" or got.dtype.kind not in "biuf" or not expect.size or not got.size:
        return {}
    e = expect.astype(np.float64)
    g = got.astype(np.float64)
    finite = np.isfinite(e).all() and np.isfinite(g).all()
    out: dict[str, Any] = {
        "shape": list(expect.shape),
        "dtype": str(expect.dtype),
        "expect_min": _plain(e.min()) if finite else None,
        "expect_max": _plain(e.max()) if finite else None,
        "expect_mean": _plain(e.mean()) if finite else None,
        "get_min": _plain(g.min()) if finite else None,
        "get_max": _plain(g.max()) if finite else None,
        "get_mean": _plain(g.mean()) if finite else None,
    }
    if finite and e.shape == g.shape:
        diff = np.abs(e - g)
        out["abs_err_max"] = _plain(diff.max())
        out["abs_err_mean"] = _plain(diff.mean())
    return out


def assert_equal(name: str, expect: np.ndarray, got: np.ndarray, maxerr: float) -> OutputCheck:
    """Check one output against its expected value with the AssertEqual metric."""
    expect = np.asarray(expect)
    got = np.asarray(got)
    stats = _stats(expect, got)
    if expect.shape != got.shape:
        return OutputCheck(
            name, False, None, maxerr, f"shape differs: expect {list(expect.shape)}, get {list(got.shape)}", stats=stats
        )
    if expect.dtype != got.dtype and not (expect.dtype.kind in "OUS" and got.dtype.kind in "OUS"):
        return OutputCheck(
            name, False, None, maxerr, f"dtype differs: expect {expect.dtype}, get {got.dtype}", stats=stats
        )
    if expect.size == 0:
        return OutputCheck(name, True, 0.0, maxerr, stats=stats)
    if expect.dtype.kind not in "fc":
        differ = expect != got
        count = int(np.count_nonzero(differ))
        if not count:
            return OutputCheck(name, True, 0.0, maxerr, stats=stats)
        index = tuple(int(i) for i in np.unravel_index(int(np.argmax(differ)), expect.shape))
        return OutputCheck(
            name,
            False,
            float(count),
            maxerr,
            f"{count} of {expect.size} elements differ (exact comparison)",
            index,
            expect[index],
            got[index],
            stats,
        )
    e = expect.astype(np.float64)
    g = got.astype(np.float64)
    bad = ~(np.isfinite(e) & np.isfinite(g))
    if bad.any():
        index = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), expect.shape))
        side = "expect" if not np.isfinite(e[index]) else "get"
        return OutputCheck(
            name,
            False,
            None,
            maxerr,
            f"NaN or infinity in {side} ({int(np.count_nonzero(bad))} elements)",
            index,
            expect[index],
            got[index],
            stats,
        )
    err_each = np.abs(e - g) / np.maximum(np.minimum(np.abs(e), np.abs(g)), 1.0)
    flat = int(np.argmax(err_each))
    index = tuple(int(i) for i in np.unravel_index(flat, expect.shape))
    err = float(err_each.reshape(-1)[flat])
    return OutputCheck(name, err <= maxerr, err, maxerr, None, index, expect[index], got[index], stats)


HINT_LIMIT = 0.5  # no --maxerr hint at or above this: an error that large means the outputs are destroyed


def suggest_maxerr(err: float) -> float:
    """A round --maxerr a little above a measured error: 1, 2 or 5 times a power of ten."""
    if err <= 0:
        return 0.0
    exponent = math.floor(math.log10(err * 1.2))
    for step in (1, 2, 5, 10):
        candidate = step * 10.0**exponent
        if candidate >= err * 1.2:
            return float(f"{candidate:.1g}")
    return float(f"{10.0 ** (exponent + 1):.1g}")


def maxerr_hint(err: float | None, scale: float = 1.0) -> str | None:
    """A ``--maxerr`` that would pass, only where the error is small against the outputs' own scale.

    Args:
        err: the worst AssertEqual error measured.
        scale: the largest magnitude of the expected outputs (the metric is
            absolute below 1, so the scale counts from 1).

    Returns:
        ``"--maxerr X would pass"``, or None for an error that means the
        outputs are destroyed (non-finite, at or above :data:`HINT_LIMIT`, or
        over a tenth of the outputs' scale).
    """
    if err is None or not math.isfinite(err) or err <= 0:
        return None
    suggested = suggest_maxerr(err)
    if suggested >= HINT_LIMIT or err > 0.1 * max(scale, 1.0):
        return None
    return f"--maxerr {suggested:g} would pass"
