"""The timed loop and its statistics."""

from __future__ import annotations

import numpy as np
import pytest

from mgedump import timing
from mgedump.errors import RunError
from mgedump.runtime import open_session
from mgedump.timing import Timing, latency_stats, time_runs
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
    return open_session(str(sample("cnn.onnx").path))


def test_time_runs_counts_and_returns_the_first_outputs(session):
    feeds = {"data": np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)}
    latencies, first = time_runs(session, feeds, iters=7, warmup=2)
    assert len(latencies) == 7 and all(ms > 0 for ms in latencies)
    np.testing.assert_array_equal(first[0], session.run(None, feeds)[0])


def test_progress_only_for_long_loops(session, monkeypatch):
    feeds = {"data": np.zeros((1, 3, 32, 32), np.float32)}
    calls = []
    time_runs(session, feeds, iters=20, warmup=0, progress=lambda *a: calls.append(a), label="x")
    assert calls == []  # a few milliseconds: no bar
    monkeypatch.setattr(timing, "PROGRESS_AFTER_S", 0.0)
    time_runs(session, feeds, iters=20, warmup=0, progress=lambda *a: calls.append(a), label="x")
    done = [d for _, d, _ in calls]
    assert done[0] == 1 and done[-1] == 20 and done == sorted(done) and {t for _, _, t in calls} == {20}


def test_a_failing_run_is_a_run_error():
    session = open_session(str(sample("bad/gather_index.onnx").path))
    with pytest.raises(RunError, match="'idx'"):
        time_runs(session, {"idx": np.array([0, 99, 1])}, iters=3, warmup=0)
