"""The report of one ``mgerun`` call as typed records: what every renderer reads.

:class:`RunReport` holds one :class:`BundleRecord` per bundle, each holding a
:class:`CaseRecord` per test case, each holding an :class:`OutputRecord` per
checked output and a :class:`TimingRecord` (its :class:`Latency` statistics).
The console (:mod:`mgedump.cli.output`), the JSON report, JUnit XML
(:mod:`.junit`) and the HTML page (:mod:`.html`) all render from these records,
so each figure and each line is worked out in one place: the latency line is
:meth:`TimingRecord.line`, the per-sample figures of a batch sweep are
:attr:`TimingRecord.sample_rate` and its reciprocal :attr:`TimingRecord.ms_per_sample`.

Every record has ``to_json()`` (the keys of docs/reports.md, exactly as
``docs/schemas/report.schema.json`` allows them) and ``from_json()``, its inverse:
a saved report renders again as it did (``RunReport.from_json(document)``).
:func:`dumps` writes a document as strict JSON: numbers that are not finite as
the strings ``"inf"``, ``"-inf"`` and ``"nan"`` (JSON has no NaN or infinity),
text through :func:`mgedump.base.text.json` (no lone surrogate).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..base import text

REPORT_VERSION = 2
REFERENCE = "embedded io dump"
STATS = ("min", "median", "mean", "p90", "p99", "max", "stddev")
UNKNOWN_PACKING = "packing environment unknown: the bundle does not record where it was packed"


# ---------------------------------------------------------------------------------------------------------------------
# Numbers and text as JSON


def finite_or_name(value: Any) -> Any:
    """A float JSON can hold as it is, or the string naming it (``"inf"``, ``"-inf"``, ``"nan"``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def number(value: Any) -> Any:
    """The inverse of :func:`finite_or_name`: ``"inf"``, ``"-inf"`` and ``"nan"`` back to floats."""
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    return value


def json_ready(value: Any) -> Any:
    """A JSON-ready value that strict JSON parsers accept: numbers that are not finite named
    (:func:`finite_or_name`), every string and key cleaned by :func:`mgedump.base.text.json`, tuples as lists."""
    if isinstance(value, dict):
        return {text.json(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, str):
        return text.json(value)
    if isinstance(value, float):
        return finite_or_name(value)
    return value


def dumps(document: dict[str, Any]) -> str:
    """A report as the JSON text ``mgerun`` writes: strict JSON, keys sorted, one item a line."""
    return json.dumps(json_ready(document), indent=1, sort_keys=True, allow_nan=False) + "\n"


def _floats(values: Sequence[Any]) -> list[float]:
    return [float(v) for v in values]


def _optional(value: Any) -> float | None:
    return None if value is None else float(number(value))


# ---------------------------------------------------------------------------------------------------------------------
# Timing


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
            latencies_ms=_floats(timing.latencies_ms),
            warmup_ms=_floats(timing.warmup_ms),
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
            latencies_ms=_floats(data.get("latencies_ms") or []),
            warmup_ms=_floats(data.get("warmup_ms") or []),
            wall_s=_optional(data.get("wall_s")),
            inferences_per_s=_optional(data.get("inferences_per_s")),
            samples_per_s=_optional(data.get("samples_per_s")),
        )


# ---------------------------------------------------------------------------------------------------------------------
# Checks


@dataclass
class OutputRecord:
    """One checked output (docs/reports.md, "An output"). An ``err`` that could not be computed, or that is not
    finite (float64 outputs near their largest value), is null in JSON; statistics that are not finite are named
    (``"inf"``)."""

    name: str
    passed: bool
    err: float | None
    maxerr: float
    reason: str | None = None
    worst_index: list[int] | None = None
    expect: Any = None
    get: Any = None
    stats: dict[str, Any] = field(default_factory=dict)
    failure: list[str] | None = None
    worst_path: str | None = None  # a sequence's, map's or optional's worst element (``[3][1]``)

    @classmethod
    def of(cls, check: Any) -> OutputRecord:
        """The record of a :class:`mgedump.measure.assertion.OutputCheck`."""
        index = check.worst_index
        record = cls(
            name=check.name,
            passed=bool(check.passed),
            err=None if check.err is None else float(check.err),
            maxerr=float(check.maxerr),
            reason=check.reason,
            worst_index=None if index is None else [int(i) for i in index],
            expect=_element(check.expect_value),
            get=_element(check.got_value),
            stats={key: _stat(key, value) for key, value in check.stats.items()},
            worst_path=getattr(check, "worst_path", None),
        )
        if not record.passed:
            record.failure = list(check.failure_lines())  # the lines the check says of itself
        return record

    def cell(self) -> str:
        """``name err / maxerr``, as the HTML table shows it."""
        err = "n/a" if self.err is None else f"{self.err:.3g}"
        return f"{self.name} {err} / {self.maxerr:g}"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "err": self.err if self.err is None or math.isfinite(self.err) else None,
            "maxerr": self.maxerr,
            "reason": self.reason,
            "worst_index": None if self.worst_index is None else list(self.worst_index),
            "expect": finite_or_name(self.expect),
            "get": finite_or_name(self.get),
            "stats": {key: finite_or_name(value) for key, value in self.stats.items()},
            "failure": None if self.failure is None else list(self.failure),
            **({"worst_path": self.worst_path} if self.worst_path is not None else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OutputRecord:
        index = data.get("worst_index")
        return cls(
            name=str(data["name"]),
            passed=bool(data["passed"]),
            err=_optional(data.get("err")),
            maxerr=float(data["maxerr"]),
            reason=data.get("reason"),
            worst_index=None if index is None else [int(i) for i in index],
            expect=data.get("expect"),
            get=data.get("get"),
            stats={key: _stat(key, value) for key, value in (data.get("stats") or {}).items()},
            failure=None if data.get("failure") is None else [str(line) for line in data["failure"]],
            worst_path=None if data.get("worst_path") is None else str(data["worst_path"]),
        )


def _stat(key: str, value: Any) -> Any:
    return value if key in ("shape", "dtype") else _optional(value)


def _element(value: Any) -> Any:
    """One tensor element as JSON holds it: a Python number, bool or text (bytes decoded, their bytes that are not
    UTF-8 kept), NaN and the infinities named."""
    if value is not None and not isinstance(value, (bool, int, float, str, bytes)) and hasattr(value, "item"):
        value = value.item()
    if isinstance(value, (bytes, bytearray)):
        return text.decoded(value)
    return finite_or_name(value)


@dataclass
class Diagnosis:
    """Where a failing test case first diverges from the bundle's embedded io dump, or why that is unknown."""

    maxerr: float
    first_divergence: dict[str, Any] | None = None
    matched: int | None = None
    text: str | None = None
    top: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None  # the run with every tensor exposed failed
    reference: str = REFERENCE

    def line(self) -> str:
        """The diagnosis as one line, as every renderer shows it."""
        if self.text:
            return f"first divergence (against the bundle's {self.reference}): {self.text}"
        if self.error:
            return f"no diagnosis: {self.error}"
        return (
            f"no node introduces error above maxerr {self.maxerr:g} among the {self.matched or 0} tensors that "
            f"match the {self.reference}"
        )

    def to_json(self) -> dict[str, Any]:
        if self.error is not None:
            return {"reference": self.reference, "maxerr": self.maxerr, "first_divergence": None, "error": self.error}
        return {
            "reference": self.reference,
            "maxerr": self.maxerr,
            "matched": self.matched or 0,
            "first_divergence": self.first_divergence,
            "text": self.text,
            "top": list(self.top),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Diagnosis:
        return cls(
            maxerr=float(data["maxerr"]),
            first_divergence=data.get("first_divergence"),
            matched=data.get("matched"),
            text=data.get("text"),
            top=list(data.get("top") or []),
            error=data.get("error"),
            reference=data.get("reference", REFERENCE),
        )


_ABSOLUTE = re.compile(r"(^|:)((?:[A-Za-z]:\\|[\\/])[^;]*)")  # /abs/path, or C:\ on Windows


def short_spec(spec: str) -> str:
    """A spec with each absolute path cut to its file name: the packing machine's folders say nothing where the
    bundle runs (``x:/home/ci/data/cat.png;#rand(0,1)`` is ``x:cat.png;#rand(0,1)``)."""
    items = []
    for item in spec.split(";"):
        items.append(_ABSOLUTE.sub(lambda m: m.group(1) + re.split(r"[\\/]", m.group(2).rstrip("\\/"))[-1], item))
    return ";".join(items)


@dataclass
class CaseRecord:
    """One test case: its checks, its timings, its batch sweep and its diagnosis (docs/reports.md)."""

    index: int
    spec: str
    origin: str
    passed: bool
    error: str | None = None
    outputs: list[OutputRecord] = field(default_factory=list)
    timing: TimingRecord = field(default_factory=TimingRecord)
    seconds: float = 0.0
    sweep: list[TimingRecord] = field(default_factory=list)
    diagnosis: Diagnosis | None = None

    @property
    def head(self) -> str:
        """``test case 0 (-d #1: #rand(0,1))``."""
        return f"test case {self.index} ({self.origin}: {self.spec})"

    @property
    def short_head(self) -> str:
        """:attr:`head` without the packing machine's absolute paths (a test's name in CI)."""
        origin, sep, line = self.origin.rpartition(":")
        origin = f"{short_spec(origin)}{sep}{line}" if sep and line.isdigit() else short_spec(self.origin)
        return f"test case {self.index} ({origin}: {short_spec(self.spec)})"

    def failure_lines(self) -> list[str]:
        """The lines of every failed output, as ``mgerun`` prints them."""
        return [line for out in self.outputs if not out.passed for line in (out.failure or [f"{out.name} failed"])]

    def to_json(self) -> dict[str, Any]:
        timing = self.timing.to_json()
        return {
            "index": self.index,
            "spec": self.spec,
            "origin": self.origin,
            "passed": self.passed,
            "error": self.error,
            "outputs": [out.to_json() for out in self.outputs],
            **timing,
            "seconds": self.seconds,
            "sweep": [entry.to_json() for entry in self.sweep],
            "diagnosis": None if self.diagnosis is None else self.diagnosis.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CaseRecord:
        diagnosis = data.get("diagnosis")
        return cls(
            index=int(data["index"]),
            spec=str(data.get("spec", "")),
            origin=str(data.get("origin", "")),
            passed=bool(data.get("passed")),
            error=data.get("error"),
            outputs=[OutputRecord.from_json(out) for out in data.get("outputs") or []],
            timing=TimingRecord.from_json(data),
            seconds=float(data.get("seconds") or 0.0),
            sweep=[TimingRecord.from_json(entry) for entry in data.get("sweep") or []],
            diagnosis=None if diagnosis is None else Diagnosis.from_json(diagnosis),
        )


# ---------------------------------------------------------------------------------------------------------------------
# Bundles


@dataclass
class Session:
    """How a bundle ran: the session's providers and threads, and the runs asked for."""

    providers: list[str]
    threads: int | None = None
    graph_opt: str = "all"
    iters: int = 10
    warmup: int = 1
    duration_s: float = 0.0
    concurrency: int = 1

    def text(self, maxerr: str = "") -> str:
        """One line: ``CPUExecutionProvider; threads default; 1 warm-up and 10 timed run(s) per test case``, then
        ``maxerr`` (:meth:`BundleRecord.maxerr_text`)."""
        line = (
            f"{', '.join(self.providers)}; threads {self.threads or 'default'}; graph optimisation {self.graph_opt}; "
            f"{self.warmup} warm-up and {self.iters} timed run(s) per test case"
        )
        line += f" (at least {self.duration_s:g} s)" if self.duration_s else ""
        line += f"; {self.concurrency} at once" if self.concurrency > 1 else ""
        return f"{line}; {maxerr}" if maxerr else line

    def to_json(self) -> dict[str, Any]:
        return {
            "providers": list(self.providers),
            "threads": self.threads,
            "graph_opt": self.graph_opt,
            "iters": self.iters,
            "warmup": self.warmup,
            "duration_s": self.duration_s,
            "concurrency": self.concurrency,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Session:
        return cls(
            providers=[str(p) for p in data.get("providers") or []],
            threads=data.get("threads"),
            graph_opt=str(data.get("graph_opt") or "all"),
            iters=int(data.get("iters", 10)),
            warmup=int(data.get("warmup", 1)),
            duration_s=float(data.get("duration_s") or 0.0),
            concurrency=int(data.get("concurrency", 1)),
        )


@dataclass
class Assertion:
    """Whether outputs were checked, and the bundle's maxerr (each output's own is on its :class:`OutputRecord`)."""

    enabled: bool
    maxerr: float

    def to_json(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "maxerr": self.maxerr}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Assertion:
        return cls(bool(data["enabled"]), float(data["maxerr"]))


@dataclass
class ColdStart:
    """Creating the session, and the first run of the first test case that ran."""

    session_create_ms: float | None = None
    first_run_ms: float | None = None

    def line(self, peak_rss_mib: float | None = None) -> str:
        """``cold start: session created in 4.5 ms, first run 0.406 ms[, peak memory 65 MiB]``."""
        parts = []
        if self.session_create_ms is not None:
            parts.append(f"session created in {self.session_create_ms:.1f} ms")
        if self.first_run_ms is not None:
            parts.append(f"first run {self.first_run_ms:.3f} ms")
        if peak_rss_mib is not None:
            parts.append(f"peak memory {peak_rss_mib:.0f} MiB")
        return "cold start: " + ", ".join(parts) if parts else ""

    def to_json(self) -> dict[str, Any]:
        return {"session_create_ms": self.session_create_ms, "first_run_ms": self.first_run_ms}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ColdStart:
        return cls(_optional(data.get("session_create_ms")), _optional(data.get("first_run_ms")))


@dataclass
class OpRow:
    """One operator type of ``--profile``: its kernel calls and their time."""

    op_type: str
    nodes: float | None
    calls: int
    total_ms: float
    ms_per_run: float | None
    share: float

    def to_json(self) -> dict[str, Any]:
        return {
            "op_type": self.op_type,
            "nodes": self.nodes,
            "calls": self.calls,
            "total_ms": self.total_ms,
            "ms_per_run": self.ms_per_run,
            "share": self.share,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OpRow:
        return cls(
            op_type=str(data["op_type"]),
            nodes=_optional(data.get("nodes")),
            calls=int(data["calls"]),
            total_ms=float(data["total_ms"]),
            ms_per_run=_optional(data.get("ms_per_run")),
            share=float(data["share"]),
        )


@dataclass
class TensorRecord:
    """A model input or output: name, dtype and shape (per dim an int, a named symbol or None)."""

    name: str
    dtype: str
    shape: list[int | str | None] | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": None if self.shape is None else list(self.shape)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TensorRecord:
        shape = data.get("shape")
        return cls(str(data["name"]), str(data["dtype"]), None if shape is None else list(shape))


@dataclass
class BundleRecord:
    """One bundle (or the plain model run with ``-d``): its outcome, how it ran, every test case, and where it was
    packed against where it ran. A bundle that could not be read has its ``error`` and none of the rest.

    Attributes:
        source: the path given, or found in a folder.
        name: what the reports call it: its file name without ``.mgetest``, or, when two bundles of a call share
            that name, as many of the last parts of its path as tell them apart (:func:`mgedump.report.unique_names`).
        started: when it started, ISO 8601 in UTC (``2025-01-31T09:30:00Z``).
        peak_rss_mib: the process's peak resident memory when it ended.
        packed_environment: the manifest's ``environment``: where it was packed (None: unknown, or a plain model).
        environment_differences: what differs between that and where it ran that can change results
            (:func:`mgedump.model.environment.differences`); for a bundle that does not record it, one sentence
            saying so.
    """

    source: str
    name: str
    kind: str
    exit_code: int
    seconds: float = 0.0
    started: str = ""
    error: str | None = None
    peak_rss_mib: float | None = None
    assertion: Assertion | None = None
    session: Session | None = None
    cold_start: ColdStart = field(default_factory=ColdStart)
    inputs: list[TensorRecord] = field(default_factory=list)
    outputs: list[TensorRecord] = field(default_factory=list)
    profile: str | None = None
    op_profile: list[OpRow] | None = None
    test_cases: list[CaseRecord] = field(default_factory=list)
    packed_environment: dict[str, Any] | None = None
    environment_differences: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    @property
    def checked(self) -> bool:
        """Outputs were checked against expected ones (not ``--no-assert``, not a plain model)."""
        return self.assertion is not None and self.assertion.enabled

    @property
    def packed_elsewhere(self) -> list[str]:
        """The differences from a known packing environment: what a failing check should be read beside."""
        return list(self.environment_differences) if self.packed_environment else []

    def output_bounds(self) -> dict[str, float]:
        """The outputs held to a maxerr of their own (``--maxerr NAME:X``, or the bundle's per-output bounds): name
        to maxerr, as the checks applied them."""
        assert_all = self.assertion.maxerr if self.assertion is not None else None
        for case in self.test_cases:
            if case.outputs:
                return {out.name: out.maxerr for out in case.outputs if out.maxerr != assert_all}
        return {}

    def maxerr_text(self) -> str:
        """``maxerr 0.0001``, with the outputs bound otherwise (``; prob 0.01``), or ``no assertions``."""
        if self.assertion is None or not self.assertion.enabled:
            return "no assertions"
        own = "".join(f"; {name} {bound:g}" for name, bound in self.output_bounds().items())
        return f"maxerr {self.assertion.maxerr:g}{own}"

    def failed_cases(self) -> list[CaseRecord]:
        return [case for case in self.test_cases if not case.passed]

    def verdict_line(self, prefix: str = "", quiet_pass: bool = False) -> str:
        """How many test cases failed, or that all passed ("" for a quiet pass)."""
        failed = self.failed_cases()
        if failed:
            return f"{prefix}FAILED: {len(failed)} of {len(self.test_cases)} test case(s) failed"
        if quiet_pass:
            return ""
        what = "passed" if self.checked else "ran (no assertions)"
        return f"{prefix}all {len(self.test_cases)} test case(s) {what}"

    def to_json(self) -> dict[str, Any]:
        head = {
            "source": self.source,
            "name": self.name,
            "kind": self.kind,
            "passed": self.passed,
            "exit_code": self.exit_code,
            "error": self.error,
            "seconds": self.seconds,
            "started": self.started,
            "peak_rss_mib": self.peak_rss_mib,
        }
        if self.error is not None:
            return {**head, "test_cases": []}
        assert self.assertion is not None and self.session is not None
        return {
            **head,
            "assertion": self.assertion.to_json(),
            "session": self.session.to_json(),
            "cold_start": self.cold_start.to_json(),
            "inputs": [info.to_json() for info in self.inputs],
            "outputs": [info.to_json() for info in self.outputs],
            "profile": self.profile,
            "op_profile": None if self.op_profile is None else [row.to_json() for row in self.op_profile],
            "test_cases": [case.to_json() for case in self.test_cases],
            "packed_environment": self.packed_environment,
            "environment_differences": list(self.environment_differences),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BundleRecord:
        from . import bundle_name

        source = str(data["source"])
        record = cls(
            source=source,
            name=str(data.get("name") or bundle_name(source)),
            kind=str(data.get("kind", "bundle")),
            exit_code=int(data["exit_code"]),
            seconds=float(data.get("seconds") or 0.0),
            started=str(data.get("started") or ""),
            error=data.get("error"),
            peak_rss_mib=_optional(data.get("peak_rss_mib")),
        )
        if record.error is not None:
            return record
        profile = data.get("op_profile")
        record.assertion = Assertion.from_json(data.get("assertion") or {"enabled": False, "maxerr": 0.0})
        record.session = Session.from_json(data.get("session") or {})
        record.cold_start = ColdStart.from_json(data.get("cold_start") or {})
        record.inputs = [TensorRecord.from_json(info) for info in data.get("inputs") or []]
        record.outputs = [TensorRecord.from_json(info) for info in data.get("outputs") or []]
        record.profile = data.get("profile")
        record.op_profile = None if profile is None else [OpRow.from_json(row) for row in profile]
        record.test_cases = [CaseRecord.from_json(case) for case in data.get("test_cases") or []]
        record.packed_environment = data.get("packed_environment")
        record.environment_differences = [str(d) for d in data.get("environment_differences") or []]
        return record


@dataclass
class RunReport:
    """Every bundle of one ``mgerun`` call, and where it ran: the JSON report (report version 2)."""

    bundles: list[BundleRecord] = field(default_factory=list)
    exit_code: int = 0
    peak_rss_mib: float | None = None
    environment: dict[str, Any] | None = None  # mgedump.model.environment.run_environment() of this call

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "report_version": REPORT_VERSION,
            "passed": self.passed,
            "exit_code": self.exit_code,
            "peak_rss_mib": self.peak_rss_mib,
            "environment": self.environment,
            "bundles": [bundle.to_json() for bundle in self.bundles],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunReport:
        return cls(
            bundles=[BundleRecord.from_json(bundle) for bundle in data.get("bundles") or []],
            exit_code=int(data["exit_code"]),
            peak_rss_mib=_optional(data.get("peak_rss_mib")),
            environment=data.get("environment"),
        )


def as_report(document: RunReport | dict[str, Any]) -> RunReport:
    """A report's records, from the records themselves or from a JSON report (a saved one, say)."""
    return document if isinstance(document, RunReport) else RunReport.from_json(document)
