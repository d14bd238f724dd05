"""The ``report`` section: what ``--report-html`` adds to a 10-test-case run: ``mgerun B --iter 10``
against the same with ``--report-html``, whole processes, alternated, on a
bundle of the small CNN with 10 test cases. Target: at most 1.10x the wall
time.
"""

from __future__ import annotations

from .common import (
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
from .models import small_cnn_bundle


def section(ctx: Context) -> Table:
    bundle = small_cnn_bundle(ctx, 10)
    html = ctx.tmp / "report.html"
    runs = max(3, ctx.runs)
    commands = {
        "plain": [*console_script("mgerun"), bundle, "--iter", "10"],
        "html": [*console_script("mgerun"), bundle, "--iter", "10", "--report-html", html],
    }
    for argv in commands.values():  # warm the page cache
        run_process(argv)
    walls: dict[str, list[float]] = {name: [] for name in commands}
    log(f"report: {runs} runs of each")
    for _, name in alternate(list(commands), runs):
        done = run_process(commands[name])
        if not done.ok:
            raise RuntimeError(f"mgerun ({name}) failed: {done.failure()}")
        walls[name].append(done.wall_s)
    plain, with_html = median(walls["plain"]), median(walls["html"])
    overall = ratio(with_html, plain)
    table = Table(
        "What the HTML report costs",
        "`mgerun B --iter 10` against the same with `--report-html`, whole processes, alternated, on a bundle of "
        "the small CNN with 10 test cases (each page: 10 histograms, 10 timelines). Target: at most 1.10x the wall "
        "time.",
        ["command", "median wall (s)", "runs"],
        rows=[
            ["mgerun B --iter 10", fmt(plain), str(len(walls["plain"]))],
            ["mgerun B --iter 10 --report-html R", fmt(with_html), str(len(walls["html"]))],
            ["**ratio**", f"**{fmt_ratio(overall)}**", ""],
        ],
    )
    table.notes.append(f"The page: {mib(html.stat().st_size)}.")
    table.checks.append(
        Check("report: with --report-html / without", "<= 1.10", fmt_ratio(overall), at_most(overall, 1.10))
    )
    return table
