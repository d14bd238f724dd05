"""Reports on standard output (``--report-json -``), through real pipes: stdout holds the report alone, the lines
people read go to stderr, a reader that stops early ends it quietly with the run's own exit code, and a report
sent to the file stdout is redirected to is written in place."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET

import pytest

from tests.support import SAMPLES, run_ok, script


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stdout")
    out = folder / "gray.mgetest"
    run_ok("mgedump", SAMPLES / "gray.onnx", "-d", "#rand(0,1)", "-d", "#rand(0,1)", "-o", out, "-q")
    return out


def _mgerun(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([script("mgerun"), *map(str, args)], capture_output=True, timeout=300, **kwargs)


@pytest.mark.parametrize("flag", ["--report-json", "--junit-xml", "--report-html"])
def test_a_report_on_stdout_is_alone_there(bundle, flag):
    done = _mgerun(bundle, "--iter", "2", "-v", flag, "-")
    assert done.returncode == 0, done.stderr
    if flag == "--report-json":
        assert json.loads(done.stdout)["bundles"][0]["name"] == "gray"
    elif flag == "--junit-xml":
        assert ET.fromstring(done.stdout).tag == "testsuites"
    else:
        assert done.stdout.startswith(b"<!doctype html>") and done.stdout.endswith(b"</html>\n")
    err = done.stderr.decode()
    assert "all 2 test case(s) passed" in err and "latency (ms)" in err and "ran with onnxruntime" in err
    assert not (tmp := bundle.parent / "-").exists(), tmp


def test_a_reader_that_stops_early_ends_it_quietly(bundle):
    # far more than a pipe holds (64 KiB), so that mgerun is still writing when the reader goes away
    process = subprocess.Popen(
        [script("mgerun"), str(bundle), "--iter", "4000", "--report-json", "-"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    head = process.stdout.read(10)
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=300) == 0, err
    assert head == b'{\n "bundle' and "Traceback" not in err and "Exception ignored" not in err
    assert "BrokenPipe" not in err and "all 2 test case(s)" in err


def test_a_failing_run_keeps_its_exit_code_through_a_closed_pipe(bundle, tmp_path):
    from tests.support import rewrite_bundle

    def expect_other(names, manifest, members):
        import onnx
        from onnx import numpy_helper

        member = "test_data_set_0/output_0.pb"
        tensor = onnx.load_tensor_from_string(members[member])
        members[member] = numpy_helper.from_array(numpy_helper.to_array(tensor) + 1, tensor.name).SerializeToString()

    failing = rewrite_bundle(bundle, tmp_path / "failing.mgetest", expect_other, fix_hashes=True)
    done = subprocess.run(
        f"'{script('mgerun')}' '{failing}' --iter 4000 --report-json - | head -c 10 > /dev/null; "
        'exit "${PIPESTATUS[0]}"',
        shell=True, executable="/bin/bash", capture_output=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert b"Traceback" not in done.stderr and b"FAILED: 1 of 2 test case(s) failed" in done.stderr


def test_human_lines_through_a_closed_pipe_end_quietly(bundle):
    # -v prints every run's latency: far more than a pipe holds
    done = subprocess.run(
        f"'{script('mgerun')}' '{bundle}' --iter 6000 -v | head -n 1 > /dev/null; exit \"${{PIPESTATUS[0]}}\"",
        shell=True, executable="/bin/bash", capture_output=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == b"", done.stderr


def test_dev_stdout_redirected_to_a_log_keeps_the_log(bundle, tmp_path):
    log = tmp_path / "log.txt"
    with open(log, "wb") as out:
        done = subprocess.run(
            [script("mgerun"), bundle, "--iter", "2", "-v", "--report-json", "/dev/stdout"],
            stdout=out, stderr=subprocess.STDOUT, timeout=300,
        )  # fmt: skip
    assert done.returncode == 0
    text = log.read_text(encoding="utf-8")
    assert "all 2 test case(s) passed" in text  # printed before the report: not replaced by it
    report = json.loads(text[text.index("{\n") :])
    assert report["exit_code"] == 0


def test_only_one_report_goes_to_stdout(bundle):
    done = _mgerun(bundle, "--report-json", "-", "--junit-xml", "-")
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().strip().splitlines() == [
        "mgerun: error: --report-json and --junit-xml both write to standard output: give each its own path"
    ]
