"""Model files: the wire-format scan for external data (graphs, subgraphs and local functions), and models whose
weights live in external files packing into one data member that verifies."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from mgedump.base.errors import ModelError
from mgedump.model.modelfile import model_source, uses_external_data
from tests.support import bundle_manifest, bundle_member, external_chain, good_models, loaded_by, sample


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


# The rewrite as the pack made it with onnx before it read the wire format: the reference its bytes must equal.
def _attribute_tensors(attr):
    if attr.HasField("t"):
        yield attr.t
    yield from attr.tensors
    if attr.HasField("sparse_tensor"):
        yield attr.sparse_tensor.values
        yield attr.sparse_tensor.indices
    for sparse in attr.sparse_tensors:
        yield sparse.values
        yield sparse.indices
    if attr.HasField("g"):
        yield from _graph_tensors(attr.g)
    for sub in attr.graphs:
        yield from _graph_tensors(sub)


def _graph_tensors(graph):
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attr in node.attribute:
            yield from _attribute_tensors(attr)


def _all_tensors(model):
    yield from _graph_tensors(model.graph)
    for function in model.functions:
        for node in function.node:
            for attr in node.attribute:
                yield from _attribute_tensors(attr)
        for attr in function.attribute_proto:
            yield from _attribute_tensors(attr)


def _source_by_onnx(path, data_location):
    """(model bytes, data files) as onnx's parse, edit and serialisation of the model gave them."""
    model = onnx.load(str(path), load_external_data=False)
    folder, files, total = os.path.dirname(str(path)), {}, 0
    for tensor in _all_tensors(model):
        if tensor.data_location != onnx.TensorProto.EXTERNAL or not tensor.HasField("data_location"):
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        real = os.path.realpath(os.path.join(folder, info["location"]))
        if real not in files:
            files[real] = (total, os.path.getsize(real))
            total += files[real][1]
        base, size = files[real]
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else size - offset
        values = (data_location, str(base + offset), str(length))
        if [e.key for e in tensor.external_data] == ["location", "offset", "length"]:
            for entry, value in zip(tensor.external_data, values, strict=True):
                entry.value = value
            continue
        kept = [(e.key, e.value) for e in tensor.external_data if e.key not in ("location", "offset", "length")]
        del tensor.external_data[:]
        for key, value in [*zip(("location", "offset", "length"), values, strict=True), *kept]:
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
    return model.SerializeToString(), tuple(files)


def _external(name, folder, location, array, entries=None):
    """A tensor whose data is ``array``, appended to ``folder/location``; ``entries`` (key -> value, in order)
    replace the usual location, offset, length."""
    file = folder / os.path.normpath(location)
    offset = file.stat().st_size if file.exists() else 0
    with open(file, "ab") as f:
        f.write(array.tobytes())
    tensor = numpy_helper.from_array(array, name)
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    given = entries or {"location": location, "offset": str(offset), "length": str(array.nbytes)}
    for key, value in given.items():
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def _every_kind_of_external_tensor(folder):
    """A model (saved as ``folder/every.onnx``) with external tensors everywhere onnx's walk looks: initializers
    (two spellings of one file, entries in another order with a checksum, no length), a sparse initializer's
    values, a Constant's ``t``, an If's branches (an initializer and a Constant each), a local function's Constant
    and an attribute's default; and an embedded tensor whose stale entries name another file (left alone)."""
    from onnx import helper

    f32 = np.arange(8, dtype=np.float32).reshape(2, 4)
    inits = [
        _external("a", folder, "a.bin", f32),
        _external("b", folder, "./a.bin", f32 + 1),
        _external("c", folder, "c.bin", f32 + 2, {"offset": "0", "checksum": "x", "location": "c.bin", "length": "32"}),
        _external("d", folder, "d.bin", f32 + 3, {"location": "d.bin"}),
    ]
    stale = numpy_helper.from_array(f32, "stale")
    stale.external_data.add(key="location", value="elsewhere.bin")
    inits.append(stale)
    values = _external("sv", folder, "s.bin", np.array([1, 2], dtype=np.float32))
    sparse = helper.make_sparse_tensor(values, numpy_helper.from_array(np.array([0, 5], dtype=np.int64), "si"), [2, 4])
    then = helper.make_graph(
        [helper.make_node("Constant", [], ["tk"], value=_external("tk", folder, "t.bin", f32 + 4))],
        "then", [], [helper.make_tensor_value_info("tk", onnx.TensorProto.FLOAT, [2, 4])],
        [_external("ti", folder, "t.bin", f32 + 5)],
    )  # fmt: skip
    other = helper.make_graph(
        [helper.make_node("Identity", ["ei"], ["eo"])],
        "else", [], [helper.make_tensor_value_info("eo", onnx.TensorProto.FLOAT, [2, 4])],
        [_external("ei", folder, "e.bin", f32 + 6)],
    )  # fmt: skip
    nodes = [
        helper.make_node("Constant", [], ["k"], value=_external("k", folder, "k.bin", f32 + 7)),
        helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other),
        helper.make_node("F", ["k"], ["z"], domain="local"),
    ]
    graph = helper.make_graph(
        nodes, "every", [helper.make_tensor_value_info("cond", onnx.TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])], inits, sparse_initializer=[sparse],
    )  # fmt: skip
    default = helper.make_attribute("w", _external("fd", folder, "g.bin", f32 + 8))
    function = helper.make_function(
        "local", "F", ["x"], ["z"],
        [helper.make_node("Constant", [], ["fk"], value=_external("fk", folder, "f.bin", f32 + 9)),
         helper.make_node("Add", ["x", "fk"], ["z"])],
        [helper.make_opsetid("", 17)],
    )  # fmt: skip
    function.attribute_proto.append(default)
    model = helper.make_model(
        graph, functions=[function], opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    )
    path = folder / "every.onnx"
    onnx.save(model, str(path))
    return path


def test_the_wire_rewrite_is_byte_for_byte_the_onnx_rewrite(tmp_path):
    """The rewrite made on the wire format gives the bytes onnx's parse, edit and serialisation gave, and the same
    data files in the same order, for external tensors in every place a model can hold one; and none of it imports
    onnx (the check runs in a fresh interpreter)."""
    import json
    import subprocess
    import sys

    path = _every_kind_of_external_tensor(tmp_path)
    want_bytes, want_files = _source_by_onnx(path, "model.onnx.data")
    source = model_source(str(path), "model.onnx.data")
    assert source.data_paths == want_files
    files = ["a.bin", "c.bin", "d.bin", "s.bin", "k.bin", "e.bin", "t.bin", "f.bin", "g.bin"]  # else_branch first
    assert [os.path.basename(p) for p in want_files] == files
    assert source.model_bytes == want_bytes
    rewritten = onnx.load_from_string(source.model_bytes)
    stale = next(t for t in rewritten.graph.initializer if t.name == "stale")
    assert [(e.key, e.value) for e in stale.external_data] == [("location", "elsewhere.bin")]
    code = (
        "import hashlib, json, sys\n"
        "from mgedump.model.modelfile import model_source\n"
        "source = model_source(sys.argv[1], 'model.onnx.data')\n"
        "print(json.dumps([hashlib.sha256(source.model_bytes).hexdigest(), 'onnx' in sys.modules]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    import hashlib

    assert json.loads(done.stdout) == [hashlib.sha256(want_bytes).hexdigest(), False]


def test_the_rewritten_chain_runs_as_the_given_one(tmp_path):
    """The rewritten model and its files laid end to end, as a bundle holds them, give onnxruntime's outputs of the
    model as given."""
    import onnxruntime as ort

    given = tmp_path / "given"
    given.mkdir()
    path = external_chain(given, ["a.bin", "./a.bin", "b.bin", "c.bin"])
    source = model_source(str(path), "model.onnx.data")
    folder = tmp_path / "bundled"
    folder.mkdir()
    (folder / "m.onnx").write_bytes(source.model_bytes)
    (folder / "model.onnx.data").write_bytes(b"".join(Path(p).read_bytes() for p in source.data_paths))
    x = {"x": np.random.default_rng(1).standard_normal((1, 4)).astype(np.float32)}
    runs = [
        ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, x) for p in (path, folder / "m.onnx")
    ]
    np.testing.assert_array_equal(runs[0][0], runs[1][0])


def _ld(number, payload):
    """A length-delimited protobuf field."""
    from mgedump.model.protowire import write_varint

    return write_varint(number << 3 | 2) + write_varint(len(payload)) + payload


def _chain_with(tmp_path, extra):
    """The chain of ``a.bin`` and ``b.bin`` with ``extra`` bytes appended to its second tensor (after its entries,
    where the scan for the files a model names does not read)."""
    path = external_chain(tmp_path, ["a.bin", "b.bin"])
    model = onnx.load(str(path), load_external_data=False)
    tensor = model.graph.initializer[1].SerializeToString() + extra
    del model.graph.initializer[1]
    graph = model.graph.SerializeToString() + _ld(5, tensor)
    model.ClearField("graph")
    path.write_bytes(model.SerializeToString() + _ld(7, graph))
    return path


HOSTILE_ENTRIES = {
    "a truncated varint": (_ld(13, b"\x0a\x01x\x10"), "truncated varint"),
    "a length past the end": (_ld(13, b"\x0a\x05ab"), "field runs past its message"),
    "an overlong varint": (_ld(13, b"\x0a" + b"\xff" * 11), "truncated varint"),
    "an unknown wire type": (_ld(13, b"\x0f"), "wire type 7"),
}


@pytest.mark.parametrize("name", HOSTILE_ENTRIES)
def test_a_broken_entry_is_one_line(tmp_path, mgedump, name):
    """An entry the scan of the files a model names never reads, broken: the rewrite refuses the model in one
    line, exit 2, nothing written."""
    extra, said = HOSTILE_ENTRIES[name]
    path = _chain_with(tmp_path, extra)
    with pytest.raises(ModelError, match=f"not a valid ONNX model \\({said}\\)"):
        model_source(str(path), "model.onnx.data")
    result = mgedump(path, "-d", "#rand(-1,1)", "-o", tmp_path / "o.mgetest")
    assert result.code == 2, result.out + result.err
    assert result.err.strip().splitlines() == [f"mgedump: error: {path}: not a valid ONNX model ({said})"]
    assert not (tmp_path / "o.mgetest").exists()


def test_a_tensor_or_graph_given_twice_is_refused(tmp_path):
    """protobuf merges a message field given twice into one (a tensor's entries from both): a rewrite in place
    cannot follow that, so such a model (onnx never writes one) is refused, never packed half pointed."""
    from onnx import helper

    tensor = _external("k", tmp_path, "k.bin", np.ones(4, np.float32)).SerializeToString()
    attribute = helper.make_attribute("value", onnx.TensorProto()).SerializeToString()
    node = helper.make_node("Constant", [], ["k"]).SerializeToString() + _ld(5, attribute + _ld(5, tensor) * 2)
    graph = helper.make_graph([], "g", [], []).SerializeToString() + _ld(1, node)
    model = helper.make_model(helper.make_graph([], "g", [], []), opset_imports=[helper.make_opsetid("", 17)])
    model.ClearField("graph")
    path = tmp_path / "twice.onnx"
    path.write_bytes(model.SerializeToString() + _ld(7, graph))
    with pytest.raises(ModelError, match=r"not a valid ONNX model \(an attribute's tensor given twice\)"):
        model_source(str(path), "model.onnx.data")
    path.write_bytes(model.SerializeToString() + _ld(7, graph) * 2)
    with pytest.raises(ModelError, match=r"not a valid ONNX model \(the model's graph given twice\)"):
        model_source(str(path), "model.onnx.data")
    embedded = numpy_helper.from_array(np.ones(4, np.float32), "k").SerializeToString()
    node = helper.make_node("Constant", [], ["k"]).SerializeToString() + _ld(5, attribute + _ld(5, embedded) * 2)
    path.write_bytes(
        model.SerializeToString() + _ld(7, helper.make_graph([], "g", [], []).SerializeToString() + _ld(1, node))
    )
    assert model_source(str(path), "model.onnx.data").model_bytes is None  # nothing outside: the file as it is


def test_every_flipped_or_cut_byte_is_a_model_or_one_error(tmp_path):
    """Hostile bytes: the model of every kind of external tensor, cut short at every length or with any one byte
    flipped, is rewritten or refused as a ModelError (never another exception)."""
    from mgedump.model.modelfile import forget_scans

    data = _every_kind_of_external_tensor(tmp_path).read_bytes()
    broken = [data[:n] for n in range(len(data))] + [
        data[:k] + bytes([data[k] ^ flip]) + data[k + 1 :] for k in range(len(data)) for flip in (0x80, 0xFF)
    ]
    refused = rewritten = 0
    for n, bad in enumerate(broken):
        path = tmp_path / f"bad{n % 2}.onnx"
        path.write_bytes(bad)
        forget_scans()
        try:
            rewritten += model_source(str(path), "model.onnx.data").model_bytes is not None
        except ModelError as exc:
            refused += 1
            assert "\n" not in str(exc)
    assert refused > 200 and rewritten > 200, (refused, rewritten)  # both ways were taken, many times


def test_a_pack_of_many_external_files_imports_neither_onnx_nor_protobuf(tmp_path):
    """The whole command, in a fresh interpreter: a plain pack of a model whose weights are in external files
    rewrites it without onnx or protobuf (their import was most of what such a pack paid over the floor), and
    the bundle verifies."""
    path = external_chain(tmp_path, [f"w{k}.bin" for k in range(20)])
    out = tmp_path / "many.mgetest"
    loaded, _ = loaded_by("mgedump", [str(path), "-d", "#rand(0,1)", "-o", str(out), "-q"], ("onnx", "google.protobuf"))
    assert loaded == []
    assert bundle_manifest(out)["model"]["external_data"] == "model.onnx.data"
    rewritten = onnx.load_from_string(bundle_member(out, "model.onnx"))
    assert {e.value for t in rewritten.graph.initializer for e in t.external_data if e.key == "location"} == {
        "model.onnx.data"
    }
