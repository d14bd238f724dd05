"""JUnit XML from the JSON report: what Jenkins, GitLab and GitHub test reporters read.

One ``<testsuite>`` per bundle and one ``<testcase>`` per (bundle, test case):
``classname`` is the bundle's name, ``name`` the test case and its spec,
``time`` its wall time in seconds. A failed assertion is a ``<failure>`` holding
the AssertEqual lines ``mgerun`` prints; a model that failed to run is an
``<error>``; a bundle that could not be read at all is one ``<testcase>`` named
``bundle`` with an ``<error>``. Each test case's latency line goes in its
``<system-out>``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from . import bundle_name

# characters XML 1.0 cannot hold at all, even escaped
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(value: Any) -> str:
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))


def _seconds(value: Any) -> str:
    return f"{float(value or 0.0):.6f}"


def _latency_line(case: dict[str, Any]) -> str:
    stats = case.get("latency_ms") or {}
    if not stats.get("count"):
        return ""
    rate = case.get("inferences_per_s")
    return (
        f"latency (ms): median {stats['median']:.3f}, min {stats['min']:.3f}, p90 {stats['p90']:.3f}, "
        f"p99 {stats['p99']:.3f} over {stats['count']} runs"
        + (f"; {rate:.1f} inf/s" if rate else "")
        + (f" at {case['concurrency']} concurrent runs" if case.get("concurrency", 1) > 1 else "")
    )


def _testcase(suite: ET.Element, classname: str, case: dict[str, Any]) -> tuple[int, int]:
    """Add one test case; return (failures, errors) it counts for."""
    element = ET.SubElement(
        suite,
        "testcase",
        classname=_text(classname),
        name=_text(f"test case {case['index']} ({case.get('origin', '')}: {case.get('spec', '')})"),
        time=_seconds(case.get("seconds")),
    )
    failures = errors = 0
    if case.get("error"):
        error = ET.SubElement(element, "error", message=_text(case["error"]), type="RunError")
        error.text = _text(f"the model failed to run: {case['error']}")
        errors = 1
    else:
        failed = [check for check in case.get("outputs", []) if not check.get("passed")]
        if failed:
            lines = [line for check in failed for line in (check.get("failure") or [f"{check['name']} failed"])]
            failure = ET.SubElement(element, "failure", message=_text(lines[0]), type="AssertEqual")
            failure.text = _text("\n".join(lines))
            failures = 1
    latency = _latency_line(case)
    if latency:
        ET.SubElement(element, "system-out").text = _text(latency)
    return failures, errors


def render_junit(document: dict[str, Any]) -> bytes:
    """The JUnit XML document (UTF-8 bytes) of a JSON report (report version 2)."""
    root = ET.Element("testsuites", name="mgerun")
    totals = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
    for bundle in document["bundles"]:
        name = bundle_name(bundle["source"])
        suite = ET.SubElement(root, "testsuite", name=_text(name))
        properties = ET.SubElement(suite, "properties")
        ET.SubElement(properties, "property", name="source", value=_text(bundle["source"]))
        for key in ("providers", "threads", "concurrency"):
            value = (bundle.get("session") or {}).get(key)
            if value is not None:
                text = ", ".join(map(str, value)) if isinstance(value, list) else value
                ET.SubElement(properties, "property", name=key, value=_text(text))
        counts = {"tests": 0, "failures": 0, "errors": 0}
        if bundle.get("error"):
            element = ET.SubElement(suite, "testcase", classname=_text(name), name="bundle", time=_seconds(0))
            error = ET.SubElement(element, "error", message=_text(bundle["error"]), type="BundleError")
            error.text = _text(bundle["error"])
            counts = {"tests": 1, "failures": 0, "errors": 1}
        for case in bundle.get("test_cases", []):
            failures, errors = _testcase(suite, name, case)
            counts["tests"] += 1
            counts["failures"] += failures
            counts["errors"] += errors
        seconds = float(bundle.get("seconds") or 0.0)
        suite.set("tests", str(counts["tests"]))
        suite.set("failures", str(counts["failures"]))
        suite.set("errors", str(counts["errors"]))
        suite.set("skipped", "0")
        suite.set("time", _seconds(seconds))
        for key in ("tests", "failures", "errors"):
            totals[key] += counts[key]
        totals["time"] += seconds
    for key in ("tests", "failures", "errors"):
        root.set(key, str(totals[key]))
    root.set("time", _seconds(totals["time"]))
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
