"""The ``overhead`` section: timing-loop overhead of ``mgerun``. A bundle is packed from
``samples/cnn.onnx``; then one worker process alternates, for 3 x
``--runs`` rounds, (a) ``mgedump.commands.verify.verify(bundle, VerifyOptions(iters=300,
warmup=10))``, taking the median latency of test case 0, and (b) a bare
loop: an onnxruntime session on the same model bytes with the same session
options and provider, the same feeds, 10 untimed and 300 timed
``session.run`` calls, median. Target: median of mgerun / bare <= 1.02.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from .common import (
    ROOT,
    Check,
    Context,
    Table,
    alternate,
    at_most,
    console_script,
    fmt_ratio,
    log,
    ratio_rows,
    run_process,
    run_worker,
)


def overhead_worker(bundle: str, iters: int, warmup: int, rounds: int) -> list[dict[str, float]]:
    """In one process, alternate mgedump.commands.verify and a bare onnxruntime loop; per-round medians in ms."""
    import onnxruntime as ort

    from mgedump.bundle import Bundle
    from mgedump.commands.verify import VerifyOptions, verify
    from mgedump.model.session import SessionSettings

    with Bundle(bundle) as opened:
        manifest = opened.manifest
        model_bytes = opened.read(manifest.model.member)
        case = manifest.test_cases[0]
        feeds = {
            info["name"]: opened.tensor(member, info["name"])
            for info, member in zip(manifest.inputs, case.inputs, strict=True)
        }

    def with_mgerun() -> float:
        report = verify(bundle, VerifyOptions(iters=iters, warmup=warmup))
        if not report.passed:
            raise RuntimeError(f"mgerun failed on {bundle}: {json.dumps(report.to_json())[:2000]}")
        return float(report.cases[0].latency()["median"])

    def bare() -> float:
        session = ort.InferenceSession(
            model_bytes, sess_options=SessionSettings().session_options(), providers=["CPUExecutionProvider"]
        )
        for _ in range(warmup):
            session.run(None, feeds)
        clock = time.perf_counter
        samples = []
        for _ in range(iters):
            start = clock()
            session.run(None, feeds)
            samples.append((clock() - start) * 1e3)
        return statistics.median(samples)

    measure = {"mgerun": with_mgerun, "bare": bare}
    results: list[dict[str, float]] = [{} for _ in range(rounds)]
    for run, name in alternate(list(measure), rounds):
        results[run][name] = measure[name]()
    return results


def section(ctx: Context) -> Table:
    iters, warmup = (50, 5) if ctx.quick else (300, 10)
    bundle = ctx.tmp / "cnn.mgetest"
    packed = run_process([*console_script("mgedump"), ROOT / "samples" / "cnn.onnx", "-d", "#rand(0,1)", "-o", bundle])
    if not packed.ok:
        raise RuntimeError(f"mgedump could not pack samples/cnn.onnx ({packed.failure()})")
    # the sample runs in tens of microseconds, where a round's ratio swings by 10% with the machine's state:
    # three times the rounds (each takes a fraction of a second) for a steadier median
    rounds_wanted = 3 * ctx.runs
    log(f"overhead: {rounds_wanted} rounds of {iters} runs")
    rounds = run_worker("overhead", ctx.tmp, bundle=str(bundle), iters=iters, warmup=warmup, rounds=rounds_wanted)
    table = Table(
        "Timing-loop overhead",
        f"Median latency per iteration of `samples/cnn.onnx` as `mgerun` times it (`verify()`, {iters} timed runs after "
        f"{warmup} warm-up) against a bare `session.run` loop with the same session options, provider and feeds, "
        "alternated in one process. Target: median ratio mgerun / bare <= 1.02.",
        ["round", "mgerun median (ms)", "bare loop median (ms)", "mgerun / bare"],
    )
    overall = ratio_rows(table, rounds, "mgerun", "bare", digits=4)
    table.checks.append(Check("overhead: mgerun / bare loop", "<= 1.02", fmt_ratio(overall), at_most(overall, 1.02)))
    return table


# the functions of this file that run in a worker process (python scripts/bench.py --worker NAME ...)
WORKERS: dict[str, Callable[..., Any]] = {
    "overhead": overhead_worker,
}
