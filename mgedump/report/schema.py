"""The report of one ``mgerun`` call as typed records: what every renderer reads.

:class:`RunReport` holds one :class:`BundleRecord` per bundle, each holding a
:class:`CaseRecord` per test case, each holding an :class:`OutputRecord` per
checked output and a :class:`TimingRecord` (its :class:`Latency` statistics).
The console (:mod:`mgedump.cli.output`), the JSON report, JUnit XML
(:mod:`.junit`) and the HTML page (:mod:`.html`) all render from these records,
so each figure and each line is worked out in one place: the latency line is
:meth:`TimingRecord.line`, the per-sample figures of a batch sweep are
:attr:`TimingRecord.sample_rate` and its reciprocal :attr:`TimingRecord.ms_per_sample`.

The records live by what they describe: :mod:`.timings`, :mod:`.cases`,
:mod:`.bundles`; numbers and text as JSON in :mod:`.jsonvalues`. This module
holds the whole report and names every record, so a renderer imports from here.

Every record has ``to_json()`` (the keys of docs/reports.md, exactly as
``docs/schemas/report.schema.json`` allows them) and ``from_json()``, its inverse:
a saved report renders again as it did (``RunReport.from_json(document)``).
:func:`dumps` writes a document as strict JSON: numbers that are not finite as
the strings ``"inf"``, ``"-inf"`` and ``"nan"`` (JSON has no NaN or infinity),
text through :func:`mgedump.base.text.json` (no lone surrogate).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..base.jsontypes import JsonObject
from .bundles import Assertion, BundleRecord, ColdStart, OpRow, Session, TensorRecord
from .cases import REFERENCE, CaseRecord, Diagnosis, OutputRecord, short_spec
from .jsonvalues import dumps, finite_or_name, json_ready, number, optional
from .spread import JobsRecord, PartRecord, ShardRecord
from .timings import STATS, Latency, TimingRecord, rate_text

REPORT_VERSION = 2


@dataclass
class RunReport:
    """Every bundle of one ``mgerun`` call, and where it ran: the JSON report (report version 2)."""

    bundles: list[BundleRecord] = field(default_factory=list)
    exit_code: int = 0
    peak_rss_mib: float | None = None
    environment: JsonObject | None = None  # mgedump.model.environment.run_environment() of this call
    shard: ShardRecord | None = None  # --shard: which shard, how it was chosen, how many bundles (docs/reports.md)
    jobs: JobsRecord | None = None  # --jobs: how many workers, and how the bundles were timed
    parts: list[PartRecord] | None = None  # --merge: each report merged (its shard, jobs and environment)
    run: dict[str, str] | None = None  # the run's identity: id, and where it came from (--run-id, a CI variable)
    latency_gate: JsonObject | None = None  # --max-latency, --baseline: every check and the verdict

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def environment_of(self, bundle: BundleRecord) -> dict[str, Any] | None:
        """Where a bundle ran: its part's environment in a merged report, else the report's."""
        if self.parts and bundle.part is not None and 0 <= bundle.part < len(self.parts):
            return self.parts[bundle.part].get("environment") or self.environment
        return self.environment

    def to_json(self) -> dict[str, Any]:
        return {
            "report_version": REPORT_VERSION,
            "passed": self.passed,
            "exit_code": self.exit_code,
            "peak_rss_mib": self.peak_rss_mib,
            "environment": self.environment,
            "bundles": [bundle.to_json() for bundle in self.bundles],
            **{
                key: value
                for key, value in (
                    ("run", self.run),
                    ("shard", self.shard),
                    ("jobs", self.jobs),
                    ("parts", self.parts),
                    ("latency_gate", self.latency_gate),
                )
                if value
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunReport:
        return cls(
            bundles=[BundleRecord.from_json(bundle) for bundle in data.get("bundles") or []],
            exit_code=int(data["exit_code"]),
            peak_rss_mib=optional(data.get("peak_rss_mib")),
            environment=data.get("environment"),
            shard=data.get("shard"),
            jobs=data.get("jobs"),
            parts=data.get("parts"),
            run=data.get("run"),
            latency_gate=data.get("latency_gate"),
        )


def as_report(document: RunReport | dict[str, Any]) -> RunReport:
    """A report's records, from the records themselves or from a JSON report (a saved one, say)."""
    return document if isinstance(document, RunReport) else RunReport.from_json(document)


__all__ = [
    "REFERENCE",
    "REPORT_VERSION",
    "STATS",
    "Assertion",
    "BundleRecord",
    "CaseRecord",
    "ColdStart",
    "Diagnosis",
    "Latency",
    "OpRow",
    "OutputRecord",
    "RunReport",
    "Session",
    "TensorRecord",
    "TimingRecord",
    "as_report",
    "dumps",
    "finite_or_name",
    "json_ready",
    "number",
    "rate_text",
    "short_spec",
]
