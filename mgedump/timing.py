"""Timing runs: the timed loop, per-iteration latencies and their statistics."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .runtime import run, run_error

PROGRESS_AFTER_S = 1.0

Progress = Callable[[str, int, int], None]
"""``progress(label, done, total)``: called during timing runs expected to last over a second."""


def latency_stats(samples: Sequence[float]) -> dict[str, float | int]:
    """count, min, median, mean, p90, p99, max and (population) stddev; stddev of one sample is 0."""
    if not samples:
        return {"count": 0}
    values = np.asarray(samples, dtype=np.float64)
    return {
        "count": int(values.size),
        "min": float(values.min()),
        "median": float(np.median(values)),
        "mean": float(values.mean()),
        "p90": float(np.percentile(values, 90)),
        "p99": float(np.percentile(values, 99)),
        "max": float(values.max()),
        "stddev": float(values.std()) if values.size > 1 else 0.0,
    }


@dataclass
class Timing:
    """Per-iteration times of one test case at one batch size."""

    batch: int
    latencies_ms: list[float]

    def stats(self) -> dict[str, float | int]:
        return latency_stats(self.latencies_ms)

    def throughput(self) -> dict[str, float | None]:
        """Inferences per second (from the mean latency) and, with batch > 1, samples per second."""
        if not self.latencies_ms:
            return {"inferences_per_s": None, "samples_per_s": None}
        per_s = 1e3 / float(np.mean(self.latencies_ms))
        return {"inferences_per_s": per_s, "samples_per_s": per_s * self.batch if self.batch > 1 else None}

    def to_json(self) -> dict[str, Any]:
        return {"batch": self.batch, "latency_ms": self.stats(), **self.throughput(), "latencies_ms": self.latencies_ms}


def batch_of(feeds: dict[str, np.ndarray]) -> int:
    first = next(iter(feeds.values()), None)
    return int(first.shape[0]) if first is not None and first.ndim >= 1 else 1


def time_runs(
    session: Any,
    feeds: dict[str, np.ndarray],
    iters: int,
    warmup: int,
    progress: Progress | None = None,
    label: str = "",
) -> tuple[list[float], list[Any] | None]:
    """Run warmup untimed, then iters timed runs; return each timed run's ms and the first outputs.

    The timed loop does nothing but call ``session.run`` between two clock reads
    (and, rarely, the progress callback), so it adds nothing measurable to what
    onnxruntime spends.

    Raises:
        RunError: onnxruntime failed.
    """
    first = None
    for _ in range(warmup):
        values = run(session, feeds)
        first = first if first is not None else values
    latencies = [0.0] * iters
    clock = time.perf_counter
    run_once = session.run
    ticking = False  # progress calls only when the first run says the loop is long
    next_tick = step = iters
    try:
        for i in range(iters):
            start = clock()
            values = run_once(None, feeds)
            latencies[i] = (clock() - start) * 1e3
            if i == next_tick:
                progress(label, i, iters)  # type: ignore[misc]
                next_tick += step
            elif i == 0:
                first = first if first is not None else values
                if progress is not None and latencies[0] * iters > PROGRESS_AFTER_S * 1e3:
                    ticking = True
                    step = max(1, int(100 / max(latencies[0], 1e-3)))  # about ten updates a second
                    next_tick = step
                    progress(label, 1, iters)
    except Exception as exc:
        raise run_error(exc, feeds) from None
    if ticking:
        progress(label, iters, iters)  # type: ignore[misc]
    return latencies, first
