"""Closed and odd standard streams, with real processes whose descriptors are truly closed (``2>&-``, ``>&-``,
``<&-``), not pointed at a pipe: a passing run still exits 0 with its report on stdout, a pack still works and
writes the same bytes (no file it opens takes the number of a closed stream, where onnxruntime's native logging
would write), a report asked for on a closed stdout is refused in one line before anything runs, and no
traceback ever shows. ``mgediff --report-json -`` writes the report alone on stdout; outputs that are files of
their own refuse ``-``; the library packs with ``sys.stderr`` None. A stream that cannot be written (a full
device, made inside the test's folder) loses its lines with one warning and keeps the exit code, unless it was
to carry a report (exit 2, one line).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import SAMPLES, script, with_changed_weight

CNN = SAMPLES / "cnn.onnx"


def run(prog: str, *args, close: tuple[int, ...] = (), cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run a console script with these standard descriptors closed (the others captured)."""

    def closing() -> None:
        for fd in close:
            os.close(fd)

    return subprocess.run(
        [script(prog), *map(str, args)],
        stdin=subprocess.DEVNULL if 0 not in close else None,
        capture_output=True,
        preexec_fn=closing,
        cwd=cwd,
        timeout=300,
    )


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("streams")
    good = folder / "good.mgetest"
    done = run("mgedump", CNN, "-d", "#rand(0,1)", "--embed-io-dump", "-o", good, "-q")
    assert done.returncode == 0, done.stderr
    return {"good": good, "broken": with_changed_weight(good, folder / "broken.mgetest")}


@pytest.mark.parametrize("close", [(2,), (0, 2)])
def test_a_passing_run_with_stderr_closed_exits_0_with_the_report_on_stdout(bundles, close):
    done = run("mgerun", bundles["good"], "--iter", "2", "--report-json", "-", close=close)
    assert done.returncode == 0
    assert json.loads(done.stdout)["exit_code"] == 0


def test_a_failing_run_with_stderr_closed_exits_1_with_the_report_on_stdout(bundles):
    done = run("mgerun", bundles["broken"], "--iter", "1", "--report-json", "-", close=(2,))
    assert done.returncode == 1 and json.loads(done.stdout)["exit_code"] == 1


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--enable-ioc16", "--optimize-for-inference", "--maxerr", "1e-2"],
        ["--enable-io16xc32", "--optimize-for-inference", "--maxerr", "1e-2", "-v"],
    ],
)
def test_a_pack_with_stderr_closed_writes_the_same_bundle(tmp_path, args):
    shown, closed = tmp_path / "shown.mgetest", tmp_path / "closed.mgetest"
    assert run("mgedump", CNN, "-d", "#rand(0,1)", *args, "-o", shown).returncode == 0
    done = run("mgedump", CNN, "-d", "#rand(0,1)", *args, "-o", closed, close=(2,))
    assert done.returncode == 0 and done.stdout == b""
    assert closed.read_bytes() == shown.read_bytes()
    assert run("mgerun", closed, "--iter", "1").returncode == 0


def test_a_refused_pack_with_stderr_closed_exits_2_and_writes_nothing(tmp_path):
    done = run(
        "mgedump", SAMPLES / "bad" / "not_onnx.onnx", "-d", "#rand(0,1)", "-o", tmp_path / "b.mgetest", close=(2,)
    )
    assert done.returncode == 2 and sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize("close", [(1,), (0, 1)])
def test_a_run_with_stdout_closed_shows_no_traceback(bundles, close):
    assert run("mgerun", bundles["good"], "--iter", "1", close=close).returncode == 0
    done = run("mgerun", bundles["broken"], "--iter", "1", close=close)
    assert done.returncode == 1 and b"Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("prog", "args"),
    [
        ("mgerun", ["{good}", "--report-json", "-"]),
        ("mgerun", ["{good}", "--junit-xml", "-"]),
        ("mgerun", ["{good}", "--report-html", "/dev/stdout"]),
        ("mgediff", ["{good}", "{broken}", "--report-json", "-"]),
    ],
)
def test_a_report_on_a_closed_stdout_is_refused_in_one_line(bundles, prog, args):
    args = [str(a).format(**bundles) for a in args]
    done = run(prog, *args, close=(1,))
    assert done.returncode == 2 and b"Traceback" not in done.stderr
    (line,) = done.stderr.decode().splitlines()
    assert line.startswith(f"{prog}: error: ") and "standard output is closed" in line


@pytest.mark.parametrize("close", [(1, 2), (0, 1, 2)])
def test_every_stream_closed_keeps_the_exit_codes(bundles, close):
    assert run("mgerun", bundles["good"], "--iter", "1", close=close).returncode == 0
    assert run("mgerun", bundles["broken"], "--iter", "1", close=close).returncode == 1
    assert run("mgediff", bundles["good"], bundles["broken"], close=close).returncode == 1


def test_mgediff_writes_its_report_alone_on_stdout(bundles):
    for target in ("-", "/dev/stdout"):
        done = run("mgediff", bundles["good"], bundles["broken"], "--report-json", target)
        assert done.returncode == 1
        assert json.loads(done.stdout)["exit_code"] == 1  # the whole of stdout is the document
        assert b"first diverges" in done.stderr or b"FAILED" in done.stderr


def test_mgediff_with_stderr_closed_writes_its_report_on_stdout(bundles):
    done = run("mgediff", bundles["good"], bundles["good"], "--report-json", "-", close=(2,))
    assert done.returncode == 0 and json.loads(done.stdout)["exit_code"] == 0


@pytest.mark.parametrize(
    ("flags", "option"),
    [
        (["--output-model", "-", "-o", "{out}"], "--output-model"),
        (["-o", "-"], "-o"),
        (["--output-model", "/dev/stdout", "-o", "{out}"], "output /dev/stdout"),
    ],
)
def test_outputs_that_are_files_of_their_own_refuse_stdout(tmp_path, flags, option):
    flags = [f.format(out=tmp_path / "b.mgetest") for f in flags]
    done = run("mgedump", CNN, "-d", "#rand(0,1)", *flags, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == b""
    (line,) = done.stderr.decode().splitlines()
    assert line.startswith(f"mgedump: error: {option}"), line
    assert os.listdir(tmp_path) == []


def test_the_library_packs_float16_with_no_stderr(tmp_path):
    code = (
        "import sys; sys.stderr = None\n"
        "from mgedump import OptimizeOptions, PackOptions, pack\n"
        "options = PackOptions(cases=['#rand(0,1)'], maxerr=1e-2,"
        " optimize=OptimizeOptions(optimize_for_inference=True, precision='ioc16'))\n"
        f"pack({str(CNN)!r}, {str(tmp_path / 'b.mgetest')!r}, options)\n"
        "print('packed')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout == "packed\n", done.stderr
    assert run("mgerun", tmp_path / "b.mgetest", "--iter", "1").returncode == 0


@pytest.fixture
def full(tmp_path) -> Path:
    """A device node that is always full (the numbers of /dev/full), made inside the test's folder."""
    import stat

    path = tmp_path / "full"
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 7))
    except PermissionError:
        pytest.skip("making a device node needs root")
    return path


def _to(path: Path, fd: int, prog: str, *args) -> subprocess.CompletedProcess:
    with open(path, "wb") as sink:
        streams = (
            {"stdout": sink, "stderr": subprocess.PIPE} if fd == 1 else {"stdout": subprocess.PIPE, "stderr": sink}
        )
        return subprocess.run([script(prog), *map(str, args)], stdin=subprocess.DEVNULL, timeout=300, **streams)


def test_a_full_stdout_loses_the_lines_and_keeps_the_exit_code(bundles, full):
    done = _to(full, 1, "mgerun", bundles["good"], "--iter", "1")
    assert done.returncode == 0 and b"Traceback" not in done.stderr
    assert done.stderr.decode().splitlines() == [
        "mgerun: warning: cannot write to standard output (No space left on device): its lines are lost"
    ]
    assert _to(full, 1, "mgerun", bundles["broken"], "--iter", "1").returncode == 1
    assert _to(full, 1, "mgediff", bundles["good"], bundles["broken"]).returncode == 1


@pytest.mark.parametrize(
    ("prog", "args"),
    [("mgerun", ["{good}", "--report-json", "-"]), ("mgerun", ["{good}", "--junit-xml", "-"]),
     ("mgediff", ["{good}", "{good}", "--report-json", "-"])],
)  # fmt: skip
def test_a_report_on_a_full_stdout_is_an_error_in_one_line(bundles, full, prog, args):
    done = _to(full, 1, prog, *[a.format(**bundles) for a in args])
    assert done.returncode == 2 and b"Traceback" not in done.stderr
    assert done.stderr.decode().splitlines()[-1] == (
        f"{prog}: error: cannot write the report - to standard output: No space left on device"
    )


def test_a_full_stderr_keeps_the_exit_codes(bundles, full, tmp_path):
    assert _to(full, 2, "mgerun", bundles["good"], "--iter", "1").returncode == 0
    assert _to(full, 2, "mgerun", bundles["broken"], "--iter", "1").returncode == 1
    assert _to(full, 2, "mgerun", tmp_path / "missing.mgetest").returncode == 2
    assert _to(full, 2, "mgerun", tmp_path / "missing.mgetest", "-v").returncode == 2
    done = _to(full, 2, "mgedump", CNN, "-d", "#rand(0,1)", "-o", tmp_path / "b.mgetest")
    assert done.returncode == 0 and (tmp_path / "b.mgetest").is_file()
