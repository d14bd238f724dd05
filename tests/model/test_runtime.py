"""onnxruntime sessions: inputs and outputs described, failures as one readable line, no process-wide side effects."""

from __future__ import annotations

import platform
import subprocess
import sys

import numpy as np
import onnxruntime
import pytest

from mgedump.base.errors import ModelError, RunError, UsageError
from mgedump.model.runtime import (
    TensorInfo,
    clean_ort_message,
    infer,
    model_io,
    open_session,
)
from mgedump.model.session import SessionSettings
from tests.support import sample


def test_model_io_names_dtypes_and_shapes():
    session = open_session(str(sample("multi_input.onnx").path))
    inputs, outputs = model_io(session)
    assert inputs == [TensorInfo("input:0", "float32", (1, 16)), TensorInfo("len", "int64", ())]
    assert [o.name for o in outputs] == ["output:0", "len_out"]
    dynamic, _ = model_io(open_session(str(sample("dynamic_batch.onnx").path)))
    assert dynamic[0].shape == ("N", 3, 16, 16) and dynamic[0].shape_text() == "[N,3,16,16]"


def test_ir3_weights_are_not_inputs():
    inputs, _ = model_io(open_session(str(sample("ir3_mlp.onnx").path)))
    assert [i.name for i in inputs] == ["x"]


def test_tensor_info_round_trips_through_json():
    info = TensorInfo("x", "float16", ("N", 3, None))
    assert TensorInfo.from_json(info.to_json()) == info


@pytest.mark.parametrize(
    "name, message",
    [
        ("bad/ir_too_new.onnx", "IR version 99 is newer than this onnxruntime supports"),
        ("bad/not_onnx.onnx", "not a valid ONNX model (protobuf parsing failed"),
        ("bad/truncated.onnx", "not a valid ONNX model"),
    ],
)
def test_load_failures_are_one_line(name, message):
    with pytest.raises(ModelError, match=message.replace("(", r"\(")) as caught:
        open_session(str(sample(name).path))
    assert "\n" not in caught.value.one_line() and ".cc:" not in caught.value.one_line()


def test_cpp_locations_and_status_prefixes_are_dropped():
    text = "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : /src/onnxruntime/core/x.cc:256 void ns::F(const A&, B) idx 50 out of bounds"
    assert clean_ort_message(RuntimeError(text)) == "idx 50 out of bounds"


def test_a_run_failure_names_the_integer_inputs():
    session = open_session(str(sample("bad/gather_index.onnx").path))
    assert infer(session, {"idx": np.array([0, 1, 9])})[0].shape == (3, 4)
    with pytest.raises(RunError, match="the model failed to run") as caught:
        infer(session, {"idx": np.array([0, 50, 2])})
    assert caught.value.hint == "check the values given for integer input(s) 'idx'"
    assert caught.value.exit_code == 1


def test_providers():
    def providers(name):
        return SessionSettings(provider=name).providers()

    assert providers(None) == ["CPUExecutionProvider"]
    assert providers("cpu") == providers("CPUExecutionProvider") == ["CPUExecutionProvider"]
    with pytest.raises(UsageError, match="unknown execution provider 'Nope'; this onnxruntime offers: ") as caught:
        providers("Nope")
    assert all(p in caught.value.message for p in onnxruntime.get_available_providers())


def test_session_options():
    opts = SessionSettings(threads=2, graph_opt="basic").session_options()
    assert opts.intra_op_num_threads == 2
    assert opts.graph_optimization_level == onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    assert opts.log_severity_level == 4  # the session is quiet; mgedump reports failures itself


def test_no_process_wide_side_effects(monkeypatch):
    """An application embedding mgedump keeps onnxruntime's warnings for its own sessions."""
    calls = []
    monkeypatch.setattr(onnxruntime, "set_default_logger_severity", lambda level: calls.append(level))
    session = open_session(str(sample("cnn.onnx").path))
    infer(session, {"data": np.zeros((1, 3, 32, 32), np.float32)})
    with pytest.raises(ModelError):
        open_session(str(sample("bad/not_onnx.onnx").path))
    assert calls == []
    assert not [name for name in vars(onnxruntime) if "mgedump" in name]


def test_an_image_of_a_size_the_model_cannot_take_suggests_fixing_h_and_w(tmp_path, mgedump):
    """A model with free H and W that halves then doubles them and concatenates with its input (as detectors do)
    fails on odd sizes with onnxruntime's 'mismatched dimensions': the one line says what to give instead."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("MaxPool", ["x"], ["half"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Resize", ["half", "", "scales"], ["back"], mode="nearest"),
        helper.make_node("Concat", ["x", "back"], ["y"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "down_up",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, "H", "W"])],
        initializer=[numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "m.onnx")
    result = mgedump(tmp_path / "m.onnx", "-d", "#rand(0,1,1,1,75,76)", "-o", tmp_path / "o.mgetest")
    assert result.code == 2 and len(result.err.strip().splitlines()) == 1, result.err
    assert "mismatched dimensions" in result.err
    assert "given x 1x1x75x76): fix them with --input-shape NAME:N,C,H,W and --resize-input" in result.err
    assert mgedump(tmp_path / "m.onnx", "-d", "#rand(0,1,1,1,64,64)", "-o", tmp_path / "o.mgetest").code == 0


_FAULTS = """
import resource, sys
from mgedump.model import runtime
runtime._PRIMED = sys.argv[2] == "skip"
import onnxruntime
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
runtime.open_session(sys.argv[1])
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the priming is about glibc's mmap threshold")
def test_the_first_session_of_a_process_is_opened_with_fewer_page_faults_once_the_allocator_is_primed():
    """One block of 8 MiB freed before the first session raises glibc's mmap threshold: the session's blocks of
    128 KiB to a few MiB come from the heap, not each from a mapping of its own faulted in page by page."""

    def faults(how: str) -> int:
        runs = [
            subprocess.run(
                [sys.executable, "-c", _FAULTS, str(sample("wide_mlp.onnx").path), how],
                capture_output=True,
                text=True,
                check=True,
            ).stdout  # fmt: skip
            for _ in range(3)
        ]
        return min(int(out) for out in runs)

    assert faults("prime") < 0.95 * faults("skip")  # 687 against 760 where it was measured
