"""The ``fitting`` section: what several variants in one bundle cost, and what ``--fitting`` costs.

(a) Bundle size: ``samples/cnn.onnx`` with 20 test cases packed with ``--variants fp32,ioc16,io16xc32`` against
the sum of the three single-variant bundles (``--enable-*`` flags): the test cases are stored once. Target: the
bundle of variants at most 0.6 of the sum.

(b) Fitting's overhead: ``mgerun B --fitting --fitting-budget S`` against ``mgerun B --config C`` (the choice
verified alone), whole processes, alternated: the wall time fitting adds over verifying the chosen variant, and
how much of it the budget is. Target: fitting's wall time at most the budget plus 1.5x a plain verification (its
own verification of every variant, one run each, and the chosen one's timed run).

(c) The pause before each turn (``mgedump.measure.fitting.SETTLE_S``): a session with 2 intra-op threads timed in
turns right after the turns of 8 other sessions (1 and 2 threads, sequential and parallel execution: fitting's
candidates), with no pause and with the pause, alternated round by round, in one worker process; each round's
turn against the same session's turns alone in that round (so that a slow spell of the shared machine, which also
slows the turns alone, cancels out), the median over rounds. Target: with the pause, at most 1.10x alone.

(d) Fitting's memory: the peak RSS of ``mgerun B --fitting`` (b's runs) against ``mgerun B --variant fp32`` (a plain
run of the same bundle), whole processes, the largest of the runs. Target: at most 2 (screening holds one session at a
time; the final rounds, the finalists' sessions within twice what a plain run takes: docs/fitting.md).
"""

from __future__ import annotations

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
    fmt,
    fmt_ratio,
    log,
    median,
    mib,
    ratio,
    run_process,
    run_worker,
)

CASES = 20
VARIANTS = ("fp32", "ioc16", "io16xc32")
SINGLE = {"fp32": [], "ioc16": ["--optimize-for-inference", "--enable-ioc16"], "io16xc32": [
    "--optimize-for-inference", "--enable-io16xc32"]}  # fmt: skip


def _pack(ctx: Context, name: str, flags: list[str]) -> int:
    out = ctx.tmp / f"fitting-{name}.mgetest"
    specs = [a for k in range(CASES) for a in ("-d", f"#rand(0,{1 + k})")]
    done = run_process([*console_script("mgedump"), ROOT / "samples" / "cnn.onnx", *specs, "--maxerr", "0.05",
                        *flags, "-o", out, "-q"])  # fmt: skip
    if not done.ok:
        raise RuntimeError(f"mgedump ({name}) failed: {done.failure()}")
    return out.stat().st_size


def settle_worker(folder: str, rounds: int) -> dict[str, float]:
    """(c): a 2-thread session's median turn alone, after 8 other sessions' turns with no pause, and with one."""
    import statistics
    import time

    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from mgedump.measure.fitting import SETTLE_S

    rng = np.random.default_rng(0)
    dim, layers = 256, 12
    nodes, inits, last = [], [], "x"
    for k in range(layers):
        inits.append(numpy_helper.from_array(rng.standard_normal((dim, dim)).astype(np.float32) / 16, f"w{k}"))
        nodes += [
            helper.make_node("MatMul", [last, f"w{k}"], [f"m{k}"]),
            helper.make_node("Relu", [f"m{k}"], [f"r{k}"]),
        ]
        last = f"r{k}"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, dim])],
                              [helper.make_tensor_value_info(last, TensorProto.FLOAT, [64, dim])], inits)  # fmt: skip
    path = f"{folder}/settle.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    feed = {"x": rng.random((64, dim), dtype=np.float32)}

    def session(threads: int, parallel: bool) -> Any:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        if parallel:
            opts.execution_mode = ort.ExecutionMode.ORT_PARALLEL
        return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])

    def turn(s: Any) -> float:
        s.run(None, feed)
        runs = []
        for _ in range(5):
            began = time.perf_counter()
            s.run(None, feed)
            runs.append((time.perf_counter() - began) * 1000)
        return statistics.median(runs)

    timed = session(2, False)
    others = [session(t, p) for t in (1, 2) for p in (False, True) for _ in range(2)]
    turns: dict[str, list[float]] = {"alone": [], "no pause": [], "pause": []}
    for _ in range(rounds):
        turns["alone"].append(statistics.median(turn(timed) for _ in range(3)))
        for name, wait in (("no pause", 0.0), ("pause", SETTLE_S)):
            for other in others:
                time.sleep(wait)
                turn(other)
            time.sleep(wait)
            turns[name].append(turn(timed))
    # each round against the same round's turns alone: a slow spell of the machine falls on both
    per_round = {
        f"{name} / alone": statistics.median(t / a for t, a in zip(turns[name], turns["alone"], strict=True))
        for name in ("no pause", "pause")
    }
    return {name: statistics.median(values) for name, values in turns.items()} | per_round | {"settle_s": SETTLE_S}


WORKERS: dict[str, Callable[..., Any]] = {"settle": settle_worker}


def section(ctx: Context) -> Table:
    log("fitting: packing the variants together and one by one")
    together = _pack(ctx, "variants", ["--variants", ",".join(VARIANTS)])
    singles = {name: _pack(ctx, name, SINGLE[name]) for name in VARIANTS}
    size_ratio = ratio(together, sum(singles.values()))
    bundle, choice = ctx.tmp / "fitting-variants.mgetest", ctx.tmp / "fitting-choice.json"
    budget = 2.0 if ctx.quick else 10.0
    commands = {
        "fitting": [
            *console_script("mgerun"),
            bundle,
            "--fitting",
            "--fitting-budget",
            str(budget),
            "--fitting-out",
            choice,
            "--iter",
            "10",
        ],  # fmt: skip
        "config": [*console_script("mgerun"), bundle, "--config", choice, "--iter", "10"],
    }
    first = run_process(commands["fitting"])  # writes the choice the other command runs
    if not first.ok:
        raise RuntimeError(f"mgerun --fitting failed: {first.failure()}")
    commands["plain"] = [*console_script("mgerun"), bundle, "--variant", "fp32", "--iter", "10"]
    walls: dict[str, list[float]] = {name: [] for name in commands}
    peaks: dict[str, list[int]] = {name: [] for name in commands}
    runs = max(2, ctx.runs)
    for _, name in alternate(list(commands), runs):
        done = run_process(commands[name])
        if not done.ok:
            raise RuntimeError(f"mgerun ({name}) failed: {done.failure()}")
        walls[name].append(done.wall_s)
        peaks[name].append(done.maxrss_kib)
    fitting, alone = median(walls["fitting"]), median(walls["config"])
    peak_ratio = ratio(max(peaks["fitting"]), max(peaks["plain"]))
    log("fitting: a session's turns after others', with and without the pause")
    settle = run_worker("settle", ctx.tmp, folder=str(ctx.tmp), rounds=3 if ctx.quick else 20)
    settled = settle["pause / alone"]
    overhead = None if fitting is None or alone is None else fitting - alone
    limit = budget + 1.5 * (alone or 0.0)
    table = Table(
        "What several variants and fitting cost",
        f"(a) `samples/cnn.onnx` with {CASES} test cases packed with `--variants {','.join(VARIANTS)}` against the "
        "sum of the single-variant bundles (`--enable-*`): the test cases are stored once. (b) `mgerun B --fitting "
        f"--fitting-budget {budget:g}` against `mgerun B --config C` (the chosen variant verified alone), whole "
        "processes, alternated. Targets: (a) at most 0.6 of the sum; (b) fitting's wall time at most the budget "
        "plus 1.5x the plain verification.",
        ["what", "value"],
        rows=[
            *[[f"single-variant bundle {name}", mib(size)] for name, size in singles.items()],
            ["sum of the single-variant bundles", mib(sum(singles.values()))],
            [f"one bundle of {len(VARIANTS)} variants", mib(together)],
            ["**(a) variants / sum**", f"**{fmt_ratio(size_ratio)}**"],
            [f"mgerun --fitting (budget {budget:g} s), median wall (s)", fmt(fitting)],
            ["mgerun --config (the choice alone), median wall (s)", fmt(alone)],
            ["**(b) fitting's overhead (s)**", f"**{fmt(overhead)}**"],
            ["(d) mgerun --fitting, peak RSS", mib(max(peaks["fitting"]) * 1024)],
            ["(d) mgerun --variant fp32 (plain), peak RSS", mib(max(peaks["plain"]) * 1024)],
            ["**(d) fitting's peak / plain peak**", f"**{fmt_ratio(peak_ratio)}**"],
            ["(c) a 2-thread session's median turn alone (ms)", fmt(settle["alone"])],
            ["(c) right after 8 other sessions' turns, no pause (ms)", fmt(settle["no pause"])],
            [f"(c) the same with a {settle['settle_s'] * 1000:g} ms pause before each turn (ms)", fmt(settle["pause"])],
            ["(c) no pause / alone, median over rounds of each round's ratio", fmt_ratio(settle["no pause / alone"])],
            ["**(c) with the pause / alone, median over rounds of each round's ratio**", f"**{fmt_ratio(settled)}**"],
        ],
    )
    table.checks.append(
        Check(
            "fitting: bundle of variants / sum of single bundles",
            "<= 0.6",
            fmt_ratio(size_ratio),
            at_most(size_ratio, 0.6),
        )  # fmt: skip
    )
    table.checks.append(
        Check(
            f"fitting: mgerun --fitting wall (budget {budget:g} s)",
            f"<= {limit:.2f} s",
            fmt(fitting),
            at_most(fitting, limit),
        )  # fmt: skip
    )
    table.checks.append(
        Check("fitting: peak RSS of --fitting / plain mgerun", "<= 2", fmt_ratio(peak_ratio), at_most(peak_ratio, 2.0))
    )
    table.checks.append(
        Check(
            "fitting: a turn after others', with the pause / alone",
            "<= 1.10",
            fmt_ratio(settled),
            at_most(settled, 1.1),
        )
    )
    return table
