"""Io dumps: what they hold, and that every way a dump folder can be wrong is refused."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import onnx
import pytest

from mgedump.base.errors import DataError, OutputError
from mgedump.base.fileio import hash_files
from mgedump.diagnose.iodump import INDEX, IoDump, Plan, tensor_stats
from tests.diagnose.support import CNN, FEEDS, _dump
from tests.support import sample


def test_the_plan_is_inputs_then_node_outputs_in_order():
    plan = Plan.of(onnx.load(str(CNN)))
    assert plan.inputs == ("data",)
    assert plan.tensors[:4] == ("data", "conv1", "bn1", "relu1") and plan.tensors[-1] == "prob"
    assert [n.name for n in plan.nodes][:2] == ["conv1", "bn1"] and len(plan.tensors) == 1 + len(plan.nodes)


def test_a_dump_holds_every_tensor_with_its_stats(tmp_path):
    _dump(tmp_path / "d")
    dump = IoDump(str(tmp_path / "d"))
    case = dump.cases[0]
    assert dump.model_sha256 == hash_files([str(CNN)]).sha256
    index = json.loads((tmp_path / "d" / "test_data_set_0" / INDEX).read_text())
    assert index["format"] == "mgedump-iodump" and index["version"] == 1 and index["test_case"] == 0
    assert [t["file"] for t in index["tensors"]][:3] == ["0000.pb", "0001.pb", "0002.pb"]
    np.testing.assert_array_equal(case.tensor("data"), FEEDS["data"])
    relu = case.tensor("relu1")
    entry = case.entry("relu1")
    assert entry["shape"] == [1, 8, 32, 32] and entry["dtype"] == "float32"
    assert (
        entry["min"] == 0.0 and entry["max"] == pytest.approx(float(relu.max())) and entry["nan"] == entry["inf"] == 0
    )
    import onnxruntime as ort

    want = ort.InferenceSession(str(CNN), providers=["CPUExecutionProvider"]).run(None, FEEDS)[0]
    np.testing.assert_allclose(case.tensor("prob"), want, rtol=1e-6)


def test_stats_count_non_finite():
    stats = tensor_stats(np.array([1.0, np.nan, np.inf, -2.0], np.float32))
    assert stats == {"min": -2.0, "max": 1.0, "mean": -0.5, "nan": 1, "inf": 1}
    assert tensor_stats(np.array([3, 1], np.int64))["max"] == 3


def test_a_second_model_is_not_mixed_into_a_dump(tmp_path):
    _dump(tmp_path / "d")
    gray = sample("gray.onnx")
    with pytest.raises(OutputError, match="holds a dump of another model"):
        _dump(tmp_path / "d", gray.path, {"gray": np.zeros((1, 1, 28, 28), np.float32)})
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="not part of an io dump"):
        _dump(tmp_path / "other")
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"


def test_a_dump_again_replaces_its_test_case(tmp_path):
    _dump(tmp_path / "d")
    _dump(tmp_path / "d", cases=(0, 1))
    assert sorted(IoDump(str(tmp_path / "d")).cases) == [0, 1]
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["test_data_set_0", "test_data_set_1"]


def _break(folder, how):
    case = folder / "test_data_set_0"
    index = json.loads((case / INDEX).read_text())
    if how == "no-index":
        (case / INDEX).unlink()
    elif how == "missing-file":
        (case / "0003.pb").unlink()
    elif how == "edited-file":
        data = bytearray((case / "0003.pb").read_bytes())
        data[-1] ^= 1
        (case / "0003.pb").write_bytes(bytes(data))
    elif how == "truncated-file":
        (case / "0003.pb").write_bytes((case / "0003.pb").read_bytes()[:-4])
    elif how == "bad-json":
        (case / INDEX).write_text("{not json")
    elif how == "other-format":
        index["format"] = "something"
        (case / INDEX).write_text(json.dumps(index))
    elif how == "newer-version":
        index["version"] = 2
        (case / INDEX).write_text(json.dumps(index))
    elif how == "unsafe-file-name":
        index["tensors"][0]["file"] = "../../etc/passwd"
        (case / INDEX).write_text(json.dumps(index))
    elif how == "another-model":
        shutil.copytree(case, folder / "test_data_set_1")
        other = json.loads((folder / "test_data_set_1" / INDEX).read_text())
        other["model_sha256"], other["test_case"] = "0" * 64, 1
        (folder / "test_data_set_1" / INDEX).write_text(json.dumps(other))
    elif how == "empty":
        shutil.rmtree(case)
    elif how.startswith("no-"):  # a key every tensor entry must have
        del index["tensors"][0][how.removeprefix("no-")]
        (case / INDEX).write_text(json.dumps(index))


@pytest.mark.parametrize(
    "how, message",
    [
        ("no-index", re.escape("no index.json (incomplete dump)")),
        ("missing-file", re.escape("0003.pb ('relu1') is missing (incomplete dump)")),
        ("truncated-file", "0003.pb is .* bytes, index.json says"),
        ("bad-json", "index.json is not valid JSON"),
        ("other-format", "not an io dump"),
        ("newer-version", "io dump version 2 is not one this mgedump reads"),
        ("unsafe-file-name", "each tensor needs a name, a file"),
        ("another-model", "mixes test cases of different models"),
        ("empty", "has no test_data_set_N folder"),
        ("no-dtype", "each tensor needs a name, a file .*, a dtype"),
        ("no-shape", "each tensor needs a name, a file .*, a dtype"),
        ("no-min", "needs min, max and mean"),
        ("no-max", "needs min, max and mean"),
        ("no-mean", "needs min, max and mean"),
        ("no-nan", "nan and inf counts"),
    ],
)
def test_broken_dumps_are_refused(tmp_path, how, message):
    _dump(tmp_path / "d")
    _break(tmp_path / "d", how)
    with pytest.raises(DataError, match=message):
        IoDump(str(tmp_path / "d"))


def test_an_edited_tensor_is_refused_when_read(tmp_path):
    _dump(tmp_path / "d")
    _break(tmp_path / "d", "edited-file")
    case = IoDump(str(tmp_path / "d")).cases[0]
    with pytest.raises(DataError, match="0003.pb does not match its sha256 in index.json"):
        case.tensor("relu1")


def test_tensors_computed_from_weights_alone_are_left_out(tmp_path):
    """A weight-only int8 model dequantizes its weights at run time (int8 -> Cast -> Mul): those tensors are the same
    for every input and many times the model's size as float32; a dump leaves them out, the activations stay."""
    from mgedump.diagnose.iodump import weight_only_tensors

    model = onnx.load(str(sample("int8/weight_only.onnx").path))
    constant = weight_only_tensors(model)
    plan = Plan.of(model)
    assert constant and not constant & set(plan.tensors)
    produced = {o for node in model.graph.node for o in node.output}
    assert set(plan.tensors) == (produced - constant) | set(plan.inputs)
    assert all(
        node.op_type in ("Cast", "Mul", "Reshape", "Transpose")
        for node in model.graph.node
        if node.output[0] in constant
    )


def test_an_embedded_dump_of_a_weight_only_model_leaves_its_weights_out(tmp_path, mgedump, mgerun):
    """The bundle's embedded dump holds the activations only (its size said at pack time), and mgerun's check of the
    bundle runs the model exposing the same tensors: nothing in one side only."""
    import zipfile

    from mgedump.diagnose.iodump import weight_only_tensors

    model = sample("int8/weight_only.onnx")
    out = tmp_path / "w.mgetest"
    result = mgedump(model.path, "-d", model.spec, "--embed-io-dump", "-o", out)
    assert result.code == 0, result.err
    assert re.search(
        r"embedded io dump: [0-9.]+ MB \(1 test case\(s\); tensors computed from weights alone", result.err
    )
    with zipfile.ZipFile(out) as zf:
        index = json.loads(zf.read("io_dump/test_data_set_0/index.json"))
    names = {t["name"] for t in index["tensors"]}
    assert names and not names & weight_only_tensors(onnx.load(str(model.path)))
    checked = mgerun(out, "--iter", "1")
    assert checked.code == 0, checked.out + checked.err
