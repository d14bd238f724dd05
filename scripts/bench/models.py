"""Models more than one section measures: a small CNN and its bundle (``load``, ``report``), a ~1 GiB model and
ResNet-50 from the onnx package (``pack``, ``rss``, ``zip``), and the real models of
``scripts/check_real_models.py`` (``float16``, ``int8``). Each is made in a worker process."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import SCRIPTS, Context, console_script, log, run_process, run_worker


@dataclass
class Model:
    """A model to pack: its label, the .onnx file, every file it occupies on disk, its targets, and the fewest
    rounds that measure them (``--runs`` when more; not with ``--quick``)."""

    label: str
    path: Path
    files: list[Path]
    max_a_over_c: float
    a_below_b: bool = False
    max_rss_a: float | None = None
    min_runs: int = 1

    @property
    def disk_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.files)


def big_model_worker(path: str, dim: int, layers: int) -> list[str]:
    """Write a MatMul + Tanh chain with [dim, dim] float32 weights in one external data file; return its files."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    target = Path(path)
    data = target.with_name(target.name + ".data")
    for stale in (target, data):
        stale.unlink(missing_ok=True)  # onnx appends to an existing data file
    rng = np.random.default_rng(0)
    scale = np.float32(1.0 / np.sqrt(dim))
    weights, nodes, current = [], [], "x"
    for i in range(layers):
        w = rng.standard_normal((dim, dim), dtype=np.float32)
        w *= scale
        weights.append(numpy_helper.from_array(w, f"w{i}"))
        del w
        out = "y" if i == layers - 1 else f"t{i}"
        nodes += [helper.make_node("MatMul", [current, f"w{i}"], [f"m{i}"]), helper.make_node("Tanh", [f"m{i}"], [out])]
        current = out
    graph = helper.make_graph(
        nodes,
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, dim])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, dim])],
        initializer=weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    del weights, graph
    onnx.save_model(model, str(target), save_as_external_data=True, all_tensors_to_one_file=True, location=data.name)
    return [str(target), str(data)]


def big_model_files(ctx: Context) -> tuple[int, list[Path]]:
    """The generated ~1 GiB model (tiny with --quick), made once per invocation: its dim and files."""

    def make() -> tuple[int, list[Path]]:
        dim = 1024 if ctx.quick else 8192
        log(f"generating the [{dim},{dim}] x 4 model")
        return dim, [
            Path(f) for f in run_worker("big_model", ctx.tmp, path=str(ctx.tmp / "big.onnx"), dim=dim, layers=4)
        ]

    return ctx.once("big_model", make)


def pack_models(ctx: Context) -> list[Model]:
    resnet = Path(run_worker("onnx_data", ctx.tmp, relpath="backend/test/data/light/light_resnet50.onnx"))
    dim, files = big_model_files(ctx)
    return [
        Model(
            "ResNet-50 (onnx `light_resnet50.onnx`)", resnet, [resnet], max_a_over_c=1.15, a_below_b=True, min_runs=15
        ),
        Model(f"MatMul chain 4 x [{dim},{dim}] (external data)", files[0], files, max_a_over_c=1.1, max_rss_a=1.3),
    ]


def onnx_data_worker(relpath: str) -> str:
    """The path of a file that the onnx package ships."""
    import onnx

    return os.path.join(os.path.dirname(onnx.__file__), relpath)


def small_cnn_worker(path: str, size: int) -> dict[str, int]:
    """A small CNN with a free batch: four 3x3 Conv/Relu/MaxPool blocks, global pooling, a MatMul, Softmax."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, current, cin = [], [], "x", 3
    for i, cout in enumerate((16, 32, 32, 64)):
        scale = 1 / np.sqrt(9 * cin)
        inits += [
            numpy_helper.from_array((rng.standard_normal((cout, cin, 3, 3)) * scale).astype(np.float32), f"w{i}"),
            numpy_helper.from_array(np.zeros(cout, np.float32), f"b{i}"),
        ]
        nodes += [
            helper.make_node("Conv", [current, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1], name=f"conv{i}"),
            helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"),
            helper.make_node("MaxPool", [f"r{i}"], [f"p{i}"], kernel_shape=[2, 2], strides=[2, 2], name=f"pool{i}"),
        ]
        current, cin = f"p{i}", cout
    inits.append(numpy_helper.from_array((rng.standard_normal((cin, 10)) * 0.1).astype(np.float32), "fc"))
    nodes += [
        helper.make_node("GlobalAveragePool", [current], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "fc"], ["logits"], name="fc"),
        helper.make_node("Softmax", ["logits"], ["prob"], name="softmax"),
    ]
    graph = helper.make_graph(
        nodes,
        "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, size, size])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["N", 10])],
        initializer=inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return {"size": size}


def small_cnn_bundle(ctx: Context, cases: int) -> Path:
    """The small CNN packed with this many random test cases (made once per invocation)."""

    def make() -> Path:
        model = ctx.tmp / "small_cnn.onnx"
        if not model.exists():
            run_worker("small_cnn", ctx.tmp, path=str(model), size=64)
        bundle = ctx.tmp / f"small_cnn_{cases}.mgetest"
        specs = [arg for _ in range(cases) for arg in ("-d", "x:#rand(0,1,1,...)")]
        packed = run_process([*console_script("mgedump"), model, *specs, "-o", bundle, "-q"])
        if not packed.ok:
            raise RuntimeError(f"mgedump could not pack the small CNN ({packed.failure()})")
        return bundle

    return ctx.once(f"small_cnn_{cases}", make)


def fetch_real_worker() -> dict[str, str]:
    """The real models of scripts/check_real_models.py, fetched and extracted (in a worker: unzipping costs memory)."""
    sys.path.insert(0, str(SCRIPTS))
    import check_real_models as real

    return {name: str(path) for name, path in real.fetch(real.DEFAULT_CACHE).items()}


# the functions of this file that run in a worker process (python scripts/bench.py --worker NAME ...)
WORKERS: dict[str, Callable[..., Any]] = {
    "big_model": big_model_worker,
    "onnx_data": onnx_data_worker,
    "fetch_real": fetch_real_worker,
    "small_cnn": small_cnn_worker,
}
