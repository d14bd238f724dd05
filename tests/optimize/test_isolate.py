"""The searches' child process (mgedump.optimize.isolate): isolated from the current folder, each candidate bounded
in time, every run of a candidate inside it, and a crash or a hang named (issue 26)."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import onnxruntime as ort
import pytest

from mgedump.base.bounds import Bounds
from mgedump.base.errors import OptimizeError, UsageError
from mgedump.optimize import isolate
from mgedump.optimize.isolate import CandidateFailed, Opener
from mgedump.optimize.quantize import quantize_int8
from mgedump.optimize.quantize_search import Budget, Searcher
from tests.support import sample

REAL_CHILD = isolate._CHILD


def _cases(model: str, count: int = 2) -> tuple[list[dict], list[list[np.ndarray]]]:
    session = ort.InferenceSession(str(sample(model).path), providers=["CPUExecutionProvider"])
    info = session.get_inputs()[0]
    rng = np.random.default_rng(0)
    cases = [{info.name: rng.random(info.shape).astype(np.float32)} for _ in range(count)]
    return cases, [session.run(None, c) for c in cases]


def test_a_json_py_in_the_current_folder_never_runs_in_the_child(tmp_path, monkeypatch):
    folder = tmp_path / "cwd"
    folder.mkdir()
    marker = tmp_path / "ran"
    for name in ("json", "numpy", "onnxruntime", "sys"):
        (folder / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\nraise SystemExit(3)\n")
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))  # as `python -c` or `python -m` would have it
    monkeypatch.setenv("PYTHONPATH", str(folder))  # and the environment, which isolated mode ignores
    cases, expected = _cases("cnn.onnx")
    with Opener() as opener:
        got = opener.run(str(sample("cnn.onnx").path), cases, str(tmp_path), "the candidate")
    assert not marker.exists()
    np.testing.assert_allclose(got[0]["prob"], expected[0][0], rtol=1e-5, atol=1e-6)


def test_the_child_command_is_isolated_and_leaves_the_current_folder_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    command = isolate.child_command("pass")
    assert command[1] == "-I" and str(tmp_path) not in command[3] and "''" not in command[3].splitlines()[1]


@pytest.mark.parametrize(
    ("child", "timeout", "cause"),
    [
        ("import sys, time\nfor line in sys.stdin:\n    time.sleep(600)\n", 1.5, "no answer within 1.5 s"),
        # stopped: abandoned as soon as it is seen stopped, not when the limit is up
        (
            "import os, signal, sys\nfor line in sys.stdin:\n    os.kill(os.getpid(), signal.SIGSTOP)\n",
            600.0,
            "no answer: its process was stopped",
        ),
    ],
    ids=["deadlock", "sigstop"],
)
def test_a_child_that_gives_no_answer_is_abandoned_and_named(child, timeout, cause, tmp_path, monkeypatch):
    monkeypatch.setattr(isolate, "_CHILD", child)
    cases, _ = _cases("cnn.onnx")
    started = time.monotonic()
    with Opener(timeout=timeout) as opener, pytest.raises(CandidateFailed) as caught:
        opener.run(str(sample("cnn.onnx").path), cases, str(tmp_path), "candidate 7 (2 node(s) kept float)")
    assert time.monotonic() - started < 30
    error = caught.value
    assert error.cause == cause
    assert error.message.startswith(f"candidate 7 (2 node(s) kept float): onnxruntime gave {cause}")
    assert "abandoned" in error.message


def _crashing_on_run(nth: int = 0) -> str:
    """The real child, which dies by SIGSEGV running the test cases (not opening the model): on every plain run
    of a candidate, or on its ``nth`` one only (each new child counts from 1; the runs with every tensor exposed do
    not count, and do not crash)."""
    when = "job.get('inputs')" if not nth else f"_count[0] == {nth}"
    return "import os as _os, signal as _signal\n_count = [0]\n" + REAL_CHILD.replace(
        "    job = json.loads(line)\n",
        f"    job = json.loads(line)\n    _count[0] += 'call' not in job\n    if 'call' not in job and {when}:\n"
        "        _os.kill(_os.getpid(), _signal.SIGSEGV)\n",
    )


def test_a_crash_running_a_candidate_is_named_with_its_signal(tmp_path, monkeypatch):
    monkeypatch.setattr(isolate, "_CHILD", _crashing_on_run())
    cases, _ = _cases("cnn.onnx")
    with Opener() as opener:
        opener.check(str(sample("cnn.onnx").path), "opening")  # opening alone survives
        with pytest.raises(CandidateFailed) as caught:
            opener.run(str(sample("cnn.onnx").path), cases, str(tmp_path), "candidate 3")
    assert caught.value.cause == "SIGSEGV" and caught.value.message.startswith("candidate 3: onnxruntime crashes")


def test_int8_runs_its_candidates_in_the_child_and_a_first_crash_is_a_refusal(tmp_path, monkeypatch):
    """The test data runs inside the child: a segfault there is a refusal naming the candidate, never a crash."""
    monkeypatch.setattr(isolate, "_CHILD", _crashing_on_run())
    cases, expected = _cases("int8/mild_outlier.onnx")
    with pytest.raises(CandidateFailed) as caught:
        quantize_int8(
            str(sample("int8/mild_outlier.onnx").path),
            str(tmp_path / "int8.onnx"),
            test_inputs=cases,
            expected=expected,
            bounds=Bounds(maxerr=0.2),
            scratch=str(tmp_path),
        )
    assert "candidate 1 (0 node(s) kept float): onnxruntime crashes (SIGSEGV)" in caught.value.message
    assert not (tmp_path / "int8.onnx").exists()


def test_a_candidate_that_crashes_during_the_search_is_skipped_and_said(tmp_path, monkeypatch):
    """The second candidate (the first the search tries) dies by SIGSEGV: it is skipped, and the search goes on;
    whether int8 then packs or is left out, the skipped candidate is said, with its signal."""
    monkeypatch.setattr(isolate, "_CHILD", _crashing_on_run(nth=2))
    cases, expected = _cases("int8/mild_outlier.onnx")
    try:
        result = quantize_int8(
            str(sample("int8/mild_outlier.onnx").path),
            str(tmp_path / "int8.onnx"),
            test_inputs=cases,
            expected=expected,
            bounds=Bounds(maxerr=0.1),
            scratch=str(tmp_path),
        )
    except OptimizeError as exc:
        assert "a candidate with 1 node(s) kept float was skipped: SIGSEGV" in exc.message
        assert not isinstance(exc, CandidateFailed)
    else:
        assert any("a candidate with 1 node(s) kept float was skipped: SIGSEGV" in n for n in result.notes)
        assert result.outputs[0].assert_err <= 0.1


def test_int8_on_empty_data_is_an_error(tmp_path):
    cases, _ = _cases("int8/mild_outlier.onnx")
    empty = [{"x": np.zeros((0, 32), np.float32)}]
    common = {"bounds": Bounds(maxerr=0.2), "scratch": str(tmp_path)}
    with pytest.raises(UsageError, match="test case 0 gives outputs that hold no element"):
        quantize_int8(
            str(sample("int8/mild_outlier.onnx").path),
            str(tmp_path / "a.onnx"),
            test_inputs=empty,
            expected=[[np.zeros((0, 8), np.float32)]],
            **common,
        )
    _, expected = _cases("int8/mild_outlier.onnx")
    with pytest.raises(UsageError, match="input 'x' holds no element in any of the 1 calibration case"):
        quantize_int8(
            str(sample("int8/mild_outlier.onnx").path),
            str(tmp_path / "b.onnx"),
            test_inputs=cases,
            expected=expected,
            calibration=empty,
            **common,
        )


def test_the_child_is_gone_after_a_search(tmp_path):
    cases, _ = _cases("cnn.onnx")
    opener = Opener()
    with opener:
        opener.run(str(sample("cnn.onnx").path), cases, str(tmp_path), "x")
        child = opener._child
        assert child is not None
    assert child.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.kill(child.pid, signal.SIGCONT)


def test_a_last_candidate_skipped_on_the_way_runs_again_and_its_crash_is_a_refusal():
    """Every node float is the search's last candidate, whose crash is a refusal; reached on the way (the gallop's
    whole ranking) and skipped there, it is run again as the last, not taken as failed from the cache ("even with
    every node float the model misses" would be false)."""
    tried = []

    def probe(keep):
        tried.append(frozenset(keep))
        raise CandidateFailed("candidate 9: onnxruntime crashes (SIGSEGV)", cause="SIGSEGV")

    searcher = Searcher(probe, Bounds(maxerr=0.1), Budget())
    every = {"a": "", "b": ""}
    assert searcher.run(every) is None
    assert searcher.skipped == ["int8: a candidate with 2 node(s) kept float was skipped: SIGSEGV"]
    with pytest.raises(CandidateFailed, match="candidate 9"):
        searcher.run(every, last=True)
    assert tried == [frozenset(every)] * 2
