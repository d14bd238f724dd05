"""The diff: per-tensor errors, the node that introduces error (not those that pass it on), float16 overflow."""

from __future__ import annotations

import copy
import math

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from mgedump.base.bounds import DEFAULT_MAXERR as FLOAT32_MAXERR
from mgedump.base.errors import DataError
from mgedump.diagnose.divergence import tensor_err
from mgedump.diagnose.locate import compare_models
from mgedump.optimize.float16 import convert
from mgedump.optimize.nodes import name_nodes
from mgedump.options import FLOAT16_MAXERR
from tests.support import sample

RNG = np.random.default_rng(0)


def test_tensor_err_is_assert_equal_on_finite_values():
    a = np.array([0.5, 100.0, 3.0], np.float32)
    b = np.array([0.5004, 100.2, 3.0], np.float32)
    t = tensor_err("x", a, b)
    assert t.err == pytest.approx(2e-3, rel=1e-3) and t.index == (1,) and t.reason is None


@pytest.mark.parametrize(
    "a, b, reason",
    [
        (np.ones(3, np.float32), np.ones(4, np.float32), "shape differs: A [3], B [4]"),
        (np.ones(3, np.float32), np.array([1, np.inf, 1], np.float32), "NaN or infinity in B only (1 elements)"),
        (np.array([1, np.nan, 1], np.float32), np.ones(3, np.float32), "NaN or infinity in A only (1 elements)"),
    ],
)
def test_what_cannot_agree_is_an_infinite_error(a, b, reason):
    t = tensor_err("x", a, b)
    assert math.isinf(t.err) and t.reason == reason


@pytest.mark.parametrize("shape", [(), (1,), (2, 3)])
def test_any_rank(shape):
    a = np.full(shape, 2.0, np.float32)
    t = tensor_err("x", a, (a + 0.5).astype(np.float16))
    assert t.err == pytest.approx(0.25) and len(t.index) == len(shape)


def test_the_same_non_finite_values_agree():
    a = np.array([np.nan, np.inf, 1.0], np.float32)
    assert tensor_err("x", a, a.copy()).err == 0.0


def test_float16_overflow_is_recorded():
    t = tensor_err("x", np.array([7e4, 1.0], np.float32), np.array([np.inf, 1.0], np.float16))
    assert t.b_inf_where_a_finite and t.a_absmax == 7e4


def _pair(tmp_path, change):
    model = onnx.load(str(sample("cnn.onnx").path))
    name_nodes(model)
    onnx.save(model, tmp_path / "a.onnx")
    changed = copy.deepcopy(model)
    change(changed)
    onnx.save(changed, tmp_path / "b.onnx")
    return (str(tmp_path / "a.onnx"), "a"), (str(tmp_path / "b.onnx"), "b")


def _bump_weight(model, name="conv2_W", by=2.0):
    init = next(i for i in model.graph.initializer if i.name == name)
    array = numpy_helper.to_array(init).copy()
    array[0, 0, 1, 1] += by
    init.CopyFrom(numpy_helper.from_array(array, name))


def test_a_changed_weight_is_found_where_it_is_used(tmp_path):
    a, b = _pair(tmp_path, _bump_weight)
    feeds = {"data": RNG.random((1, 3, 32, 32), dtype=np.float32)}
    report = compare_models(a, b, [(0, feeds)], str(tmp_path))
    case = report.cases[0]
    assert report.maxerr == FLOAT32_MAXERR and report.maxerr_source == "the default" and not report.passed
    first = case.first_divergence
    assert first.node.name == "conv2" and first.inputs == {"pool1": 0.0} and first.cause is None
    # nodes after it carry its error on: they do not introduce any
    assert [n.node.name for n in case.introducers()] == ["conv2"]
    assert {n.node.name for n in case.nodes if n.err > case.maxerr} >= {"conv2", "bn2", "relu2", "softmax"}
    text = first.describe()
    assert text.startswith("node 'conv2' (Conv), output 'conv2' err ") and "its inputs carry err pool1 0" in text


def test_same_models_compare_clean(tmp_path):
    a, _ = _pair(tmp_path, lambda m: None)
    report = compare_models(a, a, [(0, {"data": RNG.random((1, 3, 32, 32), dtype=np.float32)})], str(tmp_path))
    assert report.passed and report.exit_code == 0 and report.cases[0].first_divergence is None
    assert len(report.cases[0].tensors) == 12 and report.cases[0].only_a == report.cases[0].only_b == []


def test_float16_rounding_carried_in_is_not_introduced(tmp_path):
    """Every node of a float16 model rounds; none of that counts: the default maxerr is float16's precision."""
    a, b = _pair(tmp_path, lambda m: convert(m, "io16xc32"))
    report = compare_models(a, b, [(0, {"data": RNG.random((1, 3, 32, 32), dtype=np.float32)})], str(tmp_path))
    assert report.maxerr == FLOAT16_MAXERR and "float16" in report.maxerr_source
    assert report.passed and report.cases[0].first_divergence is None
    assert report.cases[0].only_b and all("__" in name for name in report.cases[0].only_b)  # the Casts


def test_the_first_float16_overflow_is_named(tmp_path):
    model = onnx.load(str(sample("float16/overflow_chain.onnx").path))
    naive = copy.deepcopy(model)
    convert(naive, "io16xc32")
    onnx.save(model, tmp_path / "a.onnx")
    onnx.save(naive, tmp_path / "b.onnx")
    feeds = {"x": RNG.uniform(5, 10, (1, 8)).astype(np.float32)}
    report = compare_models(
        (str(tmp_path / "a.onnx"), "a"), (str(tmp_path / "b.onnx"), "b"), [(0, feeds)], str(tmp_path)
    )
    first = report.cases[0].first_divergence
    assert first.node.name == "amplify" and math.isinf(first.err)
    assert first.cause.startswith("float16 overflow: B holds an infinity where A is finite")


def test_runs_with_nothing_in_common_are_refused(tmp_path):
    from mgedump.diagnose.divergence import diff_dumps
    from mgedump.diagnose.locate import dump_model

    cnn = dump_model(
        str(sample("cnn.onnx").path),
        "a",
        [(0, {"data": np.zeros((1, 3, 32, 32), np.float32)})],
        str(tmp_path),
        label="a",
    )
    gray = dump_model(
        str(sample("gray.onnx").path),
        "b",
        [(1, {"gray": np.zeros((1, 1, 28, 28), np.float32)})],
        str(tmp_path),
        label="b",
    )
    with pytest.raises(DataError, match="share no test case"):
        diff_dumps(cnn, gray)
    half = dump_model(
        str(sample("half_relu.onnx").path), "b", [(0, {"x": np.zeros(2, np.float16)})], str(tmp_path), label="b"
    )
    with pytest.raises(DataError, match="no tensor name in common"):
        diff_dumps(cnn, half)


def _dump(folder, nodes, tensors):
    """An io dump of one test case, written by the dump's own writer: nodes as (name, op, inputs, outputs)."""
    from onnx import TensorProto, helper

    from mgedump.diagnose.iodump import IoDump, Plan, write_case

    graph = helper.make_graph(
        [helper.make_node(op, list(i), list(o), name=name) for name, op, i, o in nodes],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info(nodes[-1][3][0], TensorProto.FLOAT, None)],
    )
    plan = Plan.of(helper.make_model(graph))
    write_case(str(folder), 0, plan, "sha", iter([(name, tensors[name]) for name in plan.tensors]))
    return IoDump(str(folder))


def test_float16_internal_tensors_are_reported_and_the_outputs_decide(tmp_path):
    """A float16 run accumulates inside (here a difference of near values): the internal tensor is above maxerr, the
    output is not; the test case passes and the tensor is reported."""
    from mgedump.diagnose.divergence import diff_dumps

    nodes = [("diff", "Sub", ("x", "x"), ("d",)), ("scale", "Mul", ("d", "x"), ("y",))]
    x = np.array([0.5, 0.25], np.float32)
    a = _dump(tmp_path / "a", nodes, {"x": x, "d": np.zeros(2, np.float32), "y": np.zeros(2, np.float32)})
    b16 = {"x": x.astype(np.float16), "d": np.array([0.0202, 0], np.float16), "y": np.array([0.0049, 0], np.float16)}
    report = diff_dumps(a, _dump(tmp_path / "b", nodes, b16))
    case = report.cases[0]
    assert report.maxerr == FLOAT16_MAXERR and report.passed and case.judged == ["y"]
    assert [t.name for t in case.above_unjudged()] == ["d"]
    b32 = {name: value.astype(np.float32) for name, value in b16.items()}
    assert not diff_dumps(a, _dump(tmp_path / "c", nodes, b32), maxerr=FLOAT16_MAXERR).passed  # float32: all decide


def test_integer_accumulators_never_overflow_float16():
    from mgedump.diagnose.divergence import recognise_cause

    acc = tensor_err("acc", np.array([100000, 5], np.int32), np.array([100001, 5], np.int32))
    assert recognise_cause([acc]) is None
    wide = tensor_err("sum", np.array([7e4, 1.0], np.float32), np.array([np.inf, 1.0], np.float32))
    assert recognise_cause([wide]) is None  # float32 on both sides: not float16's range
    half = tensor_err("sum", np.array([7e4, 1.0], np.float32), np.array([np.inf, 1.0], np.float16))
    assert recognise_cause([half]).startswith("float16 overflow: B holds an infinity where A is finite")


def test_the_node_that_made_the_error_ranks_above_those_that_carry_it():
    from mgedump.diagnose.divergence import CaseDiff, NodeDiff
    from mgedump.diagnose.iodump import NodeInfo

    def node(name, err, carried):
        info = NodeInfo(name, "Op", "", ("i",), ("o",))
        return NodeDiff(info, err, tensor_err("o", np.zeros(1), np.full(1, err)), {"i": carried}, True)

    carrier = node("reduce_sum", 5.0, 1.0)  # sums what it is given: 5x more err, from 1.0 carried in
    culprit = node("matmul", 0.5, 0.0)  # nothing carried in
    accumulator = node("matmul_integer", 2.0, 0.5)
    case = CaseDiff(0, 0.01, [], [carrier, accumulator, culprit], [], [])
    assert [n.node.name for n in case.introducers()] == ["matmul", "reduce_sum", "matmul_integer"]
