"""The runs with every tensor exposed happen in the searches' child too (mgedump.optimize.isolate_call): a crash or a
hang of the float16 search's reference is a refusal that names it, one of a candidate's diagnosis costs the
diagnosis (said, the search going on without it), never the pack; and what comes back on disk builds only the
classes the caller allows (issue 26)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from mgedump.base.errors import ModelError, OptimizeError
from mgedump.diagnose.divergence import CaseDiff, TensorErr
from mgedump.optimize import isolate, isolate_call
from mgedump.optimize.isolate import Opener
from tests.support import SAMPLES, bundle_manifest, sample

REAL_CHILD = isolate._CHILD
BLAME = "quantize_blame:blame"  # the int8 search's diagnosis
DIFFS = "autocast_trials:exposed_diffs"  # the float16 search's
REFERENCE = "isolate_call:dump_exposed"  # the float16 search's reference


def _dying_in(call: str, hang: bool = False) -> str:
    """The real child, which dies by SIGSEGV (or, with ``hang``, stops answering) when asked to call ``call``."""
    action = "_time.sleep(3600)" if hang else "_os.kill(_os.getpid(), _signal.SIGSEGV)"
    line = "    job = json.loads(line)\n"
    assert line in REAL_CHILD
    return "import os as _os, signal as _signal, time as _time\n" + REAL_CHILD.replace(
        line, f"{line}    if {call!r} in job.get('call', ''):\n        {action}\n"
    )


HANG_S = 1.0  # what the call that hangs is given to answer (it never will)


def _hanging(monkeypatch, call: str, hang: bool) -> None:
    """The child dies in ``call`` (or, with ``hang``, hangs there). The call that hangs is abandoned after
    :data:`HANG_S`, every other call (and the one that dies) keeps :data:`isolate.CANDIDATE_SECONDS`: however slow
    the machine, only the call that hangs is abandoned, and a crash is never mistaken for a hang."""
    monkeypatch.setattr(isolate, "_CHILD", _dying_in(call, hang))
    real = Opener._ask

    def ask(self, job, *args, **kwargs):
        self.timeout = HANG_S if hang and call in str(job.get("call", "")) else isolate.CANDIDATE_SECONDS
        return real(self, job, *args, **kwargs)

    monkeypatch.setattr(Opener, "_ask", ask)


def _pack(mgedump, tmp_path, model: str, *args, cases: int = 2):
    out = tmp_path / "o.mgetest"
    data = ["-d", sample(model).spec] * cases
    return mgedump(SAMPLES / model, *data, *args, "-o", out), out


@pytest.mark.parametrize("hang", [False, True], ids=["segfault", "hang"])
def test_int8_goes_on_without_a_diagnosis_that_crashes_or_hangs(hang, tmp_path, mgedump, mgerun, monkeypatch):
    """The first candidate misses 0.1, so the search diagnoses it; that run dies (or stops answering and is
    abandoned): the search ranks without the blame, and the pack says the diagnosis was lost and why, whether int8
    then packs or is left out."""
    _hanging(monkeypatch, BLAME, hang)
    result, out = _pack(mgedump, tmp_path, "int8/mild_outlier.onnx", "--quantize", "int8", "--maxerr", "0.1")
    cause = "no answer within 1 s" if hang else "SIGSEGV"
    lost = f"int8: the diagnosis of candidate 1 (its run with every tensor exposed, beside the float model's) was lost: {cause}; the search went on without it"
    assert "Traceback" not in result.err
    assert lost in " ".join(result.err.split())
    assert result.code in (0, 2)  # packed with more kept float, or left out beyond half the model's arithmetic
    if result.code == 0:
        assert bundle_manifest(out)["int8"]["kept_float32"]
        assert mgerun(out, "--iter", "1").code == 0
    else:
        assert not out.exists() and "int8 would have too little left to speed up" in result.err


@pytest.mark.parametrize("hang", [False, True], ids=["segfault", "hang"])
def test_float16_goes_on_without_a_diagnosis_that_crashes_or_hangs(hang, tmp_path, mgedump, mgerun, monkeypatch):
    """wide_logits needs the diagnosis to find its culprit; without it the search goes on to its last candidate,
    every node float32, which passes: a bundle, and the note that says why so much stayed float32."""
    _hanging(monkeypatch, DIFFS, hang)
    args = ["--optimize-for-inference", "--enable-io16xc32", "--maxerr", "1e-2"]
    result, out = _pack(mgedump, tmp_path, "float16/wide_logits.onnx", *args, cases=4)
    assert result.code == 0, result.err
    cause = "no answer within 1 s" if hang else "SIGSEGV"
    assert (
        f"io16xc32: the diagnosis of candidate 1 (its run with every tensor exposed) was lost: {cause}; the search "
        "went on without it" in " ".join(result.err.split())
    )
    assert "Traceback" not in result.err
    kept = bundle_manifest(out)["float16"]["kept_float32"]
    assert {k["node"] for k in kept} >= {"fc", "act", "embed"}
    assert mgerun(out, "--iter", "1").code == 0


def test_a_float16_refusal_says_the_diagnosis_was_lost(tmp_path, mgedump, monkeypatch):
    """Nothing passes (every candidate is made to miss) and the diagnosis died: the refusal says both."""
    from mgedump.optimize import autocast, autocast_trials

    monkeypatch.setattr(isolate, "_CHILD", _dying_in(DIFFS))
    real = autocast_trials.Search.evaluate

    def every_node_misses(self, kept, keep_io=None, label=""):
        trial = real(self, kept, keep_io, label)
        trial.errs = [dict.fromkeys(errs, 1.0) for errs in trial.errs]
        return trial

    monkeypatch.setattr(autocast_trials.Search, "evaluate", every_node_misses)
    monkeypatch.setattr(autocast, "MAX_RUNS", 1)
    args = ["--optimize-for-inference", "--enable-ioc16", "--maxerr", "1e-2"]
    result, out = _pack(mgedump, tmp_path, "float16/wide_logits.onnx", *args)
    assert result.code == 2 and not out.exists()
    assert "the diagnosis of candidate 1 (its run with every tensor exposed) was lost: SIGSEGV" in result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize("hang", [False, True], ids=["segfault", "hang"])
def test_a_float16_reference_that_crashes_or_hangs_is_a_refusal(hang, tmp_path, mgedump, monkeypatch):
    """The float32 model with every tensor exposed is what the search measures against: without it there is no
    search, so its crash (or hang) is a refusal that names it, and the pack writes nothing."""
    _hanging(monkeypatch, REFERENCE, hang)
    result, out = _pack(mgedump, tmp_path, "cnn.onnx", "--optimize-for-inference", "--enable-ioc16")
    assert result.code == 2 and not out.exists()
    cause = "gave no answer within 1 s running it" if hang else "crashes (SIGSEGV) running it"
    assert f"--enable-ioc16: the search's reference (the float32 model): onnxruntime {cause}" in result.err
    assert "(hint: leave --enable-ioc16 out)" in result.err and "Traceback" not in result.err


def test_a_call_hands_back_its_result_or_its_error_kind(tmp_path):
    cases = [{"x": np.arange(3, dtype=np.float32)}, {"x": np.ones(3, np.float32)}]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\xff" * 64)
    args = {"sha256": "x", "folder": str(tmp_path / "dump"), "settings": None, "label": "it"}
    with Opener() as opener:
        with pytest.raises(ModelError, match=r"garbage.onnx: not a valid ONNX model"):  # the kind raised in the child
            opener.call(
                f"mgedump.optimize.{REFERENCE}", cases, str(scratch), "x", (), path=str(garbage), numbers=[0, 1], **args
            )
        with pytest.raises(OptimizeError, match=r"^the call: ValueError: not a function of mgedump: 'os:system'$"):
            opener.call("os:system", cases, str(scratch), "the call", ())
        with pytest.raises(OptimizeError, match=r"^the call: AttributeError"):
            opener.call("mgedump.optimize.isolate_call:nothing", cases, str(scratch), "the call", ())
        model = str(sample("cnn.onnx").path)
        feeds = [{"data": np.zeros((1, 3, 32, 32), np.float32)}]
        done = opener.call(
            f"mgedump.optimize.{REFERENCE}", feeds, str(scratch), "x", (), path=model, numbers=[0], **args
        )
        assert done is None
    assert os.listdir(scratch) == []  # the cases and the result are removed after each call
    assert os.listdir(tmp_path / "dump") == ["test_data_set_0"]


def test_a_result_file_builds_only_the_classes_allowed(tmp_path):
    """The result crosses as JSON: the dataclasses named, tuples, mappings and numpy's numbers come back as they went,
    and nothing else is built."""
    path = str(tmp_path / "result.json")
    err = TensorErr("t", float("inf"), (0, 1), np.float32(1.5), np.float16(2.0), reason="shape")
    diff = CaseDiff(0, 1e-4, [err], [], ["a"], [], {"x": 0.5}, judged=None)
    isolate_call.save_result([diff, (err, {("k", 1): np.arange(3, dtype=np.int64)})], path)
    back, (again, mapping) = isolate_call.load_result(path, (CaseDiff, TensorErr), "x")
    assert back == diff and again == err and type(again.a_value) is np.float32 and type(again.b_value) is np.float16
    assert isinstance(again.index, tuple) and again.err == float("inf")
    ((key, array),) = mapping.items()
    assert key == ("k", 1) and array.dtype == np.int64 and array.tolist() == [0, 1, 2]
    with pytest.raises(OptimizeError, match=r"divergence:TensorErr is not part of the result"):
        isolate_call.load_result(path, (CaseDiff,), "x")
    with open(path, "w") as f:  # a crafted file: a class by name, a numpy object dtype
        json.dump({"$class": "os:system", "fields": {"command": "true"}}, f)
    with pytest.raises(OptimizeError, match=r"^x: its result cannot be read back \(TypeError: os:system is not part"):
        isolate_call.load_result(path, (TensorErr,), "x")
    with open(path, "w") as f:
        json.dump({"$numpy": "|O", "shape": [], "scalar": True, "values": 1}, f)
    with pytest.raises(OptimizeError, match="dtype object is not part of the result"):
        isolate_call.load_result(path, (), "x")
    with pytest.raises(OptimizeError, match="cannot be read back"):
        isolate_call.load_result(str(tmp_path / "missing"), (), "x")
    with pytest.raises(TypeError, match="a bytes cannot cross from the child"):
        isolate_call.save_result(b"raw", path)
