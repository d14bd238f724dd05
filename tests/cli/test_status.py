"""A sign of life on long work: on a terminal, mgedump says what it is doing with the time taken; nowhere else."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys

from mgedump.cli import status as status_module
from mgedump.cli.status import Status
from tests.support import sample


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_line_names_each_step_with_its_time_and_is_wiped(monkeypatch):
    monkeypatch.setattr(status_module, "AFTER_S", 0.0)
    out = _Terminal()
    with Status("mgedump", out) as status:
        status("loading m.onnx")
        status("running test case 1 of 2 \x1b[31m")  # text from files is escaped
    text = out.getvalue()
    assert "\rmgedump: loading m.onnx (0s)" in text and "running test case 1 of 2 \\x1b[31m (0s)" in text
    assert "\x1b" not in text and text.endswith("\r")  # wiped: what comes next starts on a clean line


def test_nothing_when_not_a_terminal_or_quiet(monkeypatch):
    monkeypatch.setattr(status_module, "AFTER_S", 0.0)
    for status in (Status("mgedump", io.StringIO()), Status("mgedump", _Terminal(), enabled=False)):
        status("loading")
        status.close()
        assert status.stream.getvalue() == ""


def test_a_quick_step_shows_nothing():
    out = _Terminal()
    with Status("mgedump", out) as status:
        status("loading")
    assert out.getvalue() == ""


def test_pack_reports_its_steps(tmp_path, monkeypatch):
    from mgedump import PackOptions, pack

    seen = []
    cnn = sample("cnn.onnx")
    pack(str(cnn.path), tmp_path / "o.mgetest", PackOptions(cases=[cnn.spec, cnn.spec]), on_stage=seen.append)
    assert seen[0] == "loading cnn.onnx" and "running test case 2 of 2" in seen
    assert seen[-2:] == ["hashing the weights", "writing o.mgetest"]


_SLOW_START = """
import sys
from mgedump.cli import status
status.AFTER_S = 0.0
from mgedump.cli import mgedump_main
mgedump_main(sys.argv[1:])
"""


def _run_in_terminal(args, program=_SLOW_START):
    """The command on a pseudo-terminal (stdout and stderr), as a person runs it; what the terminal got."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", program, *args], stdin=subprocess.DEVNULL, stdout=follower, stderr=follower
    )
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the other side closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return proc.wait(timeout=60), b"".join(chunks).decode()


def test_on_a_real_terminal_the_steps_show(tmp_path):
    cnn = sample("cnn.onnx")
    code, text = _run_in_terminal([str(cnn.path), "-d", cnn.spec, "-o", str(tmp_path / "o.mgetest")])
    assert code == 0
    assert "\rmgedump: loading cnn.onnx (" in text and "mgedump: wrote " in text


def test_in_a_pipe_nothing_extra(tmp_path):
    cnn = sample("cnn.onnx")
    done = subprocess.run(
        [sys.executable, "-c", _SLOW_START, str(cnn.path), "-d", cnn.spec, "-o", str(tmp_path / "o.mgetest")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "\r" not in done.stderr and "loading" not in done.stderr


_SLOW_RUN = """
import sys
from mgedump.measure import timing
from mgedump.cli import status
status.AFTER_S = 0.0
timing.PROGRESS_AFTER_S = 0.0
from mgedump.cli import mgerun_main
mgerun_main(sys.argv[1:])
"""


def test_mgerun_on_a_terminal_shows_its_loading_then_click_progress_bars(tmp_path):
    from tests.support import run_ok

    cnn = sample("cnn.onnx")
    bundle = tmp_path / "c.mgetest"
    run_ok("mgedump", cnn.path, "-d", cnn.spec, "-o", bundle, "-q")
    code, text = _run_in_terminal([str(bundle), "--iter", "200"], program=_SLOW_RUN)
    assert code == 0, text
    assert "mgerun: checking c.mgetest (" in text and "mgerun: loading the model (" in text
    assert "test case 0" in text and "200/200" in text  # click's bar: its label and position


def test_mgerun_in_a_pipe_prints_no_bar_and_no_status(tmp_path):
    from tests.support import run_ok

    cnn = sample("cnn.onnx")
    bundle = tmp_path / "c.mgetest"
    run_ok("mgedump", cnn.path, "-d", cnn.spec, "-o", bundle, "-q")
    done = subprocess.run(
        [sys.executable, "-c", _SLOW_RUN, str(bundle), "--iter", "50"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "\r" not in done.stderr + done.stdout and "checking" not in done.stderr
