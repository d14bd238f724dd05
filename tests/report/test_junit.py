"""JUnit XML from a JSON report: counts, outcomes, and text that XML cannot hold."""

from __future__ import annotations

from junitparser import Error, Failure, JUnitXml

from mgedump.report.junit import render_junit


def _case(index, passed=True, error=None, spec="#rand(0,1)"):
    outputs = [] if error else [
        {"name": "y", "passed": passed, "err": 0.0 if passed else 0.5, "maxerr": 1e-4,
         "failure": None if passed else ["AssertEqual: err=0.5 (name=y) FAILED (maxerr=0.0001)", "  worst element"]}
    ]  # fmt: skip
    return {
        "index": index, "spec": spec, "origin": f"-d #{index + 1}", "passed": passed and not error, "error": error,
        "outputs": outputs, "seconds": 0.25, "latency_ms": {"count": 3, "min": 1.0, "median": 1.5, "p90": 2.0,
        "p99": 2.0, "max": 2.0, "stddev": 0.4}, "inferences_per_s": 600.0, "concurrency": 1,
    }  # fmt: skip


def test_counts_and_outcomes(tmp_path):
    document = {
        "report_version": 2,
        "exit_code": 2,
        "bundles": [
            {"source": "zoo/a.mgetest", "exit_code": 1, "seconds": 1.5, "session": {"providers": ["CPU"]},
             "test_cases": [_case(0), _case(1, passed=False), _case(2, error="the model failed: bad index")]},
            {"source": "zoo/b.mgetest", "exit_code": 2, "seconds": 0.1, "error": "zoo/b.mgetest: not a bundle",
             "test_cases": []},
        ],
    }  # fmt: skip
    path = tmp_path / "j.xml"
    path.write_bytes(render_junit(document))
    xml = JUnitXml.fromfile(str(path))
    suites = list(xml)
    assert [(s.name, s.tests, s.failures, s.errors) for s in suites] == [("a", 3, 1, 1), ("b", 1, 0, 1)]
    assert xml.tests == 4 and xml.failures == 1 and xml.errors == 2
    a = list(suites[0])
    assert [c.name for c in a] == ["test case 0 (-d #1: #rand(0,1))", "test case 1 (-d #2: #rand(0,1))",
                                   "test case 2 (-d #3: #rand(0,1))"]  # fmt: skip
    assert a[0].result == [] and a[0].time == 0.25 and "median 1.500" in a[0].system_out
    (failure,) = a[1].result
    assert isinstance(failure, Failure) and failure.text.endswith("  worst element")
    (error,) = a[2].result
    assert isinstance(error, Error) and error.message == "the model failed: bad index"
    (bundle_error,) = list(suites[1])[0].result
    assert isinstance(bundle_error, Error) and bundle_error.type == "BundleError"


def test_characters_xml_cannot_hold_are_escaped(tmp_path):
    document = {
        "report_version": 2,
        "exit_code": 0,
        "bundles": [{"source": "c.mgetest", "exit_code": 0, "seconds": 0, "test_cases": [_case(0, spec="a\x00b\x1b")]}],
    }
    path = tmp_path / "j.xml"
    path.write_bytes(render_junit(document))
    (case,) = [c for s in JUnitXml.fromfile(str(path)) for c in s]
    assert case.name == "test case 0 (-d #1: a\\x00b\\x1b)"
