"""What trace() and dump() are given: a value of the wrong type is one TypeError naming the keyword, the type it
takes and the type given, raised before anything is written (issue 26, trace API arguments)."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mgedump import tensor
from mgedump.jit import trace


@pytest.fixture
def traced():
    f = trace(lambda x: x * 2, capture_as_const=True)
    f(tensor(np.ones((2, 3), np.float32)))
    return f


WRONG_TYPES = [
    ("arg_names", 123, r"dump\(arg_names=\.\.\.\) takes a str or a list of str, got int 123"),
    ("arg_names", ["x", 3], r"takes a str or a list of str; item 1 is int 3"),
    ("arg_names", {"x"}, r"dump\(arg_names=\.\.\.\) takes a str or a list of str, got set"),
    ("output_names", 1.5, r"dump\(output_names=\.\.\.\) takes a str or a list of str, got float 1\.5"),
    ("output_names", [None], r"item 0 is NoneType None"),
    (
        "input_data",
        "#rand(0,1)",
        r"takes a list of test cases .*got str '#rand\(0,1\)'; wrap the spec in a list: input_data=\['#rand\(0,1\)'\]$",
    ),
    ("input_data", b"#rand(0,1)", r"got bytes .*wrap the spec in a list"),
    ("input_data", {"arg_0": np.ones((2, 3))}, r"got dict .*wrap one test case in a list"),
    ("input_data", np.ones((2, 3), np.float32), r"got ndarray .*wrap one test case in a list"),
    ("input_data", 7, r"got int 7; e\.g\. input_data=\['#rand\(0,1\)'\]$"),
    ("strip_info_file", 123, r"dump\(strip_info_file=\.\.\.\) takes a path \(a str or os\.PathLike\), got int 123"),
    ("strip_info_file", b"info.json", r"takes a path .*got bytes"),
    ("keep_var_name", "2", r"dump\(keep_var_name=\.\.\.\) takes an int from 0 to 2, got str '2'"),
    ("keep_var_name", True, r"takes an int from 0 to 2, got bool True"),
    ("optimize_for_inference", "no", r"dump\(optimize_for_inference=\.\.\.\) takes True or False, got str 'no'"),
    ("keep_opr_name", None, r"dump\(keep_opr_name=\.\.\.\) takes True or False, got NoneType None"),
    ("keep_param_name", 2, r"takes True or False, got int 2"),
    ("append_json", "yes", r"dump\(append_json=\.\.\.\) takes True or False"),
    ("no_assert", [], r"dump\(no_assert=\.\.\.\) takes True or False, got list"),
    ("maxerr", "0.1", r"dump\(maxerr=\.\.\.\) takes a number, got str '0\.1'"),
    ("maxerr", True, r"dump\(maxerr=\.\.\.\) takes a number, got bool True"),
    ("dump_format", 1, r"dump\(dump_format=\.\.\.\) takes a str, got int 1"),
    ("enable_io16xc32", "yes", r"dump\(enable_io16xc32=\.\.\.\) takes True or False, got str 'yes'"),
]


@pytest.mark.parametrize(("keyword", "value", "message"), WRONG_TYPES, ids=[f"{k}={v!r}" for k, v, _ in WRONG_TYPES])
def test_dump_keywords_of_the_wrong_type_say_what_was_expected(traced, tmp_path, keyword, value, message):
    with pytest.raises(TypeError, match=message) as caught:
        traced.dump(str(tmp_path / "f.mgetest"), **{keyword: value})
    assert "\n" not in str(caught.value)  # one line
    assert not list(tmp_path.iterdir())  # refused before anything is written


@pytest.mark.parametrize("file", [3, None, 2.5, ["f.onnx"]])
def test_dump_file_must_be_a_path_or_a_file_object(traced, file):
    with pytest.raises(TypeError, match=r"^dump\(file=\.\.\.\) takes a path or a binary file object, got "):
        traced.dump(file)


def test_values_of_the_right_types_are_taken(traced, tmp_path):
    info = traced.dump(Path(tmp_path / "f.onnx"), arg_names="x", output_names=("y",), keep_var_name=np.int64(2))
    assert info.inputs == ["x"] and info.outputs == ["y"]
    info = traced.dump(
        str(tmp_path / "f.mgetest"),
        input_data=("#rand(0,1)",),
        maxerr=np.float32(0.5),
        no_assert=np.bool_(False),
        optimize_for_inference=0,
        strip_info_file=Path(tmp_path / "f.json"),
    )
    assert (tmp_path / "f.mgetest").is_file() and (tmp_path / "f.json").is_file()


def test_keep_var_name_out_of_range_and_empty_names_are_value_errors(traced):
    with pytest.raises(ValueError, match=r"dump\(keep_var_name=\.\.\.\) must be from 0 to 2, got 3"):
        traced.dump(io.BytesIO(), keep_var_name=3)
    with pytest.raises(ValueError, match="arg_names must be non-empty strings"):
        traced.dump(io.BytesIO(), arg_names=[""])
    with pytest.raises(ValueError, match="arg_names has 2 name"):
        traced.dump(io.BytesIO(), arg_names=["a", "b"])


def test_strip_info_on_the_dumped_file_is_refused(traced, tmp_path):
    target = tmp_path / "k.onnx"
    with pytest.raises(ValueError, match=r"strip_info_file='.*k\.onnx'\) would be written over the dumped file"):
        traced.dump(str(target), strip_info_file=str(target))
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("keyword", "value", "message"),
    [
        ("symbolic", "yes", r"trace\(symbolic=\.\.\.\) takes True or False, got str 'yes'"),
        ("capture_as_const", None, r"trace\(capture_as_const=\.\.\.\) takes True or False, got NoneType None"),
        ("without_host", 2, r"trace\(without_host=\.\.\.\) takes True or False, got int 2"),
        ("symbolic_shape", "false", r"trace\(symbolic_shape=\.\.\.\) takes True or False"),
        ("imperative", [], r"trace\(imperative=\.\.\.\) takes True or False"),
        ("profiling", 1.0, r"trace\(profiling=\.\.\.\) takes True or False, got float 1\.0"),
        ("opt_level", "2", r"trace\(opt_level=\.\.\.\) .*takes an int from 0 to 3, got str '2'"),
        ("opt_level", 2.0, r"takes an int from 0 to 3, got float 2\.0"),
    ],
)
def test_trace_switches_of_the_wrong_type_say_what_was_expected(keyword, value, message):
    with pytest.raises(TypeError, match=message):
        trace(lambda x: x, **{keyword: value})


def test_trace_switches_take_bools_and_zero_one():
    f = trace(lambda x: x + 1, capture_as_const=1, symbolic=np.bool_(True), opt_level=np.int32(1))
    assert f.capture_as_const is True and f.symbolic is True and f.opt_level == 1
    assert f(tensor([1.0])).tolist() == [2.0]
    with pytest.raises(ValueError, match=re.escape("trace(opt_level=...)")):
        trace(lambda x: x, opt_level=4)


@pytest.mark.parametrize(
    ("keyword", "value"),
    [("append", True), ("keep_opr_priority", True), ("user_info", {"a": 1}), ("repeat", 4), ("model_version", 1)],
)
def test_megengine_format_keywords_are_refused_by_name_unless_at_their_default(traced, keyword, value):
    with pytest.raises(NotImplementedError, match=rf"^dump\({keyword}=\.\.\.\) is .* no counterpart in an ONNX model"):
        traced.dump(io.BytesIO(), **{keyword: value})


def test_megengine_format_keywords_at_their_defaults_and_silent_are_taken(traced, tmp_path, mgerun):
    defaults = {"append": False, "keep_opr_priority": False, "no_change_graph": False, "user_info": None}
    defaults |= {"repeat": 1, "resize_input": False, "input_transform": None, "model_version": 2}
    info = traced.dump(io.BytesIO(), enable_metadata=False, compat_older_version=None, **defaults)
    assert info.outputs == ["MUL"]
    with pytest.raises(TypeError, match=r"dump\(enable_metadata=\.\.\.\) takes True or False"):
        traced.dump(io.BytesIO(), enable_metadata="no")
    bundle = tmp_path / "f.mgetest"
    traced.dump(str(bundle), input_data=["#rand(0,1)"], silent=True)
    manifest = json.loads(zipfile.ZipFile(bundle).read("mgedump.json"))
    assert manifest["assertion"]["verbose"] is False  # recorded as mgedump --silent records it
    traced.dump(str(bundle), input_data=["#rand(0,1)"])
    assert json.loads(zipfile.ZipFile(bundle).read("mgedump.json"))["assertion"]["verbose"] is True
    assert mgerun(str(bundle)).code == 0
