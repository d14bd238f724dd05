"""Verifying and timing: assertions and their failures, tampered bundles, the report, providers, profiles, dumps, sweeps."""

from __future__ import annotations

import json
import re
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from tests.support import SAMPLES, one_report, rewrite_bundle, with_changed_weight


@pytest.fixture
def bundle(tmp_path, mgedump):
    out = tmp_path / "cnn.mgetest"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-d", SAMPLES / "images" / "cat.png", "-o", out).code == 0
    return out


def test_report_numbers_are_consistent(bundle, tmp_path, mgerun):
    report_path = tmp_path / "r.json"
    result = mgerun(
        bundle,
        "--iter",
        "20",
        "--warmup-iter",
        "2",
        "--thread",
        "1",
        "--graph-opt",
        "basic",
        "--report-json",
        report_path,
    )
    assert result.code == 0, result.err
    report = one_report(report_path)
    assert report["session"] == {
        "providers": ["CPUExecutionProvider"],
        "threads": 1,
        "graph_opt": "basic",
        "iters": 20,
        "warmup": 2,
        "duration_s": 0.0,
        "concurrency": 1,
    }
    for case in report["test_cases"]:
        lat = case["latency_ms"]
        assert lat["count"] == 20 == len(case["latencies_ms"])
        assert lat["min"] <= lat["median"] <= lat["max"]
        assert lat["min"] <= lat["mean"] <= lat["max"] and lat["p90"] <= lat["p99"] <= lat["max"]
        assert lat["min"] == min(case["latencies_ms"]) and lat["stddev"] >= 0
        assert case["inferences_per_s"] == pytest.approx(1e3 / lat["mean"])
        assert case["batch"] == 1 and case["samples_per_s"] is None
    table = [line for line in result.out.splitlines() if line.startswith("latency (ms)")]
    assert table and "p99" in table[0] and "inf/s" in table[0]


def test_one_iteration_has_zero_stddev(bundle, tmp_path, mgerun):
    report_path = tmp_path / "r.json"
    assert mgerun(bundle, "--iter", "1", "--warmup-iter", "0", "--report-json", report_path).code == 0
    lat = one_report(report_path)["test_cases"][0]["latency_ms"]
    assert lat["count"] == 1 and lat["stddev"] == 0.0 and lat["min"] == lat["max"]


def test_unknown_provider_lists_the_available_ones(bundle, mgerun):
    result = mgerun(bundle, "--provider", "NoSuchExecutionProvider")
    assert result.code == 2
    assert len(result.err.strip().splitlines()) == 1
    for provider in ort.get_available_providers():
        assert provider in result.err
    assert mgerun(bundle, "--provider", "cpu", "--iter", "1").code == 0


def test_bin_out_dump_writes_the_outputs(bundle, tmp_path, mgerun):
    from mgedump.bundle import Bundle

    dump = tmp_path / "dump"
    assert mgerun(bundle, "--iter", "1", "--bin-out-dump", dump).code == 0
    session = ort.InferenceSession(str(SAMPLES / "cnn.onnx"), providers=["CPUExecutionProvider"])
    with Bundle(str(bundle)) as b:
        for i in range(2):
            x = b.tensor(f"test_data_set_{i}/input_0.pb", "data")
            want = session.run(None, {"data": x})[0]
            got = np.load(dump / f"test_data_set_{i}" / "prob.npy", allow_pickle=False)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(got, b.tensor(f"test_data_set_{i}/output_0.pb", "prob"), rtol=1e-6, atol=1e-7)


def test_profile_is_onnxruntime_json(bundle, tmp_path, mgerun):
    profile = tmp_path / "profile.json"
    assert mgerun(bundle, "--iter", "2", "--profile", profile).code == 0
    events = json.loads(profile.read_text())
    assert isinstance(events, list) and events
    assert {"cat", "name", "dur"} <= set(events[0]) or any({"cat", "name"} <= set(e) for e in events)
    assert any(e.get("cat") == "Node" for e in events)


def test_repeat_sweep_times_each_batch(tmp_path, mgerun):
    report_path = tmp_path / "r.json"
    result = mgerun(
        "--repeat-sweep",
        "1,2,4",
        SAMPLES / "dynamic_batch.onnx",
        "-d",
        "x:#rand(0,1,1,...)",
        "--iter",
        "3",
        "--report-json",
        report_path,
    )
    assert result.code == 0, result.err
    sweep = one_report(report_path)["test_cases"][0]["sweep"]
    assert [s["batch"] for s in sweep] == [1, 2, 4]
    assert sweep[2]["samples_per_s"] == pytest.approx(4 * sweep[2]["inferences_per_s"])
    assert all(s["latency_ms"]["count"] == 3 for s in sweep)
    assert "batch sweep (ms)" in result.out and "ms/sample" in result.out


def test_repeat_sweep_needs_a_free_batch_dim(bundle, mgerun):
    result = mgerun(bundle, "--repeat-sweep", "1,2")
    assert result.code == 2 and "fixes dim 0 to 1" in result.err


def test_progress_callback_for_long_runs(bundle, monkeypatch):
    from mgedump.commands import verify as verify_module  # the module
    from mgedump.measure import timing

    monkeypatch.setattr(timing, "PROGRESS_AFTER_S", 0.0)
    calls = []
    report = verify_module.verify(
        str(bundle),
        verify_module.VerifyOptions(iters=50, warmup=0),
        progress=lambda label, done, total: calls.append((label, done, total)),
    )
    assert report.passed
    first_case = [done for label, done, total in calls if label == "test case 0"]
    assert first_case[0] == 1 and first_case[-1] == 50 and first_case == sorted(first_case)
    assert {label for label, _, _ in calls} == {"test case 0", "test case 1"}


def test_no_assert_and_silent(samples, tmp_path, mgedump, mgerun):
    out = tmp_path / "n.mgetest"
    assert mgedump(samples / "cnn.onnx", "-d", "#rand(0,1)", "--no-assert", "-o", out).code == 0
    with zipfile.ZipFile(out) as zf:
        assert not [n for n in zf.namelist() if "output_" in n]
    result = mgerun(out, "--iter", "1")
    assert result.code == 0 and "AssertEqual" not in result.out and "no assertions" in result.out
    silent = tmp_path / "s.mgetest"
    assert mgedump(samples / "cnn.onnx", "-d", "#rand(0,1)", "--silent", "-o", silent).code == 0
    result = mgerun(silent, "--iter", "1")
    assert result.code == 0 and "AssertEqual" not in result.out and "test case 0" not in result.out.splitlines()[0]
    assert result.out.splitlines()[0].startswith("latency (ms)")  # silent is about assertions: timing stays


def test_plain_model_mode_and_report_json(samples, tmp_path, mgerun, mgedump):
    result = mgerun(samples / "cnn.onnx", "-d", "#rand(0,1)", "--iter", "3")
    assert result.code == 0 and "ran (no assertions)" in result.out
    row = next(line for line in result.out.splitlines() if re.match(r"test case 0\s+\d", line))
    assert row.split()[3:5] == ["1", "3"]  # batch, iters
    out = tmp_path / "r.mgetest"
    assert mgedump(samples / "cnn.onnx", "-d", "#rand(0,1)", "-d", "#rand(0,2)", "-o", out).code == 0
    report_path = tmp_path / "report.json"
    assert mgerun(out, "--iter", "4", "--report-json", report_path).code == 0
    report = one_report(report_path)
    assert report["passed"] is True and report["exit_code"] == 0 and len(report["test_cases"]) == 2
    case = report["test_cases"][0]
    assert case["outputs"][0]["name"] == "prob" and case["outputs"][0]["passed"] is True
    lat = case["latency_ms"]
    assert lat["count"] == 4 and lat["min"] <= lat["median"] <= lat["max"]


def test_changed_byte_in_expected_output_names_the_member(samples, tmp_path, mgedump, mgerun):
    out = tmp_path / "t.mgetest"
    assert mgedump(samples / "cnn.onnx", "-d", "#rand(0,1)", "-o", out).code == 0
    data = bytearray(out.read_bytes())
    with zipfile.ZipFile(out) as zf:
        info = zf.getinfo("test_data_set_0/output_0.pb")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + info.file_size - 1] ^= 0x01
    tampered = tmp_path / "tampered.mgetest"
    tampered.write_bytes(bytes(data))
    result = mgerun(tampered)
    assert result.code == 2
    assert "test_data_set_0/output_0.pb" in result.err and "Traceback" not in result.err


def test_changed_weight_fails_the_assertion_with_location_and_values(samples, tmp_path, mgedump, mgerun):
    out = tmp_path / "w.mgetest"
    assert mgedump(samples / "cnn.onnx", "-d", "#rand(0,1)", "-o", out).code == 0
    model = onnx.load(str(samples / "cnn.onnx"))
    gemm_bias = next(init for init in model.graph.initializer if init.dims == [10])
    changed = numpy_helper.to_array(gemm_bias).copy()
    changed[3] += 2.0
    gemm_bias.CopyFrom(numpy_helper.from_array(changed, gemm_bias.name))
    bad = tmp_path / "bad.mgetest"
    rewrite_bundle(
        out,
        bad,
        lambda names, manifest, members: members.update({"model.onnx": model.SerializeToString()}),
        fix_hashes=True,
    )
    result = mgerun(bad, "--iter", "1")
    assert result.code == 1, result.out + result.err
    assert "AssertEqual: err=" in result.out and "(name=prob) FAILED" in result.out
    assert "worst element at [0, " in result.out and "expect=" in result.out and "get=" in result.out
    report = tmp_path / "r.json"
    assert mgerun(bad, "--iter", "1", "--silent", "--report-json", report).code == 1
    check = one_report(report)["test_cases"][0]["outputs"][0]
    assert check["passed"] is False and check["err"] > 1e-4 and len(check["worst_index"]) == 2


def test_io_dump_writes_every_test_case(bundle, tmp_path, mgerun):
    from mgedump.bundle import Bundle
    from mgedump.diagnose.iodump import IoDump

    assert mgerun(bundle, "--iter", "1", "--io-dump", tmp_path / "dump").code == 0
    dump = IoDump(str(tmp_path / "dump"))
    with Bundle(str(bundle)) as b:
        sha = b.manifest.model.sha256
        expected = b.tensor("test_data_set_1/output_0.pb", "prob")
    assert sorted(dump.cases) == [0, 1] and dump.model_sha256 == sha
    np.testing.assert_allclose(dump.cases[1].tensor("prob"), expected, rtol=1e-5, atol=1e-7)
    assert dump.cases[0].names[0] == "data" and [n.op_type for n in dump.cases[0].nodes][:2] == [
        "Conv",
        "BatchNormalization",
    ]


def test_an_embedded_io_dump_names_the_layer_that_changed(tmp_path, mgedump, mgerun):
    good = tmp_path / "good.mgetest"
    assert (
        mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-d", "#rand(0,2)", "--embed-io-dump", "-o", good).code == 0
    )
    assert mgerun(good, "--iter", "1").code == 0  # an embedded dump changes nothing for a bundle that passes
    bad = with_changed_weight(good, tmp_path / "bad.mgetest")
    report = tmp_path / "r.json"
    result = mgerun(bad, "--iter", "1", "--report-json", report)
    assert result.code == 1, result.out + result.err
    lines = result.out.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("  first divergence")))
    assert lines[at].startswith("  first divergence (against the bundle's embedded io dump): node 'conv2' (Conv)")
    assert "its inputs carry err pool1 0" in lines[at]
    assert result.out.count("first divergence") == 1  # --embed-io-dump (no count) covers test case 0 only
    cases = one_report(report)["test_cases"]
    assert cases[0]["diagnosis"]["first_divergence"]["node"] == "conv2" and cases[1]["diagnosis"] is None


def test_an_old_bundle_without_a_dump_still_says_what_failed(tmp_path, mgedump, mgerun):
    good = tmp_path / "good.mgetest"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", good).code == 0
    result = mgerun(with_changed_weight(good, tmp_path / "bad.mgetest"), "--iter", "1")
    assert result.code == 1 and "FAILED" in result.out and "first divergence" not in result.out


def test_a_plain_bundle_runs_without_the_precision_modes(samples, tmp_path, mgedump):
    """mgerun on a bundle of the model as given imports no precision mode (their rewriting and search code): what
    it starts costs every run."""
    import subprocess
    import sys

    out = tmp_path / "p.mgetest"
    assert mgedump(samples / "cnn.onnx", "-d", "#rand(0,1)", "-o", out).code == 0
    code = (
        "import sys\nfrom mgedump.cli import mgerun_main\n"
        f"sys.argv = ['mgerun', {str(out)!r}, '--iter', '1', '-q']\n"
        "try:\n    mgerun_main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print(sorted(m for m in sys.modules if m.startswith('mgedump.optimize.precisions.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr
