"""mgerun as a benchmark tool: timing report, providers, profiles, output dumps, batch sweeps, progress."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest

from conftest import SAMPLES, run_script


@pytest.fixture
def bundle(tmp_path, mgedump):
    out = tmp_path / "cnn.mgetest"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-d", SAMPLES / "images" / "cat.png", "-o", out).code == 0
    return out


def test_report_numbers_are_consistent(bundle, tmp_path, mgerun):
    report_path = tmp_path / "r.json"
    result = mgerun(bundle, "--iter", "20", "--warmup-iter", "2", "--thread", "1", "--graph-opt", "basic", "--report-json", report_path)
    assert result.code == 0, result.err
    report = json.loads(report_path.read_text())
    assert report["session"] == {"providers": ["CPUExecutionProvider"], "threads": 1, "graph_opt": "basic", "iters": 20, "warmup": 2}
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
    lat = json.loads(report_path.read_text())["test_cases"][0]["latency_ms"]
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
    result = mgerun("--repeat-sweep", "1,2,4", SAMPLES / "dynamic_batch.onnx", "-d", "x:#rand(0,1,1,...)", "--iter", "3",
                    "--report-json", report_path)
    assert result.code == 0, result.err
    sweep = json.loads(report_path.read_text())["test_cases"][0]["sweep"]
    assert [s["batch"] for s in sweep] == [1, 2, 4]
    assert sweep[2]["samples_per_s"] == pytest.approx(4 * sweep[2]["inferences_per_s"])
    assert all(s["latency_ms"]["count"] == 3 for s in sweep)
    assert "batch sweep (ms)" in result.out and "ms/sample" in result.out


def test_repeat_sweep_needs_a_free_batch_dim(bundle, mgerun):
    result = mgerun(bundle, "--repeat-sweep", "1,2")
    assert result.code == 2 and "fixes dim 0 to 1" in result.err


@pytest.mark.parametrize("args, needle", [
    (["--thread", "0"], "--thread must be >= 1"),
    (["--warmup-iter", "-1"], "--warmup-iter must be >= 0"),
    (["--graph-opt", "max"], "'max' is not one of"),
    (["--repeat-sweep", "1,x"], "not a comma-separated list"),
    (["--repeat-sweep", "0"], "batch sizes must be >= 1"),
])
def test_bad_benchmark_options(bundle, mgerun, args, needle):
    result = mgerun(bundle, *args)
    assert result.code == 2 and needle in result.err and len(result.err.strip().splitlines()) == 1


def test_progress_callback_for_long_runs(bundle, monkeypatch):
    from mgedump import verify as verify_module

    monkeypatch.setattr(verify_module, "PROGRESS_AFTER_S", 0.0)
    calls = []
    report = verify_module.verify(str(bundle), verify_module.VerifyOptions(iters=50, warmup=0),
                                  progress=lambda label, done, total: calls.append((label, done, total)))
    assert report.passed
    first_case = [done for label, done, total in calls if label == "test case 0"]
    assert first_case[0] == 1 and first_case[-1] == 50 and first_case == sorted(first_case)
    assert {label for label, _, _ in calls} == {"test case 0", "test case 1"}


def test_no_progress_bar_without_a_terminal(bundle):
    result = run_script("mgerun", bundle, "--iter", "200")
    assert result.returncode == 0
    assert "\r" not in result.stderr and "\r" not in result.stdout
