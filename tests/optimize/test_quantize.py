"""int8 (mgedump.optimize.quantize): onnxruntime's quantizer, proved on the test data: what the model becomes, the
search that keeps nodes float, the refusal of a model int8 destroys, determinism."""

from __future__ import annotations

import hashlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from mgedump.base.bounds import Bounds
from mgedump.base.errors import OptimizeError
from mgedump.optimize.isolate import Opener
from mgedump.optimize.quantize import METHODS, quantize_int8
from tests.support import sample


def _cases(model: str, count: int, seed: int = 0, scale: float = 1.0) -> tuple[list[dict], list[list[np.ndarray]]]:
    """Random inputs in [0, scale) for a one-input sample, and the outputs of the sample as given on them."""
    path = str(sample(model).path)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    info = session.get_inputs()[0]
    rng = np.random.default_rng(seed)
    cases = [{info.name: (rng.random(info.shape) * scale).astype(np.float32)} for _ in range(count)]
    return cases, [session.run(None, c) for c in cases]


def _quantize(tmp_path, model: str, maxerr: float, **kwargs):
    cases, expected = kwargs.pop("data", None) or _cases(model, 4)
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    out = tmp_path / kwargs.pop("name", "int8.onnx")
    result = quantize_int8(
        str(sample(model).path),
        str(out),
        test_inputs=cases,
        expected=expected,
        bounds=Bounds(maxerr=maxerr),
        scratch=str(scratch),
        **kwargs,
    )
    return result, out


def _ops(path) -> list[str]:
    return [n.op_type for n in onnx.load(str(path)).graph.node]


def test_static_int8_is_qdq_per_channel_and_meets_maxerr(tmp_path):
    result, out = _quantize(tmp_path, "cnn.onnx", 0.05)
    ops = _ops(out)
    assert "QuantizeLinear" in ops and "DequantizeLinear" in ops and ops.count("Conv") == 2
    model = onnx.load(str(out))
    onnx.checker.check_model(model)
    weight_scales = [
        n for n in model.graph.node if n.op_type == "DequantizeLinear" and any(a.name == "axis" for a in n.attribute)
    ]
    assert weight_scales, "per-channel weights carry DequantizeLinear's axis"
    record = result.to_json()
    assert record["mode"] == "static" and record["format"] == "QDQ" and record["per_channel"] is True
    assert record["method"] == "minmax" and record["kept_float32"] == [] and record["search_rounds"] == 1
    assert record["calibration"] == {"cases": 4, "from": ["the test cases"]}
    (stats,) = record["outputs"]
    assert stats["name"] == "prob" and 0 < stats["max_abs_err"] <= 0.05
    assert stats["mean_abs_err"] <= stats["p99_abs_err"] <= stats["max_abs_err"]
    assert stats["top1_agreement"] == 1.0 and stats["top1_rows"] == 4
    # the int8 model runs in onnxruntime and gives what the statistics say
    cases, expected = _cases("cnn.onnx", 4)
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    worst = max(float(np.abs(session.run(None, c)[0] - e[0]).max()) for c, e in zip(cases, expected, strict=True))
    assert worst == pytest.approx(stats["max_abs_err"], rel=1e-5)


def test_separate_calibration_data_sets_other_ranges_and_is_recorded(tmp_path):
    own, _ = _quantize(tmp_path, "cnn.onnx", 0.05, name="own.onnx")
    other_cases, _ = _cases("cnn.onnx", 3, seed=7, scale=0.5)
    calibrated, out = _quantize(
        tmp_path,
        "cnn.onnx",
        0.5,
        name="other.onnx",
        calibration=other_cases,
        calibration_specs=["--calibrate #rand(0,0.5)"],
    )
    assert calibrated.calibration == {"cases": 3, "from": ["--calibrate #rand(0,0.5)"]}
    assert (tmp_path / "own.onnx").read_bytes() != out.read_bytes()


def test_the_same_data_gives_the_same_bytes(tmp_path):
    digests = set()
    for k in range(2):
        folder = tmp_path / str(k)
        folder.mkdir()
        _, out = _quantize(folder, "cnn.onnx", 0.05)
        digests.add(hashlib.sha256(out.read_bytes()).hexdigest())
    assert len(digests) == 1


@pytest.mark.parametrize("method", METHODS)
def test_every_calibration_method_quantizes(method, tmp_path):
    result, out = _quantize(tmp_path, "cnn.onnx", 0.1, method=method)
    assert result.method == method and "QuantizeLinear" in _ops(out)


def test_the_search_keeps_the_node_that_misses_maxerr_float(tmp_path):
    result, out = _quantize(tmp_path, "int8/mild_outlier.onnx", 0.1)
    assert list(result.kept) == ["head"] and "int8 err" in result.kept["head"]
    assert set(result.quantized) >= {"embed", "mid"} and "head" not in result.quantized
    model = onnx.load(str(out))
    head = next(n for n in model.graph.node if n.name == "head")
    producers = {o: n.op_type for n in model.graph.node for o in n.output}
    assert producers.get(head.input[1]) != "DequantizeLinear", "the head's weight stays float"
    assert result.outputs[0].assert_err <= 0.1 and result.rounds >= 2


def test_a_model_int8_destroys_is_searched_and_its_culprit_kept_float(tmp_path):
    """int8 destroys the outputs (a weight outlier in the head): the search is not refused before it searches; it
    ranks the nodes by what keeping each float buys, and keeps the head float."""
    result, out = _quantize(tmp_path, "int8/weight_outlier.onnx", 0.2)
    assert list(result.kept) == ["head"] and "kept float alone" in result.kept["head"]
    assert result.search is not None and result.search["ranked_by"] == "benefit"
    assert result.search["float_share"] == pytest.approx(256 / (1024 + 256), abs=1e-3)
    assert result.to_json()["search"]["budget"]["runs"] >= 1
    assert any("20% of the model's multiply-accumulates" in note for note in result.notes)
    assert "QuantizeLinear" in _ops(out) and result.outputs[0].assert_err <= 0.2


def test_fp32_nodes_naming_the_destroying_node_packs(tmp_path):
    result, out = _quantize(tmp_path, "int8/weight_outlier.onnx", 0.2, fp32_nodes=["head"])
    assert result.kept == {"head": "fp32_nodes head"} and result.search is None
    assert "QuantizeLinear" in _ops(out) and result.outputs[0].top1_agreement == 1.0


def test_keeping_most_of_the_model_float_is_refused_with_the_figure(tmp_path):
    """At a bound only the float model meets, the search is complete (its last candidate keeps every node float)
    and the result is refused on the share of the model's arithmetic kept float, said plainly."""
    with pytest.raises(OptimizeError) as caught:
        _quantize(tmp_path, "cnn.onnx", 1e-4)
    message = caught.value.message
    assert "only with" in message and "of the model's multiply-accumulates" in message
    assert "int8 would have too little left to speed up (it is left out beyond 50%)" in message
    assert "with every node int8: err=" in message
    hint = caught.value.hint or ""
    assert hint.startswith("maxerr ") and hint.endswith(" would pass")  # int8's error is small against the outputs


def test_dynamic_int8_quantizes_matmul_weights(tmp_path):
    result, out = _quantize(tmp_path, "int8/mild_outlier.onnx", 0.5, mode="dynamic")
    ops = _ops(out)
    assert "MatMulInteger" in ops and "DynamicQuantizeLinear" in ops and "QuantizeLinear" not in ops
    assert result.calibration is None and result.method is None


def _matmul_chain(path, layers: int, width: int = 32) -> str:
    """x -> (MatMul -> Relu) x layers: every MatMul carries the same share of the multiply-accumulates."""
    rng = np.random.default_rng(3)
    nodes, weights, previous = [], [], "x"
    for k in range(layers):
        weights.append(onnx.numpy_helper.from_array(rng.normal(0, 0.3, (width, width)).astype(np.float32), f"w{k}"))
        nodes.append(onnx.helper.make_node("MatMul", [previous, f"w{k}"], [f"m{k}"], name=f"mm{k}"))
        previous = f"r{k}" if k < layers - 1 else "y"
        nodes.append(onnx.helper.make_node("Relu", [f"m{k}"], [previous], name=f"relu{k}"))
    graph = onnx.helper.make_graph(
        nodes,
        "chain",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, width])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, width])],
        weights,
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


class _CountingOpener(Opener):
    """The child that runs the candidates, counting the candidates it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.candidates = 0

    def run(self, *args, **kwargs):
        self.candidates += 1
        return super().run(*args, **kwargs)


@pytest.mark.parametrize("destroyed", [False, True], ids=["missed", "destroyed"])
def test_a_bound_int8_cannot_meet_within_the_share_is_refused_after_three_candidates(destroyed, tmp_path):
    """Six equal MatMuls: half the model's arithmetic may stay float, and no set of three meets a bound far below
    int8's error. The search runs the first candidate, one more that misses, then the largest set the share
    allows; that misses too, and it is refused there, naming that set, its share and its error (the search that
    ran to every node float took 6 and 19 candidates to the same refusal). Counted in runs of the child."""
    model = _matmul_chain(tmp_path / "chain.onnx", 6)
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    scale = 1e4 if destroyed else 1.0  # calibrated on small inputs, tested on huge ones: int8 saturates them all
    cases = [{"x": rng.random((1, 32)).astype(np.float32) * (scale if k else 1.0)} for k in range(3)]
    expected = [session.run(None, case) for case in cases]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with _CountingOpener() as opener, pytest.raises(OptimizeError) as caught:
        quantize_int8(
            model,
            str(tmp_path / "int8.onnx"),
            test_inputs=cases,
            expected=expected,
            bounds=Bounds(maxerr=1e-6),
            calibration=cases[:1],
            scratch=str(scratch),
            opener=opener,
        )
    assert opener.candidates == 3
    message = caught.value.message
    assert "only with more kept float than the 9 node(s)" in message
    assert "50% of the model's multiply-accumulates (3 of 6 heavy node(s)), the most it may keep float" in message
    assert "(with those float: err=" in message and "int8 would have too little left to speed up" in message
    assert not (tmp_path / "int8.onnx").exists()


def test_the_search_reads_weights_in_scratch_where_they_lie_and_makes_the_same_model(tmp_path):
    """A float model whose weights lie in the scratch folder already is named without reading them in: the named
    copy the quantizer starts from points at the same data file (no second copy on disk, none held in memory), and
    the int8 model made is byte for byte the one made from the same model elsewhere (its weights read in)."""
    chain = _matmul_chain(tmp_path / "chain.onnx", 4, width=64)
    rng = np.random.default_rng(5)
    cases = [{"x": rng.random((1, 64)).astype(np.float32)} for _ in range(3)]
    session = ort.InferenceSession(str(tmp_path / "chain.onnx"), providers=["CPUExecutionProvider"])
    expected = [session.run(None, c) for c in cases]
    made = {}
    for where in ("same", "other"):
        scratch = tmp_path / f"scratch-{where}"
        scratch.mkdir()
        folder = scratch if where == "same" else tmp_path / f"model-{where}"
        folder.mkdir(exist_ok=True)
        onnx.save_model(
            onnx.load(chain),
            str(folder / "float.onnx"),
            save_as_external_data=True,
            location="float.onnx.data",
            size_threshold=0,
        )
        (tmp_path / f"out-{where}").mkdir()
        out = tmp_path / f"out-{where}" / "int8.onnx"
        result = quantize_int8(
            str(folder / "float.onnx"),
            str(out),
            test_inputs=cases,
            expected=expected,
            bounds=Bounds(maxerr=0.5),
            mode="dynamic",
            scratch=str(scratch),
            external=True,
        )
        assert result.quantized, where
        named = onnx.load(str(scratch / "int8-base.onnx"), load_external_data=False)
        locations = {e.value for t in named.graph.initializer for e in t.external_data if e.key == "location"}
        if where == "same":
            assert locations == {"float.onnx.data"} and not (scratch / "int8-base.onnx.data").exists()
        else:
            assert locations == {"int8-base.onnx.data"}
        made[where] = out.read_bytes() + (tmp_path / f"out-{where}" / "int8.onnx.data").read_bytes()
    assert "MatMulInteger" in _ops(tmp_path / "out-same" / "int8.onnx")
    assert made["same"] == made["other"]
