"""The float16 search's weights stay in files (docs/float16.md, "What a search costs"): no candidate holds or copies
a weight, each weight is converted to float16 once for the whole search, a model that keeps its weights outside is
never copied, and the model kept is, byte for byte, the one the conversion in memory makes."""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest

from mgedump.optimize import autocast, autocast_trials, float16_weights, offline
from mgedump.optimize.float16 import convert
from mgedump.optimize.float16_weights import ALIGN, FLOAT16_FILE, FLOAT32_FILE, WeightFiles
from mgedump.optimize.nodes import name_nodes
from tests.support import bundle_manifest, bundle_member, external_chain

DIM, LAYERS = 32, 3  # 4 KiB a weight: past the 1 KiB below which a weight stays in the graph


def _chain(folder, external: bool):
    """A MatMul chain with a small bias (it stays in the graph) and a weight beyond float16's range (it stays
    float32 in ioc16); external: its weights in one data file beside it."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    inits, nodes, last = [], [], "x"
    for k in range(LAYERS):
        w = (rng.standard_normal((DIM, DIM)) / 4).astype(np.float32)
        if k == 1:
            w[0, 0] = 1e6  # beyond float16: kept float32 (and its reader computes in float32)
        inits.append(numpy_helper.from_array(w, f"w{k}"))
        nodes.append(helper.make_node("MatMul", [last, f"w{k}"], [f"m{k}"], name=f"mm{k}"))
        last = f"m{k}"
    inits.append(numpy_helper.from_array(np.full((DIM,), 0.5, np.float32), "bias"))
    nodes.append(helper.make_node("Add", [last, "bias"], ["y"], name="add"))
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, DIM])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, DIM])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = os.path.join(folder, "float32.onnx")
    if external:
        onnx.save(model, path, save_as_external_data=True, location="float32.onnx.data", size_threshold=1024)
    else:
        onnx.save(model, path)
    return path


def _search(monkeypatch, path, scratch, **options):
    """The search on one test case, at a bound only every node float32 meets (several candidates); its trials."""
    trials = []
    real = autocast_trials.Search.evaluate

    def kept(self, *args, **kwargs):
        trial = real(self, *args, **kwargs)
        trials.append((trial, _weight_bytes(trial.model), os.path.getsize(trial.path)))  # as the search holds it
        return trial

    monkeypatch.setattr(autocast_trials.Search, "evaluate", kept)
    feeds = [{"x": np.random.default_rng(2).random((1, DIM), dtype=np.float32)}]
    found = autocast.choose_precision(path, "ioc16", feeds, maxerr=1e-9, scratch=scratch, keep_io=True, **options)
    return found, trials


def _weight_bytes(model) -> int:
    return sum(len(init.raw_data) for init in model.graph.initializer)


@pytest.mark.parametrize("external", [False, True], ids=["embedded", "external"])
def test_candidates_hold_no_weights_and_each_weight_is_converted_once(external, tmp_path, monkeypatch):
    scratch = str(tmp_path)
    path = _chain(scratch, external)
    found, trials = _search(monkeypatch, path, scratch)
    assert len({frozenset(t.kept) for t, _, _ in trials}) >= 2  # several candidates, most storing weights float16
    weights = LAYERS * DIM * DIM * 4
    for _, held, size in trials:
        assert held <= DIM * 4  # the bias alone: every weight lies in the search's files
        assert size < weights / 4  # a graph, opened from its path beside the weights
    # each weight that some candidate stores float16 converted once, whatever the number of candidates
    halves = os.path.getsize(os.path.join(scratch, FLOAT16_FILE))
    assert halves <= LAYERS * (DIM * DIM * 2 + ALIGN)
    # a model whose weights lie in the scratch folder already is not copied; another one's written there once
    held = os.path.getsize(os.path.join(scratch, FLOAT32_FILE))
    assert held == 0 if external else weights <= held <= LAYERS * (DIM * DIM * 4 + ALIGN)
    assert _weight_bytes(found.model) <= DIM * 4
    found.load_weights()
    assert _weight_bytes(found.model) >= DIM * DIM * 2 * (LAYERS - 1)  # the model kept holds its weights again


@pytest.mark.parametrize("external", [False, True], ids=["embedded", "external"])
@pytest.mark.parametrize("mode", ["ioc16", "io16xc32"])
def test_the_model_kept_is_the_conversion_in_memory_byte_for_byte(mode, external, tmp_path):
    """Each candidate of a search, converted with its weights in files and read back, is what converting the whole
    model in memory makes."""
    import onnx

    scratch = str(tmp_path)
    path = _chain(scratch, external)
    base = onnx.load(path, load_external_data=False)
    weights = WeightFiles(scratch)
    weights.hold(base)
    name_nodes(base)
    whole = onnx.load(path)
    name_nodes(whole)
    for kept in ({}, {"mm0": "why"}, {"mm0": "", "mm1": "", "mm2": "", "add": ""}):
        candidate, expected = copy.deepcopy(base), copy.deepcopy(whole)
        made = convert(candidate, mode, kept, keep_io=True, weights=weights)
        wanted = convert(expected, mode, kept, keep_io=True)
        assert made.weights32 == wanted.weights32 and made.weights16 == wanted.weights16
        assert _weight_bytes(candidate) <= DIM * 4
        weights.load(candidate)
        assert candidate.SerializeToString() == expected.SerializeToString()
    weights.to_float16(copy.deepcopy(base.graph.initializer[0]))
    written = weights.written16
    weights.to_float16(copy.deepcopy(base.graph.initializer[0]))
    assert written == DIM * DIM * 2 * (mode == "io16xc32") or written == weights.written16
    assert weights.written16 == written  # converted already: pointed at, not written again


@pytest.mark.parametrize(
    "values",
    [[1.0, -3.0], [np.nan, 2.0], [np.inf, -1.0], [-np.inf, np.nan], [np.nan], []],
    ids=["finite", "nan", "inf", "both", "only-nan", "empty"],
)
def test_the_largest_finite_magnitude(values):
    array = np.array(values, np.float32)
    finite = np.abs(array[np.isfinite(array)])
    assert float16_weights.largest(array) == (finite.max() if finite.size else 0.0)


def test_the_portable_rewrites_leave_external_weights_in_the_scratch_folder(tmp_path):
    """onnxruntime's optimiser writes an external model's weights into the scratch folder; the model it gives holds
    none of them until the pipeline reads them in to save it."""
    import onnx

    src = _chain(str(tmp_path), external=True)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    model = offline.portable_rewrites(src, str(scratch), True)
    assert _weight_bytes(model) <= DIM * 4
    offline.load_weights(model, str(scratch))
    given = {init.name: init.raw_data for init in onnx.load(src).graph.initializer}
    assert {init.name: init.raw_data for init in model.graph.initializer if init.name in given} == given


def test_a_model_with_external_weights_packs_float16_as_the_same_model_embedded(tmp_path, mgedump, mgerun):
    """The float16 pack of a model that keeps its weights outside (its weights never held by the search, nor by
    the rewrites before it) holds the same weights, the same record, as the same model embedded."""
    import onnx

    folder = tmp_path / "ext"
    folder.mkdir()
    path = external_chain(folder, ["w.bin"] * LAYERS, dim=DIM)
    embedded = tmp_path / "embedded.onnx"
    onnx.save(onnx.load(str(path)), str(embedded))
    bundles = {}
    for name, model in (("ext", path), ("embedded", embedded)):
        bundles[name] = tmp_path / f"{name}.mgetest"
        flags = ["--optimize-for-inference", "--enable-ioc16", "--maxerr", "1e-1"]
        result = mgedump(model, "-d", "#rand(0,1)", *flags, "-o", bundles[name])
        assert result.code == 0, result.err
        assert mgerun(bundles[name], "--iter", "1").code == 0
    assert bundle_manifest(bundles["ext"])["float16"] == bundle_manifest(bundles["embedded"])["float16"]
    data = bundle_member(bundles["ext"], "model.onnx.data")
    ext = onnx.load_from_string(bundle_member(bundles["ext"], "model.onnx"))
    inline = onnx.load_from_string(bundle_member(bundles["embedded"], "model.onnx"))
    stored = {}
    for init in ext.graph.initializer:
        entries = {e.key: e.value for e in init.external_data}
        start = int(entries.get("offset", 0))
        stored[init.name] = data[start : start + int(entries["length"])] if entries else init.raw_data
    assert stored == {init.name: init.raw_data for init in inline.graph.initializer}
    assert any(init.data_type == onnx.TensorProto.FLOAT16 for init in ext.graph.initializer)


@pytest.mark.parametrize("limit, together", [(0, 1), (1 << 40, 2)], ids=["big", "small"])
def test_io16xc32_times_a_big_model_one_session_at_a_time(limit, together, tmp_path, mgedump, monkeypatch):
    """The latency note's two sessions: alternated for a small model; one after the other past the size where two
    would hold the weights twice."""
    import gc
    import weakref

    from mgedump.optimize.precisions import io16xc32

    live, most = [0], [0]
    real = io16xc32.open_session

    def opened(*args, **kwargs):
        session = real(*args, **kwargs)
        live[0] += 1
        most[0] = max(most[0], live[0])
        weakref.finalize(session, lambda: live.__setitem__(0, live[0] - 1))
        return session

    monkeypatch.setattr(io16xc32, "ONE_AT_A_TIME", limit)
    monkeypatch.setattr(io16xc32, "open_session", opened)
    path = _chain(str(tmp_path), external=False)
    out = tmp_path / "io16.mgetest"
    flags = ["--optimize-for-inference", "--enable-io16xc32", "--maxerr", "1e-1", "--keep-io-types"]
    result = mgedump(path, "-d", "#rand(0,1)", *flags, "-o", out)
    gc.collect()
    assert result.code == 0, result.err
    assert "x the float32 model's latency on this CPU (test case 0, medians of 15 runs)" in result.err
    assert most[0] == together
