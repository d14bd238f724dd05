"""The ``big`` section: ``mgerun`` on a bundle whose weights are external data, against onnxruntime alone.

A MatMul chain on one input row (onnx.helper; [4096, 4096] float32 weights, one external file per tensor), 1 GiB
(64 MiB with ``--quick``), packed by ``mgedump``; then, alternated, ``mgerun B --iter 1`` and onnxruntime alone (a
script: import onnxruntime, open the model as given, run it once), whole processes. ``mgerun`` reads the weights
where they lie in the bundle (docs/bundle.md, "Reading the weights in place"): only the small model member is
copied, and the weights' hash is checked while onnxruntime reads them. Target: ``mgerun`` / onnxruntime alone at
most 1.3.

Then float16 of the same model, against a plain pack, alternated, whole processes: ``--optimize-for-inference
--enable-ioc16`` at ``--maxerr 1e-2`` (every MatMul converted) and at ``--maxerr 1e-3`` (the search ends on every
MatMul kept float32). Peak RSS is the largest of the process and its children (the search runs its candidates in
one). Targets (float16 at ``--maxerr 1e-2``): its wall at most 10x a plain pack's, its peak RSS at most 3x the
weights. The model and bundles are deleted at the end of the section.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from typing import Any

from .common import (
    Check,
    Context,
    Table,
    alternate,
    at_most,
    console_script,
    fmt,
    fmt_ratio,
    log,
    median,
    mib,
    ratio,
    run_process,
    run_worker,
)

DIM = 4096

ALONE = """
import sys, numpy as np, onnxruntime as ort
session = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
session.run(None, {"x": np.ones((1, session.get_inputs()[0].shape[1]), np.float32)})
"""


def make_worker(folder: str, mib_total: int) -> dict[str, Any]:
    """The chain of ``mib_total`` MiB of weights, one external file per tensor, in ``folder``."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    layers = max(1, (mib_total << 20) // (DIM * DIM * 4))
    nodes, inits, last = [], [], "x"
    for k in range(layers):
        w = (rng.standard_normal((DIM, DIM), dtype=np.float32) / 64).astype(np.float32)
        with open(f"{folder}/w{k}.bin", "wb") as f:
            f.write(w.tobytes())
        tensor = TensorProto(name=f"w{k}", data_type=TensorProto.FLOAT, dims=[DIM, DIM])
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", f"w{k}.bin"), ("offset", "0"), ("length", str(w.nbytes))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        inits.append(tensor)
        nodes.append(helper.make_node("MatMul", [last, f"w{k}"], [f"m{k}"]))
        last = f"m{k}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, DIM])],
        [helper.make_tensor_value_info(last, TensorProto.FLOAT, [1, DIM])], inits,
    )  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), f"{folder}/chain.onnx")
    return {"layers": layers, "bytes": layers * DIM * DIM * 4}


WORKERS: dict[str, Callable[..., Any]] = {"big_external_chain": make_worker}

FLOAT16 = {  # what is compared with a plain pack: a label and its flags
    "ioc16 at 1e-2": ["--optimize-for-inference", "--enable-ioc16", "--maxerr", "1e-2"],
    "ioc16 at 1e-3": ["--optimize-for-inference", "--enable-ioc16", "--maxerr", "1e-3"],
}
TARGET16 = "ioc16 at 1e-2"


def float16_runs(folder: Any, runs: int) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    """A plain pack and each float16 pack of ``folder/chain.onnx``, alternated: walls (s) and peak RSS (KiB)."""
    plain = ["-q"]
    argvs = {"plain pack": plain, **{label: [*flags, "-q"] for label, flags in FLOAT16.items()}}
    walls: dict[str, list[float]] = {name: [] for name in argvs}
    peaks: dict[str, list[int]] = {name: [] for name in argvs}
    out = folder / "f16.mgetest"
    for _, name in alternate(list(argvs), runs):
        done = run_process(
            [*console_script("mgedump"), folder / "chain.onnx", "-d", "#rand(0,1)", "-o", out, *argvs[name]]
        )
        out.unlink(missing_ok=True)
        if not done.ok:
            raise RuntimeError(f"{name} failed: {done.failure()}")
        walls[name].append(done.wall_s)
        peaks[name].append(done.maxrss_kib)
    return walls, peaks


def section(ctx: Context) -> Table:
    size = 64 if ctx.quick else 1024
    folder = ctx.tmp / "big"
    folder.mkdir()
    try:
        log(f"big: a {size} MiB MatMul chain, its weights in external files")
        made = run_worker("big_external_chain", ctx.tmp, folder=str(folder), mib_total=size)
        bundle = folder / "chain.mgetest"
        packed = run_process(
            [*console_script("mgedump"), folder / "chain.onnx", "-d", "#rand(0,1)", "-o", bundle, "-q"]
        )
        if not packed.ok:
            raise RuntimeError(f"mgedump failed: {packed.failure()}")
        commands = {
            "mgerun": [*console_script("mgerun"), bundle, "--iter", "1", "-q"],
            "onnxruntime alone": [sys.executable, "-c", ALONE, folder / "chain.onnx"],
        }
        walls: dict[str, list[float]] = {name: [] for name in commands}
        peaks: dict[str, list[int]] = {name: [] for name in commands}
        for _, name in alternate(list(commands), max(2, ctx.runs)):
            done = run_process(commands[name])
            if not done.ok:
                raise RuntimeError(f"{name} failed: {done.failure()}")
            walls[name].append(done.wall_s)
            peaks[name].append(done.maxrss_kib)
        bundle.unlink()
        log(f"big: float16 of the {size} MiB model against a plain pack")
        walls16, peaks16 = float16_runs(folder, max(2, min(ctx.runs, 3)))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    run, alone = median(walls["mgerun"]), median(walls["onnxruntime alone"])
    wall_ratio = ratio(run, alone)
    table = Table(
        "A bundle of big external weights",
        f"A MatMul chain on one input row, {made['layers']} x [{DIM}, {DIM}] float32 weights in external files "
        f"({mib(made['bytes'])}), packed; `mgerun B --iter 1` against onnxruntime alone (open the model as given, "
        "run once), whole processes, alternated. mgerun reads the weights where they lie in the bundle (no copy). "
        "Target: at most 1.3. Then float16 of the same model against a plain pack, alternated: "
        "`--optimize-for-inference --enable-ioc16` at `--maxerr 1e-2` (every MatMul converted) and `1e-3` (the "
        "search ends on every MatMul kept float32); peak RSS is the largest of the process and its children. "
        "Targets at 1e-2: wall at most 10x a plain pack's, peak RSS at most 3x the weights.",
        ["what", "value"],
        rows=[
            ["mgedump (pack), wall (s)", fmt(packed.wall_s)],
            ["mgerun, median wall (s)", fmt(run)],
            ["onnxruntime alone, median wall (s)", fmt(alone)],
            ["mgerun peak RSS", mib(max(peaks["mgerun"]) * 1024)],
            ["onnxruntime alone peak RSS", mib(max(peaks["onnxruntime alone"]) * 1024)],
            ["**mgerun / onnxruntime alone**", f"**{fmt_ratio(wall_ratio)}**"],
        ],
    )
    plain16 = median(walls16["plain pack"])
    table.rows.append(["plain pack, median wall (s)", fmt(plain16)])
    table.rows.append(["plain pack peak RSS / weights", fmt_ratio(max(peaks16["plain pack"]) * 1024 / made["bytes"])])
    ratios16 = {}
    for label, flags in FLOAT16.items():
        ratios16[label] = (
            ratio(median(walls16[label]), plain16),
            max(peaks16[label]) * 1024 / made["bytes"],
        )
        table.rows.append([f"`{' '.join(flags)}`, median wall (s)", fmt(median(walls16[label]))])
        table.rows.append([f"**{label} / plain pack (wall)**", f"**{fmt_ratio(ratios16[label][0])}**"])
        table.rows.append(
            [
                f"**{label} peak RSS / weights**",
                f"**{fmt_ratio(ratios16[label][1])}** ({mib(max(peaks16[label]) * 1024)})",
            ]
        )
    wall16, peak16 = ratios16[TARGET16]
    table.checks.append(
        Check(
            f"big: float16 ({TARGET16}) / plain pack ({mib(made['bytes'])})",
            "<= 10",
            fmt_ratio(wall16),
            at_most(wall16, 10),
        )
    )
    table.checks.append(
        Check(f"big: float16 ({TARGET16}) peak RSS / weights", "<= 3", fmt_ratio(peak16), at_most(peak16, 3))
    )
    table.checks.append(
        Check(
            f"big: mgerun / onnxruntime alone ({mib(made['bytes'])})",
            "<= 1.3",
            fmt_ratio(wall_ratio),
            at_most(wall_ratio, 1.3),
        )  # fmt: skip
    )
    return table
