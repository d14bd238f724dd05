"""The ``startup`` section: wall time of ``mgedump --help`` and ``mgerun --help`` against ``python -c
pass`` with the same interpreter, alternated, 3 x ``--runs`` runs each
(they are short). Target: at most 0.25 s more.
"""

from __future__ import annotations

import sys

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
    ratio,
    run_process,
)


def section(ctx: Context) -> Table:
    runs = 3 * ctx.runs
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "mgedump --help": [*console_script("mgedump"), "--help"],
        "mgerun --help": [*console_script("mgerun"), "--help"],
    }
    for argv in commands.values():
        run_process(argv)  # warm-up (page cache, .pyc)
    log(f"startup: {runs} alternated runs of {len(commands)} commands")
    walls: dict[str, list[float]] = {name: [] for name in commands}
    for _, name in alternate(list(commands), runs):
        result = run_process(commands[name])
        if not result.ok:
            raise RuntimeError(f"{name} failed ({result.failure()})")
        walls[name].append(result.wall_s)
    base = median(walls["python -c pass"])
    table = Table(
        "Startup",
        f"Wall time of `--help` against `python -c pass` with the same interpreter, {runs} alternated runs each, "
        "medians. Target: at most 0.25 s more than `python -c pass`.",
        ["command", "median (s)", "`python -c pass` median (s)", "difference (s)", "ratio"],
    )
    for name in ("mgedump --help", "mgerun --help"):
        value = median(walls[name])
        diff = None if value is None or base is None else value - base
        table.rows.append([f"`{name}`", fmt(value), fmt(base), fmt(diff), fmt_ratio(ratio(value, base))])
        table.checks.append(
            Check(f"startup: `{name}` - `python -c pass`", "<= 0.25 s", f"{fmt(diff)} s", at_most(diff, 0.25))
        )
    return table
