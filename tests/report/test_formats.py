"""The registry of report formats: a format added in one place has its flag, is written by mgerun and by
mgerun --merge, and may or may not go to standard output, like the built-in ones."""

from __future__ import annotations

import pytest

from mgedump import VerifyOptions, verify_all
from mgedump.base.errors import UsageError
from mgedump.report.formats import ReportFormat, formats, register, unregister
from mgedump.report.schema import RunReport
from tests.zoo import failing_bundle, small_bundle


def _markdown(report: RunReport) -> str:
    """A Markdown table of the bundles and their verdicts: a format in a few lines."""
    rows = [f"| {b.name} | {b.exit_code} | {len(b.test_cases)} |" for b in report.bundles]
    return "\n".join(["| bundle | exit code | test cases |", "|---|---|---|", *rows, ""])


MARKDOWN = ReportFormat("report_md", "Write a Markdown summary.", _markdown)


@pytest.fixture
def markdown():
    register(MARKDOWN)
    yield MARKDOWN
    unregister("report_md")


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bundles")
    good = small_bundle(folder)
    return good, failing_bundle(good, folder / "fails.mgetest")


def test_a_format_registered_in_one_place_is_written_by_mgerun_and_by_merge(markdown, bundles, tmp_path, mgerun):
    good, bad = bundles
    assert "--report-md FILE" in mgerun("--help").out
    done = mgerun(good, bad, "--iter", "1", "--report-md", tmp_path / "run.md", "--report-json", tmp_path / "run.json")
    assert done.code == 1, done.err
    expected = "| bundle | exit code | test cases |\n|---|---|---|\n| gray | 0 | 1 |\n| fails | 1 | 1 |\n"
    assert (tmp_path / "run.md").read_text() == expected
    merged = mgerun("--merge", tmp_path / "run.json", "--report-md", tmp_path / "merged.md")
    assert merged.code == 1, merged.err
    merged_text = (tmp_path / "merged.md").read_text()  # the merged report lists the failing bundles first
    assert sorted(merged_text.splitlines()) == sorted(expected.splitlines()) and merged_text != expected
    on_stdout = mgerun("--merge", tmp_path / "run.json", "--report-md", "-")
    assert on_stdout.out == merged_text and "1 failed" in on_stdout.err  # the lines people read go to stderr


def test_a_format_that_is_a_file_of_its_own_refuses_standard_output(bundles, mgerun):
    register(ReportFormat("report_blob", "Write a blob.", lambda report: b"\0", stdout=False))
    try:
        done = mgerun(bundles[0], "--iter", "1", "--report-blob", "-")
    finally:
        unregister("report_blob")
    assert done.code == 2
    assert "--report-blob - : this output is a file of its own, not text for standard output" in done.err


def test_the_library_names_a_registered_format_by_its_option(markdown, bundles, tmp_path):
    verify_all([str(bundles[0])], VerifyOptions(iters=1, reports={"report_md": str(tmp_path / "lib.md")}))
    assert (tmp_path / "lib.md").read_text().endswith("| gray | 0 | 1 |\n")
    with pytest.raises(UsageError, match="no report format 'report_csv'"):
        verify_all([str(bundles[0])], VerifyOptions(reports={"report_csv": str(tmp_path / "x.csv")}))
    assert not (tmp_path / "x.csv").exists()


def test_a_built_in_format_given_by_its_option_is_its_field():
    options = VerifyOptions(reports={"junit_xml": "j.xml"})
    assert options.junit_xml == "j.xml" and options.reports == {} and options.report_target("junit_xml") == "j.xml"
    with pytest.raises(UsageError, match="junit_xml is given twice"):
        VerifyOptions(junit_xml="a.xml", reports={"junit_xml": "b.xml"})


def test_an_unregistered_format_has_no_flag(mgerun, bundles):
    done = mgerun(bundles[0], "--report-md", "x.md")
    assert done.code == 2 and "No such option '--report-md'" in done.err


def test_the_built_in_formats_and_a_format_taken_twice():
    assert [entry.option for entry in formats()][:3] == ["report_json", "junit_xml", "report_html"]
    with pytest.raises(ValueError, match="registered already"):
        register(formats()[1])
    with pytest.raises(ValueError, match="built in"):
        unregister("junit_xml")
