"""Model files: the wire-format scan for external data (graphs, subgraphs and local functions), and models whose
weights live in external files packing into one data member that verifies."""

from __future__ import annotations

import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from mgedump.model.modelfile import model_source, uses_external_data
from tests.support import bundle_manifest, bundle_member, external_chain, good_models, sample


@pytest.mark.parametrize("model", good_models(), ids=lambda m: m.id)
def test_the_scan_agrees_with_onnx(model):
    """The scan, which never parses the weights, says what onnx's own walker says (functions and subgraphs included)."""
    from onnx.external_data_helper import _get_all_tensors
    from onnx.external_data_helper import uses_external_data as tensor_is_external

    parsed = onnx.load(str(model.path), load_external_data=False)
    expect = any(tensor_is_external(t) for t in _get_all_tensors(parsed))
    assert uses_external_data(str(model.path)) is expect
    assert expect is ("external" in model.tags)


def test_a_local_functions_external_tensor_is_found():
    """The scan visits model-local functions: their Constant nodes can keep data outside."""
    path = sample("external/function_const.onnx").path
    parsed = onnx.load(str(path), load_external_data=False)
    assert not any(init.data_location == onnx.TensorProto.EXTERNAL for init in parsed.graph.initializer)
    assert parsed.functions[0].node[0].attribute[0].t.data_location == onnx.TensorProto.EXTERNAL
    assert uses_external_data(str(path))
    source = model_source(str(path), "model.onnx.data")
    assert source.model_bytes is not None and [os.path.basename(p) for p in source.data_paths] == [
        "function_const.data"
    ]


@pytest.mark.parametrize("name", ["external/mlp.onnx", "external/function_const.onnx"])
def test_external_data_packs_into_one_member_and_verifies(name, tmp_path, monkeypatch, mgedump, mgerun):
    model = sample(name)
    out = tmp_path / "ext.mgetest"
    assert mgedump(model.path, "-d", model.spec, "-d", "#rand(-1,1)", "-o", out).code == 0
    manifest = bundle_manifest(out)
    assert [m["name"] for m in manifest["members"]][:2] == ["model.onnx", "model.onnx.data"]
    assert manifest["model"]["external_data"] == "model.onnx.data"
    # unzipped, the model loads on its own with its data beside it, and holds the same weights
    folder = tmp_path / "unzipped"
    folder.mkdir()
    for member in ("model.onnx", "model.onnx.data"):
        (folder / member).write_bytes(bundle_member(out, member))
    onnx.checker.check_model(str(folder / "model.onnx"))
    loaded = onnx.load(str(folder / "model.onnx"))
    original = onnx.load(str(model.path))
    from onnx.external_data_helper import _get_all_tensors

    got = [numpy_helper.to_array(t) for t in _get_all_tensors(loaded)]
    want = [numpy_helper.to_array(t) for t in _get_all_tensors(original)]
    assert len(got) == len(want) > 0
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    # and mgerun, run from elsewhere, finds everything inside the bundle
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = mgerun(out, "--iter", "1")
    assert result.code == 0, result.out + result.err
    assert result.out.count("AssertEqual: err=0 (name=y)") == 2


def test_a_moved_model_with_its_data_still_packs(tmp_path, mgedump):
    """Data is found beside the model, wherever the model is."""
    model = sample("external/mlp.onnx")
    for file in (model.file, *model.files):
        shutil.copy(model.path.parent.parent / file, tmp_path / os.path.basename(file))
    assert mgedump(tmp_path / "mlp.onnx", "-d", model.spec, "-o", tmp_path / "o.mgetest").code == 0


def test_embedded_weights_are_not_external():
    assert not uses_external_data(str(sample("cnn.onnx").path))
    assert not uses_external_data(str(sample("ir3_mlp.onnx").path))
    assert model_source(str(sample("cnn.onnx").path), "model.onnx.data").model_bytes is None


@pytest.mark.parametrize("data", [b"", b"\xff\xff\xff", b"text, not protobuf"])
def test_the_scan_of_garbage_is_false(tmp_path, data):
    """The scan leaves judging a broken file to onnxruntime, which says what is wrong with it."""
    path = tmp_path / "x.onnx"
    path.write_bytes(data)
    assert uses_external_data(str(path)) is False


def test_optimised_external_data_model_keeps_one_data_member(tmp_path, mgedump, mgerun):
    model = sample("external/mlp.onnx")
    out = tmp_path / "o.mgetest"
    flags = ["--optimize-for-inference", "--enable-ioc16", "--maxerr", "1e-2"]
    assert mgedump(model.path, "-d", model.spec, *flags, "-o", out).code == 0
    members = {m["name"]: m["size"] for m in bundle_manifest(out)["members"]}
    assert list(members)[:2] == ["model.onnx", "model.onnx.data"]
    assert members["model.onnx.data"] < (32 * 64 + 64 * 8) * 4  # float16 weights
    assert mgerun(out, "--iter", "1").code == 0


def test_a_file_named_two_ways_is_stored_once(tmp_path, mgedump, mgerun):
    """``./shared.weights`` and ``shared.weights`` are one file: one data path, and a data member of its size."""
    path = external_chain(tmp_path, ["./shared.weights", "shared.weights", "other.weights"])
    source = model_source(str(path), "model.onnx.data")
    assert [os.path.basename(p) for p in source.data_paths] == ["shared.weights", "other.weights"]
    out = tmp_path / "two.mgetest"
    assert mgedump(path, "-d", "#rand(-1,1)", "-o", out).code == 0
    sizes = {m["name"]: m["size"] for m in bundle_manifest(out)["members"]}
    assert sizes["model.onnx.data"] == os.path.getsize(tmp_path / "shared.weights") + os.path.getsize(
        tmp_path / "other.weights"
    )
    result = mgerun(out, "--iter", "1")
    assert result.code == 0, result.out + result.err


def test_the_folder_is_resolved_once_not_per_tensor(tmp_path, monkeypatch):
    """A model of many external files resolves its folder's real path once, and each plain file beside it without a
    real-path walk of its own (2,000 files cost 4,000 walks, a third of the pack)."""
    path = external_chain(tmp_path, [f"w{k}.bin" for k in range(40)])
    walks = []
    real = os.path.realpath
    monkeypatch.setattr(os.path, "realpath", lambda p, *a, **k: walks.append(p) or real(p, *a, **k))
    source = model_source(str(path), "model.onnx.data")
    assert len(source.data_paths) == 40
    assert len(walks) <= 2, walks


def _rewritten_by_onnx(path, data_location):
    """What the rewrite of every external tensor gives when made by onnx's own reading of the entries, each
    entry list replaced whole (location, offset, length, then the other keys): the bytes a pack must keep."""
    from onnx.external_data_helper import ExternalDataInfo, _get_all_tensors
    from onnx.external_data_helper import uses_external_data as tensor_is_external

    model = onnx.load(str(path), load_external_data=False)
    folder, bases, total = os.path.dirname(str(path)), {}, 0
    for tensor in _get_all_tensors(model):
        if not tensor_is_external(tensor):
            continue
        info = ExternalDataInfo(tensor)
        real = os.path.realpath(os.path.join(folder, info.location))
        if real not in bases:
            bases[real] = total
            total += os.path.getsize(real)
        size = os.path.getsize(real)
        offset = info.offset or 0
        length = info.length if info.length is not None else size - offset
        kept = [(e.key, e.value) for e in tensor.external_data if e.key not in ("location", "offset", "length")]
        del tensor.external_data[:]
        for key, value in [
            ("location", data_location),
            ("offset", str(bases[real] + offset)),
            ("length", str(length)),
            *kept,
        ]:
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
    return model.SerializeToString()


def test_the_rewrite_is_onnxs_whatever_the_order_of_the_entries(tmp_path):
    """The rewritten model is byte for byte the one onnx's reading of the entries gives: entries in onnx's order
    (location, offset, length) rewritten where they are, others (another order, a checksum, no length) rebuilt."""
    path = external_chain(tmp_path, ["a.bin", "./a.bin", "b.bin", "c.bin"])
    model = onnx.load(str(path), load_external_data=False)
    second, third, fourth = (model.graph.initializer[k] for k in (1, 2, 3))
    entries = [(e.key, e.value) for e in third.external_data]
    del third.external_data[:]
    for key, value in [entries[1], ("checksum", "x"), entries[0], entries[2]]:  # offset, checksum, location, length
        entry = third.external_data.add()
        entry.key, entry.value = key, value
    del fourth.external_data[2]  # no length: to the end of its file
    second.external_data[0].value = "a.bin"  # the same file named as the first names it, at its own offset
    onnx.save(model, str(path))
    source = model_source(str(path), "model.onnx.data")
    assert source.model_bytes == _rewritten_by_onnx(path, "model.onnx.data")
    assert [os.path.basename(p) for p in source.data_paths] == ["a.bin", "b.bin", "c.bin"]
    rewritten = onnx.load_from_string(source.model_bytes)
    assert [(e.key, e.value) for e in rewritten.graph.initializer[2].external_data] == [
        ("location", "model.onnx.data"),
        ("offset", str(os.path.getsize(tmp_path / "a.bin"))),
        ("length", "64"),
        ("checksum", "x"),
    ]


def test_an_offset_that_is_not_a_number_is_one_line(tmp_path, mgedump):
    path = external_chain(tmp_path, ["a.bin", "b.bin"])
    model = onnx.load(str(path), load_external_data=False)
    model.graph.initializer[1].external_data[1].value = "sixteen"
    onnx.save(model, str(path))
    result = mgedump(path, "-d", "#rand(-1,1)", "-o", tmp_path / "o.mgetest")
    assert result.code == 2, result.out + result.err
    assert "tensor 'w1' keeps its data in 'b.bin' at offset 'sixteen', which is not a number of bytes" in result.err
    assert "Traceback" not in result.err and len(result.err.strip().splitlines()) == 1
    assert not (tmp_path / "o.mgetest").exists()


def test_a_tensor_past_its_file_is_refused_in_mgedumps_words(tmp_path, mgedump):
    """The copy is planned while onnxruntime opens the model; when both refuse it, the plan's reason is the one
    said (onnxruntime's own message names no file size)."""
    path = external_chain(tmp_path, ["a.bin", "b.bin"])
    model = onnx.load(str(path), load_external_data=False)
    model.graph.initializer[1].external_data[2].value = "6400"  # length: past b.bin's 64 bytes
    onnx.save(model, str(path))
    result = mgedump(path, "-d", "#rand(-1,1)", "-o", tmp_path / "o.mgetest")
    assert result.code == 2, result.out + result.err
    assert "tensor 'w1' keeps its data in 'b.bin' at offset 0, length 6400, past the file's 64 bytes" in result.err
    assert "Traceback" not in result.err and len(result.err.strip().splitlines()) == 1
