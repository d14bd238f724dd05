"""The ``jobs`` section: ``mgerun --jobs 2`` against ``--jobs 1`` on 400 small bundles, and the parent's peak memory
for 200 against 2,000 bundles.

(a) ``mgerun ZOO --jobs 1 --iter 1 --warmup-iter 0``: one worker process, one run per test case;
(b) ``mgerun ZOO --jobs 2``: two workers, one run per test case (no timing: ``--jobs-timing none``);
alternated round by round, wall time from spawn to reap. The bundles are copies of one bundle of
``samples/gray.onnx`` (one test case) in 10 subfolders. Target: (a) / (b) >= 1.6 on 2 cores.

The parent's memory: ``mgerun ZOO --jobs 2 --report-json R`` on 200 and on 2,000 bundles; the report's
``peak_rss_mib`` is the parent's own peak (``getrusage(RUSAGE_SELF)``) when every bundle is done, before the reports
are rendered (wait4's figure would include the workers). Target: 2,000 / 200 <= 1.10.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
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
    run_process,
)

SPEEDUP = 1.6
MEMORY = 1.10


def _zoo(ctx: Context, count: int) -> Path:
    """``count`` copies of one small bundle in 10 subfolders (made once per count)."""
    one = ctx.tmp / "jobs-one.mgetest"
    if not one.exists():
        packed = run_process(
            [*console_script("mgedump"), ROOT / "samples" / "gray.onnx", "-d", "#rand(0,255)", "-o", one, "-q"]
        )
        if not packed.ok:
            raise RuntimeError(f"packing the bundle failed ({packed.failure()})")
    root = ctx.tmp / f"jobs-zoo-{count}"
    if not root.exists():
        for k in range(count):
            target = root / f"f{k % 10}" / f"b{k:04d}.mgetest"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(one, target)
    return root


def _parent_peak(zoo: Path, report: Path) -> float:
    done = subprocess.run(
        [*console_script("mgerun"), zoo, "--jobs", "2", "-q", "--report-json", report],
        capture_output=True, text=True, check=False, timeout=3600,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"mgerun --jobs 2 on {zoo.name} exited {done.returncode}: {done.stderr[-500:]}")
    document = json.loads(report.read_text())
    assert len(document["bundles"]) == sum(1 for _ in zoo.rglob("*.mgetest"))
    return float(document["peak_rss_mib"])


def section(ctx: Context) -> Table:
    count = 40 if ctx.quick else 400
    small, large = (20, 200) if ctx.quick else (200, 2000)
    table = Table(
        "Many bundles in worker processes",
        f"Wall time of `mgerun ZOO --jobs 1 --iter 1 --warmup-iter 0` (A) and `mgerun ZOO --jobs 2` (B, checked in "
        f"parallel, not timed) on {count} small bundles (`samples/gray.onnx`, one test case each, in 10 subfolders), "
        f"alternated, one run each per round; then the parent's own peak memory (`peak_rss_mib` of the report, "
        f"RUSAGE_SELF) for `--jobs 2` on {small:,} and on {large:,} bundles. Targets: A / B >= {SPEEDUP} on 2 cores; "
        f"{large:,} / {small:,} <= {MEMORY}.",
        ["round", "A --jobs 1 (s)", "B --jobs 2 (s)", "A / B"],
    )
    zoo = _zoo(ctx, count)
    times: dict[str, list[float]] = {"1": [], "2": []}
    for _, jobs in alternate(["1", "2"], ctx.runs):
        log(f"jobs: --jobs {jobs} on {count} bundles")
        flags = ["--iter", "1", "--warmup-iter", "0"] if jobs == "1" else []
        done = run_process([*console_script("mgerun"), zoo, "--jobs", jobs, *flags, "-q"])
        if not done.ok:
            raise RuntimeError(f"mgerun --jobs {jobs} failed ({done.failure()})")
        times[jobs].append(done.wall_s)
    ratios = [a / b for a, b in zip(times["1"], times["2"], strict=True)]
    for index, (a, b, r) in enumerate(zip(times["1"], times["2"], ratios, strict=True), 1):
        table.rows.append([str(index), fmt(a, 2), fmt(b, 2), fmt_ratio(r)])
    speedup = median(ratios)
    table.rows.append(
        ["**median**", fmt(median(times["1"]), 2), fmt(median(times["2"]), 2), f"**{fmt_ratio(speedup)}**"]
    )
    table.checks.append(
        Check(f"jobs: --jobs 2 / --jobs 1 speed-up ({count} bundles, 2 cores)", f">= {SPEEDUP}",
              fmt_ratio(speedup), None if speedup is None else speedup >= SPEEDUP)
    )  # fmt: skip
    peaks = {n: _parent_peak(_zoo(ctx, n), ctx.tmp / f"jobs-{n}.json") for n in (small, large)}
    growth = peaks[large] / peaks[small]
    table.rows.append(
        [f"parent peak (MiB), {large:,} / {small:,} bundles", fmt(peaks[large], 1), fmt(peaks[small], 1),
         fmt_ratio(growth)]
    )  # fmt: skip
    table.checks.append(
        Check(f"jobs: parent peak memory, {large:,} / {small:,} bundles", f"<= {MEMORY}", fmt_ratio(growth),
              at_most(growth, MEMORY))
    )  # fmt: skip
    table.notes.append(
        "The parent keeps no record: each bundle's record goes to a temporary file as its worker sends it back, and "
        "the reports are rendered from that file at the end (that step holds the report, as any report of that "
        "size does; it is not in these figures)."
    )
    return table


# no worker functions: the section runs the console scripts
WORKERS: dict[str, Callable[..., Any]] = {}
