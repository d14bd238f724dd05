"""The ``jobs`` section: ``mgerun --jobs 2`` against ``--jobs 1`` on 400 small bundles, and the parent's peak memory
for 200 against 2,000 bundles.

(a) ``mgerun ZOO --jobs 1 --iter 1 --warmup-iter 0``: one worker process, one run per test case, onnxruntime's
    own choice of intra-op threads (one per core), as ``mgerun`` runs without ``--thread``;
(b) ``mgerun ZOO --jobs 2``: two workers, one run per test case (no timing: ``--jobs-timing none``), each
    session with one intra-op thread (the cores shared out);
(c) ``mgerun ZOO --jobs 1 --thread 1 --iter 1 --warmup-iter 0``: (a) with (b)'s thread, to tell the parallel
    checks from the threads' own cost;
alternated round by round, wall time from spawn to reap. The bundles are copies of one bundle of
``samples/cnn.onnx`` with the 4 test cases of ``samples/testcases.txt`` (60 KB) in 10 subfolders. Target: (a) / (b)
>= 1.6 on 2 cores.

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
            [*console_script("mgedump"), "cnn.onnx", "-d", "@testcases.txt", "-o", one, "-q"], cwd=ROOT / "samples"
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
        f"Wall time of `mgerun ZOO --jobs 1 --iter 1 --warmup-iter 0` (A: onnxruntime's own threads, one per core), "
        f"`mgerun ZOO --jobs 2` (B: checked in parallel, not timed, one thread a worker) and A with `--thread 1` (C) "
        f"on {count} small bundles (`samples/cnn.onnx`, the 4 test cases of `samples/testcases.txt`, in 10 "
        f"subfolders), alternated, one run each per round; then the parent's own peak memory (`peak_rss_mib` of the "
        f"report, RUSAGE_SELF) for `--jobs 2` on {small:,} and on {large:,} bundles. Targets: A / B >= {SPEEDUP} on "
        f"2 cores; {large:,} / {small:,} <= {MEMORY}.",
        ["round", "A --jobs 1 (s)", "B --jobs 2 (s)", "C --jobs 1 --thread 1 (s)", "A / B", "C / B"],
    )
    zoo = _zoo(ctx, count)
    flags = {"A": ["--jobs", "1", "--iter", "1", "--warmup-iter", "0"], "B": ["--jobs", "2"],
             "C": ["--jobs", "1", "--thread", "1", "--iter", "1", "--warmup-iter", "0"]}  # fmt: skip
    times: dict[str, list[float]] = {name: [] for name in flags}
    for _, name in alternate(list(flags), ctx.runs):
        log(f"jobs: {name} {' '.join(flags[name])} on {count} bundles")
        done = run_process([*console_script("mgerun"), zoo, *flags[name], "-q"])
        if not done.ok:
            raise RuntimeError(f"mgerun {' '.join(flags[name])} failed ({done.failure()})")
        times[name].append(done.wall_s)
    ratios = [a / b for a, b in zip(times["A"], times["B"], strict=True)]
    controls = [c / b for c, b in zip(times["C"], times["B"], strict=True)]
    for index, row in enumerate(zip(times["A"], times["B"], times["C"], ratios, controls, strict=True), 1):
        table.rows.append([str(index), *(fmt(v, 2) for v in row[:3]), *(fmt_ratio(v) for v in row[3:])])
    speedup = median(ratios)
    table.rows.append(
        ["**median**", *(fmt(median(times[n]), 2) for n in "ABC"), f"**{fmt_ratio(speedup)}**",
         fmt_ratio(median(controls))]
    )  # fmt: skip
    table.checks.append(
        Check(f"jobs: --jobs 2 / --jobs 1 speed-up ({count} bundles, 2 cores)", f">= {SPEEDUP}",
              fmt_ratio(speedup), None if speedup is None else speedup >= SPEEDUP)
    )  # fmt: skip
    peaks = {n: _parent_peak(_zoo(ctx, n), ctx.tmp / f"jobs-{n}.json") for n in (small, large)}
    growth = peaks[large] / peaks[small]
    table.rows.append(
        [f"parent peak (MiB), {large:,} / {small:,} bundles", fmt(peaks[large], 1), fmt(peaks[small], 1), "",
         fmt_ratio(growth), ""]
    )  # fmt: skip
    table.checks.append(
        Check(f"jobs: parent peak memory, {large:,} / {small:,} bundles", f"<= {MEMORY}", fmt_ratio(growth),
              at_most(growth, MEMORY))
    )  # fmt: skip
    table.notes.append(
        "C / B is the speed-up of the parallel checks alone: A's sessions keep onnxruntime's default thread pool, "
        "whose threads spin between the runs of these small models; a user who gives `--thread 1` gets C."
    )
    table.notes.append(
        "The parent keeps no record: each bundle's record goes to a temporary file as its worker sends it back, and "
        "the reports are rendered from that file at the end (that step holds the report, as any report of that "
        "size does; it is not in these figures)."
    )
    return table


# no worker functions: the section runs the console scripts
WORKERS: dict[str, Callable[..., Any]] = {}
