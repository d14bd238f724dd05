"""The timed loop and its statistics. The loops that go on for a time, stop at a limit or show progress run on a
clock that only the runs move (:class:`Clock`), so what they count holds whatever the machine's load."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

from mgedump.base.errors import RunError
from mgedump.measure import timing
from mgedump.measure.timing import Timing, latency_stats, time_runs
from mgedump.model.runtime import open_runner
from tests.support import sample


def test_statistics():
    stats = latency_stats([4.0, 1.0, 3.0, 2.0])
    assert stats["count"] == 4 and stats["min"] == 1.0 and stats["max"] == 4.0
    assert stats["median"] == 2.5 and stats["mean"] == 2.5 and stats["stddev"] == pytest.approx(np.std([1, 2, 3, 4]))
    assert stats["min"] <= stats["p90"] <= stats["p99"] <= stats["max"]


def test_one_sample_has_zero_stddev_and_none_has_no_numbers():
    assert latency_stats([5.0])["stddev"] == 0.0
    assert latency_stats([]) == {"count": 0}


def test_throughput():
    assert Timing(1, [2.0, 2.0]).throughput() == {"inferences_per_s": 500.0, "samples_per_s": None}
    assert Timing(4, [2.0]).throughput() == {"inferences_per_s": 500.0, "samples_per_s": 2000.0}
    assert Timing(1, []).throughput() == {"inferences_per_s": None, "samples_per_s": None}


@pytest.fixture
def session():
    return open_runner(str(sample("cnn.onnx").path))


STEP_S = 1 / 64  # what a run moves the clock by: a power of two, so that the clock's sums are exact


class Clock:
    """A clock that only runs move: mgedump.measure.timing reads it in place of ``time.perf_counter``."""

    def __init__(self) -> None:
        self.now = 0.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


class Ticking:
    """The real runner; each of its runs moves the clock by :data:`STEP_S`."""

    def __init__(self, session, clock: Clock) -> None:
        self.session, self.clock = session, clock

    def run(self, feeds):
        values = self.session.run(feeds)
        self.clock.advance(STEP_S)
        return values


@pytest.fixture
def ticking(session, monkeypatch) -> Ticking:
    clock = Clock()
    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=clock))
    return Ticking(session, clock)


def test_time_runs_counts_and_returns_the_first_outputs(session):
    feeds = {"data": np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)}
    timing, first = time_runs(session, feeds, iters=7, warmup=2)
    assert len(timing.latencies_ms) == 7 and all(ms > 0 for ms in timing.latencies_ms)
    assert len(timing.warmup_ms) == 2 and timing.first_run_ms() == timing.warmup_ms[0]
    assert timing.concurrency == 1 and timing.wall_s >= sum(timing.latencies_ms) / 1e3
    np.testing.assert_array_equal(first[0], session.run(feeds)[0])
    without_warmup, _ = time_runs(session, feeds, iters=3, warmup=0)
    assert without_warmup.warmup_ms == [] and without_warmup.first_run_ms() == without_warmup.latencies_ms[0]


def test_a_duration_runs_at_least_that_long_and_at_least_iters(ticking):
    feeds = {"data": np.zeros((1, 3, 32, 32), np.float32)}
    timed, first = time_runs(ticking, feeds, iters=3, warmup=0, duration_s=0.3)
    assert len(timed.latencies_ms) == 20 and timed.wall_s == 20 * STEP_S  # the first run at or past 0.3 s
    assert timed.latencies_ms == [STEP_S * 1e3] * 20
    np.testing.assert_array_equal(first[0], ticking.session.run(feeds)[0])
    many, _ = time_runs(ticking, feeds, iters=50, warmup=0, duration_s=1e-6)
    assert len(many.latencies_ms) == 50


def test_concurrent_runs_count_in_all_and_give_throughput_from_wall_time(session):
    feeds = {"data": np.random.default_rng(1).random((1, 3, 32, 32), dtype=np.float32)}
    timing, first = time_runs(session, feeds, iters=40, warmup=1, concurrency=3)
    assert len(timing.latencies_ms) == 40 and timing.concurrency == 3
    assert timing.throughput()["inferences_per_s"] == pytest.approx(40 / timing.wall_s)
    np.testing.assert_allclose(first[0], session.run(feeds)[0], rtol=1e-6)


def test_concurrent_runs_go_on_for_the_duration(ticking):
    feeds = {"data": np.zeros((1, 3, 32, 32), np.float32)}
    timed, _ = time_runs(ticking, feeds, iters=2, warmup=0, concurrency=2, duration_s=0.2)
    assert timed.wall_s >= 0.2 and len(timed.latencies_ms) >= 13  # 0.2 s is 12.8 runs of the clock
    assert timed.wall_s == len(timed.latencies_ms) * STEP_S  # every run timed, and nothing else moved the clock


def test_a_failing_run_under_load_is_a_run_error():
    session = open_runner(str(sample("bad/gather_index.onnx").path))
    with pytest.raises(RunError, match="'idx'"):
        time_runs(session, {"idx": np.array([0, 99, 1])}, iters=10, warmup=0, concurrency=2)


def test_progress_only_for_long_loops(ticking, monkeypatch):
    feeds = {"data": np.zeros((1, 3, 32, 32), np.float32)}
    calls = []
    time_runs(ticking, feeds, iters=20, warmup=0, progress=lambda *a: calls.append(a), label="x")
    assert calls == []  # 20 runs of 1/64 s: under PROGRESS_AFTER_S, no bar
    monkeypatch.setattr(timing, "PROGRESS_AFTER_S", 0.0)
    time_runs(ticking, feeds, iters=20, warmup=0, progress=lambda *a: calls.append(a), label="x")
    done = [d for _, d, _ in calls]
    assert done[0] == 1 and done[-1] == 20 and done == sorted(done) and {t for _, _, t in calls} == {20}


def test_a_failing_run_is_a_run_error():
    session = open_runner(str(sample("bad/gather_index.onnx").path))
    with pytest.raises(RunError, match="'idx'"):
        time_runs(session, {"idx": np.array([0, 99, 1])}, iters=3, warmup=0)


def test_a_long_duration_stops_at_the_run_limit(ticking):
    feeds = {"data": np.zeros((1, 3, 32, 32), np.float32)}
    alone, _ = time_runs(ticking, feeds, iters=3, warmup=0, duration_s=600, max_runs=25)
    assert len(alone.latencies_ms) == 25 and alone.wall_s == 25 * STEP_S  # not 600 s
    loaded, _ = time_runs(ticking, feeds, iters=3, warmup=0, duration_s=600, concurrency=2, max_runs=25)
    assert len(loaded.latencies_ms) == 25 and loaded.wall_s == 25 * STEP_S


class _TwoSpeeds:
    """A stand-in session on a clock per thread: the first thread to call it takes 20 ms a run, the second 3 ms.
    The two take turns (each run waits for the other thread's), so each makes half the runs whatever the load."""

    def __init__(self) -> None:
        self.lock, self.local, self.seen = threading.Lock(), threading.local(), 0
        self.turns = threading.Barrier(2)

    def clock(self) -> float:
        return getattr(self.local, "now", 0.0)

    def run(self, feeds):
        if not hasattr(self.local, "step"):
            with self.lock:
                self.local.step = 0.020 if self.seen == 0 else 0.003
                self.seen += 1
        self.turns.wait(timeout=60)
        self.local.now = self.clock() + self.local.step
        return [np.zeros(1, np.float32)]


def test_runs_under_load_are_listed_in_the_order_they_ended(monkeypatch):
    """Each thread keeps its own runs; merged, they are in the order they ended (the slow thread's runs fall
    among the fast one's), not one thread's runs and then the other's."""
    stand_in = _TwoSpeeds()
    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=stand_in.clock))
    loaded, _ = time_runs(stand_in, {"x": np.zeros(1, np.float32)}, iters=30, warmup=0, concurrency=2)
    ends = sorted([(0.020 * k, True) for k in range(1, 16)] + [(0.003 * k, False) for k in range(1, 16)])
    slow = [ms > 10 for ms in loaded.latencies_ms]
    assert slow == [is_slow for _, is_slow in ends]  # 6 fast, 1 slow, 7 fast, 1 slow, 2 fast, 13 slow
    assert sum(1 for a, b in zip(slow, slow[1:], strict=False) if a != b) == 5  # one after the other: 1
