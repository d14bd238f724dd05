"""On GitHub Actions, mgerun appends a job summary to $GITHUB_STEP_SUMMARY and prints an ::error workflow command
per failure, for one bundle, a folder and --merge; a summary file it cannot write is one warning, the verdict and the
exit code unchanged; --no-ci-output turns both off (docs/ci.md#what-the-ci-shows)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mgedump.report.ci import workflow_commands
from mgedump.report.schema import BundleRecord, RunReport
from tests.zoo import failing_bundle, small_bundle, two_case_bundle

WEIRD = "we%ird,na:me"  # characters a workflow command's property must escape


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    scratch = tmp_path_factory.mktemp("scratch")
    root = tmp_path_factory.mktemp("zoo")
    small_bundle(root / "a")
    two_case_bundle(root / "b")
    failing_bundle(small_bundle(scratch), root / "c" / f"{WEIRD}.mgetest")
    (root / "d").mkdir()
    (root / "d" / "junk.mgetest").write_text("not a bundle\n")
    return root


@pytest.fixture
def on_github(monkeypatch, tmp_path) -> Path:
    summary = tmp_path / "step_summary.md"
    summary.write_text("an earlier step's summary\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    return summary


def test_a_folder_run_is_summarised_and_each_failure_annotated(zoo, tmp_path, mgerun, on_github, monkeypatch):
    result = mgerun(zoo, "--iter", "2", "--report-json", tmp_path / "r.json")
    monkeypatch.delenv("GITHUB_ACTIONS")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    plain = mgerun(zoo, "--iter", "2")
    assert result.code == plain.code == 2
    summary = on_github.read_text()
    assert summary.startswith("an earlier step's summary\n### mgerun: FAILED (exit 2)\n")  # appended, not replaced
    assert "4 bundle(s): 2 passed, 1 failed, 1 could not run; 4 test case(s): 3 passed, 1 failed, 0 could not run" in (
        summary
    )
    assert (
        f"| c/{WEIRD} | test case 0 (-d #1: #rand(0,255)) | score: err=0.5 &gt; maxerr=0.0001 |" in summary
    )  # Markdown renders HTML: &gt; is >
    assert "| d/junk |  | could not run (exit 2): " in summary
    errors = [line for line in result.out.splitlines() if line.startswith("::error ")]
    assert errors == [
        f"::error file={zoo / 'c' / 'we%25ird%2Cna%3Ame.mgetest'},title=mgerun%3A c/we%25ird%2Cna%3Ame test case 0 "
        "(-d #1%3A #rand(0%2C255))::score: err=0.5 > maxerr=0.0001",
        f"::error file={zoo / 'd' / 'junk.mgetest'},title=mgerun%3A d/junk::could not run (exit 2): "
        f"{zoo / 'd' / 'junk.mgetest'}: not a bundle (corrupt or not a zip archive: File is not a zip file)",
    ]
    assert "::error" not in plain.out
    document = json.loads((tmp_path / "r.json").read_text())
    assert document["exit_code"] == 2


def test_annotations_name_files_in_the_workspace_as_github_places_them(zoo, mgerun, on_github, monkeypatch):
    monkeypatch.setenv("GITHUB_WORKSPACE", str(zoo))
    result = mgerun(zoo, "--iter", "1")
    files = [line.split(",", 1)[0] for line in result.out.splitlines() if line.startswith("::error ")]
    assert files == ["::error file=c/we%25ird%2Cna%3Ame.mgetest", "::error file=d/junk.mgetest"]
    monkeypatch.setenv("GITHUB_WORKSPACE", str(zoo / "a"))  # the bundles outside it keep their paths
    result = mgerun(zoo / "c", "--iter", "1")
    assert f"::error file={zoo / 'c' / 'we%25ird%2Cna%3Ame.mgetest'}," in result.out


def test_a_passing_bundle_is_summarised_without_annotations(zoo, mgerun, on_github):
    result = mgerun(zoo / "b" / "cnn.mgetest", "--iter", "2")
    assert result.code == 0
    summary = on_github.read_text().split("an earlier step's summary\n", 1)[1]
    assert summary.splitlines()[:3] == [
        "### mgerun: passed",
        "",
        "1 bundle(s): 1 passed, 0 failed, 0 could not run; 2 test case(s): 2 passed, 0 failed, 0 could not run",
    ]
    assert "|" not in summary and "::error" not in result.out


def test_one_bad_bundle_is_said_to_the_ci_too(zoo, mgerun, on_github):
    result = mgerun(zoo / "d" / "junk.mgetest")
    assert result.code == 2
    assert "### mgerun: FAILED (exit 2)" in on_github.read_text()
    assert "not a bundle" in on_github.read_text()
    assert [line for line in result.out.splitlines() if line.startswith("::error title=mgerun::")]


def test_a_folder_without_bundles_is_said_to_the_ci_too(tmp_path, mgerun, on_github):
    (tmp_path / "empty").mkdir()
    result = mgerun(tmp_path / "empty")
    assert result.code == 2
    assert "### mgerun: FAILED (exit 2)" in on_github.read_text()
    assert "::error title=mgerun::" in result.out


def test_a_latency_gate_is_in_the_summary(zoo, mgerun, on_github):
    result = mgerun(zoo / "a" / "gray.mgetest", "--iter", "10", "--max-latency", "0.000001")
    assert result.code == 3
    summary = on_github.read_text()
    assert "### mgerun: FAILED (exit 3)" in summary
    assert "- latency gate (p90): 1 check(s), 1 too slow" in summary


def test_merge_is_summarised(zoo, tmp_path, mgerun, on_github, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    for k in (1, 2):
        mgerun(zoo, "--shard", f"{k}/2", "--iter", "1", "--run-id", "r1", "--report-json", tmp_path / f"s{k}.json")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(on_github))
    result = mgerun("--merge", tmp_path / "s1.json", tmp_path / "s2.json", "--run-id", "r1")
    assert result.code == 2
    summary = on_github.read_text()
    assert "### mgerun --merge: FAILED (exit 2)" in summary
    assert "4 bundle(s): 2 passed, 1 failed, 1 could not run" in summary
    assert sum(line.startswith("::error file=") for line in result.out.splitlines()) == 2
    refused = mgerun("--merge", tmp_path / "s1.json", "--run-id", "r1")  # a shard missing
    assert refused.code == 2
    assert summary.count("### mgerun --merge") == 1
    assert on_github.read_text().count("### mgerun --merge: FAILED (exit 2)") == 2
    assert "missing" in on_github.read_text().rsplit("### ", 1)[1]


@pytest.mark.parametrize("kind", ["folder", "fifo", "missing folder"])
def test_a_summary_that_cannot_be_written_is_one_warning(zoo, tmp_path, mgerun, monkeypatch, kind):
    target = tmp_path / "target"
    if kind == "folder":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)  # nobody reads it: opening it to write must neither wait nor write
    else:
        target = tmp_path / "no" / "such" / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    result = mgerun(zoo / "c" / f"{WEIRD}.mgetest", "--iter", "1")
    assert result.code == 1
    warnings = [line for line in result.err.splitlines() if "job summary" in line]
    assert len(warnings) == 1 and f"GITHUB_STEP_SUMMARY={target}" in warnings[0]
    assert "Traceback" not in result.err


def test_no_ci_output_turns_both_off(zoo, mgerun, on_github):
    result = mgerun(zoo / "c" / f"{WEIRD}.mgetest", "--iter", "1", "--no-ci-output")
    assert result.code == 1
    assert on_github.read_text() == "an earlier step's summary\n"
    assert "::error" not in result.out


def test_with_a_report_on_stdout_the_annotations_go_to_stderr(zoo, mgerun, on_github):
    result = mgerun(zoo / "c" / f"{WEIRD}.mgetest", "--iter", "1", "--report-json", "-")
    assert result.code == 1
    assert json.loads(result.out)["exit_code"] == 1
    assert "::error file=" in result.err


def test_annotation_text_is_escaped_as_github_says():
    bundle = BundleRecord(source="m/a,b:c%d.mgetest", name="a,b:c%d", kind="bundle", exit_code=2,
                          error="line one\r\nline two 100%\x1b[31m")  # fmt: skip
    [line] = workflow_commands(RunReport(bundles=[bundle], exit_code=2))
    assert line == (
        "::error file=m/a%2Cb%3Ac%25d.mgetest,title=mgerun%3A a%2Cb%3Ac%25d::could not run (exit 2): "
        "line one\\x0d\\x0aline two 100%25\\x1b[31m"
    )
