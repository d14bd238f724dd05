"""mgedump.tracing.dump: trace.dump writes models and bundles that the real mgedump/mgerun commands accept."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import onnx
import pytest

import mgedump
import mgedump.functional as F
import mgedump.module as M
from mgedump import tensor
from mgedump.jit import DumpInfo, exclude_from_trace, trace
from mgedump.model.runtime import open_session
from mgedump.options import PackOptions
from tests.support import run_script
from tests.tracing.support import batch


@pytest.fixture
def f_exp():
    @trace(capture_as_const=True)
    def f(x):
        return np.exp(x)

    f(tensor(5.0))
    return f


def test_acceptance_dump_then_pack_and_verify_with_the_commands(f_exp, tmp_path):
    f_exp.dump(str(tmp_path / "f.onnx"))
    model = onnx.load(str(tmp_path / "f.onnx"))
    onnx.checker.check_model(model)
    assert model.ir_version == 8 and [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [13]
    packed = run_script("mgedump", "f.onnx", "-d", "#rand(0,1)", "-o", "f.mgetest", cwd=tmp_path, timeout=120)
    assert packed.returncode == 0, packed.stderr
    checked = run_script("mgerun", "f.mgetest", cwd=tmp_path, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "AssertEqual: err=" in checked.stdout


def test_acceptance_dump_with_input_data_writes_a_verified_bundle(f_exp, tmp_path, mgerun):
    out = tmp_path / "f.mgetest"
    f_exp.dump(str(out), input_data=["#rand(0,1)"])
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("mgedump.json"))
    assert [c["spec"] for c in manifest["test_cases"]] == ["#rand(0,1)"]
    assert manifest["optimizations"] == ["optimize-for-inference"]
    assert manifest["assertion"]["maxerr"] == PackOptions().maxerr  # maxerr not given: the bundle default
    checked = mgerun(str(out))
    assert checked.code == 0, checked.out + checked.err


def test_dump_bundle_from_arrays_and_multiple_inputs(tmp_path, mgerun):
    w = tensor(np.arange(6, dtype=np.float32).reshape(2, 3))

    @trace(capture_as_const=True)
    def f(x, y):
        return {"sum": F.linear(x, w) + y, "max": F.max(x, axis=1)}

    x = np.random.default_rng(0).random((4, 3), dtype=np.float32)
    y = np.ones((4, 2), np.float32)
    f(tensor(x), tensor(y))
    out = tmp_path / "two.mgetest"
    f.dump(
        str(out),
        arg_names=["features", "offset"],
        maxerr=1e-5,
        input_data=[[x, y], {"features": x * 2, "offset": tensor(y)}, "features:#rand(0,1);offset:#const(0)"],
    )
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("mgedump.json"))
        expect = onnx.numpy_helper.to_array(onnx.load_tensor_from_string(zf.read("test_data_set_1/output_0.pb")))
    assert [i["name"] for i in manifest["inputs"]] == ["features", "offset"]
    assert [o["name"] for o in manifest["outputs"]] == ["sum", "max"]
    assert manifest["assertion"]["maxerr"] == 1e-5 and len(manifest["test_cases"]) == 3
    np.testing.assert_allclose(expect, (x * 2) @ w.numpy().T + y, rtol=1e-6)
    checked = mgerun(str(out), "--iter", "1")
    assert checked.code == 0, checked.out + checked.err
    # arrays go to the packer as arrays, recorded by dtype and shape: the same dump gives the same bytes
    assert manifest["test_cases"][0]["spec"] == "features: float32[4, 3]; offset: float32[4, 2]"
    again = tmp_path / "again.mgetest"
    f.dump(
        str(again),
        arg_names=["features", "offset"],
        maxerr=1e-5,
        input_data=[[x, y], {"features": x * 2, "offset": tensor(y)}, "features:#rand(0,1);offset:#const(0)"],
    )
    assert again.read_bytes() == out.read_bytes()
    with pytest.raises(ValueError, match="test case 0 is one array, but the graph has 2 inputs"):
        f.dump(str(tmp_path / "x.mgetest"), input_data=[x])
    with pytest.raises(ValueError, match="unknown input"):
        f.dump(str(tmp_path / "x.mgetest"), input_data=[{"z": x}])
    with pytest.raises(ValueError, match="has 1 array"):
        f.dump(str(tmp_path / "x.mgetest"), input_data=[[x]])


def test_dump_no_assert_strip_info_and_file_objects(f_exp, tmp_path):
    bundle = tmp_path / "f.mgetest"
    strip = tmp_path / "strip.json"
    f_exp.dump(str(bundle), input_data=["#rand(0,1)"], no_assert=True, strip_info_file=str(strip))
    with zipfile.ZipFile(bundle) as zf:
        members = zf.namelist()
    assert "test_data_set_0/input_0.pb" in members  # a test case, stored without its expected output
    assert not any(n.endswith("output_0.pb") for n in members)
    info = json.loads(strip.read_text())
    assert {op["op_type"] for op in info["operators"]} == {"Exp", "Reshape"}  # the scalar is (1,) outside
    assert (tmp_path / "strip.required_operators.config").exists()

    @trace(capture_as_const=True)
    def g(x):
        return F.relu(x) * 2

    g(tensor([1.0, -1.0]))
    g.dump(str(tmp_path / "g.mgetest"), input_data=["#rand(-1,1)"], strip_info_file=str(strip), append_json=True)
    info = json.loads(strip.read_text())
    assert len(info["models"]) == 2 and {"Exp", "Relu", "Mul"} <= {op["op_type"] for op in info["operators"]}

    g.dump(str(tmp_path / "g.onnx"), strip_info_file=str(strip), append_json=True)  # the same model as bundled
    assert [m["model"] for m in json.loads(strip.read_text())["models"]] == ["model.onnx", "g.onnx"]

    buffer = io.BytesIO()
    g.dump(buffer, optimize_for_inference=False)
    model = onnx.load_from_string(buffer.getvalue())
    assert [n.op_type for n in model.graph.node] == ["Relu", "Mul"]
    buffer = io.BytesIO()
    g.dump(buffer, input_data=["#rand(0,1)"])  # a bundle into a file object too
    with zipfile.ZipFile(buffer) as zf:
        assert "mgedump.json" in zf.namelist()


def test_dumped_model_computes_what_the_trace_did(tmp_path):
    @trace(capture_as_const=True)
    def f(x):
        y = F.conv2d(x, tensor(np.ones((2, 1, 3, 3), np.float32) / 9), padding=1)
        return F.softmax(F.flatten(F.avg_pool2d(y, 2), 1), axis=1), F.argmax(y, axis=1)

    x = tensor(np.random.default_rng(1).random((3, 1, 6, 6), dtype=np.float32))
    probs, idx = f(x)
    for optimize in (False, True):
        path = str(tmp_path / f"m{optimize}.onnx")
        f.dump(path, optimize_for_inference=optimize, output_names=["probs", "idx"])
        session = open_session(path)
        got_probs, got_idx = session.run(None, {"arg_0": x.numpy()})
        np.testing.assert_allclose(got_probs, probs.numpy(), rtol=1e-6)
        np.testing.assert_array_equal(got_idx, idx.numpy())


def test_dump_keeps_unused_inputs_and_returns_of_inputs(tmp_path):
    @trace(capture_as_const=True)
    def f(x, unused):
        return x, x * 2, x

    f(tensor([1.0]), tensor([2.0]))
    path = str(tmp_path / "m.onnx")
    f.dump(path, optimize_for_inference=False)
    model = onnx.load(path)
    onnx.checker.check_model(model)
    assert [i.name for i in model.graph.input] == ["arg_0", "arg_1"]  # MegEngine's names
    session = open_session(path)
    got = session.run(None, {"arg_0": np.array([3.0], np.float32), "arg_1": np.array([0.0], np.float32)})
    assert [g.tolist() for g in got] == [[3.0], [6.0], [3.0]]


def test_dump_error_cases(tmp_path):
    out = str(tmp_path / "f.onnx")
    plain = trace(lambda x: x + 1)
    plain(tensor([1.0]))
    with pytest.raises(ValueError, match="capture_as_const=True"):
        plain.dump(out)
    uncalled = trace(lambda x: x + 1, capture_as_const=True)
    with pytest.raises(RuntimeError, match="not been called yet"):
        uncalled.dump(out)

    @trace(capture_as_const=True)
    def two(x, y):
        return x + y, x - y

    two(tensor([1.0]), tensor([2.0]))
    with pytest.raises(ValueError, match=r"arg_names has 1 name\(s\), but two has 2 tensor input\(s\)"):
        two.dump(out, arg_names=["a"])
    with pytest.raises(ValueError, match=r"output_names has 3 name\(s\), but two has 2 output\(s\)"):
        two.dump(out, output_names=["a", "b", "c"])
    with pytest.raises(ValueError, match="unique"):
        two.dump(out, arg_names=["a", "b"], output_names=["a", "c"])
    with pytest.raises(ValueError, match="keep_var_name"):
        two.dump(out, keep_var_name=3)

    d = trace(lambda x: {"y": x * 2}, capture_as_const=True)
    d(tensor([1.0]))
    with pytest.raises(TypeError, match="returns a dict"):
        d.dump(out, output_names=["z"])
    d.dump(out, optimize_for_inference=False)
    assert [o.name for o in onnx.load(out).graph.output] == ["y"]


def test_dump_refuses_unknown_and_megengine_only_flags(tmp_path):
    f = trace(lambda x: x + 1, capture_as_const=True)
    f(tensor([1.0]))
    with pytest.raises(mgedump.MgeError, match="unknown optimisation flag"):
        f.dump(str(tmp_path / "f.onnx"), enable_warp_speed=True)
    with pytest.raises(mgedump.MgeError, match="nchw44"):
        f.dump(str(tmp_path / "f.onnx"), enable_nchw44=True)
    with pytest.raises(mgedump.MgeError, match="enable_io16xc32=True needs optimize_for_inference"):
        f.dump(str(tmp_path / "f.onnx"), optimize_for_inference=False, enable_io16xc32=True)
    assert not (tmp_path / "f.onnx").exists()


def test_cnn_dump_io16xc32_has_float16_inputs(cnn, tmp_path):
    f = trace(lambda x: cnn(x), capture_as_const=True)
    f(batch())
    out = tmp_path / "cnn16.onnx"
    f.dump(str(out), enable_io16xc32=True)
    model = onnx.load(str(out))
    onnx.checker.check_model(model)
    assert [i.type.tensor_type.elem_type for i in model.graph.input] == [onnx.TensorProto.FLOAT16]
    assert [o.type.tensor_type.elem_type for o in model.graph.output] == [onnx.TensorProto.FLOAT16]
    session = open_session(str(out))
    x = batch()
    got = session.run(None, {session.get_inputs()[0].name: x.numpy().astype(np.float16)})[0]
    np.testing.assert_allclose(got.astype(np.float32), cnn(x).numpy(), atol=1e-2)


def test_dump_names_weights_nodes_and_tensors_on_request(cnn, tmp_path):
    f = trace(lambda x: cnn(x), capture_as_const=True)
    f(batch())
    out = tmp_path / "named.onnx"
    f.dump(
        str(out),
        optimize_for_inference=False,
        keep_param_name=True,
        keep_opr_name=True,
        keep_var_name=2,
        arg_names=["image"],
        output_names="prob",
    )
    model = onnx.load(str(out))
    inits = {i.name for i in model.graph.initializer}
    assert {"conv1.weight", "bn2.running_var", "fc.weight"} <= inits
    assert [i.name for i in model.graph.input] == ["image"] and [o.name for o in model.graph.output] == ["prob"]
    assert [n.name for n in model.graph.node][:2] == ["conv1.Convolution", "bn1.BatchNorm"]
    assert "conv1.Convolution" in {v for n in model.graph.node for v in n.output}

    f.dump(str(out), optimize_for_inference=False)  # defaults: numbered weights, no node names
    model = onnx.load(str(out))
    assert not {"conv1.weight", "fc.weight"} & {i.name for i in model.graph.initializer}
    assert model.graph.node and all(not n.name for n in model.graph.node)
    assert [i.name for i in model.graph.input] == ["arg_0"] and [o.name for o in model.graph.output] == ["Softmax"]


def test_dump_refuses_bad_maxerr_and_empty_input_data(tmp_path):
    f = trace(lambda x: x + 1, capture_as_const=True)
    f(tensor([1.0]))
    with pytest.raises(mgedump.MgeError, match="maxerr must be a finite number >= 0"):
        f.dump(str(tmp_path / "f.mgetest"), input_data=["#rand(0,1)"], maxerr=-1.0)
    with pytest.raises(ValueError, match="input_data is empty"):
        f.dump(str(tmp_path / "f.mgetest"), input_data=[])
    with pytest.raises(TypeError, match="test case 0 is a int"):
        f.dump(str(tmp_path / "f.mgetest"), input_data=[3])
    with pytest.raises(TypeError, match=r"^dump\(file=\.\.\.\) takes a path or a binary file object, got int 3$"):
        f.dump(3)
    assert not list(tmp_path.iterdir())


def test_dump_refuses_a_trace_that_used_exclude_from_trace(tmp_path):
    @trace
    def f(x):
        with exclude_from_trace():
            extra = tensor([2.0])
        return x + 1, extra

    f(tensor([1.0]))
    assert f._program.output_vids[1] is None  # the excluded tensor is no value of the graph
    f.capture_as_const = True  # not reachable through the API (exclude_from_trace refuses it); the guard holds anyway
    with pytest.raises(ValueError, match="uses exclude_from_trace"):
        f.dump(str(tmp_path / "f.onnx"))


# ---------------------------------------------------------------- MegEngine's dump


def test_dump_returns_dump_info_with_megengine_input_names(tmp_path):
    @trace(symbolic=True, capture_as_const=True)
    def f(a, b):
        return a + b

    a, b = tensor([2]), tensor([4])
    y = f(a, b).numpy()
    for _ in range(3):
        np.testing.assert_array_equal(f(a, b).numpy(), y)
    buffer = io.BytesIO()
    info = f.dump(buffer)
    assert isinstance(info, DumpInfo)
    assert info.inputs == ["arg_0", "arg_1"] and info.outputs == ["ADD"] and info.params == []  # MegEngine's names
    assert info.nr_opr == 1 and info.opr_types == {"Add": 1}  # ONNX has no input nodes (MegEngine counts 3)
    assert info.tot_bytes == len(buffer.getvalue()) and len(info.content_hash) == 64
    got = open_session(buffer.getvalue()).run(None, {"arg_0": a.numpy(), "arg_1": b.numpy()})[0]
    np.testing.assert_array_equal(got, y)

    named = trace(lambda x, *, bias: x * 2 + bias, capture_as_const=True)
    named(tensor([1.0], name="data"), bias=tensor([1.0]))
    assert named.dump(io.BytesIO()).inputs == ["data", "bias"]  # the tensor's own name, else the keyword


def test_dump_format_onnx_only_and_scalars_become_one_element(tmp_path, mgerun):
    @trace(symbolic=True, capture_as_const=True)
    def f(x):
        return F.sqrt(x)

    f(tensor(1.0))
    for megengine_format in ("FBS", "fbs_v2", "MDL"):
        with pytest.raises(ValueError, match=rf"dump_format='{megengine_format}' is MegEngine's own graph format"):
            f.dump(io.BytesIO(), dump_format=megengine_format)
    buffer = io.BytesIO()
    info = f.dump(buffer, dump_format="ONNX", input_data=["#rand(0, 255, 1)", np.array(0.5, np.float32)])
    model_in = onnx.load_from_string(zipfile.ZipFile(buffer).read("model.onnx")).graph.input[0]
    assert [d.dim_value for d in model_in.type.tensor_type.shape.dim] == [1] and info.inputs == ["arg_0"]
    out = tmp_path / "f.mgetest"
    out.write_bytes(buffer.getvalue())
    checked = mgerun(str(out))
    assert checked.code == 0, checked.out + checked.err


def test_dump_input_data_arrays_reach_the_packer_as_arrays(tmp_path, mgerun):
    f = trace(lambda a, b: a * b, capture_as_const=True)
    x = np.arange(3, dtype=np.float32)
    f(tensor(x), tensor(x))
    out = tmp_path / "spaced.mgetest"
    f.dump(str(out), arg_names=[" a", "b;c"], input_data=[[x, x], {" a": x * 2, "b;c": x}])  # no -d text involved
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("mgedump.json"))
    assert [i["name"] for i in manifest["inputs"]] == [" a", "b;c"] and len(manifest["test_cases"]) == 2
    checked = mgerun(str(out))
    assert checked.code == 0, checked.out + checked.err


def test_node_names_are_scoped_by_module_names():
    class Net(M.Module):
        def __init__(self):
            super().__init__(name="net")
            self.linear = M.Linear(3, 2)
            self.head = M.Linear(2, 2, name="head_named")  # a name given inside a module scopes it, as MegEngine

        def forward(self, x):
            return F.relu(self.head(self.linear(x)))

    net = Net()
    f = trace(lambda x: net(x), capture_as_const=True)
    f(tensor(np.ones((1, 3), np.float32)))
    buffer = io.BytesIO()
    f.dump(buffer, keep_opr_name=True, optimize_for_inference=False)
    names = [n.name for n in onnx.load_from_string(buffer.getvalue()).graph.node]
    expect = ["net.linear.MatrixMul", "net.linear.ADD", "net.head_named.MatrixMul", "net.head_named.ADD", "net.RELU"]
    assert names == expect
    assert M.Linear(2, 2, name="fc").name == "fc"


def test_log_exp_is_rewritten_at_opt_level_1():
    counts = []
    for level in (0, 1):
        f = trace(lambda x: F.log(F.exp(x)), symbolic=True, opt_level=level, capture_as_const=True)
        f(tensor(1.0))
        counts.append(f.dump(io.BytesIO(), optimize_for_inference=False).nr_opr)
    assert counts[0] - counts[1] == 2  # Log and Exp are gone; x passes through


@pytest.fixture
def free_batch_cnn(cnn):
    f = trace(lambda x: cnn(x), symbolic=True, capture_as_const=True)  # symbolic_shape=True: MegEngine's default
    for n in (2, 3):
        f(batch(n))
    return f


def test_symbolic_shape_dump_has_a_free_batch_dim(free_batch_cnn, cnn, tmp_path, mgerun):
    path = tmp_path / "cnn.onnx"
    info = free_batch_cnn.dump(str(path))
    assert info.free_dims == {"arg_0": {0: "arg_0_dim0"}}
    model = onnx.load(str(path))
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["arg_0_dim0", 3, 16, 16]
    session = open_session(str(path))
    for n in (1, 5):  # batch sizes the trace never saw
        x = batch(n, seed=n)
        np.testing.assert_allclose(session.run(None, {"arg_0": x.numpy()})[0], cnn(x).numpy(), atol=1e-5)
    packed = run_script(
        "mgedump", "cnn.onnx", "-d", "#rand(0,1)", "--input-shape", "arg_0:4,3,16,16", "-o", "cnn.mgetest", cwd=tmp_path
    )
    assert packed.returncode == 0, packed.stderr
    checked = mgerun(str(tmp_path / "cnn.mgetest"))
    assert checked.code == 0, checked.out + checked.err


def test_free_dims_need_shapes_computed_by_the_graph():
    f = trace(lambda x: x.reshape(int(x.shape[0]), -1) * 2, capture_as_const=True)  # a Python number: baked
    g = trace(lambda x: x.reshape(x.shape[0], -1) * 2, capture_as_const=True)  # a shape tensor: computed
    fixed = trace(lambda x: x.reshape(int(x.shape[0]), -1), capture_as_const=True, symbolic_shape=False)
    for n in (2, 3):
        x = tensor(np.ones((n, 2, 2), np.float32))
        f(x), g(x), fixed(x)
    with pytest.raises(ValueError, match=r"op #\d+ \(reshape\) differs \(shape: \(2, -1\) and \(3, -1\)\)"):
        f.dump(io.BytesIO())
    assert g.dump(io.BytesIO()).free_dims == {"arg_0": {0: "arg_0_dim0"}}
    assert fixed.dump(io.BytesIO()).free_dims == {}  # symbolic_shape=False: the first call's shapes


def test_dump_passes_variants_through_to_the_bundle(tmp_path, mgerun):
    """dump(..., variants=[...]) packs several proven variants, as mgedump --variants does."""
    f = trace(lambda x: F.relu(x * 2.0 + 1.0), capture_as_const=True)
    f(tensor(np.ones((1, 8), np.float32)))
    out = tmp_path / "f.mgetest"
    f.dump(str(out), input_data=["#rand(0,1,1,8)"], variants=["fp32", "ioc16"], maxerr=1e-2)
    manifest = json.loads(zipfile.ZipFile(out).read("mgedump.json"))
    assert manifest["format_version"] == 2 and [v["name"] for v in manifest["variants"]] == ["fp32", "ioc16"]
    assert mgerun(out, "--iter", "1").code == 0
    with pytest.raises(TypeError, match=r"dump\(variants=...\) takes a str or a list of str"):
        f.dump(str(tmp_path / "g.mgetest"), input_data=["#rand(0,1,1,8)"], variants=3)
