"""The AssertEqual metric (docs/assertion.md).

Per output::

    err = max over elements of |expect - get| / max(min(|expect|, |get|), 1)

or, with another error statistic (``error_stat``: ``p99``, ``mean``, ``median``), that statistic of the same
element errors: a detector's boxes in pixels beside scores in 0..1 may hold a few large errors that no kept
detection shows.

:func:`measure` is the one implementation, used by ``mgerun``'s checks,
``mgediff`` and the precision searches alike. Shapes must match; floats of two
widths compare by value; a NaN or infinity counts as equal only where both
sides hold the same one; integer, bool and string outputs compare exactly. An
output passes when ``err <= maxerr`` (exact kinds: when every element is equal).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.bounds import ERROR_STATS, err_text
from ..base.jsontypes import is_number
from ..base.naming import option_name

FLOAT16_MAX = float(np.finfo(np.float16).max)  # 65504: float16's largest finite value, the one definition


def summarize(each: np.ndarray, stat: str) -> float:
    """One statistic of an output's element errors."""
    if stat == "max":
        return float(each.max())
    if stat == "p99":
        return float(np.percentile(each, 99))
    if stat == "mean":
        return float(each.mean(dtype=np.float64))
    if stat == "median":
        return float(np.median(each))
    raise ValueError(f"unknown error statistic {stat!r}: one of {', '.join(ERROR_STATS)}")


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
        stat: the statistic of the element errors ``err`` is and ``maxerr`` bounds (docs/assertion.md#error-statistics).
        largest: the largest element error, whatever the statistic (none: not computed, or not finite).
        worst_path: for a sequence, a map or an optional: where the worst element is (``[3][1]``:
            element 3 of the sequence, key 1 of its map; :mod:`mgedump.measure.structured`).
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
    stat: str = "max"
    worst_path: str | None = None
    largest: float | None = None

    def to_json(self) -> dict[str, Any]:
        path = {"worst_path": self.worst_path} if self.worst_path is not None else {}
        return {
            **path,
            "name": self.name,
            "passed": self.passed,
            "err": self.err,
            "maxerr": self.maxerr,
            "reason": self.reason,
            "worst_index": None if self.worst_index is None else list(self.worst_index),
            "expect": json_value(self.expect_value),
            "get": json_value(self.got_value),
            "stats": self.stats,
            "failure": None if self.passed else self.failure_lines(),
            "error_stat": self.stat,
            **({"max_err": self.largest} if self.stat != "max" else {}),
        }

    def failure_lines(self) -> list[str]:
        """How a failed output is printed (and put in the reports): the err, where the worst element is and
        both values there, and the output's statistics."""
        lines = [
            f"{err_text(self.err, self.stat, self.largest)} (name={self.name}) FAILED "
            f"(maxerr={self.maxerr:g})" + (f": {self.reason}" if self.reason else "")
        ]
        located = self.worst_index is not None or self.worst_path is not None
        if located and (self.expect_value is not None or self.got_value is not None):  # a broken structure has none
            where = self.worst_path if self.worst_path is not None else list(self.worst_index or ())
            lines.append(
                f"  worst element at {where}: expect={value_text(self.expect_value)}, get={value_text(self.got_value)}"
            )
        stats = self.stats
        if "abs_err_max" in stats:
            n = {key: number_text(value) for key, value in stats.items() if key not in ("dtype", "shape")}
            lines.append(
                f"  {stats['dtype']}{stats['shape']}: abs err max={n['abs_err_max']} mean={n['abs_err_mean']}; "
                f"expect min={n['expect_min']} max={n['expect_max']} mean={n['expect_mean']}; "
                f"get min={n['get_min']} max={n['get_max']} mean={n['get_mean']}"
            )
        return lines


def number_text(value: Any) -> str:
    """A statistic as people read it: ``0.00123``, ``inf`` (a mean or difference of finite values that overflows),
    ``-`` when there is none."""
    if value is None:
        return "-"
    if is_number(value):
        return f"{value:g}"
    return str(value)


def value_text(value: Any) -> str:
    """An element as a person reads it: ``0.0935``, not ``np.float32(0.0935)`` (numpy scalars print their shortest
    exact form); text quoted."""
    return repr(value) if isinstance(value, (str, bytes)) else str(value)


def json_value(value: Any) -> Any:
    """A value as JSON holds it: numpy scalars as Python numbers, non-finite floats named (``\"inf\"``), bytes
    decoded."""
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
    with np.errstate(all="ignore"):  # a sum or a difference of finite float64 values can overflow: inf, as a value
        return _stats_of(expect, e, g, bool(finite))


def _stats_of(expect: np.ndarray, e: np.ndarray, g: np.ndarray, finite: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "shape": list(expect.shape),
        "dtype": str(expect.dtype),
        "expect_min": json_value(e.min()) if finite else None,
        "expect_max": json_value(e.max()) if finite else None,
        "expect_mean": json_value(e.mean()) if finite else None,
        "get_min": json_value(g.min()) if finite else None,
        "get_max": json_value(g.max()) if finite else None,
        "get_mean": json_value(g.mean()) if finite else None,
    }
    if finite and e.shape == g.shape:
        diff = np.abs(e - g)
        out["abs_err_max"] = json_value(diff.max())
        out["abs_err_mean"] = json_value(diff.mean())
    return out


@dataclass
class Measure:
    """The AssertEqual metric of one pair of tensors: the one definition that ``mgerun``'s checks, ``mgediff``
    and the precision searches all use (docs/assertion.md).

    Attributes:
        err: the largest element error ``|e - g| / max(min(|e|, |g|), 1)``; ``inf`` when the tensors cannot agree
            (shapes differ, kinds of value differ, strings differ, a NaN or infinity on one side only).
        exact: the values are not floats (integers, bool, strings): they pass only when every element is equal.
        reason: why they cannot agree, or how many elements differ for an exact comparison.
        index: where the worst element is; expect_value, got_value: the two values there.
        expect_absmax: the largest finite magnitude in the expected tensor.
        got_inf_where_expect_finite: the tensor checked holds an infinity where the expected one is finite.
        path: for a sequence, a map or an optional, where the worst element is (``[3][1]``); ``index`` is then None.
        largest: the largest element error, whatever the statistic ``err`` is (none: the tensors cannot agree).
    """

    err: float
    exact: bool = False
    reason: str | None = None
    index: tuple[int, ...] | None = None
    expect_value: Any = None
    got_value: Any = None
    expect_absmax: float = 0.0
    got_inf_where_expect_finite: bool = False
    path: str | None = None
    largest: float | None = None

    def passes(self, maxerr: float) -> bool:
        """Within maxerr: ``err <= maxerr``, and every element equal for an exact comparison."""
        return self.err == 0.0 if self.exact else self.err <= maxerr


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def measure(
    expect: np.ndarray, got: np.ndarray, labels: tuple[str, str] = ("expect", "get"), stat: str = "max"
) -> Measure:
    """The AssertEqual metric of ``got`` against ``expect``.

    Floats of different widths (float16 against float32) are compared by value; a non-finite element counts as
    equal where both sides hold the same one (NaN and NaN, inf and inf) and as an infinite error where one side
    only holds it. Integers, bool and strings compare exactly: ``err`` is then the metric of the values (0 when
    all are equal) and :meth:`Measure.passes` asks for 0.

    Args:
        labels: what the two sides are called in the reasons (``mgediff`` says A and B).
        stat: the statistic of the element errors that ``err`` is (:data:`ERROR_STATS`); the worst element is
            the largest whatever the statistic.
    """
    with np.errstate(all="ignore"):  # differences of finite float64 values may overflow: an infinite error
        return _measure(np.asarray(expect), np.asarray(got), labels, stat)


def _measure(expect: np.ndarray, got: np.ndarray, labels: tuple[str, str], stat: str = "max") -> Measure:
    expect = np.asarray(expect)
    got = np.asarray(got)
    e_name, g_name = labels
    if expect.shape != got.shape:
        return Measure(math.inf, reason=f"shape differs: {e_name} {list(expect.shape)}, {g_name} {list(got.shape)}")
    text_e, text_g = expect.dtype.kind in "OUS", got.dtype.kind in "OUS"
    if text_e != text_g:
        return Measure(math.inf, reason=f"dtype differs: {e_name} {expect.dtype}, {g_name} {got.dtype}")
    if expect.size == 0:
        return Measure(0.0, exact=expect.dtype.kind not in "fc")
    if text_e:
        differ = expect.astype(object) != got.astype(object)
        count = int(np.count_nonzero(differ))
        if not count:
            return Measure(0.0, exact=True)
        index = _unravel(int(np.argmax(differ)), expect.shape)
        reason: str | None = f"{count} of {expect.size} elements differ (exact comparison)"
        return Measure(math.inf, True, reason, index, expect[index], got[index])
    if "c" in (expect.dtype.kind, got.dtype.kind):
        # complex values compared as complex: |e - g| / max(min(|e|, |g|), 1) with complex magnitudes
        return _masked(expect, got, expect.astype(np.complex128), got.astype(np.complex128), False, labels, stat)
    exact = expect.dtype.kind not in "fc" and got.dtype.kind not in "fc"
    if expect.dtype == got.dtype and np.array_equal(expect, got):
        return Measure(0.0, exact, expect_absmax=_absmax(expect) if expect.dtype.kind == "f" else 0.0)
    if exact and expect.dtype.kind == "b":
        differ = expect != got
        index = _unravel(int(np.argmax(differ)), expect.shape)
        reason = f"{int(np.count_nonzero(differ))} of {expect.size} elements differ (exact comparison)"
        return Measure(1.0, True, reason, index, expect[index], got[index])
    # float32 arithmetic is exact enough for the metric when neither side is wider
    wide = np.float64 if max(expect.dtype.itemsize, got.dtype.itemsize) > 4 or exact else np.float32
    x = expect.astype(wide, copy=False)
    y = got.astype(wide, copy=False)
    fx, fy = np.isfinite(x), np.isfinite(y)
    if fx.all() and fy.all():  # the common case: no masks, buffers reused
        each = np.abs(x, out=np.empty(x.shape, wide))  # out= keeps 0-d tensors arrays
        absmax = float(each.max())
        denominator = np.minimum(each, np.abs(y), out=np.empty(x.shape, wide))
        np.maximum(denominator, 1.0, out=denominator)
        np.subtract(x, y, out=each)
        np.abs(each, out=each)
        each /= denominator
        flat = int(np.argmax(each))
        index = _unravel(flat, expect.shape)
        largest = float(each.reshape(-1)[flat])
        err = largest if stat == "max" or exact else summarize(each, stat)
        reason = None
        if exact and err:
            reason = f"{int(np.count_nonzero(expect != got))} of {expect.size} elements differ (exact comparison)"
        return Measure(err, exact, reason, index, expect[index], got[index], absmax, largest=largest)
    return _masked(expect, got, x, y, exact, labels, stat)


def _masked(
    expect: np.ndarray,
    got: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    exact: bool,
    labels: tuple[str, str],
    stat: str = "max",
) -> Measure:
    """The metric where some element is not finite (``x``, ``y``: the values in the arithmetic's type, real or
    complex): the same NaN or infinity on both sides agrees, one on one side only is an infinite error."""
    fx, fy = np.isfinite(x), np.isfinite(y)
    absmax = float(np.abs(x[fx]).max()) if fx.any() else 0.0
    inf_new = bool(np.any(np.isinf(y) & fx))
    same_nonfinite = ~fx & ~fy & ((np.isnan(x) & np.isnan(y)) | (x == y))
    broken = ~(fx & fy) & ~same_nonfinite
    if broken.any():
        index = _unravel(int(np.argmax(broken)), expect.shape)
        side = labels[1] if fx[index] else labels[0]
        reason = f"NaN or infinity in {side} only ({int(broken.sum())} elements)"
        return Measure(math.inf, exact, reason, index, expect[index], got[index], absmax, inf_new)
    both = fx & fy
    each = np.where(both, np.abs(np.subtract(x, y)) / np.maximum(np.minimum(np.abs(x), np.abs(y)), 1.0), 0.0)
    flat = int(np.argmax(each))
    index = _unravel(flat, expect.shape)
    largest = float(each.reshape(-1)[flat])
    err = largest if stat == "max" or exact else summarize(np.asarray(each), stat)
    return Measure(err, exact, None, index, expect[index], got[index], absmax, inf_new, largest=largest)


def _absmax(a: np.ndarray) -> float:
    finite = np.isfinite(a)
    return float(np.abs(a if finite.all() else a[finite]).max(initial=0.0))


def assert_equal(name: str, expect: np.ndarray, got: np.ndarray, maxerr: float, stat: str = "max") -> OutputCheck:
    """Check one output against its expected value with the AssertEqual metric (:func:`measure`), the bound
    applying to ``stat`` of the element errors."""
    expect = np.asarray(expect)
    got = np.asarray(got)
    stats = _stats(expect, got)
    if expect.dtype != got.dtype and not (expect.dtype.kind in "OUS" and got.dtype.kind in "OUS"):
        # the bundle records each output's dtype: another one is a different model, whatever the values
        reason = f"dtype differs: expect {expect.dtype}, get {got.dtype}"
        return OutputCheck(name, False, None, maxerr, reason, stats=stats, stat=stat)
    m = measure(expect, got, stat=stat)
    if not math.isfinite(m.err) and m.reason is None:
        m.reason = "the difference of finite values overflows (inf)"
    passed = m.passes(maxerr)
    err = m.err if math.isfinite(m.err) else None
    worst = m.err if m.largest is None else m.largest  # none apart: equal, exact, or no element
    largest = worst if math.isfinite(worst) else None
    return OutputCheck(
        name, passed, err, maxerr, m.reason, m.index, m.expect_value, m.got_value, stats, stat, largest=largest
    )


def by_value(want: Any, have: Any) -> Any:
    """An output in the reference's float dtype, to be compared by value: a variant's float16 output held to the
    float32 outputs of the model it was made from (docs/bundle.md, version 2)."""
    arrays = isinstance(want, np.ndarray) and isinstance(have, np.ndarray)
    if arrays and want.dtype != have.dtype and want.dtype.kind == "f" and have.dtype.kind == "f":
        return have.astype(want.dtype)
    return have


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
        ``"maxerr X would pass"`` (``--maxerr X`` on the command line), or None for an error that means the
        outputs are destroyed (non-finite, at or above :data:`HINT_LIMIT`, or
        over a tenth of the outputs' scale).
    """
    if err is None or not math.isfinite(err) or err <= 0:
        return None
    suggested = suggest_maxerr(err)
    if suggested >= HINT_LIMIT or err > 0.1 * max(scale, 1.0):
        return None
    return f"{option_name('maxerr')} {suggested:g} would pass"
