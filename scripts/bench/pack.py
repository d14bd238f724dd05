"""The ``pack`` section: wall time to pack a model with test data. Models: ResNet-50 from the onnx
package, and a ~1 GiB model (4 MatMul + Tanh layers with [8192, 8192]
float32 weights in one external data file) that the script generates.
Commands, alternated per run after one untimed warm-up each: (A)
``mgedump M -d "#rand(0,255)" -o OUT``, (B) ``polygraphy run M --onnxrt
--save-inputs IN.json --save-outputs OUT.json`` (skipped with a note when
polygraphy, the project's optional ``bench`` extra, is not installed), (C)
the floor: a minimal script that only loads the model in onnxruntime, makes
random inputs, runs once and saves inputs and outputs with ``np.save``.
Targets: ResNet-50 A/C <= 1.15 and A < B; 1 GiB A/C <= 1.1, each the median
of the ratios taken pair by pair (A's run over C's in the same round), shown
with their interquartile range and extremes; ResNet-50 takes at least 15
rounds (``--runs`` when more). After the warm-up, ``mgerun`` checks A's bundle
once (untimed) to show that what was timed is a usable bundle.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .common import (
    Check,
    Context,
    ProcResult,
    Spread,
    Table,
    alternate,
    at_most,
    console_script,
    failure_notes,
    fmt,
    fmt_ratio,
    log,
    median,
    mib,
    ok_values,
    pair_ratios,
    polygraphy_command,
    read_first,
    run_fresh,
    run_process,
    run_worker,
)
from .models import Model, pack_models

FLOOR_SCRIPT = '''"""The floor of packing: load the model, make random inputs, run once, save inputs and outputs."""
import sys

import numpy as np
import onnxruntime as ort

DTYPES = {"float": "float32", "double": "float64", "float16": "float16", "bool": "bool", "int8": "int8",
          "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8", "uint16": "uint16",
          "uint32": "uint32", "uint64": "uint64"}


def random_input(arg, rng):
    shape = [d if isinstance(d, int) else 1 for d in arg.shape]
    dtype = np.dtype(DTYPES[arg.type[len("tensor("):-1]])
    if dtype.kind == "f":
        return rng.uniform(0, 255, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dtype)
    return rng.integers(0, 256, size=shape).astype(dtype)


def main(model, out):
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {arg.name: random_input(arg, rng) for arg in session.get_inputs()}
    outputs = session.run(None, feeds)
    for k, array in enumerate(feeds.values()):
        np.save(f"{out}/input_{k}.npy", array)
    for k, array in enumerate(outputs):
        np.save(f"{out}/output_{k}.npy", array)


main(sys.argv[1], sys.argv[2])
'''


def pack_commands(model: Model, tmp: Path) -> dict[str, tuple[list[str | Path], Path]]:
    """name -> (argv, output folder) of the commands compared; B only when polygraphy is installed."""
    floor = tmp / "floor.py"
    if not floor.exists():
        floor.write_text(FLOOR_SCRIPT)
    out = {name: tmp / f"out-{name}" for name in "ABC"}
    commands: dict[str, tuple[list[str | Path], Path]] = {
        "A": ([*console_script("mgedump"), model.path, "-d", "#rand(0,255)", "-o", out["A"] / "OUT.mgetest"], out["A"]),
        "C": ([sys.executable, floor, model.path, out["C"]], out["C"]),
    }
    poly = polygraphy_command()
    if poly:
        commands["B"] = (
            [
                *poly,
                "run",
                model.path,
                "--onnxrt",
                "--save-inputs",
                out["B"] / "IN.json",
                "--save-outputs",
                out["B"] / "OUT.json",
            ],
            out["B"],
        )
    return dict(sorted(commands.items()))


def check_bundle(argv: Sequence[str | Path], out: Path) -> str:
    """Pack once more and check the bundle with mgerun (untimed): 'yes' or why not."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    try:
        packed = run_process(argv, cwd=out)
        if not packed.ok:
            return f"no: mgedump {packed.failure()}"
        checked = run_process([*console_script("mgerun"), out / "OUT.mgetest", "--iter", "1", "--silent"])
        return "yes" if checked.ok else f"no: mgerun {checked.failure()}"
    finally:
        shutil.rmtree(out, ignore_errors=True)


def measure_pack(ctx: Context) -> list[tuple[Model, dict[str, list[ProcResult]], str]]:
    """Per model: warm up each command once, check A's bundle, then alternated timed runs of each (ctx.runs, or
    the model's fewest rounds when more and not --quick)."""
    measured = []
    for model in pack_models(ctx):
        commands = pack_commands(model, ctx.tmp)
        log(f"pack: {model.label}: warm-up of {', '.join(commands)}")
        for name, (argv, out) in commands.items():
            warm = run_fresh(argv, out)
            if not warm.ok:
                log(f"pack: {name} failed in warm-up: {warm.failure()}")
        usable = check_bundle(*commands["A"])
        results: dict[str, list[ProcResult]] = {name: [] for name in commands}
        runs = ctx.runs if ctx.quick else max(ctx.runs, model.min_runs)
        for run, name in alternate(list(commands), runs):
            log(f"pack: {model.label}: run {run + 1}/{runs} {name}")
            results[name].append(run_fresh(*commands[name]))
        measured.append((model, results, usable))
    return measured


def weight_cost_worker(files: list[str], folder: str) -> dict[str, float]:
    """What bundling the weights costs at least: sha256 of every byte (a sha256 per member) and a kernel copy + fsync."""
    import hashlib

    from mgedump.base.fileio import hash_files
    from mgedump.bundle.zipwrite import copy_range

    size = sum(os.path.getsize(f) for f in files)
    start = time.perf_counter()
    hash_files(files)
    hashed = time.perf_counter() - start
    sample = os.urandom(64 << 20)
    start = time.perf_counter()
    hashlib.sha256(sample).digest()
    rate = len(sample) / (time.perf_counter() - start)
    target = os.path.join(folder, "copy.bin")
    start = time.perf_counter()
    with open(target, "wb") as dst:
        for path in files:
            with open(path, "rb") as src:
                copy_range(src.fileno(), dst.fileno(), os.path.getsize(path))
        dst.flush()
        os.fsync(dst.fileno())
    copied = time.perf_counter() - start
    os.unlink(target)
    return {"bytes": size, "hash_s": hashed, "sha256_mb_s": rate / 1e6, "copy_fsync_s": copied}


def weight_notes(ctx: Context, model: Model, floor_s: float | None) -> list[str]:
    """Why a model whose weights dominate cannot pack near the floor: the measured cost of hashing and copying them."""
    cost = run_worker("weight_cost", ctx.tmp, files=[str(f) for f in model.files], folder=str(ctx.tmp))
    sha_ni = "sha_ni" in (read_first("/proc/cpuinfo", "flags") or "")
    note = (
        f"Profile of the {mib(cost['bytes'])} model: mgedump must sha256 every byte it bundles (docs/bundle.md: a sha256 per "
        f"member) and copy it into the bundle. Here sha256 runs at {cost['sha256_mb_s']:.0f} MB/s (the CPU "
        f"{'has' if sha_ni else 'has no'} SHA extensions), so hashing the weights took {cost['hash_s']:.2f} s "
        f"and the kernel copy + fsync {cost['copy_fsync_s']:.2f} s"
    )
    if floor_s:
        note += (
            f": {(cost['hash_s'] + cost['copy_fsync_s']) / floor_s:.1f}x the floor's whole run, which neither "
            "hashes nor copies the weights. mgedump hashes in a thread while onnxruntime loads and runs the model, "
            "so its wall time is about the hash plus the copy, not their sum with the floor. What would reach "
            "1.1x: a CPU with SHA extensions (sha256 at 1.5 GB/s and more, hidden behind session creation), or "
            "a bundle format that hashes large members in chunks on every core"
        )
    return [note + "."]


def section(ctx: Context) -> Table:
    table = Table(
        "Pack wall time",
        'Wall time (spawn to exit) of packing a model with random test data: (A) `mgedump M -d "#rand(0,255)" -o OUT`, '
        "(B) `polygraphy run M --onnxrt --save-inputs IN.json --save-outputs OUT.json`, (C) the floor, a minimal "
        "onnxruntime script that loads, makes inputs, runs once and saves with `np.save`. Medians of alternated runs "
        "after one warm-up each; a ratio is the median of the ratios pair by pair (A's run over the other's in the "
        "same round), with their interquartile range, extremes and number of pairs. Targets: ResNet-50 A/C <= 1.15 "
        "(at least 15 pairs) and A < B; 1 GiB model A/C <= 1.1.",
        [
            "model",
            "size on disk",
            "A mgedump (s)",
            "B polygraphy (s)",
            "C floor (s)",
            "A / C",
            "A / B",
            "A's bundle verifies",
        ],
    )
    for model, results, usable in ctx.once("pack", lambda: measure_pack(ctx)):
        wall = {name: median(ok_values(results.get(name, []), lambda r: r.wall_s)) for name in "ABC"}
        pairs_c = Spread.of(pair_ratios(results["A"], results["C"], lambda r: r.wall_s))
        pairs_b = Spread.of(pair_ratios(results["A"], results["B"], lambda r: r.wall_s)) if "B" in results else None
        a_c = pairs_c.median if pairs_c else None
        a_b = pairs_b.median if pairs_b else None
        table.rows.append(
            [
                model.label,
                mib(model.disk_bytes),
                fmt(wall["A"]),
                fmt(wall["B"]) if "B" in results else "skipped",
                fmt(wall["C"]),
                pairs_c.text() if pairs_c else "n/a",
                pairs_b.text() if pairs_b else "n/a",
                usable,
            ]
        )
        short = model.label.split(" (")[0]
        table.checks.append(
            Check(f"pack {short}: A / C", f"<= {model.max_a_over_c}", fmt_ratio(a_c), at_most(a_c, model.max_a_over_c))
        )
        if model.a_below_b:
            table.checks.append(
                Check(f"pack {short}: A < B", "A / B < 1", fmt_ratio(a_b), None if a_b is None else a_b < 1)
            )
        for name, runs in results.items():
            table.notes.append(
                f"{short}, {name} per run (s): " + " ".join(fmt(r.wall_s) if r.ok else "failed" for r in runs)
            )
        table.notes += failure_notes(short, results)
        if a_c is not None and a_c > model.max_a_over_c and model.max_rss_a is not None:
            table.notes += weight_notes(ctx, model, wall["C"])
    if polygraphy_command() is None:
        table.notes.append(
            "B skipped: polygraphy is not installed (it is in the project's optional `bench` extra: "
            '`pip install -e ".[bench]"`).'
        )
    return table


# the functions of this file that run in a worker process (python scripts/bench.py --worker NAME ...)
WORKERS: dict[str, Callable[..., Any]] = {
    "weight_cost": weight_cost_worker,
}
