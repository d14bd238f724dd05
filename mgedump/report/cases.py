"""The record of a test case (:class:`CaseRecord`): its checked outputs (:class:`OutputRecord`), its timings and
its :class:`Diagnosis` against the bundle's embedded io dump."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from ..base.jsontypes import JsonObject, JsonValue
from .jsonvalues import element, finite_or_name, optional
from .timings import TimingRecord

REFERENCE = "embedded io dump"


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
    expect: JsonValue = None
    get: JsonValue = None
    stats: JsonObject = field(default_factory=dict)
    failure: list[str] | None = None
    worst_path: str | None = None  # a sequence's, map's or optional's worst element (``[3][1]``)
    error_stat: str = "max"  # the statistic of the element errors err is (docs/assertion.md#error-statistics)
    max_err: float | None = None  # under another statistic than max: the largest element error

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
            expect=element(check.expect_value),
            get=element(check.got_value),
            stats={key: _stat(key, value) for key, value in check.stats.items()},
            worst_path=getattr(check, "worst_path", None),
            error_stat=str(getattr(check, "stat", "max")),
            max_err=None if getattr(check, "largest", None) is None else float(check.largest),
        )
        if not record.passed:
            record.failure = list(check.failure_lines())  # the lines the check says of itself
        return record

    def cell(self) -> str:
        """``name err / maxerr``, as the HTML table shows it."""
        err = "n/a" if self.err is None else f"{self.err:.3g}"
        if self.error_stat == "max":
            return f"{self.name} {err} / {self.maxerr:g}"
        largest = "" if self.max_err is None else f", max {self.max_err:.3g}"
        return f"{self.name} {self.error_stat} {err} / {self.maxerr:g}{largest}"

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
            "error_stat": self.error_stat,
            **({"max_err": _finite(self.max_err)} if self.error_stat != "max" else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OutputRecord:
        index = data.get("worst_index")
        return cls(
            name=str(data["name"]),
            passed=bool(data["passed"]),
            err=optional(data.get("err")),
            maxerr=float(data["maxerr"]),
            reason=data.get("reason"),
            worst_index=None if index is None else [int(i) for i in index],
            expect=data.get("expect"),
            get=data.get("get"),
            stats={key: _stat(key, value) for key, value in (data.get("stats") or {}).items()},
            failure=None if data.get("failure") is None else [str(line) for line in data["failure"]],
            worst_path=None if data.get("worst_path") is None else str(data["worst_path"]),
            error_stat=str(data.get("error_stat", "max")),
            max_err=optional(data.get("max_err")),
        )


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def _stat(key: str, value: Any) -> Any:
    return value if key in ("shape", "dtype") else optional(value)


@dataclass
class Diagnosis:
    """Where a failing test case first diverges from the bundle's embedded io dump, or why that is unknown."""

    maxerr: float
    first_divergence: JsonObject | None = None
    matched: int | None = None
    text: str | None = None
    top: list[JsonObject] = field(default_factory=list)
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

    def reason(self) -> str:
        """Why it failed, in a few words: ``prob: err=0.5 > maxerr=0.0001`` (``(+1 more)`` when other outputs
        failed too), the model's error when it failed to run, ``FAILED`` otherwise."""
        if self.error is not None:
            return str(self.error)
        failed = [out for out in self.outputs if not out.passed]
        if not failed:
            return "FAILED"
        first = failed[0]
        err = first.reason or ("not finite" if first.err is None else f"err={first.err:g}")
        more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
        return f"{first.name}: {err} > maxerr={first.maxerr:g}{more}"

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
