#!/usr/bin/env python3
"""Generate the small, deterministic sample files in ``samples/``.

Usage::

    python scripts/make_samples.py [--out DIR]

``DIR`` defaults to the ``samples/`` folder next to ``scripts/``.  Every file
is built from fixed seeds (one ``np.random.default_rng`` per file), so running
the script twice gives byte-identical output.  Models are built with
``onnx.helper`` only and are checked with ``onnx.checker`` and smoke-run in
onnxruntime before the script exits.

Models: every model, good and deliberately bad, is an entry of :data:`REGISTRY`
below (file, a ``-d`` spec that fits it, what it is for, and for a bad one the
error ``mgedump`` must report). The script writes the registry to
``samples/models.json``, which the tests read: one list of sample models for
every test. Good models are at the top of ``samples/``, models with external
data under ``samples/external/``, bad ones under ``samples/bad/``.

Images (``images/``, drawn with numpy + cv2, no noise):

``cat.png``
    32x32 BGR colour PNG; fits ``cnn.onnx`` and ``nhwc.onnx`` directly.
``dog.jpg``
    64x48 (width x height) colour JPEG, quality 90; needs ``--resize-input``
    for the 32x32 models.
``digit.png``
    28x28 single-channel PNG; fits ``gray.onnx``.

Arrays (``data/``):

``cnn_input.npy``
    float32 [1,3,32,32] in [0, 1) for ``cnn.onnx``.
``multi_input.npz``
    ``np.savez``-format archive with keys ``input:0`` (float32 [1,16]) and
    ``len`` (int64 scalar, value 3) for ``multi_input.onnx``.
``cnn_input.pb``
    Serialized ONNX ``TensorProto`` named ``data``, float32 [1,3,32,32].

``testcases.txt``
    A test-case list file for ``cnn.onnx`` (paths relative to ``samples/``).
"""

from __future__ import annotations

import argparse
import json
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IR_VERSION = 8
PRODUCER = "mgedump make_samples.py"

# One fixed seed per generated file.
SEEDS: dict[str, int] = {
    "cnn.onnx": 1001,
    "nhwc.onnx": 1002,
    "gray.onnx": 1003,
    "multi_input.onnx": 1004,
    "dynamic_batch.onnx": 1005,
    "ir3_mlp.onnx": 1006,
    "wide_mlp.onnx": 1007,
    "fan.onnx": 1008,
    "external/mlp.onnx": 1009,
    "external/function_const.onnx": 1010,
    "float16/layernorm_sum.onnx": 1011,
    "float16/rsqrt_quiet.onnx": 1012,
    "float16/overflow_chain.onnx": 1013,
    "float16/if_float.onnx": 1014,
    "float16/loop_float.onnx": 1015,
    "free_width.onnx": 1016,
    "free_dims.onnx": 1017,
    "int8/weight_outlier.onnx": 1018,
    "int8/mild_outlier.onnx": 1019,
    "int8/weight_only.onnx": 1020,
    "float16/wide_logits.onnx": 1021,
    "values/zipmap_classifier.onnx": 1022,
    "cnn_input.npy": 2001,
    "multi_input.npz": 2002,
    "cnn_input.pb": 2003,
    "smoke": 3001,
}

# Fixed timestamp for zip entries (np.savez would use the wall clock).
_ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)

_ORT_DTYPES: dict[str, type[np.generic]] = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
    "tensor(float16)": np.float16,
}

TESTCASES = """\
#rand(0,1)
images/cat.png
data/cnn_input.npy
data:data/cnn_input.pb
"""


# --------------------------------------------------------------------------
# helpers


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(SEEDS[name])


def _weight(rng: np.random.Generator, name: str, shape: Sequence[int], scale: float = 0.3) -> TensorProto:
    """A small random float32 initializer."""
    arr = (rng.standard_normal(shape) * scale).astype(np.float32)
    return numpy_helper.from_array(arr, name=name)


def _batchnorm_params(rng: np.random.Generator, prefix: str, channels: int) -> list[TensorProto]:
    """Non-trivial scale / bias / mean / var (var strictly positive)."""
    scale = rng.uniform(0.5, 1.5, channels).astype(np.float32)
    bias = rng.uniform(-0.2, 0.2, channels).astype(np.float32)
    mean = rng.uniform(-0.1, 0.1, channels).astype(np.float32)
    var = rng.uniform(0.5, 2.0, channels).astype(np.float32)
    return [
        numpy_helper.from_array(scale, name=f"{prefix}_scale"),
        numpy_helper.from_array(bias, name=f"{prefix}_bias"),
        numpy_helper.from_array(mean, name=f"{prefix}_mean"),
        numpy_helper.from_array(var, name=f"{prefix}_var"),
    ]


def _value_info(name: str, elem_type: int, shape: Sequence[int | str]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, list(shape))


def _make_model(graph: onnx.GraphProto, ir_version: int = IR_VERSION, opset: int = OPSET) -> onnx.ModelProto:
    # onnx 1.23 defaults to an IR version newer than onnxruntime accepts, so
    # always pin it together with the opset.
    return helper.make_model(
        graph,
        ir_version=ir_version,
        opset_imports=[helper.make_opsetid("", opset)],
        producer_name=PRODUCER,
    )


def _save_model(model: onnx.ModelProto, path: Path, full_check: bool = True) -> None:
    onnx.checker.check_model(model, full_check=full_check)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def _save_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write an archive in the same layout as ``np.savez`` (stored .npy entries),
    but with fixed zip timestamps so the bytes are reproducible."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, mode="w", compression=zipfile.ZIP_STORED) as zf:
        for key, value in arrays.items():
            info = zipfile.ZipInfo(key + ".npy", date_time=_ZIP_DATE_TIME)
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            with zf.open(info, "w", force_zip64=True) as fid:
                np.lib.format.write_array(fid, np.asanyarray(value))


def _write_image(path: Path, img: np.ndarray, params: Sequence[int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(path), img, list(params)):
        raise RuntimeError(f"cv2 could not write {path.name}")


# --------------------------------------------------------------------------
# models


def build_cnn() -> onnx.ModelProto:
    rng = _rng("cnn.onnx")
    inits = [
        _weight(rng, "conv1_W", [8, 3, 3, 3], 0.15),
        _weight(rng, "conv1_B", [8], 0.1),
        *_batchnorm_params(rng, "bn1", 8),
        _weight(rng, "conv2_W", [16, 8, 3, 3], 0.15),
        *_batchnorm_params(rng, "bn2", 16),
        _weight(rng, "fc_W", [10, 16], 0.5),
        _weight(rng, "fc_B", [10], 0.1),
    ]
    bn = ["scale", "bias", "mean", "var"]
    nodes = [
        helper.make_node(
            "Conv",
            ["data", "conv1_W", "conv1_B"],
            ["conv1"],
            name="conv1",
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
        ),
        helper.make_node(
            "BatchNormalization",
            ["conv1", *(f"bn1_{p}" for p in bn)],
            ["bn1"],
            name="bn1",
            epsilon=1e-5,
        ),
        helper.make_node("Relu", ["bn1"], ["relu1"], name="relu1"),
        helper.make_node(
            "MaxPool",
            ["relu1"],
            ["pool1"],
            name="pool1",
            kernel_shape=[2, 2],
            strides=[2, 2],
        ),
        helper.make_node(
            "Conv",
            ["pool1", "conv2_W"],
            ["conv2"],
            name="conv2",
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
        ),
        helper.make_node(
            "BatchNormalization",
            ["conv2", *(f"bn2_{p}" for p in bn)],
            ["bn2"],
            name="bn2",
            epsilon=1e-5,
        ),
        helper.make_node("Relu", ["bn2"], ["relu2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["relu2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc_W", "fc_B"], ["fc"], name="fc", transB=1),
        helper.make_node("Softmax", ["fc"], ["prob"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [_value_info("data", TensorProto.FLOAT, [1, 3, 32, 32])],
        [_value_info("prob", TensorProto.FLOAT, [1, 10])],
        initializer=inits,
    )
    return _make_model(graph)


def _conv_head(
    name: str,
    in_name: str,
    in_shape: Sequence[int | str],
    out_name: str,
    out_shape: Sequence[int | str],
    seed_key: str,
    channels: tuple[int, int],
    kernel: int,
    pads: int = 0,
    nhwc: bool = False,
) -> onnx.ModelProto:
    """[Transpose ->] Conv -> Relu -> GlobalAveragePool -> Flatten."""
    rng = _rng(seed_key)
    c_in, c_out = channels
    inits = [
        _weight(rng, "conv_W", [c_out, c_in, kernel, kernel]),
        _weight(rng, "conv_B", [c_out], 0.1),
    ]
    nodes: list[onnx.NodeProto] = []
    conv_in = in_name
    if nhwc:
        nodes.append(helper.make_node("Transpose", [in_name], ["nchw"], name="to_nchw", perm=[0, 3, 1, 2]))
        conv_in = "nchw"
    nodes += [
        helper.make_node(
            "Conv",
            [conv_in, "conv_W", "conv_B"],
            ["conv"],
            name="conv",
            kernel_shape=[kernel, kernel],
            pads=[pads] * 4,
        ),
        helper.make_node("Relu", ["conv"], ["relu"], name="relu"),
        helper.make_node("GlobalAveragePool", ["relu"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], [out_name], name="flatten", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        name,
        [_value_info(in_name, TensorProto.FLOAT, in_shape)],
        [_value_info(out_name, TensorProto.FLOAT, out_shape)],
        initializer=inits,
    )
    return _make_model(graph)


def build_nhwc() -> onnx.ModelProto:
    return _conv_head(
        "nhwc",
        "image",
        [1, 32, 32, 3],
        "logits",
        [1, 4],
        "nhwc.onnx",
        channels=(3, 4),
        kernel=3,
        nhwc=True,
    )


def build_gray() -> onnx.ModelProto:
    return _conv_head(
        "gray",
        "gray",
        [1, 1, 28, 28],
        "score",
        [1, 2],
        "gray.onnx",
        channels=(1, 2),
        kernel=5,
    )


def build_dynamic_batch() -> onnx.ModelProto:
    return _conv_head(
        "dynamic_batch",
        "x",
        ["N", 3, 16, 16],
        "y",
        ["N", 4],
        "dynamic_batch.onnx",
        channels=(3, 4),
        kernel=3,
        pads=1,
    )


def build_multi_input() -> onnx.ModelProto:
    rng = _rng("multi_input.onnx")
    inits = [
        _weight(rng, "W", [16, 16], 0.25),
        numpy_helper.from_array(np.array(1, dtype=np.int64), name="one"),
    ]
    nodes = [
        helper.make_node("MatMul", ["input:0", "W"], ["matmul"], name="matmul"),
        helper.make_node("Cast", ["len"], ["len_f"], name="cast_len", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["matmul", "len_f"], ["scaled"], name="mul"),
        helper.make_node("Relu", ["scaled"], ["output:0"], name="relu"),
        helper.make_node("Add", ["len", "one"], ["len_out"], name="len_plus_one"),
    ]
    graph = helper.make_graph(
        nodes,
        "multi_input",
        [
            _value_info("input:0", TensorProto.FLOAT, [1, 16]),
            _value_info("len", TensorProto.INT64, []),
        ],
        [
            _value_info("output:0", TensorProto.FLOAT, [1, 16]),
            _value_info("len_out", TensorProto.INT64, []),
        ],
        initializer=inits,
    )
    return _make_model(graph)


def build_ir3_mlp() -> onnx.ModelProto:
    rng = _rng("ir3_mlp.onnx")
    shapes = {"W1": [8, 16], "B1": [16], "W2": [16, 4], "B2": [4]}
    inits = [_weight(rng, name, shape) for name, shape in shapes.items()]
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "B1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["h_relu"], name="relu"),
        helper.make_node("Gemm", ["h_relu", "W2", "B2"], ["y"], name="fc2"),
    ]
    # IR < 4 convention: every initializer is also a graph input.
    inputs = [_value_info("x", TensorProto.FLOAT, [1, 8])] + [
        _value_info(name, TensorProto.FLOAT, shape) for name, shape in shapes.items()
    ]
    graph = helper.make_graph(
        nodes,
        "ir3_mlp",
        inputs,
        [_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=inits,
    )
    return _make_model(graph, ir_version=3, opset=8)


def _valid_conv(
    name: str, in_shape: Sequence[int | str], out_shape: Sequence[int | str], seed_key: str
) -> onnx.ModelProto:
    """x -> 3x3 Conv without padding -> Relu -> GlobalAveragePool -> Flatten: an input under 3x3 fails to run."""
    rng = _rng(seed_key)
    inits = [_weight(rng, "W", [int(out_shape[1]), 3, 3, 3], 0.2), _weight(rng, "B", [int(out_shape[1])], 0.1)]
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["y"], name="flatten", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        name,
        [_value_info("x", TensorProto.FLOAT, in_shape)],
        [_value_info("y", TensorProto.FLOAT, out_shape)],
        initializer=inits,
    )
    return _make_model(graph)


def build_free_width() -> onnx.ModelProto:
    """An OCR-like input with a free width: x [1,3,32,W]."""
    return _valid_conv("free_width", [1, 3, 32, "W"], [1, 8], "free_width.onnx")


def build_free_dims() -> onnx.ModelProto:
    """A detector-like input with every dim free but the channels: x [N,3,H,W]."""
    return _valid_conv("free_dims", ["N", 3, "H", "W"], ["N", 4], "free_dims.onnx")


def build_wide_mlp() -> onnx.ModelProto:
    """Two 256-wide MatMuls: float16 storage halves it (``--enable-ioc16``)."""
    rng = _rng("wide_mlp.onnx")
    inits = [_weight(rng, "W1", [256, 256], 0.05), _weight(rng, "W2", [256, 16], 0.05)]
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "W2"], ["y"], name="fc2"),
    ]
    graph = helper.make_graph(
        nodes,
        "wide_mlp",
        [_value_info("x", TensorProto.FLOAT, [1, 256])],
        [_value_info("y", TensorProto.FLOAT, [1, 16])],
        initializer=inits,
    )
    return _make_model(graph)


def build_fan() -> onnx.ModelProto:
    """One tensor read by two Convs, nodes unnamed: onnxruntime's float16 converter, with those ops kept
    float32, writes two Casts with one output name (a bug mgedump repairs)."""
    rng = _rng("fan.onnx")
    inits = [
        _weight(rng, "W0", [4, 3, 3, 3], 0.1),
        _weight(rng, "W1", [4, 4, 1, 1], 0.1),
        _weight(rng, "W2", [4, 4, 1, 1], 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "W0"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "W1"], ["a"]),
        helper.make_node("Conv", ["p", "W2"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "fan",
        [_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])],
        initializer=inits,
    )
    return _make_model(graph)


def build_if_branches() -> onnx.ModelProto:
    """An If whose branches are subgraphs (Neg or Abs of the outer ``x``)."""
    then = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["a"])], "then", [], [_value_info("a", TensorProto.FLOAT, [2])]
    )
    other = helper.make_graph(
        [helper.make_node("Abs", ["x"], ["b"])], "else", [], [_value_info("b", TensorProto.FLOAT, [2])]
    )
    node = helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other)
    graph = helper.make_graph(
        [node],
        "if_branches",
        [_value_info("c", TensorProto.BOOL, []), _value_info("x", TensorProto.FLOAT, [2])],
        [_value_info("y", TensorProto.FLOAT, [2])],
    )
    return _make_model(graph)


def build_half_relu() -> onnx.ModelProto:
    """A model that is float16 already."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "half_relu",
        [_value_info("x", TensorProto.FLOAT16, [2])],
        [_value_info("y", TensorProto.FLOAT16, [2])],
    )
    return _make_model(graph)


def build_gather_index() -> onnx.ModelProto:
    """Gather from a 10-row table by an int64 index input: random indices beyond 9 make it fail to run."""
    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), name="table")
    node = helper.make_node("Gather", ["table", "idx"], ["rows"], name="gather", axis=0)
    graph = helper.make_graph(
        [node],
        "gather_index",
        [_value_info("idx", TensorProto.INT64, [3])],
        [_value_info("rows", TensorProto.FLOAT, [3, 4])],
        initializer=[table],
    )
    return _make_model(graph)


def build_ir_too_new() -> onnx.ModelProto:
    """A Relu saved with IR version 99, beyond what onnxruntime reads."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "ir_too_new",
        [_value_info("x", TensorProto.FLOAT, [1, 4])],
        [_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    return _make_model(graph, ir_version=99)


def _mlp(seed_key: str) -> onnx.ModelProto:
    rng = _rng(seed_key)
    inits = [_weight(rng, "W1", [32, 64]), _weight(rng, "W2", [64, 8])]
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "W2"], ["y"], name="fc2"),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [_value_info("x", TensorProto.FLOAT, [1, 32])],
        [_value_info("y", TensorProto.FLOAT, [1, 8])],
        initializer=inits,
    )
    return _make_model(graph)


def _point_external(model: onnx.ModelProto, location: str) -> onnx.ModelProto:
    """Every initializer refers to external data at location (which the model's folder need not hold)."""
    for tensor in model.graph.initializer:
        tensor.ClearField("raw_data")
        tensor.ClearField("float_data")
        tensor.data_location = TensorProto.EXTERNAL
        entry = tensor.external_data.add()
        entry.key, entry.value = "location", location
    return model


def build_function_const() -> onnx.ModelProto:
    """A model-local function whose Constant node holds the weight: the weight lives in external data."""
    rng = _rng("external/function_const.onnx")
    weight = (rng.standard_normal((4, 4)) * 0.5).astype(np.float32)
    const = helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(weight, name="w_value"))
    function = helper.make_function(
        "local",
        "ScaledMatMul",
        ["a"],
        ["b"],
        [const, helper.make_node("MatMul", ["a", "w"], ["b"])],
        opset_imports=[helper.make_opsetid("", OPSET)],
    )
    graph = helper.make_graph(
        [helper.make_node("ScaledMatMul", ["x"], ["y"], domain="local", name="call")],
        "function_const",
        [_value_info("x", TensorProto.FLOAT, [1, 4])],
        [_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    return helper.make_model(
        graph,
        ir_version=IR_VERSION,
        producer_name=PRODUCER,
        functions=[function],
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)],
    )


def _layernorm(prefix: str, x: str, width: int, eps: float, sum_then_divide: bool) -> tuple[list, list, str]:
    """LayerNorm over the last axis, decomposed as exporters write it: mean, centred, variance, reciprocal square root."""
    inits = [numpy_helper.from_array(np.array(eps, np.float32), f"{prefix}_eps")]
    nodes = [
        helper.make_node("ReduceMean", [x], [f"{prefix}_mean"], name=f"{prefix}/mean", axes=[-1], keepdims=1),
        helper.make_node("Sub", [x, f"{prefix}_mean"], [f"{prefix}_d"], name=f"{prefix}/centre"),
        helper.make_node("Mul", [f"{prefix}_d", f"{prefix}_d"], [f"{prefix}_sq"], name=f"{prefix}/square"),
    ]
    if sum_then_divide:
        nodes += [
            helper.make_node(
                "ReduceSum", [f"{prefix}_sq", f"{prefix}_axes"], [f"{prefix}_sum"], name=f"{prefix}/sum", keepdims=1
            ),
            helper.make_node("Div", [f"{prefix}_sum", f"{prefix}_n"], [f"{prefix}_var"], name=f"{prefix}/variance"),
        ]
        inits.append(numpy_helper.from_array(np.array([-1], np.int64), f"{prefix}_axes"))
        inits.append(numpy_helper.from_array(np.array(float(width), np.float32), f"{prefix}_n"))
    else:
        nodes.append(
            helper.make_node(
                "ReduceMean", [f"{prefix}_sq"], [f"{prefix}_var"], name=f"{prefix}/variance", axes=[-1], keepdims=1
            )
        )
    nodes += [
        helper.make_node("Add", [f"{prefix}_var", f"{prefix}_eps"], [f"{prefix}_vareps"], name=f"{prefix}/add_eps"),
        helper.make_node("Sqrt", [f"{prefix}_vareps"], [f"{prefix}_std"], name=f"{prefix}/sqrt"),
        helper.make_node("Reciprocal", [f"{prefix}_std"], [f"{prefix}_rstd"], name=f"{prefix}/rsqrt"),
        helper.make_node("Mul", [f"{prefix}_d", f"{prefix}_rstd"], [f"{prefix}_out"], name=f"{prefix}/normalize"),
    ]
    return nodes, inits, f"{prefix}_out"


def _classifier(
    key: str, width: int, classes: int, nodes: list, inits: list, x: str, name: str, scale: float = 1.0
) -> onnx.ModelProto:
    rng = _rng(key)
    inits = [*inits, _weight(rng, "head_W", [width, classes], 0.3)]
    nodes = [
        *nodes,
        helper.make_node("MatMul", [x, "head_W"], ["logits"], name="head"),
        helper.make_node("Softmax", ["logits"], ["prob"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        name,
        [_value_info("x", TensorProto.FLOAT, [1, width])],
        [_value_info("prob", TensorProto.FLOAT, [1, classes])],
        initializer=inits,
    )
    return _make_model(graph)


def build_layernorm_sum() -> onnx.ModelProto:
    """Byte values (0..255) through a LayerNorm that sums the squares before dividing: the sum reaches ~3e5,
    beyond float16 (the failure of a file-type classifier's LayerNorm)."""
    nodes, inits, out = _layernorm("ln", "x", 64, 1e-6, sum_then_divide=True)
    return _classifier("float16/layernorm_sum.onnx", 64, 8, nodes, inits, out, "layernorm_sum")


def build_rsqrt_quiet() -> onnx.ModelProto:
    """A quiet signal (values ~1e-4) normalised: its variance (~1e-9) and epsilon (1e-12) are zero in float16, so
    the reciprocal square root goes to infinity. No float32 value leaves float16's range: only a comparison finds it."""
    nodes, inits, out = _layernorm("norm", "x", 32, 1e-12, sum_then_divide=False)
    return _classifier("float16/rsqrt_quiet.onnx", 32, 4, nodes, inits, out, "rsqrt_quiet")


def build_overflow_chain() -> onnx.ModelProto:
    """A chain whose middle values (~1e5) leave float16's range and come back (divided by 1000) at the end."""
    rng = _rng("float16/overflow_chain.onnx")
    inits = [
        numpy_helper.from_array((rng.uniform(1000, 2000, (8, 8))).astype(np.float32), "W_big"),
        numpy_helper.from_array(np.array(1e-3, np.float32), "shrink"),
        _weight(rng, "W_out", [8, 4], 0.5),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "W_big"], ["big"], name="amplify"),
        helper.make_node("Relu", ["big"], ["big_relu"], name="relu"),
        helper.make_node("Mul", ["big_relu", "shrink"], ["small"], name="shrink"),
        helper.make_node("MatMul", ["small", "W_out"], ["y"], name="out"),
    ]
    graph = helper.make_graph(
        nodes,
        "overflow_chain",
        [_value_info("x", TensorProto.FLOAT, [1, 8])],
        [_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=inits,
    )
    return _make_model(graph)


def build_if_float() -> onnx.ModelProto:
    """An If whose branches compute on floats, one of them with a weight of the outer graph."""
    rng = _rng("float16/if_float.onnx")
    then = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["t0"], name="then/matmul"),
            helper.make_node("Tanh", ["t0"], ["a"], name="then/tanh"),
        ],
        "then",
        [],
        [_value_info("a", TensorProto.FLOAT, [1, 6])],
    )
    other = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "x"], ["e0"], name="else/square"),
            helper.make_node("ReduceSum", ["e0", "axes"], ["e1"], name="else/sum", keepdims=1),
            helper.make_node("Expand", ["e1", "shape"], ["b"], name="else/expand"),
        ],
        "else",
        [],
        [_value_info("b", TensorProto.FLOAT, [1, 6])],
    )
    inits = [
        _weight(rng, "W", [6, 6], 0.5),
        numpy_helper.from_array(np.array([-1], np.int64), "axes"),
        numpy_helper.from_array(np.array([1, 6], np.int64), "shape"),
    ]
    nodes = [
        helper.make_node("If", ["c"], ["branch"], name="choose", then_branch=then, else_branch=other),
        helper.make_node("Add", ["branch", "x"], ["y"], name="residual"),
    ]
    graph = helper.make_graph(
        nodes,
        "if_float",
        [_value_info("c", TensorProto.BOOL, []), _value_info("x", TensorProto.FLOAT, [1, 6])],
        [_value_info("y", TensorProto.FLOAT, [1, 6])],
        initializer=inits,
    )
    return _make_model(graph)


def build_loop_float() -> onnx.ModelProto:
    """A Loop that carries a float state through a few steps of state = tanh(state @ W + x)."""
    rng = _rng("float16/loop_float.onnx")
    body = helper.make_graph(
        [
            helper.make_node("MatMul", ["s_in", "W"], ["m"], name="body/matmul"),
            helper.make_node("Add", ["m", "x"], ["pre"], name="body/add"),
            helper.make_node("Tanh", ["pre"], ["s_out"], name="body/tanh"),
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body/cond"),
        ],
        "body",
        [
            _value_info("i", TensorProto.INT64, []),
            _value_info("cond_in", TensorProto.BOOL, []),
            _value_info("s_in", TensorProto.FLOAT, [1, 6]),
        ],
        [_value_info("cond_out", TensorProto.BOOL, []), _value_info("s_out", TensorProto.FLOAT, [1, 6])],
    )
    inits = [
        _weight(rng, "W", [6, 6], 0.4),
        numpy_helper.from_array(np.array(4, np.int64), "steps"),
        numpy_helper.from_array(np.array(True), "go"),
        numpy_helper.from_array(np.zeros((1, 6), np.float32), "s0"),
    ]
    nodes = [helper.make_node("Loop", ["steps", "go", "s0"], ["y"], name="recur", body=body)]
    graph = helper.make_graph(
        nodes,
        "loop_float",
        [_value_info("x", TensorProto.FLOAT, [1, 6])],
        [_value_info("y", TensorProto.FLOAT, [1, 6])],
        initializer=inits,
    )
    return _make_model(graph)


def build_wide_logits() -> onnx.ModelProto:
    """A text recogniser's head, as a CRNN ends: 1024 sigmoid features summed by a Gemm into logits that reach ~35.
    Its weights are all positive and its bias takes back their mean, so each logit is a small difference of large
    sums: the float16 storage of the 1024 features alone moves the logits near zero by ~0.01 (io16xc32), and float16
    weights by ~0.2 (ioc16). Keeping the Gemm and the features' producers float32 holds them."""
    rng = _rng("float16/wide_logits.onnx")
    w1 = (rng.standard_normal((64, 1024)) * 0.4).astype(np.float32)
    w2 = rng.uniform(2.0, 6.0, (1024, 16)).astype(np.float32)
    probe = rng.random((256, 64)).astype(np.float32)  # the bias takes back the mean sum over inputs in [0, 1)
    # in float64: float32 matrix products round differently with the CPU's vector width, float64's do not reach float32
    wide = probe.astype(np.float64) @ w1.astype(np.float64)
    bias = -(1.0 / (1.0 + np.exp(-wide)) @ w2.astype(np.float64)).mean(axis=0)
    bias[3] += 14.0  # one class stands out: its logit reaches ~35, where float16 values are 0.0156 apart
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["pre"], name="embed"),
        helper.make_node("Sigmoid", ["pre"], ["features"], name="act"),
        helper.make_node("Gemm", ["features", "W2", "b2"], ["logits"], name="fc"),
    ]
    graph = helper.make_graph(
        nodes,
        "wide_logits",
        [_value_info("x", TensorProto.FLOAT, [1, 64])],
        [_value_info("logits", TensorProto.FLOAT, [1, 16])],
        initializer=[
            numpy_helper.from_array(w1, "W1"),
            numpy_helper.from_array(w2, "W2"),
            numpy_helper.from_array(bias.astype(np.float32), "b2"),
        ],
    )
    return _make_model(graph)


def build_weight_outlier() -> onnx.ModelProto:
    """A feature that is always zero (its Relu input is negative on data in [0, 1]) carries a weight of 500 in every
    output column of the head: int8's per-column scale (500/127) rounds every other weight of the head to zero, so
    int8 destroys the logits. The float model never notices: the feature is zero."""
    rng = _rng("int8/weight_outlier.onnx")
    w1 = (rng.standard_normal((32, 32)) * 0.3).astype(np.float32)
    w1[:, 0] = -0.05  # feature 0 is negative for any input in [0, 1]: the Relu makes it zero
    w2 = (rng.standard_normal((32, 8)) * 0.3).astype(np.float32)
    w2[0, :] = 500.0
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"], name="embed"),
        helper.make_node("Relu", ["h"], ["r"], name="act"),
        helper.make_node("MatMul", ["r", "W2"], ["logits"], name="head"),
    ]
    graph = helper.make_graph(
        nodes,
        "weight_outlier",
        [_value_info("x", TensorProto.FLOAT, [1, 32])],
        [_value_info("logits", TensorProto.FLOAT, [1, 8])],
        initializer=[numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(w2, "W2")],
    )
    return _make_model(graph)


def build_mild_outlier() -> onnx.ModelProto:
    """Three MatMuls; the head's columns each hold a weight of 12 on a dead feature, so int8 rounds the head's other
    weights coarsely (steps of 12/127): the head alone moves the logits beyond a tight maxerr, the rest holds."""
    rng = _rng("int8/mild_outlier.onnx")
    w1 = (rng.standard_normal((32, 32)) * 0.3).astype(np.float32)
    w1[:, 0] = -0.05
    w2 = (rng.standard_normal((32, 32)) * 0.3).astype(np.float32)
    w2[0, :] = 0.0
    w2[:, 0] = -0.05
    w3 = (rng.standard_normal((32, 8)) * 0.3).astype(np.float32)
    w3[0, :] = 12.0
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h1"], name="embed"),
        helper.make_node("Relu", ["h1"], ["r1"], name="act1"),
        helper.make_node("MatMul", ["r1", "W2"], ["h2"], name="mid"),
        helper.make_node("Relu", ["h2"], ["r2"], name="act2"),
        helper.make_node("MatMul", ["r2", "W3"], ["logits"], name="head"),
    ]
    graph = helper.make_graph(
        nodes,
        "mild_outlier",
        [_value_info("x", TensorProto.FLOAT, [1, 32])],
        [_value_info("logits", TensorProto.FLOAT, [1, 8])],
        initializer=[numpy_helper.from_array(w, n) for w, n in ((w1, "W1"), (w2, "W2"), (w3, "W3"))],
    )
    return _make_model(graph)


def build_weight_only() -> onnx.ModelProto:
    """Weight-only int8, as exporters write it: int8 weights -> Cast -> Mul by a per-column scale -> MatMul. The
    weights must stay int8 through --optimize-for-inference (constant folding would store them as float32)."""
    rng = _rng("int8/weight_only.onnx")
    q1 = rng.integers(-127, 128, (64, 64)).astype(np.int8)
    q2 = rng.integers(-127, 128, (64, 16)).astype(np.int8)
    inits = [
        numpy_helper.from_array(q1, "W1_q"),
        numpy_helper.from_array((rng.uniform(0.5, 1.5, 64) / 400).astype(np.float32), "W1_scale"),
        numpy_helper.from_array(q2, "W2_q"),
        numpy_helper.from_array((rng.uniform(0.5, 1.5, 16) / 400).astype(np.float32), "W2_scale"),
    ]
    nodes = [
        helper.make_node("Cast", ["W1_q"], ["W1_f"], name="w1/cast", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["W1_f", "W1_scale"], ["W1"], name="w1/scale"),
        helper.make_node("MatMul", ["x", "W1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="act"),
        helper.make_node("Cast", ["W2_q"], ["W2_f"], name="w2/cast", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["W2_f", "W2_scale"], ["W2"], name="w2/scale"),
        helper.make_node("MatMul", ["r", "W2"], ["y"], name="fc2"),
    ]
    graph = helper.make_graph(
        nodes,
        "weight_only",
        [_value_info("x", TensorProto.FLOAT, [1, 64])],
        [_value_info("y", TensorProto.FLOAT, [1, 16])],
        initializer=inits,
    )
    return _make_model(graph)


# --------------------------------------------------------------------------
# sequences, maps and optionals


def build_zipmap_classifier() -> onnx.ModelProto:
    """A scikit-learn-style classifier as skl2onnx exports it: LinearClassifier (softmax) + ZipMap, so
    ``probabilities`` is seq(map(int64, tensor(float))), one map of class -> probability per row."""
    rng = _rng("values/zipmap_classifier.onnx")
    classes = [0, 1, 2]
    coefficients = rng.normal(0.0, 1.0, (len(classes), 4)).astype(np.float32)
    intercepts = rng.normal(0.0, 0.5, len(classes)).astype(np.float32)
    linear = helper.make_node(
        "LinearClassifier",
        ["X"],
        ["label", "scores"],
        name="linear",
        domain="ai.onnx.ml",
        coefficients=coefficients.reshape(-1).tolist(),
        intercepts=intercepts.tolist(),
        classlabels_ints=classes,
        post_transform="SOFTMAX",
    )
    zipmap = helper.make_node(
        "ZipMap", ["scores"], ["probabilities"], name="zipmap", domain="ai.onnx.ml", classlabels_int64s=classes
    )
    probabilities = onnx.ValueInfoProto(name="probabilities")
    probabilities.type.sequence_type.elem_type.map_type.key_type = TensorProto.INT64
    probabilities.type.sequence_type.elem_type.map_type.value_type.CopyFrom(
        helper.make_tensor_type_proto(TensorProto.FLOAT, [])
    )
    graph = helper.make_graph(
        [linear, zipmap],
        "zipmap_classifier",
        [_value_info("X", TensorProto.FLOAT, ["N", 4])],
        [_value_info("label", TensorProto.INT64, ["N"]), probabilities],
    )
    return helper.make_model(
        graph,
        ir_version=IR_VERSION,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("ai.onnx.ml", 1)],
        producer_name=PRODUCER,
    )


def _sequence_type(elem_type: int) -> onnx.TypeProto:
    return helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem_type, None))


def build_sequences() -> onnx.ModelProto:
    """A sequence input and sequence and optional outputs: xs seq(tensor(float)) -> ys (xs with 2 * its first
    element appended), total (the sum of the concatenation), maybe optional(tensor(float)) (the doubled one)."""
    first = helper.make_tensor("first", TensorProto.INT64, [], [0])
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    nodes = [
        helper.make_node("SequenceAt", ["xs", "first"], ["x0"], name="at"),
        helper.make_node("Mul", ["x0", "two"], ["doubled"], name="double"),
        helper.make_node("SequenceInsert", ["xs", "doubled"], ["ys"], name="insert"),
        helper.make_node("ConcatFromSequence", ["ys"], ["joined"], name="concat", axis=0),
        helper.make_node("ReduceSum", ["joined"], ["total"], name="sum", keepdims=0),
        helper.make_node("Optional", ["doubled"], ["maybe"], name="optional"),
    ]
    graph = helper.make_graph(
        nodes,
        "sequences",
        [helper.make_value_info("xs", _sequence_type(TensorProto.FLOAT))],
        [
            helper.make_value_info("ys", _sequence_type(TensorProto.FLOAT)),
            _value_info("total", TensorProto.FLOAT, []),
            helper.make_value_info(
                "maybe", helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
            ),
        ],
        [first, two],
    )
    return _make_model(graph, opset=15)


# --------------------------------------------------------------------------
# writers: each registry entry writes its file(s) under the output folder


def _writer(build: Callable[[], onnx.ModelProto], full_check: bool = True) -> Callable[[Path], None]:
    return lambda path: _save_model(build(), path, full_check=full_check)


def _write_bytes(data: Callable[[], bytes]) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data())

    return write


def _write_external(build: Callable[[], onnx.ModelProto], data_name: str) -> Callable[[Path], None]:
    """Save with every tensor in one external data file beside the model (onnx's own writer)."""

    def write(path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / data_name).unlink(missing_ok=True)  # onnx appends to an existing data file
        model = build()
        onnx.checker.check_model(model)
        onnx.save_model(
            model,
            str(path),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=data_name,
            size_threshold=0,
            convert_attribute=True,
        )

    return write


def _write_unchecked(build: Callable[[], onnx.ModelProto]) -> Callable[[Path], None]:
    """Save a model onnx.checker would refuse (that is the point of it)."""

    def write(path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(build(), str(path))

    return write


@dataclass(frozen=True)
class Sample:
    """One sample model.

    Attributes:
        file: its path under ``samples/``.
        write: writes it (and any data file) at a path.
        spec: a ``-d`` spec that fits it.
        about: what it is for.
        error: for a deliberately bad model (or bad spec): a part of the one
            line ``mgedump MODEL -d SPEC`` must print on stderr, with exit 2.
        files: other files it needs beside it (external data).
        tags: what it exercises (``image``, ``external``, ``subgraph``, ``float16``, ...).
    """

    file: str
    write: Callable[[Path], None]
    spec: str
    about: str
    error: str | None = None
    files: tuple[str, ...] = ()
    tags: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "spec": self.spec,
            "about": self.about,
            "kind": "bad" if self.error else "good",
            "error": self.error,
            "files": list(self.files),
            "tags": list(self.tags),
        }


REGISTRY: tuple[Sample, ...] = (
    Sample(
        "cnn.onnx",
        _writer(build_cnn),
        "#rand(0,1)",
        "the main example: NCHW [1,3,32,32] -> Conv/BatchNorm/Relu/MaxPool/Gemm/Softmax -> prob [1,10]",
        tags=("image", "batchnorm", "int8"),
    ),
    Sample("nhwc.onnx", _writer(build_nhwc), "#rand(0,255)", "an NHWC image input [1,32,32,3]", tags=("image",)),
    Sample("gray.onnx", _writer(build_gray), "#rand(0,255)", "a one-channel NCHW input [1,1,28,28]", tags=("image",)),
    Sample(
        "multi_input.onnx",
        _writer(build_multi_input),
        "input:0:#rand(0,1);len:#const(7)",
        "two inputs: 'input:0' float32 [1,16] (':' in the name) and 'len' an int64 scalar",
        tags=("names",),
    ),
    Sample(
        "dynamic_batch.onnx",
        _writer(build_dynamic_batch),
        "x:#rand(0,1,2,...)",
        "a symbolic batch dim: x [N,3,16,16] -> y [N,4]",
        tags=("symbolic",),
    ),
    Sample(
        "ir3_mlp.onnx",
        _writer(build_ir3_mlp),
        "#rand(-1,1)",
        "IR 3 / opset 8: every weight is also listed as a graph input",
        tags=("ir3",),
    ),
    Sample(
        "free_width.onnx",
        _writer(build_free_width),
        "x:#rand(0,1,1,3,32,100)",
        "a free width (an OCR line): x [1,3,32,W]; a width of 1 cannot run",
        tags=("symbolic", "image"),
    ),
    Sample(
        "free_dims.onnx",
        _writer(build_free_dims),
        "#rand(0,1,1,3,64,64)",
        "every dim free but the channels (a detector): x [N,3,H,W]",
        tags=("symbolic", "image"),
    ),
    Sample(
        "wide_mlp.onnx",
        _writer(build_wide_mlp),
        "#rand(0,1)",
        "two 256-wide MatMuls: float16 halves its size",
        tags=("float16",),
    ),
    Sample(
        "fan.onnx",
        _writer(build_fan),
        "#rand(0,1)",
        "one tensor read by two Convs, unnamed nodes: onnxruntime's float16 converter writes duplicate Casts",
        tags=("float16",),
    ),
    Sample(
        "if_branches.onnx",
        _writer(build_if_branches),
        "c:#const(1);x:#rand(-1,1)",
        "an If with two subgraph branches",
        tags=("subgraph",),
    ),
    Sample(
        "half_relu.onnx", _writer(build_half_relu), "#rand(-1,1)", "a model that is float16 already", tags=("float16",)
    ),
    Sample(
        "external/mlp.onnx",
        _write_external(lambda: _mlp("external/mlp.onnx"), "mlp.weights"),
        "#rand(0,1)",
        "weights in an external data file",
        files=("external/mlp.weights",),
        tags=("external",),
    ),
    Sample(
        "external/function_const.onnx",
        _write_external(build_function_const, "function_const.data"),
        "#rand(0,1)",
        "a model-local function whose Constant node keeps its weight in external data",
        files=("external/function_const.data",),
        tags=("external", "function"),
    ),
    Sample(
        "float16/layernorm_sum.onnx",
        _writer(build_layernorm_sum),
        "#rand(0,255)",
        "byte values through a LayerNorm that sums squares: the sum leaves float16's range",
        tags=("float16",),
    ),
    Sample(
        "float16/rsqrt_quiet.onnx",
        _writer(build_rsqrt_quiet),
        "#rand(0,0.0001)",
        "a quiet signal normalised: in float16 its variance is zero and the reciprocal square root infinite",
        tags=("float16",),
    ),
    Sample(
        "float16/overflow_chain.onnx",
        _writer(build_overflow_chain),
        "#rand(0,10)",
        "values that leave float16's range in the middle of a chain and come back",
        tags=("float16",),
    ),
    Sample(
        "float16/if_float.onnx",
        _writer(build_if_float),
        "c:#const(1);x:#rand(-1,1)",
        "an If whose branches compute on floats, one with a weight of the outer graph",
        tags=("float16", "subgraph"),
    ),
    Sample(
        "float16/loop_float.onnx",
        _writer(build_loop_float),
        "#rand(-1,1)",
        "a Loop carrying a float state",
        tags=("float16", "subgraph"),
    ),
    Sample(
        "float16/wide_logits.onnx",
        _writer(build_wide_logits),
        "#rand(0,1)",
        "a Gemm summing 1024 sigmoid features into logits near 35, each a small difference of large sums",
        tags=("float16",),
    ),
    Sample(
        "int8/weight_outlier.onnx",
        _writer(build_weight_outlier),
        "#rand(0,1)",
        "a head whose every column holds one huge weight on a dead feature: int8 rounds the others to zero",
        tags=("int8",),
    ),
    Sample(
        "int8/mild_outlier.onnx",
        _writer(build_mild_outlier),
        "#rand(0,1)",
        "three MatMuls, the head's weights coarse in int8: the search keeps the head float",
        tags=("int8",),
    ),
    Sample(
        "int8/weight_only.onnx",
        _writer(build_weight_only),
        "#rand(0,1)",
        "weight-only int8 (int8 -> Cast -> Mul): --optimize-for-inference keeps the weights int8",
        tags=("int8",),
    ),
    Sample(
        "values/zipmap_classifier.onnx",
        _writer(build_zipmap_classifier),
        "#rand(-2,2,3,...)",
        "a scikit-learn-style classifier: LinearClassifier + ZipMap; probabilities is seq(map(int64, tensor(float)))",
        tags=("values", "ml"),
    ),
    Sample(
        "values/sequences.onnx",
        _writer(build_sequences),
        "#rand(-1,1,2,3)",
        "a sequence input xs seq(tensor(float)), outputs ys seq(tensor(float)), total and maybe optional(tensor(float))",
        tags=("values",),
    ),
    Sample(
        "bad/not_onnx.onnx",
        _write_bytes(lambda: b"hello, this is text\n"),
        "#rand(0,1)",
        "a text file named .onnx",
        error="not a valid ONNX model",
    ),
    Sample(
        "bad/truncated.onnx",
        _write_bytes(lambda: build_cnn().SerializeToString()[:3000]),
        "#rand(0,1)",
        "the first 3000 bytes of cnn.onnx",
        error="not a valid ONNX model",
    ),
    Sample(
        "bad/ir_too_new.onnx",
        _write_unchecked(build_ir_too_new),
        "#rand(0,1)",
        "IR version 99, newer than onnxruntime reads",
        error="IR version 99",
    ),
    Sample(
        "bad/gather_index.onnx",
        _writer(build_gather_index),
        "#rand(0,100)",
        "random indices beyond the table's 10 rows: the model fails to run on them",
        error="'idx'",
    ),
    Sample(
        "bad/unsafe_external.onnx",
        _write_unchecked(lambda: _point_external(_mlp("external/mlp.onnx"), "../outside.bin")),
        "#rand(0,1)",
        "external data outside the model's folder",
        error="not a safe relative path",
    ),
    Sample(
        "bad/missing_external.onnx",
        _write_unchecked(lambda: _point_external(_mlp("external/mlp.onnx"), "missing.bin")),
        "#rand(0,1)",
        "external data in a file that is not there",
        error="which is not a file beside the model",
    ),
)


# --------------------------------------------------------------------------
# images


def _gradient(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Horizontal and vertical ramps in [0, 1]."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    return xx / max(width - 1, 1), yy / max(height - 1, 1)


def make_cat() -> np.ndarray:
    gx, gy = _gradient(32, 32)
    img = np.stack([gx * 200, gy * 180 + 40, (1 - gx) * 160 + 60], axis=-1)
    img = img.astype(np.uint8)  # BGR
    cv2.rectangle(img, (4, 5), (13, 14), (30, 200, 240), thickness=-1)
    cv2.circle(img, (22, 20), 7, (220, 60, 40), thickness=-1)
    cv2.line(img, (2, 29), (29, 24), (255, 255, 255), thickness=1)
    return img


def make_dog() -> np.ndarray:
    height, width = 48, 64
    gx, gy = _gradient(height, width)
    img = np.stack([(1 - gy) * 220 + 20, gx * 160 + 50, (gx + gy) * 100 + 30], axis=-1).astype(np.uint8)  # BGR
    cv2.rectangle(img, (6, 8), (26, 30), (40, 40, 210), thickness=-1)
    cv2.rectangle(img, (34, 28), (58, 42), (200, 220, 30), thickness=-1)
    cv2.circle(img, (44, 14), 9, (250, 250, 250), thickness=-1)
    cv2.circle(img, (16, 38), 6, (10, 90, 10), thickness=-1)
    return img


def make_digit() -> np.ndarray:
    gx, gy = _gradient(28, 28)
    img = ((gx + gy) * 20).astype(np.uint8)  # faint dark background ramp
    cv2.circle(img, (14, 9), 5, 255, thickness=2)
    cv2.line(img, (18, 11), (10, 23), 255, thickness=2)
    cv2.line(img, (9, 23), (20, 23), 230, thickness=2)
    return img


# --------------------------------------------------------------------------
# arrays


def make_arrays(data_dir: Path) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)

    cnn_input = _rng("cnn_input.npy").random((1, 3, 32, 32), dtype=np.float32)
    np.save(data_dir / "cnn_input.npy", cnn_input)

    multi = {
        "input:0": _rng("multi_input.npz").standard_normal((1, 16)).astype(np.float32),
        "len": np.array(3, dtype=np.int64),
    }
    _save_npz(data_dir / "multi_input.npz", multi)

    pb_input = _rng("cnn_input.pb").random((1, 3, 32, 32), dtype=np.float32)
    tensor = numpy_helper.from_array(pb_input, name="data")
    (data_dir / "cnn_input.pb").write_bytes(tensor.SerializeToString())


# --------------------------------------------------------------------------
# verification


def _smoke(path: Path, rng: np.random.Generator) -> dict[str, list[str]]:
    """Run ``path`` in onnxruntime on random inputs (symbolic dims = 8).

    Returns a short description of inputs and outputs as onnxruntime sees them.
    """
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds: dict[str, Any] = {}
    for inp in sess.get_inputs():
        if inp.type.startswith("seq("):  # a sequence of two tensors
            feeds[inp.name] = [rng.random((2, 3)).astype(np.float32) for _ in range(2)]
            continue
        dtype = _ORT_DTYPES[inp.type]
        shape = [d if isinstance(d, int) else 8 for d in inp.shape]
        if np.issubdtype(dtype, np.floating):
            feeds[inp.name] = rng.random(shape).astype(dtype)
        else:
            feeds[inp.name] = rng.integers(1, 5, size=shape).astype(dtype)
    outputs = sess.run(None, feeds)
    for meta, value in zip(sess.get_outputs(), outputs, strict=True):
        if not meta.type.startswith("tensor("):  # a sequence, a map or an optional: onnxruntime ran it
            continue
        expected = [d if isinstance(d, int) else 8 for d in meta.shape]
        if list(value.shape) != expected:
            raise RuntimeError(f"{path.name}: output {meta.name!r} has shape {value.shape}, expected {expected}")
        if np.issubdtype(value.dtype, np.floating) and not np.all(np.isfinite(value)):
            raise RuntimeError(f"{path.name}: output {meta.name!r} is not finite")
    return {
        "inputs": [f"{i.name} {i.type} {i.shape}" for i in sess.get_inputs()],
        "outputs": [f"{o.name} {o.type} {o.shape}" for o in sess.get_outputs()],
    }


def _check_arrays(out: Path) -> None:
    with np.load(out / "data" / "multi_input.npz") as npz:
        if sorted(npz.files) != ["input:0", "len"]:
            raise RuntimeError(f"multi_input.npz keys: {npz.files}")
        if npz["input:0"].shape != (1, 16) or npz["input:0"].dtype != np.float32:
            raise RuntimeError("multi_input.npz: bad 'input:0'")
        if npz["len"].shape != () or int(npz["len"]) != 3:
            raise RuntimeError("multi_input.npz: bad 'len'")
    tensor = TensorProto()
    tensor.ParseFromString((out / "data" / "cnn_input.pb").read_bytes())
    if tensor.name != "data" or numpy_helper.to_array(tensor).shape != (1, 3, 32, 32):
        raise RuntimeError("cnn_input.pb: bad tensor")
    expected_images = {
        "cat.png": (32, 32, 3),
        "dog.jpg": (48, 64, 3),
        "digit.png": (28, 28),
    }
    for name, shape in expected_images.items():
        img = cv2.imread(str(out / "images" / name), cv2.IMREAD_UNCHANGED)
        if img is None or img.shape != shape:
            raise RuntimeError(f"{name}: expected shape {shape}")


# --------------------------------------------------------------------------


def generate(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for sample in REGISTRY:
        sample.write(out / sample.file)
    registry = {
        "about": "the sample models; written by scripts/make_samples.py",
        "models": [s.to_json() for s in REGISTRY],
    }
    (out / "models.json").write_text(json.dumps(registry, indent=1) + "\n", encoding="utf-8", newline="\n")

    png = [cv2.IMWRITE_PNG_COMPRESSION, 9]
    _write_image(out / "images" / "cat.png", make_cat(), png)
    _write_image(out / "images" / "dog.jpg", make_dog(), [cv2.IMWRITE_JPEG_QUALITY, 90])
    _write_image(out / "images" / "digit.png", make_digit(), png)

    make_arrays(out / "data")
    (out / "testcases.txt").write_text(TESTCASES, encoding="utf-8", newline="\n")


def verify(out: Path) -> None:
    rng = _rng("smoke")
    for sample in REGISTRY:
        if sample.error:
            continue
        info = _smoke(out / sample.file, rng)
        print(f"{sample.file}: inputs {info['inputs']}; outputs {info['outputs']}")
    _check_arrays(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent.parent / "samples",
        help="output folder (default: samples/ next to scripts/)",
    )
    args = parser.parse_args(argv)
    out: Path = args.out
    generate(out)
    verify(out)
    print(f"wrote samples to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
