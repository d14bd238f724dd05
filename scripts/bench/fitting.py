"""The ``fitting`` section: what several variants in one bundle cost, and what ``--fitting`` costs.

(a) Bundle size: ``samples/cnn.onnx`` with 20 test cases packed with ``--variants fp32,ioc16,io16xc32`` against
the sum of the three single-variant bundles (``--enable-*`` flags): the test cases are stored once. Target: the
bundle of variants at most 0.6 of the sum.

(b) Fitting's overhead: ``mgerun B --fitting --fitting-budget S`` against ``mgerun B --config C`` (the choice
verified alone), whole processes, alternated: the wall time fitting adds over verifying the chosen variant, and
how much of it the budget is. Target: fitting's wall time at most the budget plus 1.5x a plain verification (its
own verification of every variant, one run each, and the chosen one's timed run).
"""

from __future__ import annotations

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
    walls: dict[str, list[float]] = {name: [] for name in commands}
    runs = max(2, ctx.runs)
    for _, name in alternate(list(commands), runs):
        done = run_process(commands[name])
        if not done.ok:
            raise RuntimeError(f"mgerun ({name}) failed: {done.failure()}")
        walls[name].append(done.wall_s)
    fitting, alone = median(walls["fitting"]), median(walls["config"])
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
    return table
