"""The ``trace`` section: ``mgedump.jit.trace`` on a small CNN at batch 8: eager vs compiled time per
call, and a compiled call's overhead over onnxruntime run directly on the
dumped model (``scripts/bench_trace.py``, in a worker).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .common import SCRIPTS, Check, Context, Table, fmt, fmt_ratio, run_worker


def trace_worker(runs: int, quick: bool) -> list[dict[str, Any]]:
    """scripts/bench_trace.py's measurements, in a worker process."""
    sys.path.insert(0, str(SCRIPTS))
    from bench_trace import section_trace as measure_trace

    return measure_trace(runs, quick)


def section(ctx: Context) -> Table:
    """mgedump.jit.trace: eager vs compiled per call, and a compiled call's overhead over onnxruntime itself."""
    rows = run_worker("trace", ctx.tmp, runs=max(2, ctx.runs), quick=ctx.quick)
    checks = rows[-1]
    table = Table(
        "Tracing: eager vs compiled",
        f"A small CNN written with `mgedump.module` (Conv2d, BatchNorm2d, relu, pooling, Linear, softmax) at batch "
        f"{checks['batch']} (3x32x32), in one worker process, variants alternated round by round: eager (numpy), "
        "compiled by `jit.trace` (weights captured as constants, or fed as inputs), and onnxruntime called directly on "
        "the model `trace.dump` wrote (same session options). Figures are medians over rounds of the median ms per call. "
        "Targets: eager / compiled >= 2; compiled - direct <= 0.5 ms per call (the Python replay that checks each call "
        "costs per operation, not per element, so it is an absolute budget).",
        ["variant", "ms per call", "/ direct", "eager / this"],
    )
    for row in rows[:-1]:
        table.rows.append(
            [row["variant"], fmt(row["ms_per_call"]), fmt_ratio(row["vs_direct"]), f"{row['speedup_vs_eager']:.1f}"]
        )
    table.checks.append(
        Check(
            "trace: eager / compiled",
            f">= {checks['speedup_target']}",
            f"{checks['eager_over_compiled']:.1f}",
            checks["speedup_met"],
        )
    )
    table.checks.append(
        Check(
            "trace: compiled - direct onnxruntime",
            f"<= {checks['overhead_ms_target']} ms",
            f"{checks['overhead_ms']:.3f} ms (ratio {checks['compiled_over_direct']:.2f})",
            checks["overhead_met"],
        )
    )
    return table


# the functions of this file that run in a worker process (python scripts/bench.py --worker NAME ...)
WORKERS: dict[str, Callable[..., Any]] = {
    "trace": trace_worker,
}
