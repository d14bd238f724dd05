"""Timing runs: the timed loop, per-iteration latencies and their statistics.

Three ways to time one test case, all in :func:`time_runs`:

- ``iters`` runs one after another (the default): the loop does nothing but
  call the runner's ``run`` between two clock reads;
- with ``duration_s``, runs go on until that many seconds have passed, and at
  least ``iters`` of them;
- with ``concurrency`` N, N threads issue runs on the one runner at the same
  time (onnxruntime releases the GIL while it computes); the figures are then
  the latency of each run under that load, and throughput is runs per second
  of wall time.

Warm-up runs are timed too, and kept apart: the first of them is the cold
first-run latency.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.quantiles import median, quantile
from ..model.runner import Runner
from ..model.runtime import run_error

PROGRESS_AFTER_S = 1.0

Progress = Callable[[str, int, int], None]
"""``progress(label, done, total)``: called during timing runs expected to last over a second."""


def latency_stats(samples: Sequence[float]) -> dict[str, float | int]:
    """count, min, median, mean, p90, p99, max and (population) stddev; stddev of one sample is 0."""
    if not samples:
        return {"count": 0}
    values = np.asarray(samples, dtype=np.float64)
    ordered = sorted(float(v) for v in samples)
    return {
        "count": int(values.size),
        "min": ordered[0],
        "median": median(ordered),
        "mean": float(values.mean()),
        "p90": quantile(ordered, 0.90),
        "p99": quantile(ordered, 0.99),
        "max": ordered[-1],
        "stddev": float(values.std()) if values.size > 1 else 0.0,
    }


@dataclass
class Timing:
    """Per-iteration times of one test case at one batch size.

    Attributes:
        batch: the first input's leading dim.
        latencies_ms: every timed run, in the order they ended.
        warmup_ms: every warm-up run (the first is the cold first run).
        concurrency: how many threads issued runs at once.
        wall_s: wall time of the timed runs (all threads), for throughput under load.
    """

    batch: int
    latencies_ms: list[float]
    warmup_ms: list[float] = field(default_factory=list)
    concurrency: int = 1
    wall_s: float | None = None

    def stats(self) -> dict[str, float | int]:
        return latency_stats(self.latencies_ms)

    def throughput(self) -> dict[str, float | None]:
        """Inferences per second and, with batch > 1, samples per second: from the mean latency for runs one
        after another, from the runs per second of wall time under concurrent load."""
        if not self.latencies_ms:
            return {"inferences_per_s": None, "samples_per_s": None}
        if self.concurrency > 1 and self.wall_s:
            per_s = len(self.latencies_ms) / self.wall_s
        else:
            per_s = 1e3 / float(np.mean(self.latencies_ms))
        return {"inferences_per_s": per_s, "samples_per_s": per_s * self.batch if self.batch > 1 else None}

    def first_run_ms(self) -> float | None:
        """The first run's latency: the first warm-up run, else the first timed run."""
        runs = self.warmup_ms or self.latencies_ms
        return runs[0] if runs else None

    def to_json(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "concurrency": self.concurrency,
            "latency_ms": self.stats(),
            **self.throughput(),
            "wall_s": self.wall_s,
            "latencies_ms": self.latencies_ms,
            "warmup_ms": self.warmup_ms,
        }


def batch_of(feeds: dict[str, np.ndarray]) -> int:
    first = next(iter(feeds.values()), None)  # a sequence input has no batch dim: 1
    return int(first.shape[0]) if isinstance(first, np.ndarray) and first.ndim >= 1 else 1


def time_runs(
    runner: Runner,
    feeds: dict[str, np.ndarray],
    iters: int,
    warmup: int,
    progress: Progress | None = None,
    label: str = "",
    *,
    duration_s: float = 0.0,
    concurrency: int = 1,
    max_runs: int | None = None,
) -> tuple[Timing, list[Any] | None]:
    """Run warmup runs, then the timed runs; return their timing and the first run's outputs.

    Args:
        iters: timed runs (at least this many with ``duration_s``; in all, across threads).
        warmup: runs before timing, one after another; each is timed and kept apart.
        duration_s: go on until this many seconds of timed runs have passed.
        concurrency: threads issuing runs on the one runner at once.
        max_runs: with ``duration_s``, stop after this many timed runs even if time is left (every run's
            latency is kept: this bounds their memory).

    Raises:
        RunError: onnxruntime failed.
    """
    clock = time.perf_counter
    first = None
    warmup_ms = []
    try:
        for _ in range(warmup):
            start = clock()
            values = runner.run(feeds)
            warmup_ms.append((clock() - start) * 1e3)
            first = first if first is not None else values
        limit = max(iters, max_runs) if max_runs is not None else None
        load = _Load(runner, feeds, iters, duration_s, progress, label, limit)
        if concurrency > 1:
            latencies, wall_s, values = _concurrent(load, concurrency)
        elif duration_s > 0:
            latencies, wall_s, values = _for_duration(load)
        else:
            latencies, wall_s, values = _fixed(runner, feeds, iters, progress, label)
    except Exception as exc:
        raise run_error(exc, feeds) from None
    batch = batch_of(feeds)
    return Timing(batch, latencies, warmup_ms, concurrency, wall_s), first if first is not None else values


def _fixed(
    runner: Runner, feeds: dict[str, np.ndarray], iters: int, progress: Progress | None, label: str
) -> tuple[list[float], float, Any]:
    """``iters`` runs one after another. The loop does nothing but call ``runner.run`` between two clock reads
    (and, rarely, the progress callback), so it adds nothing measurable to what onnxruntime spends."""
    latencies = [0.0] * iters
    clock = time.perf_counter
    run_once = runner.run
    first = None
    ticking = False  # progress calls only when the first run says the loop is long
    next_tick = step = iters
    began = clock()
    for i in range(iters):
        start = clock()
        values = run_once(feeds)
        latencies[i] = (clock() - start) * 1e3
        if i == next_tick:
            progress(label, i, iters)  # type: ignore[misc]
            next_tick += step
        elif i == 0:
            first = values
            if progress is not None and latencies[0] * iters > PROGRESS_AFTER_S * 1e3:
                ticking = True
                step = max(1, int(100 / max(latencies[0], 1e-3)))  # about ten updates a second
                next_tick = step
                progress(label, 1, iters)
    wall_s = clock() - began
    if ticking:
        progress(label, iters, iters)  # type: ignore[misc]
    return latencies, wall_s, first


@dataclass(frozen=True)
class _Load:
    """A timing loop that goes on for a time (``duration_s``) as well as for ``iters`` runs, up to ``limit`` runs:
    what :func:`_for_duration` and :func:`_concurrent` take."""

    runner: Runner
    feeds: dict[str, np.ndarray]
    iters: int
    duration_s: float
    progress: Progress | None
    label: str
    limit: int | None


def _for_duration(load: _Load) -> tuple[list[float], float, Any]:
    """Runs one after another until ``duration_s`` has passed and ``iters`` have run; progress in seconds."""
    latencies: list[float] = []
    append = latencies.append
    clock = time.perf_counter
    run_once, feeds, iters, limit = load.runner.run, load.feeds, load.iters, load.limit
    progress, duration_s = load.progress, load.duration_s
    began = clock()
    end = began + duration_s
    first = run_once(feeds)  # the first timed run gives the outputs, and is timed like the others
    append((clock() - began) * 1e3)
    next_tick = began + 0.1
    shown = progress is not None and duration_s > PROGRESS_AFTER_S
    while True:
        start = clock()
        if (start >= end and len(latencies) >= iters) or (limit is not None and len(latencies) >= limit):
            break
        run_once(feeds)
        stop = clock()
        append((stop - start) * 1e3)
        if shown and stop >= next_tick:
            progress(f"{load.label} (s)", min(int(stop - began), int(duration_s)), int(duration_s))  # type: ignore[misc]
            next_tick = stop + 0.1
    wall_s = clock() - began
    if shown:
        progress(f"{load.label} (s)", int(duration_s), int(duration_s))  # type: ignore[misc]
    return latencies, wall_s, first


def _show(progress: Progress, label: str, elapsed: float, duration_s: float, done: int, iters: int) -> None:
    """Progress of a load run: in seconds when it is time-bounded, in runs otherwise."""
    if duration_s > 0:
        progress(f"{label} (s)", min(int(elapsed), int(duration_s)), int(duration_s))
    else:
        progress(label, min(done, iters), iters)


def _concurrent(load: _Load, concurrency: int) -> tuple[list[float], float, Any]:
    """``concurrency`` threads issuing runs on one runner until ``iters`` runs (in all) are done and
    ``duration_s`` has passed (or ``limit`` runs are done). The main thread only waits, and shows progress."""
    runner, feeds, iters, limit = load.runner, load.feeds, load.iters, load.limit
    progress, label, duration_s = load.progress, load.label, load.duration_s
    clock = time.perf_counter
    tickets = itertools.count()  # next() on it is atomic: each run takes one ticket
    per_thread: list[list[tuple[float, float]]] = [[] for _ in range(concurrency)]  # (end, ms) of each run
    firsts: list[Any] = [None] * concurrency
    failed: list[BaseException] = []
    stop = threading.Event()
    start_line = threading.Barrier(concurrency + 1)
    began = [0.0]

    def worker(k: int) -> None:
        own = per_thread[k]
        run_once = runner.run
        start_line.wait()
        try:
            while not stop.is_set():
                ticket = next(tickets)
                start = clock()
                if (ticket >= iters and start - began[0] >= duration_s) or (limit is not None and ticket >= limit):
                    break
                values = run_once(feeds)
                end = clock()
                own.append((end, (end - start) * 1e3))
                if firsts[k] is None:
                    firsts[k] = values
        except BaseException as exc:  # handed to the main thread, which raises it
            failed.append(exc)
            stop.set()

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(concurrency)]
    for thread in threads:
        thread.start()
    began[0] = clock()
    start_line.wait()
    shown = False
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.1)
                if progress is not None and clock() - began[0] > PROGRESS_AFTER_S:
                    shown = True
                    _show(progress, label, clock() - began[0], duration_s, sum(map(len, per_thread)), iters)
    finally:  # an interrupt (Ctrl-C, SIGTERM) stops the workers too
        stop.set()
    wall_s = clock() - began[0]
    if shown:
        _show(progress, label, duration_s, duration_s, iters, iters)  # type: ignore[arg-type]
    if failed:
        raise failed[0]
    latencies = [ms for _, ms in sorted(run for own in per_thread for run in own)]  # in the order they ended
    return latencies, wall_s, next((f for f in firsts if f is not None), None)
