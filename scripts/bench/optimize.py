"""The ``optimize`` section: per optimisation flag (none, ``--optimize-for-inference`` alone and with
each ``--enable-*`` flag that mgedump implements, ``--discard-var-name``):
the model's size on disk, onnxruntime session creation time and latency,
on ResNet-50 from the onnx package, variants alternated in one worker.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from .common import Context, Table, alternate, fmt, fmt_ratio, mib, ratio, run_worker

OPTIMIZE_VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("as given", {}),
    ("--optimize-for-inference", {"optimize_for_inference": True}),
    ("+ --enable-io16xc32", {"optimize_for_inference": True, "precision": "io16xc32"}),
    ("+ --enable-ioc16", {"optimize_for_inference": True, "precision": "ioc16"}),
    (
        "+ --enable-fuse-conv-bias-nonlinearity",
        {"optimize_for_inference": True, "fuse_conv_bias_nonlinearity": True},
    ),
    ("+ --enable-nchw88", {"optimize_for_inference": True, "nchw88": True}),
    ("--discard-var-name", {"discard_var_name": True}),
]


def optimize_worker(model: str, folder: str, rounds: int, iters: int) -> list[dict[str, Any]]:
    """Optimise one model every way mgedump can; per variant: size, session creation and latency medians (alternated)."""
    import numpy as np

    from mgedump.bundle.requirements import cpu_has_avx2
    from mgedump.model.runtime import model_io, open_session
    from mgedump.optimize import optimize_file
    from mgedump.options import OptimizeOptions

    paths: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for label, flags in OPTIMIZE_VARIANTS:
        if flags.get("nchw88") and not cpu_has_avx2():
            skipped[label] = "no AVX2 on this CPU"
            continue
        if not flags:
            paths[label] = model
            continue
        out = os.path.join(folder, f"opt-{len(paths)}.onnx")
        optimize_file(model, out, OptimizeOptions(**flags))
        paths[label] = out
    rng = np.random.default_rng(0)
    feeds: dict[str, dict[str, Any]] = {}
    for label, path in paths.items():
        inputs, _ = model_io(open_session(path))
        feeds[label] = {
            i.name: rng.uniform(0, 1, [d if isinstance(d, int) else 1 for d in i.shape]).astype(i.np_dtype)
            for i in inputs
        }
    create: dict[str, list[float]] = {label: [] for label in paths}
    latency: dict[str, list[float]] = {label: [] for label in paths}
    for _, label in alternate(list(paths), rounds):
        start = time.perf_counter()
        session = open_session(paths[label])
        create[label].append(time.perf_counter() - start)
        session.run(None, feeds[label])
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            session.run(None, feeds[label])
            times.append(time.perf_counter() - t0)
        latency[label].append(statistics.median(times) * 1e3)
    rows = []
    for label, _ in OPTIMIZE_VARIANTS:
        if label in skipped:
            rows.append({"label": label, "skipped": skipped[label]})
            continue
        size = os.path.getsize(paths[label]) + sum(
            os.path.getsize(os.path.join(folder, f))
            for f in os.listdir(folder)
            if f.startswith(os.path.basename(paths[label]) + ".")
        )
        rows.append(
            {
                "label": label,
                "size": size,
                "create_s": statistics.median(create[label]),
                "latency_ms": statistics.median(latency[label]),
            }
        )
    return rows


def section(ctx: Context) -> Table:
    """Per optimisation flag: model size, session creation time and latency, before and after, on ResNet-50."""
    model = run_worker("onnx_data", ctx.tmp, relpath="backend/test/data/light/light_resnet50.onnx")
    folder = ctx.tmp / "optimize"
    folder.mkdir(exist_ok=True)
    rounds, iters = (2, 5) if ctx.quick else (max(3, ctx.runs), 30)
    rows = run_worker("optimize", ctx.tmp, model=model, folder=str(folder), rounds=rounds, iters=iters)
    table = Table(
        "Optimisation flags on ResNet-50",
        "The onnx package's `light_resnet50.onnx` (weights made by ConstantOfShape at load time, so the file is small "
        "until constant folding writes them out), optimised by `mgedump.optimize.optimize_file` with each flag; per "
        f"variant the model's size on disk, the median onnxruntime session creation time ({rounds} alternated rounds) "
        f"and the median latency of {iters} runs per round on uniform [0,1) input, default session options (CPU). "
        "Ratios are to the model as given.",
        ["variant", "size", "session creation (s)", "latency (ms)", "latency / as given"],
    )
    base = next((r for r in rows if r["label"] == "as given"), None)
    for row in rows:
        if "skipped" in row:
            table.rows.append([row["label"], "-", "-", "-", f"skipped: {row['skipped']}"])
            continue
        table.rows.append(
            [
                row["label"],
                mib(row["size"]),
                fmt(row["create_s"]),
                fmt(row["latency_ms"]),
                fmt_ratio(ratio(row["latency_ms"], base["latency_ms"] if base else None)),
            ]
        )
    table.notes.append("Latency on this 2-core machine is noisy; the ratio column is the comparison to read.")
    return table


# the functions of this file that run in a worker process (python scripts/bench.py --worker NAME ...)
WORKERS: dict[str, Callable[..., Any]] = {
    "optimize": optimize_worker,
}
