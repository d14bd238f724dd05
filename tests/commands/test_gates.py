"""CI gates: a time limit per bundle (--timeout), the latency gate (--max-latency, --baseline), and runs that cannot
mix (--run-id, the list of bundles in each shard's report, --merge refusing stale or foreign shards)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from mgedump.commands.gate import _against_limit
from mgedump.measure.gate import (
    ROUNDS,
    binomial_tail,
    judge_baseline,
    judge_limit,
    over_limit,
    percentile,
    slower,
    too_slow,
)
from tests.zoo import failing_bundle, looped_bundle, slow_bundle, small_bundle, tree


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


QUIET = [1.0 + 0.01 * (k % 10) for k in range(30)]  # a model's own runs: 1.00 to 1.09 ms, p90 1.081
BURST = QUIET[:20] + [4.0] * 10  # a third of the runs held up by another process: p90 4 ms, 10 of 30 over 1.2
SLOWER = [ms * 1.3 for ms in QUIET]  # the same model 30% slower: every run over 1.2


class Rounds:
    """A fake ``again``: hands out the rounds given, one a call, and counts the calls."""

    def __init__(self, *rounds):
        self.rounds, self.calls = list(rounds), 0

    def __call__(self):
        self.calls += 1
        return self.rounds.pop(0)


def test_a_percentile_is_the_reports_figure():
    runs = [3.0, 1.0, 2.0, 10.0, 4.0, 7.5, 0.5]
    for which, q in (("p50", 50), ("p90", 90), ("p99", 99)):
        assert percentile(runs, which) == pytest.approx(float(np.percentile(runs, q)))
    assert percentile([2.5], "p90") == 2.5


def test_a_round_fast_enough_is_not_timed_again():
    again = Rounds()
    [only] = judge_limit(QUIET, 1.2, "p90", again)
    assert again.calls == 0 and not only.too_slow and only.over == 0 and only.ms == pytest.approx(1.081)
    stalled = QUIET[:29] + [50.0]  # one stalled run: the p90 stays under the limit
    assert not too_slow(judge_limit(stalled, 1.2, "p90", again)) and again.calls == 0
    # the figure over the limit, but not more runs over it than p90 allows beyond chance: ok, not timed again
    few = QUIET[:26] + [4.0] * 4
    [round_] = judge_limit(few, 1.2, "p90", again)
    assert round_.ms > 1.2 and round_.p > 0.05 and not round_.too_slow and again.calls == 0


def test_a_burst_of_noise_is_timed_again_and_passes():
    again = Rounds(QUIET, BURST, SLOWER)
    rounds = judge_limit(BURST, 1.2, "p90", again)
    assert [r.too_slow for r in rounds] == [True, False, True] and again.calls == 2  # a third round decides
    assert too_slow(rounds)  # two rounds of three
    again = Rounds(QUIET, QUIET, SLOWER)
    rounds = judge_limit(BURST, 1.2, "p90", again)
    assert [r.too_slow for r in rounds] == [True, False, False] and not too_slow(rounds) and again.calls == 2


def test_a_slower_model_fails_on_a_second_round_too_slow():
    again = Rounds(SLOWER, QUIET, QUIET)
    rounds = judge_limit(SLOWER, 1.2, "p90", again)
    assert len(rounds) == 2 and again.calls == 1 and too_slow(rounds)  # at most 3x the runs asked for
    assert [r.over for r in rounds] == [30, 30] and ROUNDS == 3


def test_without_more_rounds_the_first_decides():
    assert too_slow(judge_limit(BURST, 1.2, "p90"))  # no way to time again
    assert too_slow(judge_limit(BURST, 1.2, "p90", Rounds([])))  # timing again failed: the rounds timed decide
    assert not too_slow(judge_limit(QUIET, 1.2, "p90", None))
    assert not too_slow([])
    split = judge_limit(BURST, 1.2, "p90", Rounds(QUIET, []))  # one of each, and no third: not too slow
    assert len(split) == 2 and not too_slow(split)


def test_a_baseline_check_is_confirmed_in_rounds_too():
    then = percentile(QUIET, "p90")
    loaded = [ms * 1.25 for ms in QUIET]  # the whole machine slower for a while: the bulk moved, not the model
    again = Rounds(QUIET, QUIET)
    rounds = judge_baseline(loaded, QUIET, then, 1.10, "p90", again)
    assert [r.too_slow for r in rounds] == [True, False, False] and not too_slow(rounds) and again.calls == 2
    assert rounds[0].ratio == pytest.approx(1.25) and rounds[0].p < 0.001
    again = Rounds(SLOWER, SLOWER)
    rounds = judge_baseline(SLOWER, QUIET, then, 1.10, "p90", again)
    assert len(rounds) == 2 and again.calls == 1 and too_slow(rounds)
    assert rounds[-1].to_json().keys() == {"ms", "runs", "p", "ratio", "too_slow"}
    few = Rounds()  # under 5 runs the rank test cannot tell: the figure decides, and is not timed again when fine
    assert not too_slow(judge_baseline(QUIET[:3], QUIET, then, 1.10, "p90", few)) and few.calls == 0


def test_a_limit_line_gives_both_figures_and_every_round():
    check = _against_limit("m test case 0", "m", 0, SLOWER, 1.417, 1.2, "p90", Rounds(SLOWER))
    assert not check["passed"] and check["ms"] == 1.417 and check["limit_ms"] == 1.2
    assert check["line"].startswith("m test case 0: p90 1.417 ms, limit 1.2 ms (30 of 30 runs over it, p = ")
    assert "timed again (up to 3 rounds, too slow if most are): p90 " in check["line"]
    assert check["line"].endswith(": TOO SLOW")
    assert [r["over"] for r in check["rounds"]] == [30, 30] and all(r["too_slow"] for r in check["rounds"])
    noise = _against_limit("m test case 0", "m", 0, BURST, 4.0, 1.2, "p90", Rounds(QUIET, QUIET))
    assert noise["passed"] and noise["line"].endswith(": ok") and "p90 1.081 ms (0 of 30 over" in noise["line"]
    assert [r["too_slow"] for r in noise["rounds"]] == [True, False, False]
    plain = _against_limit("m test case 0", "m", 0, QUIET, 1.09, 1.2, "p90", Rounds())
    assert plain["passed"] and "timed again" not in plain["line"] and len(plain["rounds"]) == 1


def test_a_limit_fails_a_grossly_slower_bundle_and_passes_the_same_one_unchanged(tmp_path, mgerun):
    """The same bundle name and test case, one model looping 40 times longer: a limit between the two medians."""
    fast, slow = looped_bundle(tmp_path / "fast", 1), looped_bundle(tmp_path / "slow", 40)
    timing = ["--iter", "20", "--warmup-iter", "2", "--thread", "1", "-q", "--latency-percentile", "p50"]
    medians = {}
    for name, bundle in (("fast", fast), ("slow", slow)):
        assert mgerun(bundle, *timing, "--report-json", tmp_path / f"{name}.json").code == 0
        medians[name] = json.loads((tmp_path / f"{name}.json").read_text())["bundles"][0]["test_cases"][0][
            "latency_ms"
        ]["median"]
    assert medians["slow"] > 8 * medians["fast"], medians
    limit = f"{(medians['fast'] * medians['slow']) ** 0.5:.6f}"
    same = mgerun(fast, *timing, "--max-latency", limit, "-v")
    assert same.code == 0, same.out + same.err
    assert "latency gate (p50): 1 check(s), 0 too slow" in same.out
    slower = mgerun(slow, *timing, "--max-latency", limit, "--report-json", tmp_path / "r.json")
    assert slower.code == 3, slower.out + slower.err
    [line] = [x for x in slower.out.splitlines() if "TOO SLOW" in x]
    assert line.startswith("latency gate: loop test case 0: p50 ") and f"limit {float(limit):.4g} ms" in line
    assert "timed again (up to 3 rounds" in line
    [check] = json.loads((tmp_path / "r.json").read_text())["latency_gate"]["checks"]
    assert len(check["rounds"]) == 2 and all(r["too_slow"] and r["runs"] == 20 for r in check["rounds"])


def test_the_latency_gate_fails_with_its_own_exit_code_and_both_figures(tmp_path, mgerun):
    bundle = small_bundle(tmp_path / "zoo")
    baseline = tmp_path / "baseline.json"
    assert mgerun(bundle, "--iter", "20", "-q", "--report-json", baseline).code == 0

    def scaled(factor: float, name: str) -> Path:
        """The baseline with every latency times ``factor`` (whether a baseline timed moments before passes on a
        loaded machine is the gate bench's measure, not this test's)."""
        document = json.loads(baseline.read_text())
        case = document["bundles"][0]["test_cases"][0]
        case["latencies_ms"] = [ms * factor for ms in case["latencies_ms"]]
        case["latency_ms"] = {k: (v * factor if k != "count" else v) for k, v in case["latency_ms"].items()}
        out = tmp_path / name
        out.write_text(json.dumps(document))
        return out

    # a baseline that claims the bundle ran 100 times slower: the gate passes and says so
    same = mgerun(bundle, "--iter", "20", "-q", "--baseline", scaled(100, "slow.json"), "--max-slowdown", "1.5")
    assert same.code == 0, same.out + same.err
    assert "latency gate (p90): 1 check(s), 0 too slow" in same.out
    # a baseline that claims the bundle ran 100 times faster: the gate fails, the checks still passed
    fast = scaled(0.01, "fast.json")
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


def test_a_baseline_of_other_bundles_is_said_so_and_not_blamed_on_timing(tmp_path, mgerun):
    bundle = small_bundle(tmp_path / "zoo")
    other = small_bundle(tmp_path / "then", "other.mgetest")
    assert mgerun(other, "--iter", "5", "-q", "--report-json", tmp_path / "b.json").code == 0
    result = mgerun(bundle, "--iter", "5", "-q", "--baseline", tmp_path / "b.json")
    assert result.code == 0, result.out + result.err
    assert "0 check(s), 0 too slow; 1 test case(s) not in the baseline, not compared" in result.out
    assert "--jobs-timing" not in result.out


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
