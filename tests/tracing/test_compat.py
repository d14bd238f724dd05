"""MegEngine code that used to stop on mgedump (issue 25): its messages, the functions it calls, what its dump
accepts and refuses, and trace(without_host=True)'s error paths; dumped graphs are run on onnxruntime."""

from __future__ import annotations

import io
import logging
import sys
import traceback
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import mgedump.functional as F
import mgedump.module as M
from mgedump import tensor
from mgedump.functional import BroadcastError
from mgedump.jit import TraceError, exclude_from_trace, trace
from tests.tracing.support import raises_trace_error


def run_dumped(f, feeds, **keywords):
    """Dump f as ONNX and run it on onnxruntime with these arrays (one per input); its outputs."""
    buffer = io.BytesIO()
    f.dump(buffer, **keywords)
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: a for i, a in zip(session.get_inputs(), feeds, strict=True)})


# ---------------------------------------------------------------- messages, exactly as MegEngine's


def test_trace_error_text_is_megengine_s_and_the_detail_is_a_note():
    mode = {"sub": False}

    @trace(symbolic=True)
    def fn(a, b):
        return a - b if mode["sub"] else a + b

    fn(tensor([1, 2]), tensor([3, 4]))
    mode["sub"] = True
    with pytest.raises(TraceError) as caught:
        fn(tensor([1, 2]), tensor([3, 4]))
    error = caught.value
    assert str(error) == "trace error because operator mismatch" and error.args == (str(error),)
    assert error.reason == "operator mismatch" and error.detail == "fn: op #0: the trace has add, this call issues sub"
    assert error.__notes__ == [error.detail]
    if sys.version_info >= (3, 11):  # tracebacks print the note under the message
        assert error.detail in "".join(traceback.format_exception(error))


def test_non_tensor_positional_arguments_are_refused_with_capture_as_const():
    @trace(capture_as_const=True)
    def f(a, scale=1.0):
        return a * 2 * scale

    with pytest.raises(TypeError) as caught:
        f(1)
    assert str(caught.value) == "Only support tensor type args when capture_as_const is enabled"
    assert caught.value.__notes__[0].startswith("f: argument [0] is int 1; with capture_as_const=True")
    with pytest.raises(TypeError, match="Only support tensor type args"):
        f([tensor([1.0]), "text"])  # inside a list too
    assert f(tensor([1.0]), scale=3.0).tolist() == [6.0]  # keywords may be anything, as MegEngine's
    assert trace(lambda a, n: a * n)(tensor([1.0]), 2).tolist() == [2.0]  # without capture_as_const: passed through


def test_a_function_without_return_values_is_not_dumped():
    @trace(capture_as_const=True)
    def f(x):
        x * 2

    assert f(tensor([1.0])) is None
    with pytest.raises(ValueError) as caught:
        f.dump(io.BytesIO())
    assert str(caught.value) == (
        "the traced function without return values cannot be dumped, the traced function should return "
        "List[Tensor] or Dict[str, Tensor]"
    )
    assert caught.value.__notes__ == ["f returns None"]
    g = trace(lambda x: [], capture_as_const=True)
    g(tensor([1.0]))
    with pytest.raises(ValueError, match="without return values cannot be dumped") as caught:
        g.dump(io.BytesIO())
    assert caught.value.__notes__ == ["<lambda> returns no tensor"]


# ---------------------------------------------------------------- functions


def test_topk_with_k_beyond_the_size_seen_when_tracing():
    @trace(symbolic=True, capture_as_const=True)
    def f(a, b):
        _, idx = F.topk(b - a, 3)  # MegEngine's test_elemwise_fuse: rows of 2, k = 3
        return 0 + idx

    narrow = (np.ones((7, 2), np.int32), np.arange(14, dtype=np.float32).reshape(7, 2) % 3)
    wide = (np.ones((7, 5), np.int32), np.arange(35, dtype=np.float32).reshape(7, 5) % 4)
    for a, b in (narrow, narrow, wide, wide):
        got = f(tensor(a), tensor(b)).numpy()
        np.testing.assert_array_equal(got, np.argsort(b - a, axis=1, kind="stable")[:, :3])
    assert f(tensor(narrow[0]), tensor(narrow[1])).shape == (7, 2)
    buffer = io.BytesIO()
    info = f.dump(buffer)  # two widths: a free dim, and k clamped in the graph
    assert info.free_dims == {"arg_0": {1: "arg_0_dim1"}, "arg_1": {1: "arg_0_dim1"}}
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    for width in (1, 2, 3, 6):
        a, b = np.zeros((7, width), np.int32), np.random.default_rng(width).random((7, width), np.float32)
        (got,) = session.run(None, {"arg_0": a, "arg_1": b})
        np.testing.assert_array_equal(got, np.argsort(b, axis=1, kind="stable")[:, :3])


def test_repeat_whose_repeats_change_between_calls():
    @trace(symbolic=True, capture_as_const=True)
    def f(x, r):
        return F.repeat(x, r, axis=0)

    x = np.array([[1, 2], [3, 4]], np.float32)
    for r in (1, 3, 0, 2):
        np.testing.assert_array_equal(f(tensor(x), tensor(r)).numpy(), np.repeat(x, r, axis=0))
    assert len(f._programs) == 1  # one recording: repeats is an input of the graph
    for r in (4, 1):
        (got,) = run_dumped(f, [x, np.array([r], np.int32)])
        np.testing.assert_array_equal(got, np.repeat(x, r, axis=0))
    with pytest.raises(ValueError, match="repeats must be >= 0, got -1"):
        f(tensor(x), tensor(-1))
    with pytest.raises(TypeError, match="repeats must be one integer, got a float32 tensor"):
        F.repeat(tensor(x), tensor(2.0))

    g = trace(lambda x, r: F.repeat(x, r))  # a Python number is a constant of the graph
    g(tensor(x), 2)
    with raises_trace_error("operator mismatch", r"op #1 \(repeat\): attributes differ \(repeats: traced 2, got 3\)"):
        g(tensor(x), 3)


def test_warp_perspective_traced_as_megengine_s_test_and_dumped():
    x = tensor(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))
    shift = tensor(np.array([[[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]], np.float32))

    @trace(symbolic=True, capture_as_const=True)
    def f(x, mat):
        out = F.vision.warp_perspective(x, mat, (2, 2))
        assert out.shape.numpy().tolist() == [1, 1, 2, 2]  # symbolic_shape: a shape tensor with a value
        return out

    for _ in range(3):
        assert f(x, shift).numpy().tolist() == [[[[5.0, 6.0], [9.0, 10.0]]]]  # MegEngine's documented example
    turn = np.array([[[0.8, -0.6, 1.5], [0.6, 0.8, -0.5], [0.0, 0.0, 1.0]]], np.float32)
    (got,) = run_dumped(f, [x.numpy(), turn])
    np.testing.assert_allclose(got, F.vision.warp_perspective(x, tensor(turn), (2, 2)).numpy(), rtol=1e-5)
    two = F.vision.warp_perspective(x, tensor(np.concatenate([shift.numpy(), turn])), (2, 2), mat_idx=[0, 0])
    assert two.shape == (2, 1, 2, 2) and two.numpy()[0].tolist() == [[[5.0, 6.0], [9.0, 10.0]]]
    outside = F.vision.warp_perspective(x, shift, (4, 4), border_mode="constant", border_val=-1.0).numpy()
    assert outside[0, 0, 3].tolist() == [-1.0] * 4 and outside[0, 0, 0, 0] == 5.0
    with pytest.raises(ValueError, match=r"border_mode in \('replicate', 'constant'\).*'reflect'"):
        F.vision.warp_perspective(x, shift, (2, 2), border_mode="reflect")
    with pytest.raises(ValueError, match=r"takes NCHW images and \(N, 3, 3\) matrices"):
        F.vision.warp_perspective(x, tensor(np.eye(3, dtype=np.float32)), (2, 2))


def test_broadcasting_errors_raise_as_megengine_and_numpy_raise_them():
    a = tensor(np.arange(8).reshape((2, 4)))
    b = tensor(np.arange(8).reshape((2, 4)))
    with pytest.raises(BroadcastError, match=r"^add: operands of shapes \[2, 4\] and \[4, 2\] cannot be broadcast"):
        a + b.transpose()
    assert issubclass(BroadcastError, RuntimeError) and issubclass(BroadcastError, ValueError)
    with pytest.raises(BroadcastError, match=r"^maximum: operands of shapes \[3\] and \[2, 4\]"):
        np.maximum(tensor([1, 2, 3]), a)  # numpy's functions on tensors too

    @trace(symbolic=True)
    def fn(a, b):
        return a + b

    fn(a, b)
    with pytest.raises(RuntimeError):  # MegEngine's test_graph_error
        fn(a, b.transpose())
    np.testing.assert_array_equal(fn(a, b).numpy(), np.arange(8).reshape(2, 4) * 2)  # the trace still works
    assert len(fn._programs) == 1  # the failed call recorded nothing


def test_batchnorm_in_training_mode_computes_and_raises_at_dump(tmp_path):
    @trace(symbolic=True, capture_as_const=True)
    def bn_train(data):
        return M.BatchNorm2d(10)(data).sum()  # a new module is in training mode, as in MegEngine

    data = np.random.default_rng(0).random((10, 10, 10, 10)).astype(np.float32)
    assert abs(bn_train(tensor(data)).item()) < 1e-2  # normalised by the batch's own statistics: sums to ~0
    with pytest.raises(RuntimeError, match=r"bn_train cannot be dumped: op #0 \(batch_norm_train\).*call \.eval\(\)"):
        bn_train.dump(str(tmp_path / "test.onnx"))
    assert not list(tmp_path.iterdir())
    net = M.BatchNorm2d(10).eval()
    g = trace(lambda x: net(x), capture_as_const=True)
    g(tensor(data))
    (got,) = run_dumped(g, [data])  # in eval mode: the running statistics (0 and 1)
    np.testing.assert_allclose(got, data / np.sqrt(1 + 1e-5), rtol=1e-5)


@pytest.fixture
def warnings_logged():
    """The warnings the package's logger gives while the test runs."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("mgedump")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    yield records
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_dump_of_outputs_that_overflow_warns_naming_the_output_and_count(tmp_path, warnings_logged, mgerun, mgedump):
    @trace(symbolic=True, capture_as_const=True)
    def f(x):
        return F.exp(x)

    f(tensor(1.0))
    f.dump(io.BytesIO(), input_data=["#rand(0, 255, 1)"])  # MegEngine's test_dump_with_testcase
    f = trace(f.__wrapped__, capture_as_const=True)
    f(tensor(np.zeros(4, np.float32)))
    bundle = tmp_path / "f.mgetest"
    f.dump(str(bundle), input_data=["#rand(100, 255, 4)"])  # every element overflows float32 to infinity
    texts = [r.getMessage() for r in warnings_logged]
    assert any("the model's output 'EXP' holds NaN or infinity (4 of 4 elements)" in t for t in texts), texts
    expected = onnx.numpy_helper.to_array(
        onnx.load_tensor_from_string(zipfile.ZipFile(bundle).read("test_data_set_0/output_0.pb"))
    )
    assert np.isposinf(expected).all()
    checked = mgerun(str(bundle))
    assert checked.code == 0, checked.out + checked.err  # the same infinity on both sides agrees
    model = tmp_path / "f.onnx"
    f.dump(str(model))
    refused = mgedump(str(model), "-d", "#rand(100,255,4)", "-o", str(tmp_path / "cli.mgetest"))
    assert refused.code == 2 and "holds NaN or infinity (4 of 4 elements)" in refused.err  # the command refuses


# ---------------------------------------------------------------- trace(without_host=True)


def test_without_host_error_paths():
    calls = {"n": 0}

    @trace(without_host=True)
    def f(x, *, k=1.0, fail=False):
        calls["n"] += 1
        if fail:
            raise ValueError("boom")
        return x * k

    with pytest.raises(ValueError, match="boom"):
        f(tensor([1.0]), fail=True)  # an exception in the first call passes through; nothing is recorded
    assert f._program is None
    assert f(tensor([2.0])).tolist() == [2.0] and calls["n"] == 2
    assert f(tensor([5.0])).tolist() == [5.0] and calls["n"] == 2  # the graph ran, not the function
    with raises_trace_error("argument mismatch", r"^f: argument \['k'\] is 3\.0, traced with not given;"):
        f(tensor([2.0]), k=3.0)  # the function is not there to follow a number that changed
    with raises_trace_error("argument mismatch", r"tensor arguments at \[0\]; this call gives them at \['x'\]"):
        f(x=tensor([2.0]))
    assert f(tensor([1.0, 2.0])).tolist() == [1.0, 2.0] and calls["n"] == 3  # a new shape is traced afresh

    @trace(without_host=True)
    def breaks(x):
        with exclude_from_trace():
            pass
        return x

    for _ in range(2):  # refused at the first call, which recorded nothing: refused again
        with pytest.raises(RuntimeError, match=r"uses exclude_from_trace, but trace\(without_host=True\)"):
            breaks(tensor([1.0]))
    g = trace(lambda x: (x, 3), without_host=True)
    with pytest.raises(TypeError, match="must return a Tensor"):
        g(tensor([1.0]))
    assert g._program is None
