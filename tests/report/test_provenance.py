"""Every report records where it ran, and what differs from where the bundle was packed: beside the verdict, and
beside a failed check run on another machine than the pack's."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tests.support import SAMPLES, rewrite_bundle, run_ok, with_changed_weight


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """One failing bundle whose manifest says it was packed with onnxruntime 0.9.0, one passing bundle whose
    manifest records no environment (packed before bundles did); every report of one mgerun call."""
    folder = tmp_path_factory.mktemp("provenance")
    run_ok("mgedump", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", folder / "good.mgetest", "-q")
    with_changed_weight(folder / "good.mgetest", folder / "changed.mgetest")

    def older_runtime(names, manifest, members):
        assert manifest["environment"]["onnxruntime"]  # the packing machine, as mgedump records it
        manifest["environment"]["onnxruntime"] = "0.9.0"

    def unrecorded(names, manifest, members):
        del manifest["environment"]

    rewrite_bundle(folder / "changed.mgetest", folder / "elsewhere.mgetest", older_runtime)
    rewrite_bundle(folder / "good.mgetest", folder / "old.mgetest", unrecorded)
    from mgedump.cli import mgerun_main

    args = [folder / "elsewhere.mgetest", folder / "old.mgetest", "--iter", "2"]
    targets = {"json": folder / "r.json", "junit": folder / "j.xml", "html": folder / "r.html"}
    args += ["--report-json", targets["json"], "--junit-xml", targets["junit"], "--report-html", targets["html"]]
    return folder, args, targets, mgerun_main


def test_every_report_says_what_differs(ran, capfd):
    from mgedump.model import environment

    folder, args, targets, main = ran
    capfd.readouterr()
    with pytest.raises(SystemExit) as ended:
        main([str(a) for a in args])
    out = capfd.readouterr().out.splitlines()
    assert ended.value.code == 1
    here = environment.run_environment()["onnxruntime"]
    differs = f"packed with onnxruntime 0.9.0, run with {here}"

    # the console: beside the failed check, and beside the bundle's verdict; once where it all ran
    beside = f"  where it ran differs from where it was packed: {differs}"
    assert beside in out and out.index(beside) < out.index(f"where it ran differs from where it was packed: {differs}")
    verdict = next(k for k, line in enumerate(out) if line.endswith("FAILED: 1 of 1 test case(s) failed"))
    assert out[verdict - 1] == f"where it ran differs from where it was packed: {differs}"
    unknown = next(k for k, line in enumerate(out) if line.endswith("old.mgetest: all 1 test case(s) passed"))
    assert out[unknown - 1].startswith("packing environment unknown")
    assert out[-2] == f"ran with {environment.summary(environment.run_environment())}"

    # the JSON report
    document = json.loads(targets["json"].read_text(encoding="utf-8"))
    assert document["environment"]["onnxruntime"] == here and document["environment"]["host"]
    changed, old = document["bundles"]
    assert changed["packed_environment"]["onnxruntime"] == "0.9.0" and changed["environment_differences"] == [differs]
    assert old["packed_environment"] is None and old["environment_differences"][0].startswith(
        "packing environment unknown"
    )

    # JUnit: the suite's properties, and the failure itself
    root = ET.parse(targets["junit"]).getroot()
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert properties["environment differences (elsewhere)"] == differs
    assert properties["packed environment (old)"] == "unknown"
    assert properties["environment (old)"] == environment.summary(document["environment"])
    failure = next(root.iter("failure"))
    assert failure.text.splitlines()[-1] == f"where it ran differs from where it was packed: {differs}"

    # HTML: beside the bundle's verdict and beside the failed check
    page = targets["html"].read_text(encoding="utf-8")
    section = page[page.index('<section class="bundle" id="bundle-0"') :]
    assert section.count(f"Where it ran differs from where it was packed: {differs}") == 2
    assert section.index('class="elsewhere"') < section.index('<table class="cases">')
    assert "Ran with onnxruntime" in page
