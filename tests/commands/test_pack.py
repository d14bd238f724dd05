"""Packing: every sample and reference model packs into a bundle that verifies; the bundle's layout, hashes and bytes."""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np
import pytest
from onnx import TensorProto, numpy_helper

from mgedump.options import PackOptions
from tests.support import good_models, light_models


@pytest.mark.parametrize("model", good_models(), ids=lambda m: m.id)
def test_every_sample_packs_and_verifies(model, tmp_path, mgedump, mgerun):
    out = tmp_path / "out.mgetest"
    packed = mgedump(model.path, "-d", model.spec, "-o", out)
    assert packed.code == 0, packed.err
    checked = mgerun(out, "--iter", "2")
    assert checked.code == 0, checked.out + checked.err
    assert "AssertEqual: err=0 (name=" in checked.out


@pytest.mark.parametrize("model", light_models(), ids=os.path.basename)
def test_reference_models_pack_and_verify(model, tmp_path, mgedump, mgerun):
    out = tmp_path / "out.mgetest"
    packed = mgedump(model, "-d", "#rand(0,255)", "-o", out)
    assert packed.code == 0, packed.err
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("mgedump.json"))
    assert len(manifest["inputs"]) == 1  # the weights listed as graph inputs are not inputs
    checked = mgerun(out, "--iter", "1", "--warmup-iter", "0")
    assert checked.code == 0, checked.out + checked.err


def test_multi_input_binding_and_several_cases(samples, tmp_path, mgedump, mgerun):
    out = tmp_path / "multi.mgetest"
    packed = mgedump(
        samples / "multi_input.onnx",
        "-d",
        "input:0:#rand(0,1);len:#const(7)",
        "-d",
        "len:#const(2);input:0:#const(1)",
        "-d",
        samples / "data" / "multi_input.npz",
        "-o",
        out,
    )
    assert packed.code == 0, packed.err
    with zipfile.ZipFile(out) as zf:
        lens = [int(numpy_helper.to_array(_tensor(zf, f"test_data_set_{i}/input_1.pb"))) for i in range(3)]
        names = {_tensor(zf, f"test_data_set_{i}/input_{k}.pb").name for i in range(3) for k in range(2)}
        len_out = [int(numpy_helper.to_array(_tensor(zf, f"test_data_set_{i}/output_1.pb"))) for i in range(3)]
        first = numpy_helper.to_array(_tensor(zf, "test_data_set_1/input_0.pb"))
    assert lens == [7, 2, 3] and len_out == [8, 3, 4]
    assert names == {"input:0", "len"}
    assert np.all(first == 1)
    assert mgerun(out, "--iter", "1").code == 0


def test_list_file_gives_a_case_per_line(samples, tmp_path, mgedump, mgerun):
    out = tmp_path / "list.mgetest"
    assert mgedump(samples / "cnn.onnx", "-d", f"@{samples / 'testcases.txt'}", "-d", "#rand(0,1)", "-o", out).code == 0
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("mgedump.json"))
        names = zf.namelist()
    assert [c["spec"] for c in manifest["test_cases"]] == [
        "#rand(0,1)",
        "images/cat.png",
        "data/cnn_input.npy",
        "data:data/cnn_input.pb",
        "#rand(0,1)",
    ]
    assert names[:2] == ["mgedump.json", "model.onnx"]
    assert names[2:] == [f"test_data_set_{i}/{kind}_0.pb" for i in range(5) for kind in ("input", "output")]
    result = mgerun(out, "--iter", "1")
    assert result.code == 0 and result.out.count("AssertEqual: err=") == 5


def test_same_command_twice_is_byte_identical(samples, tmp_path, mgedump):
    args = [samples / "cnn.onnx", "-d", f"@{samples / 'testcases.txt'}", "-d", "#randn(0,1)", "--seed", "7"]
    assert mgedump(*args, "-o", tmp_path / "a.mgetest").code == 0
    assert mgedump(*args, "-o", tmp_path / "b.mgetest").code == 0
    assert (tmp_path / "a.mgetest").read_bytes() == (tmp_path / "b.mgetest").read_bytes()
    assert str(tmp_path).encode() not in (tmp_path / "a.mgetest").read_bytes()


def test_model_member_is_the_source_file_and_manifest_hashes(samples, tmp_path, mgedump):
    out = tmp_path / "o.mgetest"
    assert mgedump(samples / "cnn.onnx", "-d", "#rand(0,1)", "-o", out).code == 0
    import hashlib

    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("mgedump.json"))
        assert zf.read("model.onnx") == (samples / "cnn.onnx").read_bytes()
        assert all(
            info.compress_type == zipfile.ZIP_STORED and info.date_time == (1980, 1, 1, 0, 0, 0)
            for info in zf.infolist()
        )
        for entry in manifest["members"]:
            assert hashlib.sha256(zf.read(entry["name"])).hexdigest() == entry["sha256"]
    assert manifest["format"] == "mgedump-bundle" and manifest["format_version"] == 1
    assert manifest["model"]["source_sha256"] == hashlib.sha256((samples / "cnn.onnx").read_bytes()).hexdigest()
    assert manifest["inputs"] == [{"name": "data", "dtype": "float32", "shape": [1, 3, 32, 32]}]
    assert manifest["assertion"] == {"enabled": True, "maxerr": 0.0001, "verbose": True}
    assert manifest["test_cases"][0]["spec"] == "#rand(0,1)" and manifest["seed"] == 0


def test_bundle_passes_onnx_backend_test_runner(samples, tmp_path, mgedump):
    import unittest

    import onnxruntime.backend
    from onnx.backend.test.case.test_case import TestCase
    from onnx.backend.test.runner import Runner

    out = tmp_path / "b.mgetest"
    assert (
        mgedump(
            samples / "multi_input.onnx", "-d", "input:0:#rand(0,1);len:#const(3)", "-d", "#rand(0,4)", "-o", out
        ).code
        == 0
    )
    folder = tmp_path / "unzipped"
    with zipfile.ZipFile(out) as zf:
        zf.extractall(folder)

    class BundleRunner(Runner):
        def __init__(self, backend):  # only our model, not onnx's own test catalogue
            self.backend = backend
            self._parent_module = __name__
            self._include_patterns, self._exclude_patterns, self._xfail_patterns = set(), set(), set()
            self._test_kwargs = {}
            from collections import defaultdict

            self._test_items = defaultdict(dict)

    runner = BundleRunner(onnxruntime.backend)
    runner._add_model_test(
        TestCase(
            name="test_mgedump_bundle",
            model_name="bundle",
            url=None,
            model_dir=str(folder),
            model=None,
            data_sets=None,
            kind="real",
            rtol=1e-3,
            atol=1e-7,
        ),
        "Bundle",
    )
    with open(os.devnull, "w") as quiet:
        result = unittest.TextTestRunner(verbosity=0, stream=quiet).run(runner.test_suite)
    assert result.testsRun >= 1 and result.wasSuccessful(), result.failures + result.errors
    assert len(result.skipped) < result.testsRun  # the CPU test ran


def _tensor(zf: zipfile.ZipFile, name: str) -> TensorProto:
    proto = TensorProto()
    proto.ParseFromString(zf.read(name))
    return proto


class _Session:
    """Stands in for the optimised model's session: returns the outputs it was given."""

    def __init__(self, outputs):
        self.outputs = outputs

    def run(self, names, feeds):
        return self.outputs


def _stored(expected):
    from mgedump.commands.pack_proof import StoredCase
    from mgedump.data import TestCase
    from mgedump.data.spec import CaseSpec

    return [StoredCase(TestCase(CaseSpec("#rand(0,1)", "-d #1"), []), [("x", np.zeros(1, np.float32))], [expected])]


def test_a_small_self_check_error_gets_a_maxerr_hint():
    from mgedump.base.errors import OptimizeError
    from mgedump.commands.pack_proof import self_check as _self_check
    from mgedump.model.runtime import TensorInfo

    expected = np.array([[0.1, 0.9]], np.float32)
    with pytest.raises(OptimizeError) as caught:
        _self_check(
            _Session([expected + 3e-4]),
            _stored(expected),
            [TensorInfo("y", "float32", (1, 2))],
            PackOptions(maxerr=1e-4),
            lambda k: pytest.fail("no diagnosis is needed"),
        )
    assert (
        caught.value.hint == "maxerr 0.0005 would pass" and "err=0.0003 (name=y, test case 0)" in caught.value.message
    )


def test_destroyed_outputs_get_the_first_divergence_and_no_hint():
    from mgedump.base.errors import OptimizeError
    from mgedump.commands.pack_proof import self_check as _self_check
    from mgedump.model.runtime import TensorInfo

    expected = np.array([[0.1, 0.9]], np.float32)
    with pytest.raises(OptimizeError) as caught:
        _self_check(
            _Session([np.array([[0.9, 0.1]], np.float32)]),
            _stored(expected),
            [TensorInfo("y", "float32", (1, 2))],
            PackOptions(maxerr=1e-2),
            lambda k: "node 'n' (Op), output 'o' err 9",
        )
    assert caught.value.hint is None
    assert caught.value.message.endswith("; first divergence on test case 0: node 'n' (Op), output 'o' err 9")


def test_pack_from_code_takes_arrays_and_a_model_in_memory(tmp_path, mgerun):
    """MegEngine users pack from code: test cases as arrays (one per input, or a dict by name) and an
    onnx.ModelProto; the bundle verifies like any other."""
    import onnx

    from mgedump import PackOptions, pack
    from tests.support import sample

    multi = onnx.load(str(sample("multi_input.onnx").path))
    names = [i.name for i in multi.graph.input if i.name not in {t.name for t in multi.graph.initializer}]
    rng = np.random.default_rng(0)
    feeds = [{n: _array_for(i, rng) for n, i in zip(names, _inputs(multi), strict=True)} for _ in range(2)]
    result = pack(multi, tmp_path / "multi.mgetest", PackOptions(cases=feeds))
    assert result.test_cases == 2
    assert [c.origin for c in result.manifest.test_cases] == ["cases[0]", "cases[1]"]
    assert mgerun(tmp_path / "multi.mgetest", "--iter", "1").code == 0
    with zipfile.ZipFile(tmp_path / "multi.mgetest") as zf:
        stored = numpy_helper.to_array(TensorProto.FromString(zf.read("test_data_set_1/input_0.pb")))
    np.testing.assert_array_equal(stored, feeds[1][names[0]])

    cnn = sample("cnn.onnx")
    one = rng.random((1, 3, 32, 32), dtype=np.float32)
    pack(str(cnn.path), tmp_path / "cnn.mgetest", PackOptions(cases=[one, {"data": one}]))
    assert mgerun(tmp_path / "cnn.mgetest", "--iter", "1").code == 0


def test_arrays_that_do_not_fit_are_one_clear_error(tmp_path):
    from mgedump import PackOptions, pack
    from mgedump.base.errors import DataError, SpecError, UsageError
    from tests.support import sample

    cnn = str(sample("cnn.onnx").path)
    good = np.zeros((1, 3, 32, 32), np.float32)
    with pytest.raises(SpecError, match=r"cases\[0\]: the model has no input 'nope'"):
        pack(cnn, tmp_path / "o.mgetest", PackOptions(cases=[{"nope": good}]))
    with pytest.raises(DataError, match="fixes dim 2 to 32"):
        pack(cnn, tmp_path / "o.mgetest", PackOptions(cases=[np.zeros((1, 3, 16, 32), np.float32)]))
    with pytest.raises(UsageError, match="cases must be a list of test cases"):
        PackOptions(cases=good)  # one array is not a list of test cases
    with pytest.raises(UsageError, match="cases must be a list of test cases .* got one int"):
        PackOptions(cases=5)  # type: ignore[arg-type]  # what the type checker refuses is refused at run time too
    with pytest.raises(UsageError, match="test case 1 is of type object: give a -d text, an array, or a dict"):
        pack(cnn, tmp_path / "o.mgetest", PackOptions(cases=[good, object()]))
    assert not (tmp_path / "o.mgetest").exists()


def _inputs(model):
    weights = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in weights]


def _array_for(info, rng):
    from onnx.helper import tensor_dtype_to_np_dtype

    dtype = np.dtype(tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type))
    shape = [d.dim_value or 1 for d in info.type.tensor_type.shape.dim]
    return (rng.random(shape) * 3).astype(dtype)


def test_per_output_maxerr_at_pack_and_at_run(tmp_path, mgedump, mgerun):
    """--maxerr OUTPUT:X beside --maxerr X: recorded in the manifest, each output held to its own bound at run
    time, overridden by the run's own --maxerr."""
    from tests.support import sample

    multi = sample("multi_input.onnx")
    out = tmp_path / "m.mgetest"
    with zipfile.ZipFile(_pack_multi(multi, out, mgedump, "--maxerr", "1e-3")) as zf:
        outputs = [o["name"] for o in json.loads(zf.read("mgedump.json"))["outputs"]]
    first = outputs[0]
    _pack_multi(multi, out, mgedump, "--maxerr", "1e-3", "--maxerr", f"{first}:0.25")
    with zipfile.ZipFile(out) as zf:
        assertion = json.loads(zf.read("mgedump.json"))["assertion"]
    assert assertion["maxerr"] == 1e-3 and assertion["output_maxerr"] == {first: 0.25}

    report = tmp_path / "r.json"
    assert mgerun(out, "--iter", "1", "--report-json", report).code == 0
    checks = json.loads(report.read_text())["bundles"][0]["test_cases"][0]["outputs"]
    assert {c["name"]: c["maxerr"] for c in checks} == {name: 0.25 if name == first else 1e-3 for name in outputs}

    assert mgerun(out, "--iter", "1", "--maxerr", "0.5", "--report-json", report).code == 0  # every output's
    checks = json.loads(report.read_text())["bundles"][0]["test_cases"][0]["outputs"]
    assert {c["maxerr"] for c in checks} == {0.5}
    assert mgerun(out, "--iter", "1", "--maxerr", f"{first}:0", "--report-json", report).code == 0
    checks = json.loads(report.read_text())["bundles"][0]["test_cases"][0]["outputs"]
    assert {c["name"]: c["maxerr"] for c in checks}[first] == 0.0


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--maxerr", "nope:1e-3"], "--maxerr nope: names no output of the model (its outputs: 'prob')"),
        (["--error-stat", "nope:p99"], "--error-stat nope: names no output of the model (its outputs: 'prob')"),
        (["--maxerr", "y:-1"], "--maxerr y: must be a finite number >= 0"),
        (["--maxerr", "abc"], "give a number (e.g. 1e-4) or OUTPUT:number"),
    ],
)
def test_a_bad_per_output_maxerr_is_one_line(tmp_path, mgedump, args, needle):
    from tests.support import sample

    cnn = sample("cnn.onnx")
    result = mgedump(cnn.path, "-d", cnn.spec, *args, "-o", tmp_path / "o.mgetest")
    assert result.code == 2 and needle in result.err and len(result.err.strip().splitlines()) == 1
    assert not (tmp_path / "o.mgetest").exists()


def test_a_run_bound_for_an_unknown_output_is_refused(tmp_path, mgedump, mgerun):
    from tests.support import sample

    cnn = sample("cnn.onnx")
    assert mgedump(cnn.path, "-d", cnn.spec, "-o", tmp_path / "c.mgetest").code == 0
    result = mgerun(tmp_path / "c.mgetest", "--maxerr", "nope:0.1")
    assert result.code == 2 and "--maxerr nope: names no output of the model (its outputs: 'prob')" in result.err


def _pack_multi(model, out, mgedump, *args):
    packed = mgedump(model.path, "-d", model.spec, *args, "-o", out)
    assert packed.code == 0, packed.err
    return out


def test_output_model_writes_the_bundled_model_as_a_plain_file(tmp_path, mgedump):
    """--output-model: the converted model itself, byte for byte the bundle's, and it runs; external data beside."""
    import onnxruntime as ort

    from tests.support import bundle_member, sample

    cnn = sample("cnn.onnx")
    flags = ["--optimize-for-inference", "--enable-io16xc32", "--maxerr", "1e-2"]
    done = mgedump(cnn.path, "-d", cnn.spec, *flags, "--output-model", tmp_path / "m16.onnx", "-o", tmp_path / "b")
    assert done.code == 0, done.err
    assert (tmp_path / "m16.onnx").read_bytes() == bundle_member(tmp_path / "b", "model.onnx")
    session = ort.InferenceSession(str(tmp_path / "m16.onnx"), providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].type == "tensor(float16)"

    mlp = sample("external/mlp.onnx")
    out = tmp_path / "ext"
    out.mkdir()
    done = mgedump(mlp.path, "-d", mlp.spec, "--output-model", out / "mlp.onnx", "-o", out / "b.mgetest")
    assert done.code == 0, done.err
    assert (out / "model.onnx.data").read_bytes() == bundle_member(out / "b.mgetest", "model.onnx.data")
    ort.InferenceSession(str(out / "mlp.onnx"), providers=["CPUExecutionProvider"])  # finds its data beside it


def test_output_model_on_the_bundle_path_is_refused(tmp_path, mgedump):
    from tests.support import sample

    cnn = sample("cnn.onnx")
    done = mgedump(cnn.path, "-d", cnn.spec, "--output-model", tmp_path / "b", "-o", tmp_path / "b")
    assert done.code == 2 and "-o and --output-model both write to" in done.err and not (tmp_path / "b").exists()


def test_a_run_bound_for_an_unknown_output_is_one_line_for_a_bundle_of_variants(tmp_path, mgedump, mgerun):
    """The variants of one bundle share its outputs: the bad bound is said once, not once per variant."""
    from tests.support import sample

    cnn = sample("cnn.onnx")
    out = tmp_path / "v.mgetest"
    assert mgedump(cnn.path, "-d", cnn.spec, "--variants", "fp32,ioc16", "--maxerr", "0.05", "-o", out).code == 0
    result = mgerun(out, "--maxerr", "nope:0.1", "--report-json", tmp_path / "r.json")
    assert result.code == 2 and len(result.err.strip().splitlines()) == 1, result.err
    assert "--maxerr nope: names no output of the model (its outputs: 'prob')" in result.err
    assert not (tmp_path / "r.json").exists()
