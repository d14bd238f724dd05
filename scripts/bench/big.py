"""The ``big`` section: bundles of big external weights, and a model of many small ones.

MatMul chains on one input row (onnx.helper; float32 weights, one external file per tensor):

- 1 GiB and 3 GiB of [4096, 4096] weights (64 MiB with ``--quick``), packed by ``mgedump``; then, alternated,
  ``mgerun B --iter 1`` and onnxruntime alone (a script: import onnxruntime, open the model as given, run it once),
  whole processes. ``mgerun`` reads the weights where they lie in the bundle (docs/bundle.md, "Reading the weights
  in place"): only the small model member is copied, and the weights' hash is checked while onnxruntime reads
  them. Target: ``mgerun`` / onnxruntime alone at most 1.3.
- 31 MiB in 2,000 files of [64, 64] weights (200 with ``--quick``): ``mgedump M -d "#rand(0,1)" -o OUT`` against
  the floor (a script: import onnxruntime, open the model, run it once, write the input, the output, the model and
  its weight files into a stored zip), alternated. Target: at most 1.15.

- float16 of the 1 GiB chain (64 MiB with ``--quick``): ``--optimize-for-inference --enable-ioc16`` at ``--maxerr
  1e-2`` (every MatMul converted) and at ``1e-3`` (the search ends on every MatMul kept float32), each against a
  plain pack, alternated; peak RSS is the largest of the process and its children (the search runs its candidates
  in one). Targets at 1e-2: wall at most 10x a plain pack's, peak RSS at most 3x the weights (docs/float16.md,
  "What a search costs").

``--sections big:many`` runs the 2,000 files alone (parts ``gib``, ``many``, ``float16``; ``+`` joins several).

Each pair's ratio is taken within its round (the two ran back to back, under the same load); the figure is the
median of those ratios. CPU time (user + system, each process's own) is shown beside the wall time: on a busy
machine a wall time grows with it. The models and bundles are deleted at the end of the section.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .common import (
    Check,
    Context,
    ProcResult,
    Table,
    alternate,
    at_most,
    console_script,
    fmt,
    fmt_ratio,
    log,
    median,
    mib,
    run_process,
    run_worker,
)

DIM = 4096
MANY_DIM = 64

ALONE = """
import sys, numpy as np, onnxruntime as ort
session = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
session.run(None, {"x": np.ones((1, session.get_inputs()[0].shape[1]), np.float32)})
"""

# the floor of packing a model of many files: run it once, then store what a bundle holds in a zip
FLOOR = """
import io, os, sys, zipfile
import numpy as np, onnxruntime as ort
model, out = sys.argv[1], sys.argv[2]
session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
arg = session.get_inputs()[0]
x = np.random.default_rng(0).uniform(0, 1, [d if isinstance(d, int) else 1 for d in arg.shape]).astype(np.float32)
outputs = session.run(None, {arg.name: x})
def npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()
folder = os.path.dirname(os.path.abspath(model))
with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
    zf.write(model, "model.onnx")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".bin"):
            zf.write(os.path.join(folder, name), name)
    zf.writestr("input_0.npy", npy(x))
    for k, array in enumerate(outputs):
        zf.writestr(f"output_{k}.npy", npy(array))
"""


def make_worker(folder: str, mib_total: int, dim: int = DIM, layers: int = 0) -> dict[str, Any]:
    """A chain of ``layers`` [dim, dim] weights (none: as many as ``mib_total`` MiB holds), one external file per
    tensor, in ``folder``."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    layers = layers or max(1, (mib_total << 20) // (dim * dim * 4))
    scale = np.float32(1 / np.sqrt(dim))
    nodes, inits, last = [], [], "x"
    for k in range(layers):
        w = rng.standard_normal((dim, dim), dtype=np.float32)
        w *= scale
        with open(f"{folder}/w{k}.bin", "wb") as f:
            f.write(w.tobytes())
        tensor = TensorProto(name=f"w{k}", data_type=TensorProto.FLOAT, dims=[dim, dim])
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", f"w{k}.bin"), ("offset", "0"), ("length", str(w.nbytes))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        inits.append(tensor)
        nodes.append(helper.make_node("MatMul", [last, f"w{k}"], [f"m{k}"]))
        last = f"m{k}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, dim])],
        [helper.make_tensor_value_info(last, TensorProto.FLOAT, [1, dim])], inits,
    )  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), f"{folder}/chain.onnx")
    return {"layers": layers, "bytes": layers * dim * dim * 4}


WORKERS: dict[str, Callable[..., Any]] = {"big_external_chain": make_worker}


def _pairs(
    commands: dict[str, list[Any]], runs: int, before: Callable[[], None] | None = None
) -> list[dict[str, ProcResult]]:
    """``runs`` rounds of the two commands, alternated (one untimed warm-up of each first): each round's results."""
    for argv in commands.values():
        if before:
            before()
        run_process(argv)
    rounds: list[dict[str, ProcResult]] = [{} for _ in range(runs)]
    for run, name in alternate(list(commands), runs):
        if before:
            before()
        done = run_process(commands[name])
        if not done.ok:
            raise RuntimeError(f"{name} failed: {done.failure()}")
        rounds[run][name] = done
    return rounds


def _rows(table: Table, label: str, rounds: list[dict[str, ProcResult]], ours: str, theirs: str) -> float | None:
    """Rows of one comparison (wall, CPU, peak memory: medians, and the median of each round's ratio); return the
    wall time's ratio."""
    result = None
    for what, key, show in (
        ("wall (s)", lambda r: r.wall_s, fmt),
        ("CPU, user + system (s)", lambda r: r.cpu_s, fmt),
        ("peak RSS", lambda r: r.maxrss_kib * 1024.0, mib),
    ):
        a = [key(r[ours]) for r in rounds]
        b = [key(r[theirs]) for r in rounds]
        paired = median([x / y for x, y in zip(a, b, strict=True) if y])
        table.rows.append([label, what, show(median(a)), show(median(b)), fmt_ratio(paired)])
        result = paired if result is None else result
    table.notes.append(
        f"{label}, wall per round (s), {ours} / {theirs}: "
        + "; ".join(f"{fmt(r[ours].wall_s)} / {fmt(r[theirs].wall_s)}" for r in rounds)
    )
    return result


def _run_vs_alone(ctx: Context, table: Table, size: int) -> None:
    folder = ctx.tmp / f"big-{size}"
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
        log(f"big: {size} MiB: {ctx.runs} alternated rounds of mgerun and onnxruntime alone")
        rounds = _pairs(commands, max(2, ctx.runs))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    label = f"{mib(made['bytes'])}: `mgerun B --iter 1` / onnxruntime alone"
    table.rows.append([label, "pack (s), once", fmt(packed.wall_s), "", ""])
    wall_ratio = _rows(table, label, rounds, "mgerun", "onnxruntime alone")
    table.checks.append(
        Check(
            f"big: mgerun / onnxruntime alone ({mib(made['bytes'])})",
            "<= 1.3",
            fmt_ratio(wall_ratio),
            at_most(wall_ratio, 1.3),
        )
    )


FLOAT16 = {  # float16 packs compared with a plain pack: the bound, and whether it is a target
    "1e-2": True,
    "1e-3": False,
}


def _float16_vs_plain(ctx: Context, table: Table, size: int) -> None:
    folder = ctx.tmp / "big-float16"
    folder.mkdir()
    found: dict[str, list[dict[str, ProcResult]]] = {}
    try:
        log(f"big: float16 of a {size} MiB MatMul chain against a plain pack")
        made = run_worker("big_external_chain", ctx.tmp, folder=str(folder), mib_total=size)
        out = folder / "OUT.mgetest"
        plain = [*console_script("mgedump"), folder / "chain.onnx", "-d", "#rand(0,1)", "-o", out, "-q"]
        for maxerr in FLOAT16:
            flags = ["--optimize-for-inference", "--enable-ioc16", "--maxerr", maxerr]
            commands = {"float16": [*plain, *flags], "plain pack": plain}
            log(f"big: float16 at {maxerr}: {ctx.runs} alternated rounds against a plain pack")
            found[maxerr] = _pairs(commands, max(2, ctx.runs), before=lambda: out.unlink(missing_ok=True))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for maxerr, target in FLOAT16.items():
        label = f"{mib(made['bytes'])}: `--optimize-for-inference --enable-ioc16 --maxerr {maxerr}` / plain pack"
        wall = _rows(table, label, found[maxerr], "float16", "plain pack")
        peak = median([r["float16"].maxrss_kib * 1024.0 for r in found[maxerr]])
        peak_ratio = peak / made["bytes"] if peak is not None else None
        table.rows.append([label, "peak RSS / weights", mib(peak or 0), mib(made["bytes"]), fmt_ratio(peak_ratio)])
        if target:
            what = f"big: float16 at {maxerr} ({mib(made['bytes'])})"
            table.checks.append(Check(f"{what} / plain pack", "<= 10", fmt_ratio(wall), at_most(wall, 10)))
            table.checks.append(
                Check(f"{what}: peak RSS / weights", "<= 3", fmt_ratio(peak_ratio), at_most(peak_ratio, 3))
            )


def _pack_vs_floor(ctx: Context, table: Table, files: int) -> None:
    folder = ctx.tmp / "many"
    folder.mkdir()
    try:
        log(f"big: a MatMul chain of {files} [{MANY_DIM}, {MANY_DIM}] weights, one external file each")
        made = run_worker("big_external_chain", ctx.tmp, folder=str(folder), mib_total=0, dim=MANY_DIM, layers=files)
        floor = ctx.tmp / "many-floor.py"
        floor.write_text(FLOOR)
        outputs = {"mgedump": folder / "OUT.mgetest", "floor": folder / "floor.zip"}
        commands = {
            "mgedump": [
                *console_script("mgedump"),
                folder / "chain.onnx",
                "-d",
                "#rand(0,1)",
                "-o",
                outputs["mgedump"],
                "-q",
            ],
            "floor": [sys.executable, floor, folder / "chain.onnx", outputs["floor"]],
        }

        def clean() -> None:
            for path in outputs.values():
                path.unlink(missing_ok=True)

        log(f"big: {files} files: {ctx.runs} alternated rounds of mgedump and the floor")
        rounds = _pairs(commands, max(2, ctx.runs), before=clean)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    label = f"{mib(made['bytes'])} in {files:,} files: pack / floor"
    ratio = _rows(table, label, rounds, "mgedump", "floor")
    table.checks.append(
        Check(
            f"big: pack / floor ({mib(made['bytes'])} in {files:,} files)",
            "<= 1.15",
            fmt_ratio(ratio),
            at_most(ratio, 1.15),
        )
    )


PARTS = ("gib", "many", "float16")  # (1), (2), (3) above: ``--sections big:many`` runs the 2,000 files alone


def section(ctx: Context) -> Table:
    sizes: Sequence[int] = (64,) if ctx.quick else (1024, 3072)
    files = 200 if ctx.quick else 2000
    table = Table(
        "Bundles of big external weights, and a model of many small ones",
        "MatMul chains on one input row, float32 weights in external files, one file per tensor. (1) [4096, 4096] "
        f"weights ({', '.join(mib(s << 20) for s in sizes)}), packed; `mgerun B --iter 1` against onnxruntime alone "
        "(open the model as given, run once). mgerun reads the weights where they lie in the bundle (no copy) and "
        "hashes them while onnxruntime reads them. (2) [64, 64] weights in "
        f'{files:,} files: `mgedump M -d "#rand(0,1)" -o OUT` against the floor (open the model, run once, write '
        "the input, output, model and weight files into a stored zip). Whole processes, alternated after one "
        "warm-up of each; each ratio is the median of the rounds' own ratios. (3) float16 of the "
        f"{mib(sizes[0] << 20)} chain, `--optimize-for-inference --enable-ioc16` at `--maxerr 1e-2` (every MatMul "
        "converted) and `1e-3` (every MatMul kept float32), against a plain pack; peak RSS is the largest of the "
        "process and its children. Targets: (1) at most 1.3, (2) at most 1.15, (3) at 1e-2 at most 10x a plain "
        "pack's wall and 3x the weights in peak RSS.",
        ["model", "what", "mgedump", "baseline", "ratio"],
    )
    if ctx.wants("big", "gib"):
        for size in sizes:
            _run_vs_alone(ctx, table, size)
    if ctx.wants("big", "many"):
        _pack_vs_floor(ctx, table, files)
    if ctx.wants("big", "float16"):
        _float16_vs_plain(ctx, table, sizes[0])
    return table
