"""CI gates: a time limit per bundle (--timeout), the latency gate (--max-latency, --baseline), and runs that cannot
mix (--run-id, the list of bundles in each shard's report, --merge refusing stale or foreign shards)."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from mgedump.measure.gate import binomial_tail, over_limit, slower
from tests.zoo import failing_bundle, slow_bundle, small_bundle, tree


@pytest.fixture(scope="module")
def hung(tmp_path_factory):
    """zoo/: a bundle that runs until it is killed, between two quick ones."""
    root = tmp_path_factory.mktemp("hung")
    slow_bundle(root / "zoo", "b_slow.mgetest")
    good = small_bundle(root / "scratch")
    shutil.copyfile(good, root / "zoo" / "a_quick.mgetest")
    shutil.copyfile(good, root / "zoo" / "c_quick.mgetest")
    return root / "zoo"


@pytest.mark.parametrize("jobs", [[], ["-j", "2"]])
def test_a_hung_bundle_fails_at_its_timeout_and_the_rest_run(hung, mgerun, tmp_path, jobs):
    began = time.monotonic()
    result = mgerun(hung, "--timeout", "3", "--iter", "1", "-q", *jobs, "--report-json", tmp_path / "r.json")
    assert time.monotonic() - began < 60
    assert result.code == 1, result.err
    assert "b_slow.mgetest: timed out: still running after 3 s (--timeout 3); stopped" in result.out + result.err
    assert "3 bundle(s): 2 passed, 0 failed, 1 could not run" in result.out
    report = json.loads((tmp_path / "r.json").read_text())
    [slow] = [b for b in report["bundles"] if b["name"] == "b_slow"]
    assert slow["exit_code"] == 1 and "--timeout 3" in slow["error"]


def test_a_timeout_is_seconds_over_zero(mgerun, hung):
    for bad in ("0", "-1", "x", "1e9"):
        result = mgerun(hung, "--timeout", bad)
        assert result.code == 2 and "--timeout" in result.err and len(result.err.strip().splitlines()) == 1


def test_the_tests_of_the_gate():
    assert binomial_tail(0, 10, 0.1) == 1.0
    assert binomial_tail(4, 10, 0.1) < 0.05 < binomial_tail(3, 10, 0.1)
    runs = [1.0] * 9 + [50.0]  # one stalled run does not fail a p90 limit
    assert over_limit(runs, 2.0, "p90") > 0.05
    assert over_limit([3.0] * 10, 2.0, "p90") < 1e-6
    base = [1.0 + 0.01 * k for k in range(20)]
    assert slower([x * 1.3 for x in base], base, 1.10) < 0.001  # 30% slower: beyond 1.10x
    assert slower(base, base, 1.10) > 0.5  # unchanged
    assert slower(base[:3], base, 1.10) is None  # too few runs to tell


def test_the_latency_gate_fails_with_its_own_exit_code_and_both_figures(tmp_path, mgerun):
    bundle = small_bundle(tmp_path / "zoo")
    baseline = tmp_path / "baseline.json"
    assert mgerun(bundle, "--iter", "20", "-q", "--report-json", baseline).code == 0
    same = mgerun(bundle, "--iter", "20", "-q", "--baseline", baseline, "--max-slowdown", "1.5")
    assert same.code == 0, same.out + same.err
    assert "latency gate (p90): 1 check(s), 0 too slow" in same.out
    # a baseline that claims the bundle ran 100 times faster: the gate fails, the checks still passed
    document = json.loads(baseline.read_text())
    case = document["bundles"][0]["test_cases"][0]
    case["latencies_ms"] = [ms / 100 for ms in case["latencies_ms"]]
    case["latency_ms"] = {k: (v / 100 if k != "count" else v) for k, v in case["latency_ms"].items()}
    fast = tmp_path / "fast.json"
    fast.write_text(json.dumps(document))
    slow = mgerun(bundle, "--iter", "20", "-q", "--baseline", fast, "--report-json", tmp_path / "r.json")
    assert slow.code == 3, slow.out + slow.err
    [line] = [x for x in slow.out.splitlines() if "TOO SLOW" in x]
    assert line.startswith("latency gate: gray test case 0: p90 ") and ", baseline " in line and "at most 1.1x" in line
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["exit_code"] == 3 and report["latency_gate"]["passed"] is False
    limit = mgerun(bundle, "--iter", "20", "-q", "--max-latency", "0:0.000001", "--latency-percentile", "p50")
    assert limit.code == 3 and "limit 1e-06 ms (20 of 20 runs over it" in limit.out
    # a failed check is worse than a slow one
    failing_bundle(bundle, tmp_path / "bad" / "gray.mgetest")
    worse = mgerun(tmp_path / "bad" / "gray.mgetest", "--iter", "20", "-q", "--max-latency", "0.000001")
    assert worse.code == 1


def test_the_latency_gate_needs_timing(tmp_path, mgerun):
    bundle = small_bundle(tmp_path / "zoo")
    result = mgerun(tmp_path / "zoo", "-j", "2", "--max-latency", "5")
    assert result.code == 2 and "--jobs-timing serial" in result.err
    assert mgerun(bundle, "--max-slowdown", "1.2").code == 2  # without --baseline


def test_merge_refuses_shards_of_another_list_or_run(tmp_path, mgerun):
    """A current shard with a stale shard of another zoo of the same size: refused, not '4 bundle(s): 4 passed'."""
    good = small_bundle(tmp_path / "scratch")
    tree(tmp_path / "now", good, 4, 2)
    tree(tmp_path / "then", good, 4, 1)  # as many bundles, other names (one deleted since, one added)
    for k, zoo in ((1, "now"), (2, "then")):
        done = mgerun(tmp_path / zoo, "--shard", f"{k}/2", "--iter", "1", "-q", "--run-id", "r1",
                      "--report-json", tmp_path / f"s{k}.json")  # fmt: skip
        assert done.code == 0, done.err
    mixed = mgerun("--merge", tmp_path / "s1.json", tmp_path / "s2.json")
    assert mixed.code == 2 and "another list of bundles" in mixed.err
    done = mgerun(tmp_path / "now", "--shard", "2/2", "--iter", "1", "-q", "--run-id", "r0",
                  "--report-json", tmp_path / "s2.json")  # fmt: skip
    stale = mgerun("--merge", tmp_path / "s1.json", tmp_path / "s2.json")
    assert stale.code == 2 and "the reports are of different runs" in stale.err
    done = mgerun(tmp_path / "now", "--shard", "2/2", "--iter", "1", "-q", "--run-id", "r1",
                  "--report-json", tmp_path / "s2.json")  # fmt: skip
    assert done.code == 0
    assert mgerun("--merge", tmp_path / "s1.json", tmp_path / "s2.json", "--run-id", "r2").code == 2
    merged = mgerun("--merge", tmp_path / "s1.json", tmp_path / "s2.json", "--run-id", "r1", "--report-json",
                    tmp_path / "m.json")  # fmt: skip
    assert merged.code == 0, merged.err
    assert json.loads((tmp_path / "m.json").read_text())["run"] == {"id": "r1", "from": "--run-id"}
