"""The pytest plugin: pytest --mgetest PATHS makes an item of every test case of every bundle (and variant); -n 2,
--junitxml, -k, --lf and pytest-split work on them; a failing item shows what mgerun prints; a killed worker fails
its bundle alone; the core never imports pytest."""

from __future__ import annotations

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.report.test_junit import XSD, xsd_problems
from tests.shared import copy_of, made_once
from tests.support import packed_once
from tests.zoo import failing_bundle, kill_busy_worker, slow_bundle, small_bundle, two_case_bundle


@pytest.fixture(scope="module")
def zoo() -> Path:
    """zoo/samples/{cnn,gray}.mgetest, zoo/variants/cnn.mgetest (fp32 and ioc16), zoo/bad/{fails,junk}.mgetest (made
    once per test run: read only; pytest runs in the folder that holds zoo/, writing there nothing but what its
    arguments name)."""

    def make(root: Path) -> None:
        zoo = root / "zoo"
        two_case_bundle(zoo / "samples")
        small_bundle(zoo / "samples")
        copy_of(packed_once("cnn.onnx", "-d", "#rand(0,1)", "--variants", "fp32,ioc16", "--maxerr", "0.05"),
                zoo / "variants" / "cnn.mgetest")  # fmt: skip
        failing_bundle(zoo / "samples" / "gray.mgetest", zoo / "bad" / "fails.mgetest")
        (zoo / "bad" / "junk.mgetest").write_text("not a bundle\n")

    return made_once("the pytest plugin's zoo", make) / "zoo"


def pytest_run(cwd: Path, *args, timeout: int = 300) -> subprocess.CompletedProcess:
    """pytest in a folder of its own (no ini, no conftest: the installed plugin only)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def _outcomes(junit: Path) -> dict[str, str]:
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        found[f"{case.get('classname')}::{case.get('name')}"] = outcome
    return found


def test_every_test_case_of_every_bundle_is_an_item(zoo):
    done = pytest_run(zoo.parent, "--mgetest", "zoo", "--collect-only", "-q", "-p", "no:cacheprovider")
    items = [line for line in done.stdout.splitlines() if "::" in line]
    assert items == [
        "zoo/bad/fails.mgetest::case_0",
        "zoo/bad/junk.mgetest::bundle",
        "zoo/samples/cnn.mgetest::case_0",
        "zoo/samples/cnn.mgetest::case_1",
        "zoo/samples/gray.mgetest::case_0",
        "zoo/variants/cnn.mgetest::fp32::case_0",
        "zoo/variants/cnn.mgetest::ioc16::case_0",
    ]


def test_a_run_with_two_workers_and_junit(zoo, tmp_path):
    junit = tmp_path / "junit.xml"
    done = pytest_run(zoo.parent, "--mgetest", "zoo", "-n", "2", "--junitxml", junit, "-p", "no:cacheprovider")
    assert done.returncode == 1, done.stdout[-3000:]
    assert "2 failed, 5 passed" in done.stdout.splitlines()[-1]
    outcomes = _outcomes(junit)
    assert sorted(n for n, o in outcomes.items() if o == "failure") == [
        "zoo.bad.fails.mgetest::case_0", "zoo.bad.junk.mgetest::bundle",
    ]  # fmt: skip
    assert len(outcomes) == 7
    assert xsd_problems(ET.parse(junit).getroot()) == []
    import xmlschema

    xmlschema.XMLSchema(str(XSD)).validate(str(junit))
    failure = next(c for c in ET.parse(junit).getroot().iter("failure") if "AssertEqual" in (c.text or ""))
    assert failure.get("message").startswith("score: err=0.5 > maxerr=0.0001")
    assert "AssertEqual: err=0.5 (name=score) FAILED" in failure.text and "worst element at" in failure.text


def test_a_failing_item_shows_what_mgerun_prints(zoo):
    done = pytest_run(zoo.parent, "--mgetest", "zoo/bad", "-p", "no:cacheprovider")
    assert done.returncode == 1
    out = done.stdout
    assert "score: err=0.5 > maxerr=0.0001\ntest case 0 (-d #1: #rand(0,255))\nAssertEqual: err=0.5 (name=score)" in out
    assert "  worst element at [0, 1]: expect=" in out
    assert "not a bundle (corrupt or not a zip archive: File is not a zip file)" in out
    assert "Traceback" not in out


def test_k_selects_a_case(zoo):
    done = pytest_run(zoo.parent, "--mgetest", "zoo", "-k", "samples and cnn and case_1", "-p", "no:cacheprovider")
    assert done.returncode == 0, done.stdout[-2000:]
    assert "1 passed, 6 deselected" in done.stdout.splitlines()[-1]


def test_lf_runs_the_failures_again(zoo, tmp_path):
    import shutil

    shutil.copytree(zoo, tmp_path / "zoo")
    first = pytest_run(tmp_path, "--mgetest", "zoo")
    assert first.returncode == 1
    again = pytest_run(tmp_path, "--mgetest", "zoo", "--lf")
    last = again.stdout.splitlines()[-1]
    assert "2 failed" in last and "passed" not in last, again.stdout[-1000:]
    assert "run-last-failure: rerun previous 2 failures" in again.stdout


def test_pytest_split_shares_the_items(zoo):
    groups = []
    for group in (1, 2):
        done = pytest_run(zoo.parent, "--mgetest", "zoo", "--splits", "2", "--group", str(group), "--collect-only",
                          "-q", "-p", "no:cacheprovider")  # fmt: skip
        groups.append({line for line in done.stdout.splitlines() if "::" in line})
    assert groups[0] and groups[1] and not groups[0] & groups[1]
    assert len(groups[0] | groups[1]) == 7


def test_options_map_to_mgerun(zoo):
    done = pytest_run(zoo.parent, "--mgetest", "zoo/bad/fails.mgetest", "--mgetest-maxerr", "1", "-p",
                      "no:cacheprovider")  # fmt: skip
    assert done.returncode == 0 and "1 passed" in done.stdout.splitlines()[-1]
    done = pytest_run(zoo.parent, "--mgetest", "zoo/variants", "--mgetest-variant", "ioc16", "--collect-only", "-q",
                      "-p", "no:cacheprovider")  # fmt: skip
    assert [line for line in done.stdout.splitlines() if "::" in line] == ["zoo/variants/cnn.mgetest::ioc16::case_0"]
    bad = pytest_run(zoo.parent, "--mgetest", "zoo/samples", "--mgetest-maxerr", "x", "-p", "no:cacheprovider")
    assert bad.returncode == 4 and "--mgetest-maxerr" in bad.stdout + bad.stderr  # pytest's usage error


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mgetest-thread", "0"], "--mgetest-thread must be"),  # was an error of 887 lines on every item
        (["--mgetest-iter", "５"], "--mgetest-iter takes a whole number in ASCII digits"),
        (["--mgetest-thread", "9" * 5000], "--mgetest-thread takes a whole number in ASCII digits"),
    ],
)
def test_a_bad_option_is_one_usage_error_before_any_item(zoo, args, message):
    bad = pytest_run(zoo.parent, "--mgetest", "zoo/samples", *args, "-p", "no:cacheprovider")
    assert bad.returncode == 4, bad.stdout + bad.stderr
    assert message in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    assert len(bad.stderr.splitlines()) <= 5 and "::case_" not in bad.stdout, bad.stderr  # said once, no item ran


def test_the_junit_file_is_never_a_bundle_being_checked(zoo, tmp_path):
    shutil.copytree(zoo / "samples", tmp_path / "samples")
    bundle = next((tmp_path / "samples").rglob("*.mgetest"))
    before = bundle.read_bytes()
    bad = pytest_run(tmp_path, "--mgetest", "samples", "--junitxml", str(bundle), "-p", "no:cacheprovider")
    assert bad.returncode == 4 and "is the input" in bad.stderr, bad.stderr
    assert bundle.read_bytes() == before


def test_bundles_under_collected_paths_when_asked(zoo, tmp_path):
    import shutil

    shutil.copytree(zoo / "samples", tmp_path / "tests" / "models")
    (tmp_path / "tests" / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    plain = pytest_run(tmp_path, "tests", "-p", "no:cacheprovider")
    assert "1 passed" in plain.stdout.splitlines()[-1]
    asked = pytest_run(tmp_path, "tests", "--mgetest-collect", "-p", "no:cacheprovider")
    assert "4 passed" in asked.stdout.splitlines()[-1], asked.stdout[-1000:]


def test_a_killed_worker_fails_its_bundle_alone(zoo, tmp_path):
    import shutil

    shutil.copytree(zoo / "samples", tmp_path / "zoo" / "a")
    slow_bundle(tmp_path / "zoo" / "z")
    junit = tmp_path / "j.xml"
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--mgetest", "zoo", "--junitxml", junit, "-p", "no:cacheprovider"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    killed = kill_busy_worker(process)
    out, _ = process.communicate(timeout=120)
    assert killed is not None and process.returncode == 1, out[-2000:]
    assert "1 failed, 3 passed" in out.splitlines()[-1]
    assert "its worker process crashed, killed by SIGKILL (Killed)" in out
    assert _outcomes(junit)["zoo.z.slow.mgetest::case_0"] == "failure"


def test_the_core_never_imports_pytest():
    code = (
        "import sys, mgedump.cli, mgedump.commands.verify_many, mgedump.commands.jobs, mgedump.report.merge; "
        "print('pytest' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
    from importlib.metadata import entry_points

    assert [e.value for e in entry_points(group="pytest11") if e.name == "mgedump"] == ["mgedump.pytest_plugin"]


def test_in_process_runs_the_bundles_in_pytests_process(zoo):
    done = pytest_run(zoo.parent, "--mgetest", "zoo/samples", "--mgetest-in-process", "-p", "no:cacheprovider")
    assert done.returncode == 0 and "3 passed" in done.stdout.splitlines()[-1], done.stdout[-1000:]


def test_a_failed_item_reruns_by_the_id_pytest_printed(zoo, monkeypatch):
    """The id in the short summary reruns that item, given as a path or to --mgetest; at 80 columns the summary
    line keeps the reason, and the headers name the bundle relative to the root, not by its absolute path."""
    monkeypatch.setenv("COLUMNS", "80")
    first = pytest_run(zoo.parent, "--mgetest", "zoo/bad", "-p", "no:cacheprovider", "-p", "no:randomly")
    [line] = [x for x in first.stdout.splitlines() if x.startswith("FAILED") and "fails.mgetest" in x]
    assert line == "FAILED zoo/bad/fails.mgetest::case_0 - score: err=0.5 > maxerr=0.0001"
    assert len(line) <= 80
    assert str(zoo) not in first.stdout  # no absolute path in the headers
    assert "zoo/bad/fails.mgetest: test case 0" in first.stdout
    item = line.split()[1]
    for args in ([item], ["--mgetest", item]):
        again = pytest_run(zoo.parent, *args, "-p", "no:cacheprovider", "-p", "no:randomly")
        assert again.returncode == 1, again.stdout[-2000:]
        assert again.stdout.splitlines()[-1].startswith("=") and "1 failed in" in again.stdout.splitlines()[-1]


def test_a_bundle_that_hangs_fails_at_its_timeout_and_the_rest_run(tmp_path, monkeypatch):
    from tests.zoo import slow_bundle

    monkeypatch.setenv("COLUMNS", "200")
    zoo = tmp_path / "zoo"
    slow_bundle(zoo)
    small_bundle(zoo)
    done = pytest_run(tmp_path, "--mgetest", "zoo", "--mgetest-timeout", "3", "-p", "no:cacheprovider", timeout=120)
    assert done.returncode == 1, done.stdout[-2000:]
    assert "1 failed, 1 passed" in done.stdout.splitlines()[-1]
    assert "FAILED zoo/slow.mgetest::case_0 - timed out: still running after 3 s (--mgetest-timeout 3)" in (done.stdout)


def test_the_plugins_options_that_mirror_mgerun_name_its_flags():
    """Each --mgetest-X that says "As mgerun --X." is mgerun's --X, and mgerun has that flag."""
    import click

    from mgedump.cli import mgerun_command
    from mgedump.cli.plugin_options import plugin_options

    ctx = click.Context(mgerun_command, **mgerun_command.context_settings)
    flags = {flag for param in mgerun_command.get_params(ctx) for flag in param.opts}
    mirrored = [o for o in plugin_options() if str(o.settings.get("help", "")).startswith("As mgerun ")]
    assert len(mirrored) >= 5
    for option in mirrored:
        flag = option.settings["help"].removeprefix("As mgerun ").removesuffix(".")
        assert flag in flags and option.flag == "--mgetest-" + flag[2:], option
    assert {"--iter", "--warmup-iter"} <= flags
