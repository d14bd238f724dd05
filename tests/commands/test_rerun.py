"""-x / --maxfail stop a folder run after N failing bundles, the rest reported as not run (JSON, JUnit skipped);
--rerun-failed REPORT runs only the bundles, variants and test cases that failed or could not run in it
(docs/verify.md#stopping-early-and-running-again)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.shared import copy_of
from tests.zoo import failing_bundle, small_bundle, two_case_bundle


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    """a_fails (test case 0 of 2 fails), then four good bundles, then a file that is not a bundle."""
    scratch = tmp_path_factory.mktemp("scratch")
    root = tmp_path_factory.mktemp("zoo")
    failing_bundle(two_case_bundle(scratch), root / "a_fails" / "model.mgetest")
    for k in range(4):
        small_bundle(root / f"b{k}", "model.mgetest")
    (root / "z_junk.mgetest").write_text("not a bundle\n")
    return root


def _run(mgerun, tmp_path, *args) -> tuple[int, dict, str]:
    target = tmp_path / f"r{len(list(tmp_path.glob('r*.json')))}.json"
    result = mgerun(*args, "--iter", "1", "--report-json", target)
    return result.code, json.loads(target.read_text()), result.out


def test_x_stops_after_the_first_failing_bundle(zoo, tmp_path, mgerun, monkeypatch):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    page = tmp_path / "report.html"
    code, document, out = _run(
        mgerun, tmp_path, zoo, "-x", "--junit-xml", tmp_path / "junit.xml", "--report-html", page
    )
    assert code == 1
    entries = [(b["name"], b["exit_code"], b.get("not_run")) for b in document["bundles"]]
    reason = "not run: stopped after 1 failing bundle(s) (--maxfail 1)"
    assert entries == [("a_fails/model", 1, None)] + [(f"b{k}/model", 0, reason) for k in range(4)] + [
        ("z_junk", 0, reason)
    ]
    assert not any(b["passed"] for b in document["bundles"])
    assert "stopped after 1 failing bundle(s) (--maxfail 1): 5 not run" in out
    assert "6 bundle(s): 0 passed, 1 failed, 0 could not run, 5 not run" in out
    suites = ET.parse(tmp_path / "junit.xml").getroot().findall("testsuite")
    skipped = [s.get("name") for s in suites if s.find("testcase/skipped") is not None]
    assert skipped == [f"b{k}/model" for k in range(4)] + ["z_junk"]
    assert {s.get("skipped") for s in suites[1:]} == {"1"}
    assert (
        "Not run (stopped after 1 failing bundle(s) (--maxfail 1)): b0/model, b1/model, b2/model, b3/model, z\\_junk"
        in (tmp_path / "summary.md").read_text()
    )
    html = page.read_text()
    assert html.count('data-verdict="NOT RUN"') == 2 * 5  # in the table of bundles and in each one's section
    assert "6 bundle(s): 0 passed, 1 failed, 0 could not run, 5 not run; exit code 1" in html


def test_maxfail_counts_failing_bundles(zoo, tmp_path, mgerun):
    code, document, _ = _run(mgerun, tmp_path, zoo, "--maxfail", "2")
    assert code == 2  # the junk bundle was the second failure: every bundle ran
    assert not any("not_run" in b for b in document["bundles"])


def test_maxfail_with_workers_starts_nothing_after_the_limit(tmp_path, mgerun):
    """Six failing bundles on two workers: when the first ends, at most one more has started since (the next starts
    as a run ends, before its outcome is read), so at least two are never started."""
    fails = failing_bundle(small_bundle(tmp_path / "scratch"), tmp_path / "scratch" / "fails.mgetest")
    for k in range(6):
        copy_of(fails, tmp_path / "all" / f"f{k}.mgetest")
    code, document, out = _run(mgerun, tmp_path, tmp_path / "all", "-x", "--jobs", "2")
    assert code == 1
    left = [b["name"] for b in document["bundles"] if "not_run" in b]
    ran = [b for b in document["bundles"] if "not_run" not in b]
    assert len(left) >= 2 and len(left) + len(ran) == 6
    assert all(b["exit_code"] == 1 for b in ran)
    assert f"{len(left)} not run" in out


def test_rerun_failed_runs_the_failed_test_cases_again(zoo, tmp_path, mgerun):
    code, first, _ = _run(mgerun, tmp_path, zoo)
    assert code == 2
    saved = tmp_path / "first.json"
    saved.write_text(json.dumps(first))
    for args in ((zoo,), ()):  # the folder again, or the bundles the report names
        code, again, _ = _run(mgerun, tmp_path, *args, "--rerun-failed", saved)
        assert code == 2
        assert [(b["name"], [c["index"] for c in b["test_cases"]]) for b in again["bundles"]] == [
            ("a_fails/model", [0]),  # its test case 1 passed
            ("z_junk", []),
        ]
        assert not again["bundles"][0]["test_cases"][0]["passed"]


def test_rerun_failed_with_nothing_failed_says_so(zoo, tmp_path, mgerun):
    code, passed, _ = _run(mgerun, tmp_path, zoo / "b0")
    assert code == 0
    saved = tmp_path / "passed.json"
    saved.write_text(json.dumps(passed))
    result = mgerun(zoo, "--rerun-failed", saved)
    assert result.code == 0
    assert f"mgerun: note: nothing failed or could not run in {saved}: nothing to run" in result.err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read report"),
        ("{", "is not a JSON report"),
        ('{"report_version": 1}', "is report version 1"),
    ],
)
def test_a_report_that_cannot_be_read_is_one_line(zoo, tmp_path, mgerun, content, message):
    report = tmp_path / "earlier.json"
    if content is not None:
        report.write_text(content)
    result = mgerun(zoo, "--rerun-failed", report)
    assert result.code == 2
    assert message in result.err and len(result.err.strip().splitlines()) == 1
    assert "Traceback" not in result.err


def test_rerun_failed_never_writes_over_its_report(zoo, tmp_path, mgerun):
    code, first, _ = _run(mgerun, tmp_path, zoo)
    saved = tmp_path / "first.json"
    saved.write_text(json.dumps(first))
    result = mgerun(zoo, "--rerun-failed", saved, "--report-json", saved)
    assert result.code == 2
    assert json.loads(saved.read_text()) == first


def test_rerun_failed_with_other_paths_says_none_failed_there(zoo, tmp_path, mgerun):
    code, first, _ = _run(mgerun, tmp_path, zoo)
    saved = tmp_path / "first.json"
    saved.write_text(json.dumps(first))
    result = mgerun(zoo / "b1", "--rerun-failed", saved)
    assert result.code == 2
    assert "none of the bundles that failed in it (a_fails/model, z_junk) is among the paths given" in result.err


@pytest.mark.parametrize("args", [("-x",), ("--maxfail", "2"), ("--rerun-failed", "r.json")])
def test_merge_refuses_what_applies_where_bundles_are_checked(tmp_path, mgerun, args):
    report = tmp_path / "s.json"
    report.write_text("{}")
    result = mgerun("--merge", report, *args)
    assert result.code == 2
    assert "apply where the bundles are checked" in result.err


def test_maxfail_takes_a_count(zoo, mgerun):
    result = mgerun(zoo, "--maxfail", "0")
    assert result.code == 2
    assert "--maxfail takes a count from 1 to 1000000; got 0" in result.err
    assert mgerun(zoo, "-x", "--maxfail", "3").code == 2


def test_shards_stopped_early_merge_with_their_bundles_not_run(zoo, tmp_path, mgerun):
    shards = []
    for k in (1, 2):
        target = tmp_path / f"s{k}.json"
        mgerun(zoo, "--shard", f"{k}/2", "-x", "--iter", "1", "--run-id", "r", "--report-json", target)
        shards.append(json.loads(target.read_text()))
    left = sorted(b["name"] for shard in shards for b in shard["bundles"] if "not_run" in b)
    assert left  # the shard holding a_fails stopped there, or at the junk file
    result = mgerun("--merge", tmp_path / "s1.json", tmp_path / "s2.json", "--run-id", "r", "--report-json",
                    tmp_path / "m.json")  # fmt: skip
    merged = json.loads((tmp_path / "m.json").read_text())
    assert sorted(b["name"] for b in merged["bundles"] if "not_run" in b) == left
    assert f", {len(left)} not run; exit {result.code}" in result.out
    assert result.code == max(shard["exit_code"] for shard in shards)


def test_rerun_failed_shares_out_what_failed_among_the_shards(zoo, tmp_path, mgerun):
    code, first, _ = _run(mgerun, tmp_path, zoo)
    saved = tmp_path / "first.json"
    saved.write_text(json.dumps(first))
    shards = []
    for k in (1, 2):
        target = tmp_path / f"again{k}.json"
        result = mgerun(zoo, "--rerun-failed", saved, "--shard", f"{k}/2", "--iter", "1", "--run-id", "r2",
                        "--report-json", target)  # fmt: skip
        assert result.code in (0, 1, 2), result.err  # a shard may hold none of them: it runs nothing
        shards.append(json.loads(target.read_text()))
    assert {s["shard"]["of"] for s in shards} == {2}  # the two that failed, shared out
    result = mgerun("--merge", tmp_path / "again1.json", tmp_path / "again2.json", "--run-id", "r2",
                    "--report-json", tmp_path / "merged.json")  # fmt: skip
    assert result.code == 2, result.err
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert [(b["name"], [c["index"] for c in b["test_cases"]]) for b in merged["bundles"]] == [
        ("a_fails/model", [0]),
        ("z_junk", []),
    ]
