"""An int8 candidate's outputs measured against the model as given: the AssertEqual error per test case (what the
search decides on) and, per output, the statistics a user needs to pick ``--maxerr`` knowingly (largest, 99th
percentile and mean absolute error, top-1 agreement for a score vector)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..base.errors import MgeError, OptimizeError
from ..measure.assertion import assert_equal
from ..model.runtime import infer, open_session, tensor_infos, to_numpy_outputs
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
        return asdict(self)

    def line(self) -> str:
        top1 = "" if self.top1_agreement is None else f", top-1 agreement {self.top1_agreement:.1%} of {self.top1_rows}"
        return (
            f"output {self.name!r}: max abs err {self.max_abs_err:.3g}, p99 {self.p99_abs_err:.3g}, "
            f"mean {self.mean_abs_err:.3g} (AssertEqual err {self.assert_err:.3g}){top1}"
        )


def run_all(path: str, cases: Sequence[Mapping[str, np.ndarray]], label: str) -> list[list[np.ndarray]]:
    """Every test case's outputs from a plain session on the int8 model.

    Raises:
        OptimizeError: the int8 model fails to run on a test case."""
    session = open_session(path, label=label)
    outputs = tensor_infos(session.get_outputs(), "output")
    got = []
    for feeds in cases:
        try:
            got.append(to_numpy_outputs(infer(session, dict(feeds)), outputs))
        except MgeError as exc:
            raise OptimizeError(f"the int8 model fails to run on the test data: {exc.message}") from None
    return got


@dataclass
class Measure:
    """A candidate's outputs against the expected ones."""

    errs: list[dict[str, float]]  # per test case: output -> AssertEqual err (inf when it cannot agree)
    scale: float

    @property
    def worst(self) -> tuple[float, str, int]:
        """(err, output, test case) of the worst output."""
        return worst_output(self.errs)

    def passes(self, maxerr: float, bounds: Mapping[str, float] | None = None) -> bool:
        """Every output within its bound: its own (``bounds``), else ``maxerr``."""
        own = bounds or {}
        return all(err <= own.get(name, maxerr) for errs in self.errs for name, err in errs.items())


def measure(
    names: Sequence[str], expected: Sequence[Sequence[np.ndarray]], got: Sequence[Sequence[np.ndarray]]
) -> Measure:
    """A candidate's outputs against the expected ones: each output's AssertEqual error per test case, and the
    outputs' largest magnitude."""
    errs, scale = [], 0.0
    for want_case, got_case in zip(expected, got, strict=True):
        case = {}
        for name, want, have in zip(names, want_case, got_case, strict=True):
            check = assert_equal(name, want, have, 0.0)
            case[name] = float("inf") if check.err is None else check.err
            if want.dtype.kind == "f" and want.size:
                finite = np.abs(want[np.isfinite(want)])
                scale = max(scale, float(finite.max(initial=0.0)))
        errs.append(case)
    return Measure(errs, scale)


def output_stats(
    names: Sequence[str], expected: Sequence[Sequence[np.ndarray]], got: Sequence[Sequence[np.ndarray]]
) -> list[OutputStats]:
    """Per output, over every test case: max, 99th percentile and mean absolute error, the AssertEqual error, and
    top-1 agreement when the output is a score vector (float, its last axis 2 or more long)."""
    stats = []
    for k, name in enumerate(names):
        diffs, agree, rows, worst, scale = [], 0, 0, 0.0, 0.0
        floats = True
        for want_case, got_case in zip(expected, got, strict=True):
            want, have = np.asarray(want_case[k]), np.asarray(got_case[k])
            check = assert_equal(name, want, have, 0.0)
            worst = max(worst, float("inf") if check.err is None else check.err)
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
