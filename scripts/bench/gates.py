"""The ``gates`` section: the latency gate's false alarms and detections on this machine (docs/verify.md#latency-gates).

A chain of 10 MatMuls of [64, 256] x [256, 256] is packed as ``base/m.mgetest``; the same chain with 3 more MatMuls
(30% more work, the same bundle name) as ``slow/m.mgetest``. The baseline: 5 runs of the first (``--iter 30
--warmup-iter 3 --thread 1 --report-json``), the one of the lowest p90 kept (noise only adds time: the lowest is
the nearest to the model's own; a limit set from a p90 the noise raised can lie above the slower bundle's, and
then no gate could tell the two apart). Then ``4 x --runs`` checks (20 by default) of each bundle, alternated,
with ``--baseline baseline.json --max-slowdown 1.10``, with ``--max-latency`` 15% over the lowest p90 of the 5,
and with ``--max-latency --latency-percentile p50`` 15% over their lowest median. A false alarm is exit 3 for the unchanged bundle; a detection is exit 3 for the slower one. Targets: false
alarms at most 1 in 20, detections at least 19 in 20. Each check's ``--report-json`` says how many rounds it timed
(docs/reports.md#the-latency-gate): a check timed again was too slow in its first round, so their count is what the
first round alone would have decided (the gates before they timed more rounds).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import Check, Context, Table, alternate, console_script, log, run_process, run_worker

SLOWDOWN = 1.10  # --max-slowdown
MARGIN = 1.15  # --max-latency: this many times the baseline's p90
BASELINES = 5  # baseline runs; the lowest p90 is kept
TIMING = ["--iter", "30", "--warmup-iter", "3", "--thread", "1", "-q"]


def chain_worker(path: str, layers: int) -> None:
    """Write a chain of ``layers`` MatMuls of [64, 256] x [256, 256] (the same weights for the same first layers)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, last = [], [], "x"
    for k in range(layers):
        weight = (rng.standard_normal((256, 256)) / 16).astype(np.float32)
        inits.append(numpy_helper.from_array(weight, f"w{k}"))
        out = "y" if k == layers - 1 else f"h{k}"
        nodes.append(helper.make_node("MatMul", [last, f"w{k}"], [out], name=f"mm{k}"))
        last = out
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 256])],
        initializer=inits,
    )
    made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    made.ir_version = 8
    onnx.save(made, path)


def _bundles(ctx: Context) -> dict[str, Path]:
    """base/m.mgetest and slow/m.mgetest, packed once."""
    bundles = {}
    for name, layers in (("base", 10), ("slow", 13)):
        model = ctx.tmp / f"gates-{name}.onnx"
        bundle = ctx.tmp / "gates" / name / "m.mgetest"
        if not bundle.exists():
            run_worker("gates_chain", ctx.tmp, path=str(model), layers=layers)
            bundle.parent.mkdir(parents=True, exist_ok=True)
            packed = run_process([*console_script("mgedump"), model, "-d", "#rand(0,1)", "-o", bundle, "-q"])
            if not packed.ok:
                raise RuntimeError(f"packing {name} failed ({packed.failure()})")
        bundles[name] = bundle
    return bundles


def _figures(report: Path) -> dict[str, float]:
    """Test case 0's p50 and p90 in a report."""
    latency = json.loads(report.read_text())["bundles"][0]["test_cases"][0]["latency_ms"]
    return {"p50": float(latency["median"]), "p90": float(latency["p90"])}


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def section(ctx: Context) -> Table:
    checks = 4 * ctx.runs
    allowed = checks // 20  # under 5%
    bundles = _bundles(ctx)
    mgerun = console_script("mgerun")
    load_before = _load()
    baselines = []
    for k in range(BASELINES):
        report = ctx.tmp / "gates" / f"baseline-{k}.json"
        done = run_process([*mgerun, bundles["base"], *TIMING, "--report-json", report])
        if not done.ok:
            raise RuntimeError(f"the baseline run failed ({done.failure()})")
        baselines.append((_figures(report), report))
    lowest = {q: min(figures[q] for figures, _ in baselines) for q in ("p50", "p90")}
    baseline = min(baselines, key=lambda entry: entry[0]["p90"])[1]
    limits = {q: lowest[q] * MARGIN for q in lowest}
    gates = {
        "baseline": ["--baseline", str(baseline), "--max-slowdown", f"{SLOWDOWN}"],
        "max-latency": ["--max-latency", f"{limits['p90']:.6f}"],
        "max-latency-p50": ["--max-latency", f"{limits['p50']:.6f}", "--latency-percentile", "p50"],
    }
    alarms = {(gate, name): 0 for gate in gates for name in bundles}
    again = {(gate, name): 0 for gate in gates for name in bundles}
    order = [(gate, name) for gate in gates for name in bundles]
    for run, key in alternate([f"{g} {n}" for g, n in order], checks):
        gate, name = key.split()
        log(f"gates: check {run + 1} of {checks}: {gate} on {name}")
        report = ctx.tmp / "gates" / "check.json"
        done = run_process([*mgerun, bundles[name], *TIMING, "--report-json", report, *gates[gate]])
        if done.returncode not in (0, 3):
            raise RuntimeError(f"mgerun {' '.join(gates[gate])} on {name} failed ({done.failure()})")
        alarms[gate, name] += done.returncode == 3
        [check] = json.loads(report.read_text())["latency_gate"]["checks"]
        again[gate, name] += len(check.get("rounds", [None])) > 1
    p90s = ", ".join(f"{figures['p90']:.3f}" for figures, _ in sorted(baselines, key=lambda e: e[0]["p90"]))
    table = Table(
        "Latency gate",
        f"A chain of 10 MatMuls of [64, 256] x [256, 256] (`base`) and the same with 3 more (`slow`, 30% more work, "
        f"the same bundle name), `mgerun {' '.join(TIMING)}`. The baseline is the run of the lowest p90 of "
        f"{BASELINES} runs of `base` (p90s {p90s} ms): the limits are {MARGIN}x the lowest p90, "
        f"`--max-latency {limits['p90']:.3f}`, and {MARGIN}x the lowest median ({lowest['p50']:.3f} ms), "
        f"`--max-latency {limits['p50']:.3f} --latency-percentile p50`. Then {checks} checks of each bundle with each "
        f"gate, alternated. A false alarm is exit 3 for `base`, a detection exit 3 for `slow`. Targets: at most "
        f"{allowed} false alarm(s) in {checks}, at least {checks - allowed} detections in {checks}. Load average (1, "
        f"5, 15 min) before: {load_before}; after: {_load()}.",
        ["gate", "unchanged: false alarms", "30% slower: detected", "first round alone: false alarms, detected"],
    )
    labels = {
        "baseline": f"`--baseline --max-slowdown {SLOWDOWN}`",
        "max-latency": f"`--max-latency` ({MARGIN}x p90)",
        "max-latency-p50": f"`--max-latency --latency-percentile p50` ({MARGIN}x p50)",
    }
    for gate in gates:
        timed = f"{again[gate, 'base']}, {again[gate, 'slow']}"  # the checks timed again: too slow in round one
        table.rows.append(
            [labels[gate], f"{alarms[gate, 'base']} of {checks}", f"{alarms[gate, 'slow']} of {checks}", timed]
        )
        table.checks.append(
            Check(f"gates: {gate} false alarms", f"<= {allowed} of {checks}", f"{alarms[gate, 'base']}",
                  alarms[gate, "base"] <= allowed)
        )  # fmt: skip
        table.checks.append(
            Check(f"gates: {gate} detections of a 30% slower bundle", f">= {checks - allowed} of {checks}",
                  f"{alarms[gate, 'slow']}", alarms[gate, "slow"] >= checks - allowed)
        )  # fmt: skip
    return table


# the functions of this file that run in a worker process (python scripts/bench.py --worker NAME ...)
WORKERS: dict[str, Callable[..., Any]] = {
    "gates_chain": chain_worker,
}
