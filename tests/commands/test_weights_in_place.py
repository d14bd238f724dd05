"""A bundled model's weights read where they lie in the bundle (docs/bundle.md, "Reading the weights in place"):
never copied, and every check of the data member kept."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from mgedump.bundle import Bundle
from tests.support import bundle_manifest, external_chain, rewrite_bundle, run_ok


@pytest.fixture
def packed(tmp_path):
    """A MatMul chain whose weights lie in two external files, packed: (bundle, model)."""
    folder = tmp_path / "given"
    folder.mkdir()
    model = external_chain(folder, ["a.bin", "b.bin", "a.bin"], dim=64)
    out = tmp_path / "chain.mgetest"
    run_ok("mgedump", model, "-d", "#rand(-1,1)", "-d", "#rand(0,1)", "-o", out, "-q")
    assert bundle_manifest(out)["model"]["external_data"] == "model.onnx.data"
    return out, model


def test_the_weights_are_never_copied(packed, monkeypatch, mgerun):
    """Only the small model member is copied out of the bundle; onnxruntime reads the weights inside it, and the
    outputs are those of onnxruntime on the model as given."""
    out, _ = packed
    copied = []
    extract = Bundle.extract
    monkeypatch.setattr(
        Bundle, "extract", lambda self, name, folder: copied.append(name) or extract(self, name, folder)
    )
    result = mgerun(out, "--iter", "2")
    assert result.code == 0, result.out + result.err
    assert result.out.count("AssertEqual: err=0") == 2
    assert copied == ["model.onnx"]


def test_the_placed_model_reads_the_data_member_at_its_offset(packed, tmp_path):
    """The rewritten model names the bundle at the data member's offset plus each tensor's: its weights are the
    given model's, bit for bit."""
    from mgedump.commands.verify_prepare import place_model

    out, given = packed
    with Bundle(str(out)) as bundle:
        placed = place_model(bundle, bundle.manifest.model, str(tmp_path / "placed"), "test")
        start, size = bundle.span("model.onnx.data")
        bundle.verified()
    model = onnx.load_from_string(placed.opened)
    for tensor in model.graph.initializer:
        entries = {e.key: e.value for e in tensor.external_data}
        assert entries["location"] == out.name
        assert start <= int(entries["offset"]) and int(entries["offset"]) + int(entries["length"]) <= start + size
    assert placed.data_folder == os.path.dirname(os.path.realpath(out))
    x = {"x": np.random.default_rng(1).random((1, 64), dtype=np.float32)}
    options = ort.SessionOptions()
    options.add_session_config_entry("session.model_external_initializers_file_folder_path", placed.data_folder)
    got = ort.InferenceSession(placed.opened, options, providers=["CPUExecutionProvider"]).run(None, x)
    want = ort.InferenceSession(str(given), providers=["CPUExecutionProvider"]).run(None, x)
    np.testing.assert_array_equal(got[0], want[0])


def test_io_dumps_fitting_and_mgediff_read_them_in_place(packed, tmp_path, mgerun, mgediff):
    out, given = packed
    result = mgerun(out, "--iter", "1", "--io-dump", tmp_path / "dump")
    assert result.code == 0, result.out + result.err
    assert (tmp_path / "dump" / "test_data_set_1").is_dir()
    result = mgerun(out, "--fitting", "--fitting-budget", "1", "--iter", "1")
    assert result.code == 0, result.out + result.err
    result = mgediff(out, given)
    assert result.code == 0, result.out + result.err


def test_a_bundle_named_in_bytes_not_utf8_still_runs(packed, tmp_path, mgerun):
    """A model cannot name a file whose name is not UTF-8 text: such a bundle has its data member copied."""
    out, _ = packed
    odd = tmp_path / os.fsdecode(b"b\xff.mgetest")
    os.link(out, odd)
    result = mgerun(odd, "--iter", "1")
    assert result.code == 0, result.out + result.err


def _edited(src, dst, key, value, tensor=0):
    """The bundle with one external tensor's ``key`` entry set to ``value`` (its hashes fixed: a valid bundle)."""
    model = onnx.ModelProto.FromString(_member(src, "model.onnx"))
    entries = model.graph.initializer[tensor].external_data
    found = [e for e in entries if e.key == key]
    if found:
        found[0].value = value
    else:
        entry = entries.add()
        entry.key, entry.value = key, value
    data = model.SerializeToString()
    return rewrite_bundle(src, dst, lambda n, m, members: members.update({"model.onnx": data}), fix_hashes=True)


def _member(path, name):
    import zipfile

    with zipfile.ZipFile(path) as zf:
        return zf.read(name)


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("offset", "99999999", "of its data member, which holds"),  # past the member: the bundle's other bytes
        ("length", "99999999", "of its data member, which holds"),
        ("offset", "+16", "is not one number of bytes"),
        ("offset", "-16", "is not one number of bytes"),
        ("location", "../../model.onnx.data", "the model reads external data from '../../model.onnx.data'"),
        ("location", "chain.mgetest", "the model reads external data from 'chain.mgetest'"),  # the bundle itself
    ],
)
def test_a_tensor_outside_its_data_member_is_refused(packed, tmp_path, mgerun, key, value, says):
    out, _ = packed
    bad = _edited(out, tmp_path / "bad.mgetest", key, value)
    result = mgerun(bad, "--iter", "1")
    assert result.code == 2, result.out + result.err
    assert says in result.err
    assert "Traceback" not in result.err and len(result.err.strip().splitlines()) <= 2


def test_a_tensor_with_no_length_reads_to_the_end_of_its_member_only(packed, tmp_path, mgerun):
    """No length meant "to the end of the file": in place, to the end of the data member (the last tensor's is)."""
    out, _ = packed
    model = onnx.ModelProto.FromString(_member(out, "model.onnx"))
    last = max(
        range(3), key=lambda k: int({e.key: e.value for e in model.graph.initializer[k].external_data}["offset"])
    )
    entries = model.graph.initializer[last].external_data
    kept = [(e.key, e.value) for e in entries if e.key != "length"]
    del entries[:]
    for key, value in kept:
        entry = entries.add()
        entry.key, entry.value = key, value
    data = model.SerializeToString()
    bad = rewrite_bundle(
        out, tmp_path / "nolength.mgetest", lambda n, m, members: members.update({"model.onnx": data}), fix_hashes=True
    )
    result = mgerun(bad, "--iter", "1")
    assert result.code == 0, result.out + result.err


def test_a_weight_changed_in_place_is_refused_before_any_result(packed, tmp_path, monkeypatch, mgerun):
    """The weights are hashed while onnxruntime opens the model on them (docs/bundle.md, "What a reader checks",
    check 5): one byte changed, at the same size, refuses the bundle with exit code 2, and no output, assertion
    or time of it is reported."""
    from mgedump.bundle import reader

    monkeypatch.setattr(reader, "DEFER_HASH_BYTES", 1024)  # the data member is hashed in the background
    out, _ = packed
    with Bundle(str(out)) as b:
        start, size = b.span("model.onnx.data")
    assert size > 1024
    data = bytearray(out.read_bytes())
    data[start + size // 2] ^= 0x01
    tampered = tmp_path / "tampered.mgetest"
    tampered.write_bytes(bytes(data))
    result = mgerun(tampered, "--iter", "1")
    assert result.code == 2, result.out + result.err
    assert "member 'model.onnx.data' does not match its sha256 in the manifest (tampered or corrupt)" in result.err
    assert "AssertEqual" not in result.out + result.err and "latency" not in result.out + result.err
    assert "Traceback" not in result.err
