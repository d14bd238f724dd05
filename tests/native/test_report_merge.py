"""A report written by mgerun-native on one machine merges with mgerun's (``mgerun --merge``) into one JUnit file
(issue 31, acceptance 5; docs/native.md, Bringing a report back)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET

from tests.native import harness
from tests.report.test_junit import xsd_problems
from tests.support import run_script
from tests.test_schemas import problems as schema_problems


def _cases(junit) -> list[tuple[str, str, str]]:
    cases = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        cases.append((case.get("classname"), case.get("name"), outcome))
    return sorted(cases)


def test_a_native_report_merges_with_mgerun_reports_into_one_junit_file(corpus_index, native, tmp_path):
    """mgerun-native checks a failing bundle and a bundle of three variants on one machine; mgerun checks a
    passing bundle on another; the merged JUnit holds all of them, and the native bundles' test cases are those
    mgerun's own run of them writes."""
    target, host = tmp_path / "target", tmp_path / "host"
    for name, entry in {"fails": "expected-shifted", "variants": "v2-all-variants", "passes": "cnn"}.items():
        folder = target if name != "passes" else host
        folder.mkdir(exist_ok=True)
        shutil.copyfile(corpus_index[entry]["path"], folder / f"{name}.mgetest")
    run = ["--iter", "1", "--warmup-iter", "0"]
    on_target = harness.run_native(native, [target / "fails.mgetest", target / "variants.mgetest", *run,
                                            "--report-json", tmp_path / "native.json"])  # fmt: skip
    assert on_target.code == 1, on_target.out + on_target.err
    native_report = json.loads((tmp_path / "native.json").read_text(encoding="utf-8"))
    assert schema_problems("report", native_report) == []
    on_host = run_script("mgerun", host / "passes.mgetest", *run, "--report-json", tmp_path / "mgerun.json", "-q")
    assert on_host.returncode == 0, on_host.stderr

    merged = run_script("mgerun", "--merge", tmp_path / "native.json", tmp_path / "mgerun.json",
                        "--junit-xml", tmp_path / "merged.xml", "--report-json", tmp_path / "merged.json")  # fmt: skip
    assert merged.returncode == 1, merged.stdout + merged.stderr  # the worst of the merged bundles: one failed
    root = ET.parse(tmp_path / "merged.xml").getroot()
    assert xsd_problems(root) == []
    document = json.loads((tmp_path / "merged.json").read_text(encoding="utf-8"))
    own = [json.loads((tmp_path / f"{side}.json").read_text(encoding="utf-8")) for side in ("native", "mgerun")]
    assert sorted(b["name"] for b in document["bundles"]) == sorted(b["name"] for r in own for b in r["bundles"])
    assert len(document["parts"]) == 2

    # the same bundles checked by mgerun alone, in one call: the same JUnit test cases and outcomes
    both = tmp_path / "both"
    shutil.copytree(target, both)
    shutil.copyfile(host / "passes.mgetest", both / "passes.mgetest")
    alone = run_script("mgerun", both / "fails.mgetest", both / "variants.mgetest", both / "passes.mgetest", *run,
                       "--junit-xml", tmp_path / "alone.xml", "-q")  # fmt: skip
    assert alone.returncode == 1, alone.stderr
    assert _cases(tmp_path / "merged.xml") == _cases(tmp_path / "alone.xml")
    assert len(_cases(tmp_path / "merged.xml")) == 2 + 3 + 2  # fails: 2 cases; variants: 3 runs of 1; passes: 2
