"""Array files for an input: .npy, .npz, .pb, list files' relative paths, --repeat, --input-transform."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from onnx import numpy_helper

from mgedump.base.errors import DataError, SpecError
from mgedump.model.runtime import TensorInfo
from tests.data.support import F32, build


def test_npy_npz_pb_and_list_file_relative_paths(samples, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    info = TensorInfo("data", "float32", (1, 3, 32, 32))
    cases = build([f"@{samples / 'testcases.txt'}"], [info])
    assert len(cases) == 4
    np.testing.assert_array_equal(cases[2]["data"], np.load(samples / "data" / "cnn_input.npy"))
    tensor = numpy_helper.to_array(__import__("onnx").load_tensor(str(samples / "data" / "cnn_input.pb")))
    np.testing.assert_array_equal(cases[3]["data"], tensor)
    multi = [TensorInfo("input:0", "float32", (1, 16)), TensorInfo("len", "int64", ())]
    (case,) = build([str(samples / "data" / "multi_input.npz")], multi)
    assert int(case["len"]) == 3 and case["input:0"].shape == (1, 16)


def test_pb_with_empty_name_and_cwd_first(tmp_path, monkeypatch):
    array = np.arange(6, dtype=np.float32).reshape(1, 6)
    (tmp_path / "t.pb").write_bytes(numpy_helper.from_array(array).SerializeToString())
    monkeypatch.chdir(tmp_path)
    (case,) = build(["t.pb"], [TensorInfo("x", "float32", (1, 6))])
    np.testing.assert_array_equal(case["x"], array)


def test_repeat_batch_dim_is_a_warning(tmp_path, caplog):
    np.save(tmp_path / "a.npy", np.ones((1, 4), np.float32))
    with caplog.at_level(logging.WARNING, logger="mgedump"):
        (case,) = build([str(tmp_path / "a.npy")], [TensorInfo("x", "float32", (1, 4))], repeat=3)
    assert case["x"].shape == (3, 4)
    assert any("repeat 3" in r.getMessage() for r in caplog.records)


def test_transform_has_no_builtins(tmp_path):
    np.save(tmp_path / "a.npy", np.ones((1, 3, 4, 5), np.float32))
    with pytest.raises(SpecError, match="NameError"):
        build([str(tmp_path / "a.npy")], [F32], input_transform="open('x')")
    (case,) = build([str(tmp_path / "a.npy")], [F32], input_transform="np.clip(data * 300, 0, 255)")
    assert case["x"].max() == 255


@pytest.mark.parametrize(
    "data, message",
    [
        (b"\x08\x02\x10\x63\x4a\x08" + b"\x00" * 8, "not a valid ONNX TensorProto file"),  # data_type 99
        (b"\x08\x02\x10\x01\x4a\x03abc", "not a valid ONNX TensorProto file"),  # 2 floats in 3 bytes
        (b"\xff\xff\xff\xff", "not a valid ONNX TensorProto file"),
    ],
)
def test_bad_pb_files_are_data_errors(tmp_path, data, message):
    (tmp_path / "t.pb").write_bytes(data)
    with pytest.raises(DataError, match=message):
        build([str(tmp_path / "t.pb")], [TensorInfo("x", "float32", (2,))])
