"""The ``iodump`` section: ``mgerun --io-dump`` on a generated chain of elementwise ops whose
intermediate tensors add up to far more than a 64 MiB budget, against the
same ``mgerun`` without it: peak RSS and wall time. Target: peak RSS within
the plain run's plus the budget.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

from .common import (
    MIB,
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
    mib,
    ok_values,
    ratio,
    run_process,
    run_worker,
)


def wide_chain_worker(path: str, channels: int, size: int, layers: int) -> dict[str, int]:
    """A chain of elementwise ops on one [1, channels, size, size] tensor: small weights, large intermediates."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, current = [], "x"
    ops = ["Sigmoid", "Mul", "Add", "Relu", "Tanh"]
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    for i in range(layers):
        op = ops[i % len(ops)]
        out = "y" if i == layers - 1 else f"t{i}"
        inputs = [current, "half"] if op in ("Mul", "Add") else [current]
        nodes.append(helper.make_node(op, inputs, [out], name=f"n{i}"))
        current = out
    shape = [1, channels, size, size]
    graph = helper.make_graph(
        nodes,
        "wide_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        initializer=inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return {"tensor_bytes": 4 * channels * size * size, "intermediates": layers}


def section(ctx: Context) -> Table:
    channels, size, layers, budget_mb = (8, 64, 12, 1) if ctx.quick else (32, 256, 60, 64)
    model = ctx.tmp / "wide_chain.onnx"
    info = run_worker("wide_chain", ctx.tmp, path=str(model), channels=channels, size=size, layers=layers)
    total = info["tensor_bytes"] * (layers + 1)
    mgerun = console_script("mgerun")
    spec = "#rand(0,1)"
    dump = ctx.tmp / "iodump-bench"
    commands = {
        "A": [*mgerun, model, "-d", spec, "--iter", "1", "--warmup-iter", "0", "-q", "--silent"],
        "B": [
            *mgerun,
            model,
            "-d",
            spec,
            "--iter",
            "1",
            "--warmup-iter",
            "0",
            "-q",
            "--silent",
            "--io-dump",
            dump,
            "--io-dump-budget",
            str(budget_mb),
        ],
    }
    results: dict[str, list[ProcResult]] = {"A": [], "B": []}
    for _, name in alternate(list(commands), ctx.runs):
        shutil.rmtree(dump, ignore_errors=True)
        results[name].append(run_process(commands[name]))
    shutil.rmtree(dump, ignore_errors=True)
    table = Table(
        "Io dump memory and time",
        f"`mgerun` on a chain of {layers} elementwise ops over a [1,{channels},{size},{size}] float32 tensor "
        f"({mib(info['tensor_bytes'])} each, {mib(total)} of tensors in all): (A) plain, `--iter 1 --warmup-iter 0`; "
        f"(B) the same with `--io-dump DIR --io-dump-budget {budget_mb}` (every tensor written; the model runs once "
        f"per part of at most {budget_mb} MiB of exposed tensors). Alternated, {ctx.runs} runs each; peak RSS from "
        "`os.wait4`. Target: B's peak RSS <= A's + the budget.",
        ["command", "wall (s)", "peak RSS", "B / A wall", "B - A peak RSS"],
    )
    wall = {n: median(ok_values(r, lambda p: p.wall_s)) for n, r in results.items()}
    rss = {n: median(ok_values(r, lambda p: p.maxrss_kib * 1024.0)) for n, r in results.items()}
    table.rows.append(["A: mgerun", fmt(wall["A"]), "n/a" if rss["A"] is None else mib(rss["A"]), "", ""])
    extra = None if rss["A"] is None or rss["B"] is None else rss["B"] - rss["A"]
    table.rows.append(
        [
            f"B: mgerun --io-dump (budget {budget_mb} MiB)",
            fmt(wall["B"]),
            "n/a" if rss["B"] is None else mib(rss["B"]),
            fmt_ratio(ratio(wall["B"], wall["A"])),
            "n/a" if extra is None else mib(max(extra, 0)),
        ]
    )
    table.notes += failure_notes("iodump", results)
    table.checks.append(
        Check(
            "iodump: B peak RSS - A peak RSS",
            f"<= {budget_mb} MiB (the budget)",
            "n/a" if extra is None else mib(max(extra, 0)),
            at_most(extra, budget_mb * MIB),
        )
    )
    return table


# the functions of this file that run in a worker process (python scripts/bench.py --worker NAME ...)
WORKERS: dict[str, Callable[..., Any]] = {
    "wide_chain": wide_chain_worker,
}
