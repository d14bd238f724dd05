"""The record of a bundle (:class:`BundleRecord`): how it ran (:class:`Session`, :class:`Assertion`,
:class:`ColdStart`), its inputs and outputs (:class:`TensorRecord`), its ``--profile`` table (:class:`OpRow`), its
test cases, and where it was packed against where it ran."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..base.jsontypes import JsonObject
from ..model.session import SessionSettings
from .cases import CaseRecord
from .fitting import FittingRecord
from .jsonvalues import optional


@dataclass
class Session:
    """How a bundle ran: the providers that ran it, the session's settings (threads, graph optimisation, ...:
    the provider asked for is the first of ``providers``), and the runs asked for."""

    providers: list[str]
    settings: SessionSettings = field(default_factory=SessionSettings)
    iters: int = 10
    warmup: int = 1
    duration_s: float = 0.0
    concurrency: int = 1

    def text(self, maxerr: str = "") -> str:
        """One line: ``CPUExecutionProvider; threads default; 1 warm-up and 10 timed run(s) per test case``, then
        ``maxerr`` (:meth:`BundleRecord.maxerr_text`)."""
        settings = self.settings
        line = (
            f"{', '.join(self.providers)}; threads {settings.threads or 'default'}; "
            f"graph optimisation {settings.graph_opt or 'all'}; "
            f"{self.warmup} warm-up and {self.iters} timed run(s) per test case"
        )
        line += f" (at least {self.duration_s:g} s)" if self.duration_s else ""
        line += f"; {self.concurrency} at once" if self.concurrency > 1 else ""
        line += f"; {settings.execution_mode} execution" if settings.execution_mode else ""
        line += "".join(f"; {part}" for part in settings.extra_text())
        return f"{line}; {maxerr}" if maxerr else line

    def to_json(self) -> dict[str, Any]:
        document = {"providers": list(self.providers), **self.settings.report_json()}
        return document | {k: v for k, v in asdict(self).items() if k not in ("providers", "settings")}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Session:
        return cls(
            providers=[str(p) for p in data.get("providers") or []],
            settings=SessionSettings.from_json({k: v for k, v in data.items() if k != "provider"}),
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
        return cls(optional(data.get("session_create_ms")), optional(data.get("first_run_ms")))


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
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OpRow:
        return cls(
            op_type=str(data["op_type"]),
            nodes=optional(data.get("nodes")),
            calls=int(data["calls"]),
            total_ms=float(data["total_ms"]),
            ms_per_run=optional(data.get("ms_per_run")),
            share=float(data["share"]),
        )


@dataclass
class TensorRecord:
    """A model input or output: name, dtype and shape (per dim an int, a named symbol or None)."""

    name: str
    dtype: str
    shape: list[int | str | None] | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

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
        variant: the variant of a bundle of several that ran (its name then ends in ``[variant]``).
        fitting: with ``--fitting``: every variant verified, the ranked candidates and the choice.
        part: in a merged report (``mgerun --merge``), the index of the report it came from in the report's ``parts``.
        not_run: why it was not run (``--maxfail`` stopped the run first); it then has none of the rest.
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
    packed_environment: JsonObject | None = None
    environment_differences: list[str] = field(default_factory=list)
    variant: str | None = None
    fitting: FittingRecord | None = None
    part: int | None = None  # in a merged report, which of its parts (the reports merged) ran it
    not_run: str | None = None  # why it was not run (--maxfail)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and self.not_run is None

    @property
    def base_name(self) -> str:
        """Its name without the ``[variant]`` a variant's run ends in (:func:`mgedump.report.report_name`)."""
        return self.name.removesuffix(f"[{self.variant}]") if self.variant is not None else self.name

    @property
    def checked(self) -> bool:
        """Outputs were checked against expected ones (not ``--no-assert``, not a plain model)."""
        return self.assertion is not None and self.assertion.enabled

    @property
    def packed_elsewhere(self) -> list[str]:
        """The differences from a known packing environment: what a failing check should be read beside."""
        return list(self.environment_differences) if self.packed_environment else []

    def output_maxerr(self) -> dict[str, float]:
        """The outputs held to a maxerr of their own (``--maxerr NAME:X``, or the bundle's per-output bounds): name
        to maxerr, as the checks applied them."""
        assert_all = self.assertion.maxerr if self.assertion is not None else None
        for case in self.test_cases:
            if case.outputs:
                return {out.name: out.maxerr for out in case.outputs if out.maxerr != assert_all}
        return {}

    def error_stats(self) -> dict[str, str]:
        """Each checked output's statistic of its element errors (docs/assertion.md#error-statistics), as the checks
        applied it: name to ``max``, ``p99``, ``mean`` or ``median``."""
        for case in self.test_cases:
            if case.outputs:
                return {out.name: out.error_stat for out in case.outputs}
        return {}

    def error_stat_text(self) -> str:
        """``max``, ``median`` (every output's), or each output's (``prob median; boxes max``); empty when no
        output was checked."""
        stats = self.error_stats()
        if len(set(stats.values())) == 1:
            return next(iter(stats.values()))
        return "; ".join(f"{name} {stat}" for name, stat in stats.items())

    def maxerr_text(self) -> str:
        """``maxerr 0.0001``, with the outputs bound otherwise (``; prob 0.01``) and the statistic when it is not
        the largest error (``; statistic median``), or ``no assertions``."""
        if self.assertion is None or not self.assertion.enabled:
            return "no assertions"
        own = "".join(f"; {name} {bound:g}" for name, bound in self.output_maxerr().items())
        stat = self.error_stat_text()
        return f"maxerr {self.assertion.maxerr:g}{own}" + (f"; statistic {stat}" if stat not in ("", "max") else "")

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
            **({"variant": self.variant} if self.variant is not None else {}),
            **({"part": self.part} if self.part is not None else {}),
        }
        if self.not_run is not None:
            del head["started"], head["peak_rss_mib"]
            return {**head, "not_run": self.not_run, "test_cases": []}
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
            **({"fitting": self.fitting.to_json()} if self.fitting is not None else {}),
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
            peak_rss_mib=optional(data.get("peak_rss_mib")),
            variant=None if data.get("variant") is None else str(data["variant"]),
            part=None if data.get("part") is None else int(data["part"]),
            not_run=None if data.get("not_run") is None else str(data["not_run"]),
        )
        if record.error is not None or record.not_run is not None:
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
        record.fitting = None if data.get("fitting") is None else FittingRecord.from_json(data["fitting"])
        return record
