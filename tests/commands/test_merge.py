"""mgerun --merge: the reports of 4 shards make the report of one unsharded run (the same JUnit test cases, counts
and verdicts); reports of different versions, a bundle checked twice, a missing shard are errors naming them."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.report.test_junit import xsd_problems
from tests.shared import copy_of, made_once
from tests.zoo import failing_bundle, small_bundle, tree, two_case_bundle


@pytest.fixture(scope="module")
def zoo() -> Path:
    """24 bundles in 4 subfolders: passing ones (one and two test cases), two that fail, one that is not a bundle
    (made once per test run: read only)."""

    def make(root: Path) -> None:
        tree(root / "one", small_bundle(root / "scratch"), 12, 3)
        tree(root / "two", two_case_bundle(root / "scratch"), 8, 2)
        failing_bundle(small_bundle(root / "scratch"), root / "bad" / "fails.mgetest")
        failing_bundle(small_bundle(root / "scratch"), root / "one" / "f0" / "fails.mgetest")
        (root / "bad" / "junk.mgetest").write_text("not a bundle\n")
        (root / "bad" / "sub").mkdir()
        (root / "bad" / "sub" / "model.mgetest").write_bytes(small_bundle(root / "scratch").read_bytes())
        shutil.rmtree(root / "scratch")

    return made_once("the zoo of 24 bundles that mgerun --merge is tested on", make)


def _cases(junit: Path) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    root = ET.parse(junit).getroot()
    counts = {key: root.get(key) for key in ("tests", "failures", "errors")}
    cases = []
    for suite in root:
        for case in suite.iter("testcase"):
            outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
            cases.append((case.get("classname"), case.get("name"), outcome))
    return counts, sorted(cases)


@pytest.fixture(scope="module")
def shards(zoo, tmp_path_factory):
    """One unsharded run's JUnit and JSON, and the JSON reports of 4 shards (two of them with --jobs 2): run once per
    test run, copied for each module that uses them (the tests write beside them)."""
    from tests.support import run_script

    def make(out: Path) -> None:
        whole = run_script("mgerun", zoo, "--iter", "1", "--junit-xml", out / "whole.xml", "--report-json",
                           out / "whole.json", "-q")  # fmt: skip
        assert whole.returncode == 2, whole.stderr
        for index in range(1, 5):
            jobs = ["--jobs", "2"] if index % 2 else []
            done = run_script("mgerun", zoo, "--shard", f"{index}/4", *jobs, "--iter", "1", "--report-json",
                              out / f"shard{index}.json", "-q")  # fmt: skip
            assert done.returncode in (0, 1, 2), done.stderr

    return copy_of(
        made_once("the reports of the merge zoo, whole and in 4 shards", make), tmp_path_factory.mktemp("r") / "reports"
    )


def test_merging_four_shards_gives_the_unsharded_run(shards, mgerun):
    parts = [shards / f"shard{k}.json" for k in (3, 1, 4, 2)]  # in any order
    result = mgerun("--merge", *parts, "--junit-xml", shards / "merged.xml", "--report-json", shards / "merged.json",
                    "--report-html", shards / "merged.html")  # fmt: skip
    assert result.code == 2, result.err  # the worst: the bundle that is not one
    assert _cases(shards / "merged.xml") == _cases(shards / "whole.xml")
    whole = json.loads((shards / "whole.json").read_text())
    merged = json.loads((shards / "merged.json").read_text())
    assert [(b["name"], b["exit_code"], len(b["test_cases"])) for b in merged["bundles"]] == [
        (b["name"], b["exit_code"], len(b["test_cases"])) for b in whole["bundles"]
    ]
    assert merged["exit_code"] == whole["exit_code"] == 2
    assert [p["shard"]["index"] for p in merged["parts"]] == [1, 2, 3, 4]
    assert [p["report"] for p in merged["parts"]] == [str(shards / f"shard{k}.json") for k in (1, 2, 3, 4)]
    assert all(p["environment"]["host"] for p in merged["parts"])
    assert {b["part"] for b in merged["bundles"]} == {0, 1, 2, 3}
    assert xsd_problems(ET.parse(shards / "merged.xml").getroot()) == []
    assert result.out.splitlines()[-1] == "25 bundle(s): 21 passed, 2 failed, 1 could not run; exit 2".replace(
        "25", str(len(whole["bundles"]))
    ).replace("21", str(sum(b["exit_code"] == 0 for b in whole["bundles"])))
    page = (shards / "merged.html").read_text()
    assert "merged from 4 report(s)" in page and "shard 3 of 4" in page


def test_the_merged_json_report_meets_the_schema(shards, mgerun):
    import jsonschema

    from tests.support import ROOT

    assert mgerun("--merge", *sorted(shards.glob("shard*.json")), "--report-json", shards / "m2.json").code == 2
    schema = json.loads((ROOT / "docs" / "schemas" / "report.schema.json").read_text())
    for name in ("m2.json", "shard1.json", "shard2.json"):
        jsonschema.validate(json.loads((shards / name).read_text()), schema)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda docs: docs[1]["environment"].update(mgedump="9.9.9"), "the reports are of different versions: "),
        (lambda docs: docs[1]["environment"].update(onnxruntime="1.0.0"), "onnxruntime 1.0.0"),
        (
            lambda docs: docs[1]["bundles"].append(docs[0]["bundles"][0]),
            "says its shard checked 5 bundle(s), and holds 6",
        ),
        (  # unsharded reports (of one folder each, say) that share a bundle
            lambda docs: [d.pop("shard") for d in docs] and docs[1]["bundles"].append(docs[0]["bundles"][0]),
            "checked twice",
        ),
        (lambda docs: docs[1]["shard"].update(index=1), "shard 1 of 4 is in "),
        (lambda docs: docs[1]["shard"].update(total=5), "are shards of different runs: another count of shards"),
        (lambda docs: docs[1]["shard"].update(of=99), "another count of bundles (24 and 99)"),
        (lambda docs: docs[1].pop("shard"), "merge the reports of one sharded run"),
        (lambda docs: docs[1].update(report_version=1), "is report version 1; this mgerun reads version 2"),
        (
            lambda docs: docs[1].update(parts=[{"report": "x.json", "bundles": 0, "exit_code": 0}]),
            "merged report already",
        ),
    ],
)
def test_reports_that_are_not_of_one_run_are_refused(shards, tmp_path, mgerun, edit, message):
    docs = [json.loads((shards / f"shard{k}.json").read_text()) for k in (1, 2, 3, 4)]
    edit(docs)
    paths = []
    for k, doc in enumerate(docs, 1):
        paths.append(tmp_path / f"s{k}.json")
        paths[-1].write_text(json.dumps(doc))
    result = mgerun("--merge", *paths, "--junit-xml", tmp_path / "out.xml")
    assert result.code == 2 and result.out == ""
    [line] = result.err.strip().splitlines()
    assert line.startswith("mgerun: error: ") and message in line, line
    assert not (tmp_path / "out.xml").exists()


def test_a_missing_shard_is_named(shards, mgerun, tmp_path):
    result = mgerun("--merge", shards / "shard1.json", shards / "shard3.json", "--junit-xml", tmp_path / "x.xml")
    assert result.code == 2
    assert "shard(s) 2, 4 of 4 missing: merge the report of every shard" in result.err
    assert not (tmp_path / "x.xml").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--iter", "3"], "--iter does not apply to --merge"),
        (["--shard", "1/2"], "--merge merges reports: --shard and -j do not apply"),
        ([], None),
    ],
)
def test_merge_takes_reports_only(shards, mgerun, tmp_path, args, message):
    result = mgerun("--merge", *sorted(shards.glob("shard*.json")), *args)
    if message is None:
        assert result.code == 2 and "bundle(s):" in result.out
    else:
        assert result.code == 2 and message in result.err


def test_merge_of_nothing_or_of_what_is_not_a_report(mgerun, tmp_path):
    assert "--merge takes the JSON reports to merge" in mgerun("--merge").err
    (tmp_path / "nan.json").write_text('{"report_version": 2, "exit_code": NaN}')
    assert mgerun("--merge", tmp_path / "nan.json").err.strip() == (
        f"mgerun: error: report {tmp_path / 'nan.json'} is not a JSON report (NaN is not JSON)"
    )
    assert "cannot read report" in mgerun("--merge", tmp_path / "none.json").err
    (tmp_path / "list.json").write_text("[]")
    assert "is not an mgerun JSON report (no report_version)" in mgerun("--merge", tmp_path / "list.json").err


def test_an_output_on_an_input_is_refused(shards, mgerun):
    result = mgerun("--merge", shards / "shard1.json", "--report-json", shards / "shard1.json")
    assert result.code == 2 and "shard1.json" in result.err
