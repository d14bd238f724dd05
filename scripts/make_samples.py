#!/usr/bin/env python3
"""Generate the small, deterministic sample files in ``samples/``.

Usage::

    python scripts/make_samples.py [--out DIR]

``DIR`` defaults to the ``samples/`` folder next to ``scripts/``.  Every file
is built from fixed seeds (one ``np.random.default_rng`` per file), so running
the script twice gives byte-identical output.  Models are built with
``onnx.helper`` only and are checked with ``onnx.checker`` and smoke-run in
onnxruntime before the script exits.

Models (opset 13 / IR 8 unless noted):

``cnn.onnx``
    The main example: ``data`` float32 [1,3,32,32] (NCHW) -> ``prob`` float32
    [1,10].  Conv -> BatchNormalization -> Relu -> MaxPool -> Conv ->
    BatchNormalization -> Relu -> GlobalAveragePool -> Flatten -> Gemm ->
    Softmax.  Used with ``testcases.txt`` and the image / array inputs.
``nhwc.onnx``
    Image model with an NHWC input: ``image`` float32 [1,32,32,3] ->
    ``logits`` float32 [1,4].  Exercises layout detection for images.
``gray.onnx``
    Single-channel NCHW model: ``gray`` float32 [1,1,28,28] -> ``score``
    float32 [1,2].  Fits ``images/digit.png``.
``multi_input.onnx``
    Two inputs whose names need care: ``input:0`` float32 [1,16] and ``len``
    int64 scalar (rank 0); outputs ``output:0`` float32 [1,16] and ``len_out``
    int64 scalar.  Exercises ``name:value`` parsing with ':' in names, int64
    and rank-0 inputs.
``dynamic_batch.onnx``
    Symbolic batch dimension: ``x`` float32 [N,3,16,16] -> ``y`` float32
    [N,4].
``ir3_mlp.onnx``
    Old-style model (IR 3, opset 8) whose initializers are also listed in
    ``graph.input``: ``x`` float32 [1,8] -> ``y`` float32 [1,4].

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
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

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


def _weight(
    rng: np.random.Generator, name: str, shape: Sequence[int], scale: float = 0.3
) -> TensorProto:
    """A small random float32 initializer."""
    arr = (rng.standard_normal(shape) * scale).astype(np.float32)
    return numpy_helper.from_array(arr, name=name)


def _batchnorm_params(
    rng: np.random.Generator, prefix: str, channels: int
) -> list[TensorProto]:
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


def _value_info(
    name: str, elem_type: int, shape: Sequence[int | str]
) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, list(shape))


def _make_model(
    graph: onnx.GraphProto, ir_version: int = IR_VERSION, opset: int = OPSET
) -> onnx.ModelProto:
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
            "Conv", ["data", "conv1_W", "conv1_B"], ["conv1"], name="conv1",
            kernel_shape=[3, 3], pads=[1, 1, 1, 1],
        ),
        helper.make_node(
            "BatchNormalization", ["conv1", *(f"bn1_{p}" for p in bn)], ["bn1"],
            name="bn1", epsilon=1e-5,
        ),
        helper.make_node("Relu", ["bn1"], ["relu1"], name="relu1"),
        helper.make_node(
            "MaxPool", ["relu1"], ["pool1"], name="pool1",
            kernel_shape=[2, 2], strides=[2, 2],
        ),
        helper.make_node(
            "Conv", ["pool1", "conv2_W"], ["conv2"], name="conv2",
            kernel_shape=[3, 3], pads=[1, 1, 1, 1],
        ),
        helper.make_node(
            "BatchNormalization", ["conv2", *(f"bn2_{p}" for p in bn)], ["bn2"],
            name="bn2", epsilon=1e-5,
        ),
        helper.make_node("Relu", ["bn2"], ["relu2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["relu2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1),
        helper.make_node(
            "Gemm", ["flat", "fc_W", "fc_B"], ["fc"], name="fc", transB=1
        ),
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
        nodes.append(
            helper.make_node(
                "Transpose", [in_name], ["nchw"], name="to_nchw", perm=[0, 3, 1, 2]
            )
        )
        conv_in = "nchw"
    nodes += [
        helper.make_node(
            "Conv", [conv_in, "conv_W", "conv_B"], ["conv"], name="conv",
            kernel_shape=[kernel, kernel], pads=[pads] * 4,
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
        "nhwc", "image", [1, 32, 32, 3], "logits", [1, 4],
        "nhwc.onnx", channels=(3, 4), kernel=3, nhwc=True,
    )


def build_gray() -> onnx.ModelProto:
    return _conv_head(
        "gray", "gray", [1, 1, 28, 28], "score", [1, 2],
        "gray.onnx", channels=(1, 2), kernel=5,
    )


def build_dynamic_batch() -> onnx.ModelProto:
    return _conv_head(
        "dynamic_batch", "x", ["N", 3, 16, 16], "y", ["N", 4],
        "dynamic_batch.onnx", channels=(3, 4), kernel=3, pads=1,
    )


def build_multi_input() -> onnx.ModelProto:
    rng = _rng("multi_input.onnx")
    inits = [
        _weight(rng, "W", [16, 16], 0.25),
        numpy_helper.from_array(np.array(1, dtype=np.int64), name="one"),
    ]
    nodes = [
        helper.make_node("MatMul", ["input:0", "W"], ["matmul"], name="matmul"),
        helper.make_node(
            "Cast", ["len"], ["len_f"], name="cast_len", to=TensorProto.FLOAT
        ),
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
    img = np.stack(
        [(1 - gy) * 220 + 20, gx * 160 + 50, (gx + gy) * 100 + 30], axis=-1
    ).astype(np.uint8)  # BGR
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
        "input:0": _rng("multi_input.npz")
        .standard_normal((1, 16))
        .astype(np.float32),
        "len": np.array(3, dtype=np.int64),
    }
    _save_npz(data_dir / "multi_input.npz", multi)

    pb_input = _rng("cnn_input.pb").random((1, 3, 32, 32), dtype=np.float32)
    tensor = numpy_helper.from_array(pb_input, name="data")
    (data_dir / "cnn_input.pb").write_bytes(tensor.SerializeToString())


# --------------------------------------------------------------------------
# verification


def _smoke(path: Path, rng: np.random.Generator) -> dict[str, list[str]]:
    """Run ``path`` in onnxruntime on random inputs (symbolic dims = 2).

    Returns a short description of inputs and outputs as onnxruntime sees them.
    """
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds: dict[str, np.ndarray] = {}
    for inp in sess.get_inputs():
        dtype = _ORT_DTYPES[inp.type]
        shape = [d if isinstance(d, int) else 2 for d in inp.shape]
        if np.issubdtype(dtype, np.floating):
            feeds[inp.name] = rng.random(shape).astype(dtype)
        else:
            feeds[inp.name] = rng.integers(1, 5, size=shape).astype(dtype)
    outputs = sess.run(None, feeds)
    for meta, value in zip(sess.get_outputs(), outputs):
        expected = [d if isinstance(d, int) else 2 for d in meta.shape]
        if list(value.shape) != expected:
            raise RuntimeError(
                f"{path.name}: output {meta.name!r} has shape {value.shape}, "
                f"expected {expected}"
            )
        if np.issubdtype(value.dtype, np.floating) and not np.all(
            np.isfinite(value)
        ):
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


MODELS = {
    "cnn.onnx": build_cnn,
    "nhwc.onnx": build_nhwc,
    "gray.onnx": build_gray,
    "multi_input.onnx": build_multi_input,
    "dynamic_batch.onnx": build_dynamic_batch,
    "ir3_mlp.onnx": build_ir3_mlp,
}


def generate(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, build in MODELS.items():
        _save_model(build(), out / name)

    png = [cv2.IMWRITE_PNG_COMPRESSION, 9]
    _write_image(out / "images" / "cat.png", make_cat(), png)
    _write_image(out / "images" / "dog.jpg", make_dog(), [cv2.IMWRITE_JPEG_QUALITY, 90])
    _write_image(out / "images" / "digit.png", make_digit(), png)

    make_arrays(out / "data")
    (out / "testcases.txt").write_text(TESTCASES, encoding="utf-8", newline="\n")


def verify(out: Path) -> None:
    rng = _rng("smoke")
    for name in MODELS:
        info = _smoke(out / name, rng)
        print(f"{name}: inputs {info['inputs']}; outputs {info['outputs']}")
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
