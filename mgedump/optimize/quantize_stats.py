"""An int8 candidate's outputs measured against the model as given: the AssertEqual error per test case (what the
search decides on) and, per output, the statistics a user needs to pick ``--maxerr`` knowingly (largest, 99th
percentile and mean absolute error, top-1 agreement for a score vector)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..base.bounds import Bounds
from ..measure.assertion import assert_equal
from .isolate import worst_output

TOP1_MIN_CLASSES = 2  # an output whose last axis holds this many scores or more is a score vector
DESTROYED_SHARE = 0.25  # an absolute error beyond this share of an output's largest magnitude destroys it


@dataclass
class OutputStats:
    """One output of the int8 model against the model as given, over every test case."""

    name: str
    max_abs_err: float
    p99_abs_err: float
    mean_abs_err: float
    assert_err: float
    top1_agreement: float | None = None  # the share of score vectors whose best class is unchanged
    top1_rows: int = 0
    scale: float = 0.0  # the largest magnitude of the expected output
    stat: str = "max"  # the statistic the output's bound applies to
    stat_err: float | None = None  # the AssertEqual metric under that statistic (another than max)

    @property
    def destroyed(self) -> bool:
        """int8 has taken the output's meaning: a non-finite error, an error beyond a quarter of the output's own
        scale, or the best class changed on half the score vectors or more."""
        return (
            not np.isfinite(self.max_abs_err)
            or not np.isfinite(self.assert_err)
            or self.max_abs_err > DESTROYED_SHARE * max(self.scale, 1e-6)
            or (self.top1_agreement is not None and self.top1_agreement <= 0.5)
        )

    def to_json(self) -> dict[str, Any]:
        found = asdict(self)
        if self.stat == "max":  # the bound on the largest error: the record as it always was
            del found["stat"], found["stat_err"]
        return found


@dataclass
class Measure:
    """A candidate's outputs against the expected ones."""

    errs: list[dict[str, float]]  # per test case: output -> AssertEqual err (inf when it cannot agree)
    scale: float

    @property
    def worst(self) -> tuple[float, str, int]:
        """(err, output, test case) of the worst output."""
        return worst_output(self.errs)

    def passes(self, bounds: Bounds) -> bool:
        """Every output within its bound."""
        return all(err <= bounds.of(name).maxerr for errs in self.errs for name, err in errs.items())


def measure(
    names: Sequence[str],
    expected: Sequence[Sequence[np.ndarray]],
    got: Sequence[Sequence[np.ndarray]],
    stats: Mapping[str, str] | None = None,
) -> Measure:
    """A candidate's outputs against the expected ones: each output's AssertEqual error per test case (under the
    statistic ``stats`` gives it, else the largest), and the outputs' largest magnitude."""
    errs, scale = [], 0.0
    stats = stats or {}
    for want_case, got_case in zip(expected, got, strict=True):
        case = {}
        for name, want, have in zip(names, want_case, got_case, strict=True):
            check = assert_equal(name, want, have, 0.0, stats.get(name, "max"))
            case[name] = float("inf") if check.err is None else check.err
            if want.dtype.kind == "f" and want.size:
                finite = np.abs(want[np.isfinite(want)])
                scale = max(scale, float(finite.max(initial=0.0)))
        errs.append(case)
    return Measure(errs, scale)


def output_stats(
    names: Sequence[str],
    expected: Sequence[Sequence[np.ndarray]],
    got: Sequence[Sequence[np.ndarray]],
    error_stats: Mapping[str, str] | None = None,
) -> list[OutputStats]:
    """Per output, over every test case: max, 99th percentile and mean absolute error, the AssertEqual error (and
    under the output's own statistic, ``error_stats``, when it has another), and top-1 agreement when the output is a
    score vector (float, its last axis 2 or more long)."""
    stats = []
    for k, name in enumerate(names):
        diffs, agree, rows, worst, scale = [], 0, 0, 0.0, 0.0
        stat = (error_stats or {}).get(name, "max")
        by_stat = 0.0
        floats = True
        for want_case, got_case in zip(expected, got, strict=True):
            want, have = np.asarray(want_case[k]), np.asarray(got_case[k])
            check = assert_equal(name, want, have, 0.0)
            worst = max(worst, float("inf") if check.err is None else check.err)
            if stat != "max":
                under = assert_equal(name, want, have, 0.0, stat)
                by_stat = max(by_stat, float("inf") if under.err is None else under.err)
            if want.dtype.kind != "f" or want.shape != have.shape:
                floats = floats and want.dtype.kind == "f"
                continue
            diffs.append(np.abs(want.astype(np.float64) - have.astype(np.float64)).reshape(-1))
            finite = want[np.isfinite(want)]
            scale = max(scale, float(np.abs(finite).max(initial=0.0)))
            if _scores(want):
                a = want.reshape(-1, want.shape[-1]).argmax(axis=-1)
                b = have.reshape(-1, have.shape[-1]).argmax(axis=-1)
                agree += int((a == b).sum())
                rows += int(a.size)
        every = np.concatenate(diffs) if diffs else np.zeros(0)
        if every.size and not np.isfinite(every).all():
            every = np.append(every[np.isfinite(every)], np.inf)
        stats.append(
            OutputStats(
                name,
                float(every.max()) if every.size else 0.0,
                float(np.percentile(every, 99)) if every.size else 0.0,
                float(every.mean()) if every.size else 0.0,
                worst,
                (agree / rows) if rows and floats else None,
                rows if floats else 0,
                scale,
                stat,
                by_stat if stat != "max" else None,
            )
        )
    return stats


def _scores(value: np.ndarray) -> bool:
    """Whether an output holds score vectors along its last axis: a batch of them ([N, C]), or probabilities (each
    vector non-negative, summing to 1) in more dims ([N, T, C]). A detector's [N, 4 + C, boxes] is neither."""
    if value.ndim < 2 or value.shape[-1] < TOP1_MIN_CLASSES or not np.isfinite(value).all():
        return False
    if value.ndim == 2:
        return True
    return bool((value >= 0).all() and np.allclose(value.sum(axis=-1), 1.0, atol=1e-2))
