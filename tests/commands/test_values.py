"""Sequences, maps and optionals end to end: a scikit-learn-style classifier with ZipMap packs, verifies, fails on
a changed probability naming the worst element by its path, diffs and dumps; a model with a sequence input and
optional output does the same; a type mgedump does not feed is refused by the command that was run."""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from mgedump.bundle.valueproto import decode_value, encode_value
from mgedump.model.valuetype import parse
from tests.support import bundle_manifest, bundle_member, one_report, rewrite_bundle, sample

ZIPMAP = sample("values/zipmap_classifier.onnx")
SEQUENCES = sample("values/sequences.onnx")
PROBABILITIES = parse("seq(map(int64,tensor(float)))")


@pytest.fixture
def zipmap_bundle(tmp_path, mgedump):
    out = tmp_path / "clf.mgetest"
    result = mgedump(ZIPMAP.path, "-d", ZIPMAP.spec, "-d", ZIPMAP.spec, "-o", out)
    assert result.code == 0, result.err
    return out


def test_a_zipmap_classifier_packs_its_probabilities_as_onnx_sequences(zipmap_bundle):
    manifest = bundle_manifest(zipmap_bundle)
    assert manifest["outputs"] == [
        {"name": "label", "dtype": "int64", "shape": ["N"]},
        {"name": "probabilities", "dtype": "seq(map(int64,tensor(float)))", "shape": None},
    ]
    sequence = onnx.SequenceProto()
    sequence.ParseFromString(bundle_member(zipmap_bundle, "test_data_set_0/output_1.pb"))
    rows = numpy_helper.to_list(sequence)
    assert sequence.name == "probabilities" and len(rows) == 3 and sorted(rows[0]) == [0, 1, 2]
    assert all(abs(sum(float(p) for p in row.values()) - 1) < 1e-5 for row in rows)


def test_it_verifies(zipmap_bundle, mgerun):
    result = mgerun(zipmap_bundle, "--iter", "1")
    assert result.code == 0, result.out + result.err
    assert result.out.count("AssertEqual: err=0 (name=probabilities)") == 2


def _changed_probability(src, dst, row=1, key=2, by=0.05):
    def edit(names, manifest, members):
        member = "test_data_set_0/output_1.pb"
        value, name = decode_value(members[member], PROBABILITIES)
        value[row][key] = np.asarray(value[row][key] + by, np.float32)
        members[member] = encode_value(value, PROBABILITIES, name)

    return rewrite_bundle(src, dst, edit, fix_hashes=True)


def test_a_changed_probability_fails_naming_the_worst_element(zipmap_bundle, tmp_path, mgerun):
    bad = _changed_probability(zipmap_bundle, tmp_path / "bad.mgetest")
    report = tmp_path / "r.json"
    result = mgerun(bad, "--iter", "1", "--report-json", report)
    assert result.code == 1
    lines = result.out.splitlines()
    failed = lines.index(next(line for line in lines if "(name=probabilities) FAILED" in line))
    assert lines[failed].startswith("AssertEqual: err=0.05")
    assert lines[failed + 1].startswith("  worst element at [1][2]: expect=")
    output = one_report(report)["test_cases"][0]["outputs"][1]
    assert output["worst_path"] == "[1][2]" and output["worst_index"] is None and not output["passed"]


def test_mgediff_finds_where_two_models_part(zipmap_bundle, tmp_path, mgediff):
    model = onnx.load(str(ZIPMAP.path))
    intercepts = next(a for a in model.graph.node[0].attribute if a.name == "intercepts")
    intercepts.floats[2] += 0.5
    changed = tmp_path / "changed.mgetest"
    rewrite_bundle(
        zipmap_bundle,
        changed,
        lambda n, m, members: members.update({"model.onnx": model.SerializeToString()}),
        fix_hashes=True,
    )
    report = tmp_path / "diff.json"
    result = mgediff(zipmap_bundle, changed, "--report-json", report)
    assert result.code == 1, result.out + result.err
    first = json.loads(report.read_text())["test_cases"][0]["first_divergence"]
    assert first["node"] == "linear"  # ZipMap only carries the error on
    assert mgediff(zipmap_bundle, zipmap_bundle).code == 0


def test_mgediff_names_the_worst_probability_by_its_path(zipmap_bundle, tmp_path, mgerun, mgediff):
    """Two dumps whose probabilities alone differ: ZipMap introduces the error, at [1][2]."""
    a, b = tmp_path / "a", tmp_path / "b"
    assert mgerun(zipmap_bundle, "--iter", "1", "--io-dump", a).code == 0
    shutil.copytree(a, b)
    index_path = b / "test_data_set_0" / "index.json"
    index = json.loads(index_path.read_text())
    entry = next(t for t in index["tensors"] if t["name"] == "probabilities")
    file = b / "test_data_set_0" / entry["file"]
    value, name = decode_value(file.read_bytes(), PROBABILITIES)
    value[1][2] = np.asarray(value[1][2] + 0.05, np.float32)
    file.write_bytes(encode_value(value, PROBABILITIES, name))
    entry["size"], entry["sha256"] = file.stat().st_size, hashlib.sha256(file.read_bytes()).hexdigest()
    index_path.write_text(json.dumps(index))
    report = tmp_path / "diff.json"
    result = mgediff(a, b, "--report-json", report)
    assert result.code == 1
    case = json.loads(report.read_text())["test_cases"][0]
    assert case["worst"]["name"] == "probabilities" and case["worst"]["worst_path"] == "[1][2]"
    assert case["first_divergence"]["node"] == "zipmap"
    assert "worst element at [1][2]" in result.out


def test_the_io_dump_holds_the_probabilities(zipmap_bundle, tmp_path, mgerun, mgediff):
    dump = tmp_path / "dump"
    assert mgerun(zipmap_bundle, "--iter", "1", "--io-dump", dump).code == 0
    index = json.loads((dump / "test_data_set_0" / "index.json").read_text())
    entry = next(t for t in index["tensors"] if t["name"] == "probabilities")
    assert entry["dtype"] == "seq(map(int64,tensor(float)))" and entry["shape"] == []
    assert 0 < entry["min"] <= entry["max"] < 1
    sequence = onnx.SequenceProto()
    sequence.ParseFromString((dump / "test_data_set_0" / entry["file"]).read_bytes())
    assert len(numpy_helper.to_list(sequence)) == 3
    assert mgediff(dump, zipmap_bundle).code == 0


def test_a_sequence_input_and_an_optional_output(tmp_path, mgedump, mgerun, mgediff):
    out = tmp_path / "seq.mgetest"
    assert mgedump(SEQUENCES.path, "-d", SEQUENCES.spec, "-o", out).code == 0
    manifest = bundle_manifest(out)
    assert [(i["name"], i["dtype"]) for i in manifest["inputs"]] == [("xs", "seq(tensor(float))")]
    assert [o["dtype"] for o in manifest["outputs"]] == ["seq(tensor(float))", "float32", "optional(tensor(float))"]
    xs, _ = decode_value(bundle_member(out, "test_data_set_0/input_0.pb"), parse("seq(tensor(float))"))
    assert len(xs) == 1 and xs[0].shape == (2, 3)
    result = mgerun(out, "--iter", "2")
    assert result.code == 0 and "AssertEqual: err=0 (name=maybe)" in result.out
    assert mgediff(out, out).code == 0


def test_a_type_mgedump_cannot_feed_is_refused_by_the_command_run(tmp_path, mgedump, mgerun, mgediff):
    features = helper.make_value_info(
        "features",
        helper.make_map_type_proto(TensorProto.STRING, helper.make_tensor_type_proto(TensorProto.FLOAT, [])),
    )
    node = helper.make_node("DictVectorizer", ["features"], ["v"], domain="ai.onnx.ml", string_vocabulary=["a", "b"])
    graph = helper.make_graph([node], "g", [features], [helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 2])])
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 1)], ir_version=8
    )
    path = tmp_path / "dictvectorizer.onnx"
    onnx.save(model, path)
    for command, run in (("mgedump", mgedump), ("mgerun", mgerun)):
        args = [path, "-d", "#rand(0,1)"] + (["-o", tmp_path / "o.mgetest"] if command == "mgedump" else [])
        result = run(*args)
        assert result.code == 2 and "Traceback" not in result.err
        assert (
            f"{command}: error: input 'features' has type map(string,tensor(float)), which {command} cannot feed"
            in (result.err)
        )
    result = mgediff(path, path, "-d", "#rand(0,1)")
    assert result.code == 2 and "which mgediff cannot feed" in result.err


@pytest.mark.parametrize("flag", [["--enable-ioc16"], ["--quantize", "int8"]])
def test_the_precision_searches_are_refused_for_a_zipmap(tmp_path, mgedump, flag):
    out = tmp_path / "o.mgetest"
    result = mgedump(ZIPMAP.path, "-d", ZIPMAP.spec, "--optimize-for-inference", *flag, "-o", out)
    assert result.code == 2 and not out.exists()
    assert "searches on tensor inputs and outputs; 'probabilities' is seq(map(int64,tensor(float)))" in result.err


def test_the_refusal_hints_only_at_flags_given(tmp_path, mgedump):
    """int8 implies the portable rewrites: the user gave no --optimize-for-inference, so the hint does not suggest
    it; under --variants auto the precision variants are left out with no hint, the float32 one packed."""
    out = tmp_path / "o.mgetest"
    result = mgedump(ZIPMAP.path, "-d", ZIPMAP.spec, "--quantize", "int8", "-o", out)
    assert result.code == 2 and "hint: pack without --quantize int8)" in result.err
    assert "--optimize-for-inference" not in result.err
    result = mgedump(ZIPMAP.path, "-d", ZIPMAP.spec, "--variants", "auto", "-o", out)
    assert result.code == 0, result.err
    left = [line for line in result.err.splitlines() if "left out" in line]
    assert len(left) == 4 and all("searches on tensor inputs" in line for line in left)
    assert "(hint:" not in result.err and "alone is fine" not in result.err
    assert [v["name"] for v in bundle_manifest(out)["variants"]] == ["fp32"]


def test_optimize_for_inference_alone_packs_a_zipmap(tmp_path, mgedump, mgerun):
    out = tmp_path / "o.mgetest"
    assert mgedump(ZIPMAP.path, "-d", ZIPMAP.spec, "--optimize-for-inference", "--embed-io-dump", "-o", out).code == 0
    assert mgerun(out, "--iter", "1").code == 0


@pytest.mark.parametrize(
    ("dtype", "message"),
    [
        ("seq(map(int64,", "outputs[1].dtype: 'seq(map(int64,' is not a type (the type ends early)"),
        ("seq(tensor(float))", "is not a valid seq(tensor(float)) (elem_type 4, expected 1"),
        ("map(float,tensor(float))", "map keys of type float"),
    ],
)
def test_a_manifest_type_that_lies_is_refused(zipmap_bundle, tmp_path, mgerun, dtype, message):
    def edit(names, manifest, members):
        manifest["outputs"][1]["dtype"] = dtype

    bad = rewrite_bundle(zipmap_bundle, tmp_path / "bad.mgetest", edit, fix_hashes=True)
    result = mgerun(bad, "--iter", "1")
    assert result.code == 2 and message in result.err and "Traceback" not in result.err
