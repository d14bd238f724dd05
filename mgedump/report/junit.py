"""JUnit XML from the report's records: what Jenkins, GitLab and GitHub test reporters read.

The document follows Jenkins' JUnit schema (``jenkins-junit.xsd``; the tests
check every rule of it) and parses with junitparser and xunitparser:

- one ``<testsuite>`` per bundle, named as the other reports name it (its file
  name without ``.mgetest``; ``a/m`` and ``b/m`` where two share a file name),
  with ``timestamp`` (when it started, UTC) and ``hostname`` (where it ran);
- ``<properties>``: how it ran (the bound, ``maxerr``, and the statistic it bounds, ``error_stat``), where it ran, where it was packed and what
  differs; each name carries the suite's name (``source (cnn)``), so that no
  two suites of the document hold one property name;
- one ``<testcase>`` per test case: ``classname`` is the suite's name, ``name``
  is ``test case N (ORIGIN: SPEC)`` with the packing machine's folders left
  out of paths, ``time`` its wall time in seconds;
- a failed assertion is a ``<failure type="AssertEqual">`` holding the lines
  ``mgerun`` prints, then the first divergence and what differs from where the
  bundle was packed; a model that failed to run is an ``<error
  type="RunError">``; a test case whose outputs were not checked (``--no-assert``,
  a plain model) is ``<skipped>``; a bundle that could not be read is one
  ``<testcase name="bundle">`` with an ``<error type="BundleError">``, and one that ``--maxfail`` left unchecked one
  ``<testcase name="bundle">`` ``<skipped>``;
- each test case's ``<system-out>`` holds its latency line and its full spec.

Text goes through :func:`mgedump.base.text.xml` and the standard library's
:class:`~xml.sax.saxutils.XMLGenerator`: characters XML 1.0 cannot hold are
shown as visible escapes, never as character references parsers refuse.
"""

from __future__ import annotations

import io
from typing import Any
from xml.sax.saxutils import XMLGenerator
from xml.sax.xmlreader import AttributesImpl

from ..base import text
from ..model.environment import summary as environment_summary
from .schema import BundleRecord, CaseRecord, RunReport, as_report

SKIPPED = "not checked: assertions are off (run and timed only)"


def _seconds(value: float | None) -> str:
    return f"{float(value or 0.0):.6f}"


def _timestamp(started: str) -> str:
    """JUnit's timestamp: ISO 8601 without a zone (it is UTC)."""
    return started.removesuffix("Z")


class _Writer:
    """Indented XML through :class:`XMLGenerator`, every text and attribute cleaned by :func:`mgedump.base.text.xml`."""

    def __init__(self) -> None:
        self.out = io.StringIO()
        self.xml = XMLGenerator(self.out, encoding="utf-8", short_empty_elements=True)
        self.depth = 0

    def _indent(self) -> None:
        self.xml.ignorableWhitespace("\n" + "  " * self.depth)

    def open(self, tag: str, **attrs: Any) -> None:
        self._indent()
        self.xml.startElement(tag, AttributesImpl({k: text.xml(v) for k, v in attrs.items()}))
        self.depth += 1

    def close(self, tag: str) -> None:
        self.depth -= 1
        self._indent()
        self.xml.endElement(tag)

    def leaf(self, tag: str, body: str | None = None, **attrs: Any) -> None:
        self._indent()
        self.xml.startElement(tag, AttributesImpl({k: text.xml(v) for k, v in attrs.items()}))
        if body:
            self.xml.characters(text.xml(body, lines=True))
        self.xml.endElement(tag)

    def document(self) -> bytes:
        return b'<?xml version="1.0" encoding="utf-8"?>' + self.out.getvalue().encode("utf-8") + b"\n"


def _properties(bundle: BundleRecord, environment: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(name, value) of a suite's properties."""
    found = [("source", bundle.source), ("kind", bundle.kind)]
    if bundle.error is not None:
        return [*found, ("error", bundle.error)]
    if bundle.not_run is not None:
        return [*found, ("not run", bundle.not_run)]
    session, assertion = bundle.session, bundle.assertion
    assert session is not None and assertion is not None
    found += [
        ("providers", ", ".join(session.providers)),
        ("threads", str(session.settings.threads or "default")),
        ("graph_opt", session.settings.graph_opt or "all"),
        ("iters", str(session.iters)),
        ("warmup", str(session.warmup)),
        ("concurrency", str(session.concurrency)),
        ("maxerr", bundle.maxerr_text().removeprefix("maxerr ")),
    ]
    if bundle.checked and bundle.error_stat_text():
        found.append(("error_stat", bundle.error_stat_text()))
    if environment:
        found.append(("environment", environment_summary(environment)))
    if bundle.fitting is not None:
        found.append(("fitting", bundle.fitting.choice_line().removeprefix("fitting: ")))
        chosen = bundle.fitting.chosen or {}
        found += [(f"fitting {key}", str(chosen[key])) for key in ("variant", "provider", "threads", "graph_opt",
                  "execution_mode", "median_ms", "p90_ms") if key in chosen]  # fmt: skip
    if bundle.kind == "bundle":
        packed = bundle.packed_environment
        found.append(("packed environment", environment_summary(packed) if packed else "unknown"))
        found.append(("environment differences", "; ".join(bundle.environment_differences) or "none"))
    return found


def _failure_text(case: CaseRecord, bundle: BundleRecord) -> str:
    lines = case.failure_lines()
    if case.diagnosis is not None:
        lines.append(case.diagnosis.line())
    if bundle.environment_differences:
        lines.append("where it ran differs from where it was packed: " + "; ".join(bundle.environment_differences))
    return "\n".join(lines)


def _outcome(case: CaseRecord, bundle: BundleRecord) -> str:
    """``passed``, ``failure``, ``error`` (the model failed to run) or ``skipped`` (outputs not checked)."""
    if case.error:
        return "error"
    if not case.passed:
        return "failure"
    return "passed" if bundle.checked else "skipped"


def _testcase(w: _Writer, suite: str, case: CaseRecord, bundle: BundleRecord) -> None:
    w.open("testcase", name=case.short_head, classname=suite, time=_seconds(case.seconds))
    outcome = _outcome(case, bundle)
    if outcome == "error":
        w.leaf("error", case.error, message=case.error, type="RunError")
    elif outcome == "failure":
        lines = case.failure_lines() or ["the check failed"]
        w.leaf("failure", _failure_text(case, bundle), message=lines[0], type="AssertEqual")
    elif outcome == "skipped":
        w.leaf("skipped", SKIPPED)
    out = [line for line in (case.timing.line(), f"spec: {case.spec}", f"origin: {case.origin}") if line]
    w.leaf("system-out", "\n".join(out))
    w.close("testcase")


def _counts(bundle: BundleRecord) -> dict[str, int]:
    counts = {"tests": 0, "failure": 0, "error": 0, "skipped": 0}
    if bundle.not_run is not None:
        outcomes = ["skipped"]
    elif bundle.error is not None:
        outcomes = ["error"]
    else:
        outcomes = [_outcome(case, bundle) for case in bundle.test_cases]
    for outcome in outcomes:
        counts["tests"] += 1
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def render_junit(document: RunReport | dict[str, Any]) -> bytes:
    """The JUnit XML document (UTF-8 bytes) of a report: its records, or a JSON report (report version 2)."""
    report = as_report(document)
    counts = [_counts(bundle) for bundle in report.bundles]
    w = _Writer()
    w.open(
        "testsuites",
        name="mgerun",
        tests=str(sum(c["tests"] for c in counts)),
        failures=str(sum(c["failure"] for c in counts)),
        errors=str(sum(c["error"] for c in counts)),
        time=_seconds(sum(bundle.seconds for bundle in report.bundles)),
    )
    for bundle, count in zip(report.bundles, counts, strict=True):
        w.open(
            "testsuite",
            name=bundle.name,
            tests=str(count["tests"]),
            failures=str(count["failure"]),
            errors=str(count["error"]),
            skipped=str(count["skipped"]),
            time=_seconds(bundle.seconds),
            **({"timestamp": _timestamp(bundle.started)} if bundle.started else {}),
            hostname=str((report.environment_of(bundle) or {}).get("host") or ""),
        )
        w.open("properties")
        for key, value in _properties(bundle, report.environment_of(bundle)):
            w.leaf("property", name=f"{key} ({bundle.name})", value=value)
        w.close("properties")
        if bundle.error is not None:
            w.open("testcase", name="bundle", classname=bundle.name, time=_seconds(bundle.seconds))
            w.leaf("error", bundle.error, message=bundle.error, type="BundleError")
            w.close("testcase")
        if bundle.not_run is not None:
            w.open("testcase", name="bundle", classname=bundle.name, time=_seconds(0.0))
            w.leaf("skipped", message=bundle.not_run)
            w.close("testcase")
        for case in bundle.test_cases:
            _testcase(w, bundle.name, case, bundle)
        w.close("testsuite")
    w.close("testsuites")
    return w.document()
