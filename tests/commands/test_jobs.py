"""--jobs N: bundles checked in worker processes give the verdicts of one process; timing is none, serial or
alone, as the report says; a worker that is killed fails its bundle alone and the run goes on."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support import SAMPLES, script
from tests.zoo import failing_bundle, kill_busy_worker, slow_bundle, small_bundle, two_case_bundle


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    scratch = tmp_path_factory.mktemp("scratch")
    root = tmp_path_factory.mktemp("zoo")
    for k in range(3):
        (root / "one").mkdir(exist_ok=True)
        (root / "one" / f"g{k}.mgetest").write_bytes(small_bundle(scratch).read_bytes())
    (root / "two").mkdir()
    (root / "two" / "cnn.mgetest").write_bytes(two_case_bundle(scratch).read_bytes())
    failing_bundle(small_bundle(scratch), root / "two" / "fails.mgetest")
    (root / "junk.mgetest").write_text("not a bundle\n")
    return root


def _report(mgerun, zoo, tmp_path, *args) -> tuple[int, dict, str]:
    target = tmp_path / f"r{len(list(tmp_path.iterdir()))}.json"
    result = mgerun(zoo, "--iter", "3", "--report-json", target, *args)
    return result.code, json.loads(target.read_text()), result.out


def _verdicts(document: dict) -> list[tuple]:
    return [
        (b["name"], b["exit_code"], b["error"], [(c["index"], c["passed"]) for c in b["test_cases"]])
        for b in document["bundles"]
    ]


def test_two_workers_give_the_verdicts_of_one_process(zoo, tmp_path, mgerun):
    code, here, _ = _report(mgerun, zoo, tmp_path)
    code2, jobs, out = _report(mgerun, zoo, tmp_path, "--jobs", "2")
    assert code == code2 == 2
    assert _verdicts(jobs) == _verdicts(here)
    assert "jobs" not in here and jobs["jobs"]["workers"] == 2 and jobs["jobs"]["timing"] == "none"
    assert jobs["jobs"]["worker_peak_rss_mib"] > 0
    ran = [b for b in jobs["bundles"] if b["error"] is None]
    assert all(c["latency_ms"] == {"count": 0} and c["latencies_ms"] == [] for b in ran for c in b["test_cases"])
    assert all(b["cold_start"] == {"session_create_ms": None, "first_run_ms": None} for b in ran)
    assert all(b["session"]["threads"] == 1 for b in ran)  # two workers share the two cores
    assert sorted(line for line in out.splitlines() if line.startswith("== ")) == sorted(
        f"== {zoo / rel}" for rel in ("junk.mgetest", "one/g0.mgetest", "one/g1.mgetest", "one/g2.mgetest",
                                      "two/cnn.mgetest", "two/fails.mgetest")
    )  # fmt: skip
    assert "latency (ms)" not in out
    assert out.splitlines()[-1].startswith("6 bundle(s): 4 passed, 1 failed, 1 could not run; peak memory ")


def test_serial_timing_times_each_bundle_after_the_check(zoo, tmp_path, mgerun):
    code, document, out = _report(mgerun, zoo, tmp_path, "-j", "2", "--jobs-timing", "serial", "--warmup-iter", "2")
    assert code == 2 and document["jobs"]["timing"] == "serial"
    ran = [b for b in document["bundles"] if b["error"] is None]
    assert all(len(c["latencies_ms"]) == 3 and len(c["warmup_ms"]) == 2 for b in ran for c in b["test_cases"])
    assert all(b["session"]["iters"] == 3 for b in ran)
    failed = next(b for b in ran if b["exit_code"] == 1)
    assert failed["test_cases"][0]["passed"] is False and failed["test_cases"][0]["outputs"][0]["failure"]
    assert out.count("latency (ms)") == len(ran)


def test_one_worker_checks_and_times_each_bundle_alone(zoo, tmp_path, mgerun):
    code, document, _ = _report(mgerun, zoo, tmp_path, "--jobs", "1")
    assert code == 2 and document["jobs"]["timing"] == "alone"
    ran = [b for b in document["bundles"] if b["error"] is None]
    assert all(c["latency_ms"]["count"] == 3 for b in ran for c in b["test_cases"])


def test_auto_is_the_cores(zoo, tmp_path, mgerun):
    import os

    _, document, _ = _report(mgerun, zoo / "one", tmp_path, "--jobs", "auto")
    assert document["jobs"]["workers"] == len(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--jobs", "0"], "-j takes a count from 1 to 256, or auto; got 0"),
        (["--jobs", "two"], "-j takes a count from 1 to 256, or auto; got 'two'"),
        (["--jobs-timing", "serial"], "--jobs-timing applies with -j"),
        (["--jobs-timing", "later", "-j", "2"], "'later' is not one of 'none', 'serial'"),
        (["-j", "2", "-d", "#rand(0,1)"], "-j spreads bundles; a plain model with -d runs alone"),
    ],
)
def test_bad_jobs_are_one_line(zoo, mgerun, args, message):
    result = mgerun(zoo if "-d" not in args else SAMPLES / "cnn.onnx", *args)
    assert result.code == 2 and result.out == ""
    [line] = result.err.strip().splitlines()
    assert message in line


def test_per_bundle_outputs_from_workers(zoo, tmp_path, mgerun):
    result = mgerun(zoo / "one", "-j", "2", "--bin-out-dump", tmp_path / "out", "--iter", "1")
    assert result.code == 0, result.err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["g0", "g1", "g2"]
    assert (tmp_path / "out" / "g1" / "test_data_set_0").is_dir()


def test_the_library_spreads_too(zoo):
    from mgedump.commands.verify_many import plan_runs, verify_all
    from mgedump.options import SpreadOptions, VerifyOptions

    plan = plan_runs([str(zoo / "two")], VerifyOptions(iters=1), spread=SpreadOptions(jobs=2))
    summary = verify_all(plan)
    assert summary.exit_code == 1
    assert [b.name for b in summary.record().bundles] == ["cnn", "fails"]


@pytest.fixture(scope="module")
def with_slow(zoo, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("with_slow")
    for rel in ("one/g0.mgetest", "one/g1.mgetest", "two/fails.mgetest"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes((zoo / rel).read_bytes())
    slow_bundle(root / "slow")
    return root


def test_a_killed_worker_fails_its_bundle_alone(with_slow, tmp_path):
    report = tmp_path / "r.json"
    process = subprocess.Popen(
        [script("mgerun"), with_slow, "-j", "2", "--report-json", report, "--junit-xml", tmp_path / "j.xml"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    killed = kill_busy_worker(process)
    out, err = process.communicate(timeout=120)
    assert killed is not None, err
    assert process.returncode == 1, err
    document = json.loads(report.read_text())
    outcomes = {b["name"]: (b["exit_code"], b["error"]) for b in document["bundles"]}
    assert outcomes["one/g0"] == (0, None) and outcomes["one/g1"] == (0, None) and outcomes["two/fails"][0] == 1
    code, error = outcomes["slow/slow"]
    assert code == 1 and error == (
        f"{with_slow / 'slow' / 'slow.mgetest'}: its worker process crashed, killed by SIGKILL (Killed): out of "
        "memory, or killed by hand"
    )
    assert f"mgerun: error: {error}" in err.splitlines()
    assert "4 bundle(s): 2 passed, 1 failed, 1 could not run" in out
