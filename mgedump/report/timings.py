"""The timing records of a test case: :class:`Latency` statistics and a :class:`TimingRecord` per batch size."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .jsonvalues import floats, optional

STATS = ("min", "median", "mean", "p90", "p99", "max", "stddev")


@dataclass
class Latency:
    """Statistics of the timed runs of a test case, in ms (none when no run was timed)."""

    count: int = 0
    min: float | None = None
    median: float | None = None
    mean: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None
    stddev: float | None = None

    @classmethod
    def of(cls, samples_ms: Sequence[float]) -> Latency:
        from ..measure.timing import latency_stats

        return cls.from_json(latency_stats(samples_ms))

    def cell(self, stat: str, digits: int = 3) -> str:
        """One statistic as the tables show it (``-`` when none)."""
        value = getattr(self, stat)
        return "-" if value is None else f"{value:.{digits}f}"

    def to_json(self) -> dict[str, Any]:
        if not self.count:
            return {"count": 0}
        return {"count": self.count, **{stat: getattr(self, stat) for stat in STATS}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Latency:
        count = int(data.get("count") or 0)
        if not count:
            return cls()
        return cls(count, **{stat: float(data[stat]) for stat in STATS})


def rate_text(value: float | None) -> str:
    """A rate (runs or samples per second) as the tables show it."""
    return "-" if value is None else f"{value:.1f}"


@dataclass
class TimingRecord:
    """The timings of one test case at one batch size (a test case's own, or an entry of its batch sweep).

    Attributes:
        batch: the first input's leading dim (1 for a scalar).
        concurrency: runs issued at once.
        latency: statistics of the timed runs.
        latencies_ms: every timed run, in the order they ended.
        warmup_ms: every warm-up run; the first is the cold first run.
        wall_s: wall time of the timed runs.
        inferences_per_s: 1000 / mean latency; under concurrent load, runs / ``wall_s``.
        samples_per_s: ``inferences_per_s`` x ``batch``, written when ``batch`` is over 1.
    """

    batch: int = 1
    concurrency: int = 1
    latency: Latency = field(default_factory=Latency)
    latencies_ms: list[float] = field(default_factory=list)
    warmup_ms: list[float] = field(default_factory=list)
    wall_s: float | None = None
    inferences_per_s: float | None = None
    samples_per_s: float | None = None

    @classmethod
    def of(cls, timing: Any) -> TimingRecord:
        """The record of a :class:`mgedump.measure.timing.Timing`."""
        rate = timing.throughput()
        return cls(
            batch=int(timing.batch),
            concurrency=int(timing.concurrency),
            latency=Latency.of(timing.latencies_ms),
            latencies_ms=floats(timing.latencies_ms),
            warmup_ms=floats(timing.warmup_ms),
            wall_s=timing.wall_s,
            inferences_per_s=rate["inferences_per_s"],
            samples_per_s=rate["samples_per_s"],
        )

    @property
    def sample_rate(self) -> float | None:
        """Samples per second at any batch (1 included): ``inferences_per_s`` x ``batch``."""
        return None if self.inferences_per_s is None else self.inferences_per_s * self.batch

    @property
    def ms_per_sample(self) -> float | None:
        """ms per sample: the reciprocal of :attr:`sample_rate`, so the two never tell different stories."""
        rate = self.sample_rate
        return None if not rate else 1e3 / rate

    def line(self) -> str:
        """The latency line: ``latency (ms): median 0.135, min 0.130, p90 0.139, p99 0.140, stddev 0.005 over 2
        runs; 7414.9 inf/s`` ("" when no run was timed)."""
        stats = self.latency
        if not stats.count:
            return ""
        figures = ", ".join(f"{stat} {stats.cell(stat)}" for stat in ("median", "min", "p90", "p99", "stddev"))
        line = f"latency (ms): {figures} over {stats.count} run(s)"
        if self.inferences_per_s:
            line += f"; {rate_text(self.inferences_per_s)} inf/s"
        if self.samples_per_s:
            line += f", {rate_text(self.samples_per_s)} samples/s at batch {self.batch}"
        if self.concurrency > 1:
            line += f"; {self.concurrency} runs at once"
        return line

    def to_json(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "concurrency": self.concurrency,
            "latency_ms": self.latency.to_json(),
            "latencies_ms": list(self.latencies_ms),
            "warmup_ms": list(self.warmup_ms),
            "wall_s": self.wall_s,
            "inferences_per_s": self.inferences_per_s,
            "samples_per_s": self.samples_per_s,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TimingRecord:
        return cls(
            batch=int(data.get("batch", 1)),
            concurrency=int(data.get("concurrency", 1)),
            latency=Latency.from_json(data.get("latency_ms") or {}),
            latencies_ms=floats(data.get("latencies_ms") or []),
            warmup_ms=floats(data.get("warmup_ms") or []),
            wall_s=optional(data.get("wall_s")),
            inferences_per_s=optional(data.get("inferences_per_s")),
            samples_per_s=optional(data.get("samples_per_s")),
        )
