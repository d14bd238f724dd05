"""The ``load`` section: ``mgerun --concurrency 2 --thread 1`` against ``--concurrency 1 --thread 1``
on a small CNN (four 3x3 Conv/Relu/MaxPool blocks on a 3x64x64 input,
generated here), in one worker process alternating the two for ``--runs``
rounds of ``verify()``; throughput is timed runs per second of wall time
for both. Target: concurrency 2 / concurrency 1 >= 1.6 on 2 cores. (The
``overhead`` section is the timing loop at concurrency 1.)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .common import Check, Context, Table, alternate, fmt_ratio, log, ratio_rows, run_worker
from .models import small_cnn_bundle


def load_worker(bundle: str, iters: int, rounds: int) -> list[dict[str, float]]:
    """Alternate verify() at concurrency 1 and 2 (one intra-op thread each); runs per second of wall time."""
    from mgedump.commands.verify import VerifyOptions, verify

    def throughput(concurrency: int) -> float:
        report = verify(bundle, VerifyOptions(iters=iters, warmup=10, session={"threads": 1}, concurrency=concurrency))
        if not report.passed:
            raise RuntimeError(f"mgerun failed on {bundle}")
        timing = report.cases[0].timing
        return len(timing.latencies_ms) / timing.wall_s

    results: list[dict[str, float]] = [{} for _ in range(rounds)]
    for run, name in alternate(["1", "2"], rounds):
        results[run][name] = throughput(int(name))
    return results


def section(ctx: Context) -> Table:
    iters = 200 if ctx.quick else 2000
    bundle = small_cnn_bundle(ctx, 1)
    log(f"load: {ctx.runs} rounds of {iters} runs at concurrency 1 and 2")
    rounds = run_worker("load", ctx.tmp, bundle=str(bundle), iters=iters, rounds=ctx.runs)
    table = Table(
        "Throughput under concurrent load",
        f"`mgerun --concurrency 2 --thread 1` against `--concurrency 1 --thread 1` on the small CNN (3x64x64 input, "
        f"batch 1): {iters} timed runs after 10 warm-up, in one worker process, alternated round by round. "
        "Throughput is timed runs per second of wall time. Target: concurrency 2 / 1 >= 1.6 on 2 cores.",
        ["round", "concurrency 1 (runs/s)", "concurrency 2 (runs/s)", "2 / 1"],
    )
    overall = ratio_rows(table, rounds, "2", "1", digits=1, swap=True)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    table.checks.append(
        Check(f"load: concurrency 2 / 1 ({cores} cores)", ">= 1.6", fmt_ratio(overall), None if overall is None
              else overall >= 1.6)
    )  # fmt: skip
    return table


# the functions of this file that run in a worker process (python scripts/bench.py --worker NAME ...)
WORKERS: dict[str, Callable[..., Any]] = {
    "load": load_worker,
}
