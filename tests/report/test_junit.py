"""JUnit XML: Jenkins' schema (jenkins-junit.xsd, every rule checked), junitparser and xunitparser read it, and it
says what CI needs: unique suite names, test names without the packing machine's paths, when and where each suite
ran, the first divergence in the failure, run errors said once, unchecked test cases skipped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xunitparser
from junitparser import Error, Failure, JUnitXml, Skipped

from mgedump.report.junit import render_junit
from mgedump.report.schema import (
    Assertion,
    BundleRecord,
    CaseRecord,
    Latency,
    OutputRecord,
    RunReport,
    Session,
    TimingRecord,
)
from tests.support import SAMPLES, run_ok, with_changed_weight

XSD = Path(__file__).with_name("jenkins-junit.xsd")
XS = "{http://www.w3.org/2001/XMLSchema}"


# ---------------------------------------------------------------- the schema's rules, read from the XSD itself


def _rules() -> dict[str, dict]:
    """Per element of the XSD: its attributes (name -> required), its children in order (name, min, max), whether
    it holds text (mixed or a string type) and whether it may have attributes or children at all."""
    rules = {}
    for element in ET.parse(XSD).getroot().findall(f"{XS}element"):
        name = element.get("name")
        if element.get("type") == "xs:string":
            rules[name] = {"attributes": {}, "children": [], "text": True}
            continue
        complex_type = element.find(f"{XS}complexType")
        attributes = {a.get("name"): a.get("use") == "required" for a in complex_type.findall(f"{XS}attribute")}
        sequence = complex_type.find(f"{XS}sequence")
        children = []
        for child in [] if sequence is None else sequence.findall(f"{XS}element"):
            high = child.get("maxOccurs", "1")
            children.append(
                (child.get("ref"), int(child.get("minOccurs", "1")), None if high == "unbounded" else int(high))
            )
        rules[name] = {"attributes": attributes, "children": children, "text": complex_type.get("mixed") == "true"}
    return rules


def xsd_problems(element: ET.Element, rules: dict[str, dict] | None = None, path: str = "") -> list[str]:
    """What in this document breaks the XSD's rules (none: it is valid)."""
    rules = rules or _rules()
    where = f"{path}/{element.tag}"
    if element.tag not in rules:
        return [f"{where}: not an element of the schema"]
    rule, problems = rules[element.tag], []
    for attribute in element.attrib:
        if attribute not in rule["attributes"]:
            problems.append(f"{where}: attribute {attribute!r} is not allowed")
    for attribute, required in rule["attributes"].items():
        if required and attribute not in element.attrib:
            problems.append(f"{where}: attribute {attribute!r} is missing")
    if not rule["text"] and ((element.text or "").strip() or any((c.tail or "").strip() for c in element)):
        problems.append(f"{where}: holds text")
    tags = [child.tag for child in element]
    at = 0
    for name, low, high in rule["children"]:
        count = 0
        while at < len(tags) and tags[at] == name and (high is None or count < high):
            at, count = at + 1, count + 1
        if count < low:
            problems.append(f"{where}: needs at least {low} <{name}>")
    if at < len(tags):
        problems.append(f"{where}: <{tags[at]}> is not allowed there (children: {tags})")
    for child in element:
        problems += xsd_problems(child, rules, where)
    return problems


@pytest.mark.parametrize(
    "broken",
    [
        '<testsuites><testsuite name="a" tests="1"><testcase name="t"><skipped message="m"/></testcase></testsuite>'
        "</testsuites>",
        '<testsuites><testsuite name="a" tests="1"><testcase name="t"><system-out>x</system-out><failure/>'
        "</testcase></testsuite></testsuites>",
        '<testsuites><testsuite tests="1"/></testsuites>',
        '<testsuites skipped="1"/>',
        '<testsuites><testsuite name="a" tests="0"><properties/></testsuite></testsuites>',
        '<testsuites><testsuite name="a" tests="0">text</testsuite></testsuites>',
    ],
)
def test_the_schema_check_refuses_what_the_xsd_refuses(broken):
    assert xsd_problems(ET.fromstring(broken))


# ---------------------------------------------------------------- a real run


@pytest.fixture(scope="module")
def junit(tmp_path_factory):
    """One mgerun call on: a/m (passes), b/m (same file name; a changed weight makes it fail, with an io dump),
    checks/off (packed --no-assert), damaged (not a bundle). The data of a/m is a file given by absolute path."""
    import numpy as np

    folder = tmp_path_factory.mktemp("junit")
    for name in ("a", "b", "checks"):
        (folder / name).mkdir()
    data = folder / "deep" / "inside" / "gray.npy"
    data.parent.mkdir(parents=True)
    np.save(data, np.random.default_rng(0).random((1, 1, 28, 28), dtype=np.float32))
    run_ok("mgedump", SAMPLES / "gray.onnx", "-d", data, "-o", folder / "a" / "m.mgetest", "-q")
    run_ok("mgedump", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--embed-io-dump", "-o", folder / "good.mgetest", "-q")
    with_changed_weight(folder / "good.mgetest", folder / "b" / "m.mgetest")
    run_ok("mgedump", SAMPLES / "gray.onnx", "-d", "#rand(0,1)", "--no-assert", "-o", folder / "checks" / "off.mgetest", "-q")  # fmt: skip
    (folder / "checks" / "damaged.mgetest").write_bytes(b"not a zip archive")
    from mgedump.cli import mgerun_main

    target = folder / "junit.xml"
    args = [folder / "a", folder / "b", folder / "checks", "--iter", "2", "--junit-xml", target, "-q"]
    with pytest.raises(SystemExit) as ended:
        mgerun_main([str(a) for a in args])
    assert ended.value.code == 2
    return target


def test_the_document_meets_jenkins_schema(junit):
    assert xsd_problems(ET.parse(junit).getroot()) == []


def test_an_xsd_validator_accepts_the_document(junit):
    """The same schema through a real XSD 1.0 validator (xmlschema), beside the rule check above."""
    import xmlschema

    schema = xmlschema.XMLSchema(str(Path(__file__).with_name("jenkins-junit.xsd")))
    schema.validate(str(junit))
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        schema.validate(ET.fromstring("<testsuites><testsuite/></testsuites>"))


def test_junitparser_reads_counts_and_outcomes(junit):
    xml = JUnitXml.fromfile(str(junit))
    suites = {suite.name: suite for suite in xml}
    assert set(suites) == {"a/m", "b/m", "off", "damaged"}  # a/m and b/m: their file names alone would collide
    passing, failing, off, damaged = suites["a/m"], suites["b/m"], suites["off"], suites["damaged"]
    assert (passing.tests, passing.failures, passing.errors, passing.skipped) == (1, 0, 0, 0)
    assert (failing.tests, failing.failures, failing.errors) == (1, 1, 0)
    assert (off.tests, off.skipped) == (1, 1)
    assert (damaged.tests, damaged.errors) == (1, 1)
    assert xml.tests == 4 and xml.failures == 1 and xml.errors == 1
    (case,) = list(off)
    assert isinstance(case.result[0], Skipped)
    (case,) = list(damaged)
    assert isinstance(case.result[0], Error) and case.result[0].type == "BundleError"


def test_suites_are_named_apart_and_say_when_and_where(junit):
    root = ET.parse(junit).getroot()
    names = [suite.get("name") for suite in root]
    assert len(set(names)) == len(names) == 4
    for suite in root:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", suite.get("timestamp"))
        assert suite.get("hostname")
        properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert all(name.endswith(f" ({suite.get('name')})") for name in properties)


def test_xunitparser_reads_it(junit):
    suite, result = xunitparser.parse(open(junit, encoding="utf-8"))  # noqa: SIM115
    assert result.testsRun == 4 and len(result.failures) == 1 and len(result.errors) == 1 and len(result.skipped) == 1
    assert any(key.startswith("source (") for key in suite.properties)


def test_names_leave_out_the_packing_machines_folders(junit):
    root = ET.parse(junit).getroot()
    (passing,) = [s for s in root if s.get("name") == "a/m"]
    (case,) = passing.iter("testcase")
    assert case.get("name") == "test case 0 (-d #1: gray.npy)"
    assert "deep/inside/gray.npy" in case.find("system-out").text  # the full spec is kept, beside it


def test_the_failure_holds_the_first_divergence(junit):
    root = ET.parse(junit).getroot()
    (failing,) = [s for s in root if s.get("name") == "b/m"]
    failure = next(failing.iter("failure"))
    assert failure.get("message").startswith("AssertEqual: err=") and failure.get("type") == "AssertEqual"
    lines = failure.text.splitlines()
    assert lines[0] == failure.get("message")
    assert any(
        line.startswith("first divergence (against the bundle's embedded io dump): node 'conv2'") for line in lines
    )


# ---------------------------------------------------------------- from records


def _case(index: int, passed: bool = True, error: str | None = None, spec: str = "#rand(0,1)") -> CaseRecord:
    outputs = []
    if error is None:
        failure = None if passed else ["AssertEqual: err=0.5 (name=y) FAILED (maxerr=0.0001)", "  worst element"]
        outputs = [OutputRecord("y", passed, 0.0 if passed else 0.5, 1e-4, failure=failure)]
    runs = [1.0, 1.5, 2.0]
    timing = TimingRecord(1, 1, Latency.of(runs), runs, inferences_per_s=600.0)
    return CaseRecord(index, spec, f"-d #{index + 1}", passed and not error, error, outputs, timing, 0.25)


def _bundle(source: str, cases: list[CaseRecord], checked: bool = True, **more) -> BundleRecord:
    code = 0 if all(c.passed for c in cases) else 1
    return BundleRecord(
        source, Path(source).stem, "bundle", code, seconds=1.5, started="2025-01-31T09:30:00Z",
        assertion=Assertion(checked, 1e-4), session=Session(["CPUExecutionProvider"]), test_cases=cases, **more,
    )  # fmt: skip


def test_outcomes_from_records(tmp_path):
    error = "the model failed to run: bad index"
    report = RunReport(
        [
            _bundle("zoo/a.mgetest", [_case(0), _case(1, passed=False), _case(2, error=error)]),
            BundleRecord(
                "zoo/b.mgetest",
                "b",
                "bundle",
                2,
                seconds=0.1,
                started="2025-01-31T09:30:01Z",
                error="zoo/b.mgetest: not a bundle",
            ),  # fmt: skip
            _bundle("zoo/c.mgetest", [_case(0)], checked=False),
        ],
        exit_code=2,
        environment={"host": "ci-7", "onnxruntime": "1.20.1", "cpu": {"arch": "x86_64"}},
    )
    path = tmp_path / "j.xml"
    path.write_bytes(render_junit(report))
    assert xsd_problems(ET.parse(path).getroot()) == []
    xml = JUnitXml.fromfile(str(path))
    suites = list(xml)
    assert [(s.name, s.tests, s.failures, s.errors, s.skipped) for s in suites] == [
        ("a", 3, 1, 1, 0),
        ("b", 1, 0, 1, 0),
        ("c", 1, 0, 0, 1),
    ]
    assert xml.tests == 5 and xml.failures == 1 and xml.errors == 2
    a = list(suites[0])
    assert [c.name for c in a] == [f"test case {k} (-d #{k + 1}: #rand(0,1))" for k in range(3)]
    assert a[0].result == [] and a[0].time == 0.25 and "median 1.500" in a[0].system_out
    (failure,) = a[1].result
    assert isinstance(failure, Failure) and failure.text.endswith("  worst element")
    (run_error,) = a[2].result
    assert isinstance(run_error, Error) and run_error.message == error and run_error.text == error  # said once
    assert suites[0].hostname == "ci-7" and suites[0].timestamp == "2025-01-31T09:30:00"
    assert render_junit(report.to_json()) == render_junit(report)  # a saved JSON report renders the same


def test_characters_xml_cannot_hold_are_escaped_visibly(tmp_path):
    spec = "a\x00b\x1b\udcff\ufffe\u202e"
    report = RunReport([_bundle("c\udcfe.mgetest", [_case(0, spec=spec)])])
    data = render_junit(report)
    assert b"&#" not in data.replace(b"&#10;", b"")
    path = tmp_path / "j.xml"
    path.write_bytes(data)
    (case,) = [c for s in JUnitXml.fromfile(str(path)) for c in s]
    assert case.name == "test case 0 (-d #1: a\\x00b\\x1b\\xff\\ufffe\\u202e)"
    assert ET.parse(path).getroot()[0].get("name") == "c\\xfe"


def test_a_different_packing_machine_is_said_beside_the_failure():
    differs = ["packed with onnxruntime 1.17.0, run with 1.20.1"]
    packed = {"onnxruntime": "1.17.0", "cpu": {"arch": "x86_64"}, "os": {"system": "Linux", "release": "6"}}
    bundle = _bundle("m.mgetest", [_case(0, passed=False)], packed_environment=packed, environment_differences=differs)
    root = ET.fromstring(render_junit(RunReport([bundle], exit_code=1)))
    failure = next(root.iter("failure"))
    assert failure.text.splitlines()[-1] == f"where it ran differs from where it was packed: {differs[0]}"
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert properties["environment differences (m)"] == differs[0]
    assert properties["packed environment (m)"].startswith("onnxruntime 1.17.0 on")


def test_each_outputs_own_maxerr_is_shown():
    from mgedump.report.html import render_html

    case = _case(0)
    case.outputs = [OutputRecord("prob", True, 0.002, 0.01), OutputRecord("box", True, 0.0, 1e-4)]
    bundle = _bundle("m.mgetest", [case])
    assert bundle.output_maxerr() == {"prob": 0.01} and bundle.maxerr_text() == "maxerr 0.0001; prob 0.01"
    root = ET.fromstring(render_junit(RunReport([bundle])))
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert properties["maxerr (m)"] == "0.0001; prob 0.01"
    page = render_html(RunReport([bundle]))
    assert "maxerr 0.0001; prob 0.01" in page and "prob 0.002 / 0.01" in page
