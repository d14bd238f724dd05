"""The report's typed records: every renderer reads them, they make the JSON report and read it back, and the
JSON they write is strict: a data file whose name is not UTF-8, and float64 outputs whose error overflows."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
import pytest

from mgedump.report.schema import RunReport, TimingRecord, dumps, short_spec
from tests.support import SAMPLES, rewrite_bundle, run_ok, script, with_changed_weight


def strict_json(data: bytes | str):
    """json.loads as a strict parser reads: no NaN or Infinity, no lone surrogate in any string."""

    def no_constant(name):
        raise ValueError(f"not JSON: {name}")

    def no_surrogates(pairs):
        for key, value in pairs:
            for s in (key, value) if isinstance(value, str) else (key,):
                assert not any(0xD800 <= ord(c) <= 0xDFFF for c in s), s
            if isinstance(value, list):
                assert not any(isinstance(v, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in v) for v in value)
        return dict(pairs)

    return json.loads(data, parse_constant=no_constant, object_pairs_hook=no_surrogates)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict:
    """A JSON report of every kind of record: a swept plain model (one call), a failing bundle with a diagnosis,
    a profiled one, and one that is not a bundle (another call)."""
    folder = tmp_path_factory.mktemp("records")
    run_ok("mgedump", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--embed-io-dump", "-o", folder / "good.mgetest", "-q")
    with_changed_weight(folder / "good.mgetest", folder / "broken.mgetest")
    (folder / "junk.mgetest").write_bytes(b"junk")
    from mgedump.cli import mgerun_main

    documents = {}
    calls = {
        "bundles": [folder / "good.mgetest", folder / "broken.mgetest", folder / "junk.mgetest", "--profile",
                    folder / "p.json"],
        "sweep": [SAMPLES / "dynamic_batch.onnx", "-d", "x:#rand(0,1,2,...)", "--repeat-sweep", "1,2"],
    }  # fmt: skip
    for name, args in calls.items():
        target = folder / f"{name}.json"
        with pytest.raises(SystemExit):
            mgerun_main([str(a) for a in [*args, "--iter", "3", "--report-json", target, "-q"]])
        documents[name] = strict_json(target.read_bytes())
    return documents


@pytest.mark.parametrize("name", ["bundles", "sweep"])
def test_records_read_a_report_back_exactly(saved, name):
    document = saved[name]
    report = RunReport.from_json(document)
    assert strict_json(dumps(report.to_json())) == document
    assert RunReport.from_json(report.to_json()) == report


def test_the_latency_line_is_formatted_once(saved):
    from mgedump.report.html import render_html
    from mgedump.report.junit import render_junit

    report = RunReport.from_json(saved["bundles"])
    case = report.bundles[0].test_cases[0]
    line = case.timing.line()
    assert line.startswith("latency (ms): median ") and f"over {case.timing.latency.count} run(s)" in line
    assert line in render_html(report) and line in render_junit(report).decode()


def test_a_sweep_reads_per_sample_from_one_statistic(saved):
    (case,) = RunReport.from_json(saved["sweep"]).bundles[0].test_cases
    for timing in [case.timing, *case.sweep]:
        assert timing.sample_rate * timing.ms_per_sample == pytest.approx(1e3)
        assert timing.sample_rate == pytest.approx(timing.inferences_per_s * timing.batch)
    assert TimingRecord().ms_per_sample is None and TimingRecord().line() == ""


def test_numbers_json_cannot_hold_are_named():
    text = dumps({"a": float("inf"), "b": [float("-inf"), float("nan")], "c": "\udcff", "\udcfe": 1.5})
    assert strict_json(text) == {"a": "inf", "b": ["-inf", "nan"], "c": "\\xff", "\\xfe": 1.5}


@pytest.mark.parametrize(
    ("spec", "short"),
    [
        ("#rand(0,1)", "#rand(0,1)"),
        ("/home/ci/data/cat.png", "cat.png"),
        ("x:/home/ci/a.npy;len:#const(7)", "x:a.npy;len:#const(7)"),
        ("input:0:C:\\data\\b.npy", "input:0:b.npy"),
        ("rel/dir/c.npy", "rel/dir/c.npy"),
    ],
)
def test_test_names_leave_out_absolute_folders(spec, short):
    assert short_spec(spec) == short


# ---------------------------------------------------------------- regressions, through the real console script


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []

    def handle_data(self, data):
        self.text.append(data)


def test_a_data_file_whose_name_is_not_utf8(tmp_path):
    """mgerun M -d $'\\xff.npy' --report-html r.html ended in a UnicodeEncodeError traceback, and its JUnit held
    &#56575;, which XML parsers refuse."""
    folder = os.fsencode(tmp_path)
    np.save(tmp_path / "x.npy", np.random.default_rng(0).random((1, 3, 16, 16), dtype=np.float32))
    os.rename(os.path.join(folder, b"x.npy"), os.path.join(folder, b"\xff.npy"))
    argv = [os.fsencode(script("mgerun")), os.fsencode(SAMPLES / "dynamic_batch.onnx"), b"-d", b"\xff.npy"]
    argv += [b"--iter", b"2", b"--report-html", b"r.html", b"--junit-xml", b"j.xml", b"--report-json", b"r.json"]
    done = subprocess.run(argv, cwd=folder, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert b"Traceback" not in done.stderr and b"\xff" not in done.stdout + done.stderr
    assert b"test case 0 (-d #1: \\xff.npy)" in done.stdout
    page = (tmp_path / "r.html").read_bytes().decode("utf-8")
    parser = Page()
    parser.feed(page)
    assert "test case 0 (-d #1: \\xff.npy)" in "".join(parser.text)
    junit = (tmp_path / "j.xml").read_bytes()
    assert b"&#" not in junit.replace(b"&#10;", b"")
    (case,) = ET.fromstring(junit).iter("testcase")
    assert case.get("name") == "test case 0 (-d #1: \\xff.npy)"
    document = strict_json((tmp_path / "r.json").read_bytes())
    assert document["bundles"][0]["test_cases"][0]["spec"] == "\\xff.npy"


def test_float64_outputs_whose_error_overflows(tmp_path):
    """A float64 output near its largest value: its err (and its statistics) overflow; the JSON report stays JSON
    that strict parsers accept."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "f64",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [1, 2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "f64.onnx")
    np.save(tmp_path / "big.npy", np.array([[1.7e308, 1e308]]))
    run_ok("mgedump", tmp_path / "f64.onnx", "-d", tmp_path / "big.npy", "-o", tmp_path / "ok.mgetest", "-q")

    def far(names, manifest, members):
        from onnx import numpy_helper

        expected = numpy_helper.from_array(np.array([[-1.7e308, 1e308]]), "y")
        members["test_data_set_0/output_0.pb"] = expected.SerializeToString()

    rewrite_bundle(tmp_path / "ok.mgetest", tmp_path / "far.mgetest", far, fix_hashes=True)
    done = subprocess.run(
        [script("mgerun"), tmp_path / "far.mgetest", "--iter", "1", "--report-json", tmp_path / "r.json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    text = (tmp_path / "r.json").read_text(encoding="utf-8")
    assert "Infinity" not in text and "NaN" not in text
    (output,) = strict_json(text)["bundles"][0]["test_cases"][0]["outputs"]
    assert output["passed"] is False and output["err"] is None
    assert output["stats"]["abs_err_max"] == "inf" and output["stats"]["get_mean"] == "inf"
    assert "abs err max=inf" in done.stdout
